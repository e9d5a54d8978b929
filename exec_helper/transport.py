"""connect() to the agent: a Unix socket, or a named pipe on Windows; chosen once, here."""

import sys

if sys.platform == "win32":
    from exec_helper.transport_windows import connect
else:
    from exec_helper.transport_unix import connect

__all__ = ["connect"]
