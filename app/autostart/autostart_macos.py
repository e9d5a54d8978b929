"""A LaunchAgent: ~/Library/LaunchAgents/io.kubetray.tray.plist (written, not run here)."""

import os
import plistlib

LABEL = "io.kubetray.tray"


def path() -> str:
    return os.path.join(os.path.expanduser("~"), "Library", "LaunchAgents", f"{LABEL}.plist")


def content(command: list[str]) -> bytes:
    return plistlib.dumps(
        {
            "Label": LABEL,
            "ProgramArguments": command,
            "RunAtLoad": True,
            "ProcessType": "Interactive",
        }
    )


def program(text: str) -> str | None:
    """The program a LaunchAgent runs."""
    try:
        doc = plistlib.loads(text.encode())
    except Exception:
        return None
    args = doc.get("ProgramArguments") if isinstance(doc, dict) else None
    return str(args[0]) if isinstance(args, list) and args else None
