"""How a subcommand's ``--help`` reads: what it does in a sentence or two, then examples."""

import argparse
import textwrap


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps the description's paragraphs to the terminal; indented lines (the examples) stay
    as written, so a command line is never broken in two."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if line.startswith(" ") or not line.strip():
                lines.append(indent + line)
            else:
                lines.append(
                    textwrap.fill(
                        line,
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                        break_on_hyphens=False,  # never split a --flag or a file name
                        break_long_words=False,
                    )
                )
        return "\n".join(lines)


def add_command(
    sub: "argparse._SubParsersAction[argparse.ArgumentParser]",
    name: str,
    summary: str,
    description: str,
    examples: list[str],
) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does and shows how to run it (a test holds every
    command to this)."""
    heading = "example:" if len(examples) == 1 else "examples:"
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog="\n".join([heading, *(f"  {e}" for e in examples)]),
        formatter_class=HelpFormatter,
    )
