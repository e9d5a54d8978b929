"""Start kubetray at login: XDG autostart (Linux), a LaunchAgent (macOS), the Run key (Windows).

The platform is chosen once, here; each variant lives in its own module.
"""

import sys


def set_enabled(enabled: bool, command: list[str]) -> None:
    """Register (or remove) ``command`` to run when the user logs in."""
    if sys.platform == "win32":
        from app.autostart import autostart_windows

        autostart_windows.set_enabled(enabled, command)
    elif sys.platform == "darwin":
        from app.autostart import autostart_macos

        autostart_macos.set_enabled(enabled, command)
    else:
        from app.autostart import autostart_linux

        autostart_linux.set_enabled(enabled, command)


def is_enabled() -> bool:
    """Whether kubetray is registered to start at login."""
    if sys.platform == "win32":
        from app.autostart import autostart_windows

        return autostart_windows.is_enabled()
    elif sys.platform == "darwin":
        from app.autostart import autostart_macos

        return autostart_macos.is_enabled()
    else:
        from app.autostart import autostart_linux

        return autostart_linux.is_enabled()
