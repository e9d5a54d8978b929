"""The per-user Run key: HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run (not run here)."""

import subprocess
import sys

assert sys.platform == "win32"  # tells mypy the rest is Windows-only

import contextlib
import winreg

KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
VALUE = "kubetray"


def set_enabled(enabled: bool, command: list[str]) -> None:
    with winreg.OpenKey(winreg.HKEY_CURRENT_USER, KEY, 0, winreg.KEY_SET_VALUE) as key:
        if enabled:
            winreg.SetValueEx(key, VALUE, 0, winreg.REG_SZ, subprocess.list2cmdline(command))
        else:
            with contextlib.suppress(FileNotFoundError):
                winreg.DeleteValue(key, VALUE)


def is_enabled() -> bool:
    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, KEY) as key:
            winreg.QueryValueEx(key, VALUE)
    except FileNotFoundError:
        return False
    return True


def program() -> str | None:
    """The program the Run value starts (its first word), None without one."""
    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, KEY) as key:
            value, _ = winreg.QueryValueEx(key, VALUE)
    except FileNotFoundError:
        return None
    text = str(value).strip()
    if text.startswith('"'):
        return text[1:].partition('"')[0]
    return text.split(" ", 1)[0] or None
