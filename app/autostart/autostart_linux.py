"""XDG autostart: ~/.config/autostart/kubetray.desktop."""

import os
import shlex


def path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "autostart", "kubetray.desktop")


def content(command: list[str]) -> bytes:
    return (
        "[Desktop Entry]\nType=Application\nName=kubetray\n"
        "Comment=Kubernetes logins in your tray\n"
        f"Exec={shlex.join(command)}\nIcon=kubetray\nTerminal=false\n"
        "X-GNOME-Autostart-enabled=true\n"
    ).encode()
