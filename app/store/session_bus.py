"""Where the user's D-Bus session bus is, for an agent started without one (Linux).

The Secret Service (the keyring) answers on the session bus. A program started by systemd,
cron, an IDE's launcher or ``env -i`` has no DBUS_SESSION_BUS_ADDRESS, yet the user's bus is
there: systemd runs one per user at ``$XDG_RUNTIME_DIR/bus``. An agent started from such a
program must find it, or it would keep tokens in memory for every later caller.
"""

import os
import stat
import sys

ENV = "DBUS_SESSION_BUS_ADDRESS"


def user_bus() -> str | None:
    """The systemd user bus's address, when its socket is there and this user's; else None."""
    if sys.platform != "linux":
        return None
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    path = os.path.join(runtime, "bus")
    try:
        st = os.stat(path)  # a link in our own runtime directory is ours to follow
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return None
    return f"unix:path={path}"


def find() -> str:
    """Make sure this process names a session bus where one exists; say where it came from."""
    if os.environ.get(ENV):
        return "the session bus it was started with"
    found = user_bus()
    if found is None:
        return "no session bus"
    os.environ[ENV] = found
    return f"the systemd user bus ({found.removeprefix('unix:path=')})"


def use(address: str) -> str | None:
    """Name ``address`` as this process's session bus; the one it replaces (None: none)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = address
    return before


def restore(before: str | None) -> None:
    """Undo ``use``."""
    if before is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = before
