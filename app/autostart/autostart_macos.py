"""A LaunchAgent: ~/Library/LaunchAgents/io.kubetray.agent.plist (written, not run here)."""

import os
import plistlib

LABEL = "io.kubetray.tray"


def _path() -> str:
    return os.path.join(os.path.expanduser("~"), "Library", "LaunchAgents", f"{LABEL}.plist")


def set_enabled(enabled: bool, command: list[str]) -> None:
    path = _path()
    if not enabled:
        if os.path.exists(path):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        plistlib.dump(
            {
                "Label": LABEL,
                "ProgramArguments": command,
                "RunAtLoad": True,
                "ProcessType": "Interactive",
            },
            f,
        )


def is_enabled() -> bool:
    return os.path.exists(_path())
