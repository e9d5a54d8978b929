"""kubetray-exec: the exec credential plugin and the IPC client. Standard library only.

This file stays empty of imports: every import here would slow down every kubectl command.
"""
