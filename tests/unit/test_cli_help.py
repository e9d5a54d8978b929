"""Every kubetray command's --help says what it does and shows an example: a new command
without them fails here."""

import argparse
from collections.abc import Iterator

import pytest

from app.cli import build_parser


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every subcommand's parser, nested ones included, by its command line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield " ".join((*path, name)), sub
                yield from commands(sub, (*path, name))


ALL = dict(commands(build_parser()))


def test_the_walk_finds_the_commands() -> None:
    assert {"setup", "doctor", "ssh", "remote", "login", "status"} <= set(ALL)
    assert len(ALL) >= 19


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_command_has_a_description_and_an_example(name: str) -> None:
    parser = ALL[name]
    text = parser.format_help()
    description = " ".join((parser.description or "").split())
    assert len(description.split()) >= 5, f"{name}: no description (a sentence or two)"
    assert description in " ".join(text.split())
    epilog = parser.epilog or ""
    assert epilog.startswith(("example:", "examples:")), f"{name}: no example in its epilog"
    examples = [line.strip() for line in epilog.splitlines()[1:]]
    assert examples and all(e.startswith(("kubetray", "kubectl")) for e in examples), examples
    assert any(f"kubetray {name}" in e or (name == "app" and e == "kubetray") for e in examples)
    for line in epilog.splitlines():  # examples print as written, one per line
        assert line in text.splitlines(), f"{name}: {line!r} was rewrapped"
