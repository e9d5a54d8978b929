"""XDG autostart: ~/.config/autostart/kubetray.desktop."""

import os
import shlex


def _path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "autostart", "kubetray.desktop")


def set_enabled(enabled: bool, command: list[str]) -> None:
    path = _path()
    if not enabled:
        if os.path.exists(path):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            "[Desktop Entry]\nType=Application\nName=kubetray\n"
            "Comment=Kubernetes logins in your tray\n"
            f"Exec={shlex.join(command)}\nIcon=kubetray\nTerminal=false\n"
            "X-GNOME-Autostart-enabled=true\n"
        )


def is_enabled() -> bool:
    return os.path.exists(_path())
