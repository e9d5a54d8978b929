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
