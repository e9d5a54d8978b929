"""XDG autostart: ~/.config/autostart/kubetray.desktop.

``TryExec`` names the program: a desktop ignores the entry once that program is gone (the
Desktop Entry Specification), so removing kubetray never leaves a broken entry behind, even for
a user whose entry the package could not remove (packages do not touch home directories).
"""

import os
import shlex


def path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "autostart", "kubetray.desktop")


def content(command: list[str]) -> bytes:
    return (
        "[Desktop Entry]\nType=Application\nName=kubetray\n"
        "Comment=Kubernetes logins in your tray\n"
        f"Exec={shlex.join(command)}\n"
        + (f"TryExec={command[0]}\n" if os.path.isabs(command[0]) else "")
        + "Icon=kubetray\nTerminal=false\n"
        "X-GNOME-Autostart-enabled=true\n"
    ).encode()


def program(text: str) -> str | None:
    """The program an entry runs (its Exec line's first word)."""
    for line in text.splitlines():
        if line.startswith("Exec="):
            words = shlex.split(line[len("Exec=") :])
            return words[0] if words else None
    return None
