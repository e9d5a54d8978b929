"""Start kubetray at login: XDG autostart (Linux), a LaunchAgent (macOS), the Run key (Windows).

The platform is chosen once, here. Linux and macOS register with a file: their modules say
where it goes and what it holds, and the writing is done here once (atomically: a failed write
leaves the entry that was there).
"""

import contextlib
import os
import sys
from types import ModuleType

from app import atomic_file


def _file_variant() -> ModuleType:
    if sys.platform == "darwin":
        from app.autostart import autostart_macos

        return autostart_macos
    from app.autostart import autostart_linux

    return autostart_linux


def set_enabled(enabled: bool, command: list[str]) -> None:
    """Register (or remove) ``command`` to run when the user logs in."""
    if sys.platform == "win32":
        from app.autostart import autostart_windows

        autostart_windows.set_enabled(enabled, command)
        return
    variant = _file_variant()
    path = variant.path()
    if not enabled:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)  # a shared folder: not atomic_file's 0700
    atomic_file.write(path, variant.content(command), 0o644)


def is_enabled() -> bool:
    """Whether kubetray is registered to start at login."""
    if sys.platform == "win32":
        from app.autostart import autostart_windows

        return autostart_windows.is_enabled()
    return os.path.exists(_file_variant().path())


def _entry() -> tuple[ModuleType, str, str] | None:
    """The file variant, the entry's path and text, when there is an entry (Linux, macOS)."""
    if sys.platform == "win32":
        return None
    variant = _file_variant()
    try:
        with open(variant.path(), encoding="utf-8") as f:
            return variant, variant.path(), f.read()
    except (OSError, UnicodeDecodeError):
        return None


def refresh(command: list[str]) -> bool:
    """Rewrite an entry of ours for ``command`` as this version writes it (0.1.0's had no
    TryExec); True when it changed. An entry for another program is not ours to touch."""
    found = _entry()
    if found is None:
        return False
    variant, path, text = found
    if variant.program(text) != command[0] or text.encode() == variant.content(command):
        return False
    atomic_file.write(path, variant.content(command), 0o644)
    return True


def remove_for(program: str) -> bool:
    """Remove the entry if it runs ``program`` (kubetray is being removed); True if it did."""
    if sys.platform == "win32":
        from app.autostart import autostart_windows

        if autostart_windows.program() == program:
            autostart_windows.set_enabled(False, [program])
            return True
        return False
    found = _entry()
    if found is None or found[0].program(found[2]) != program:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.remove(found[1])
    return True
