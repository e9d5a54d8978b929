"""The demo identity as the rest of kubetray knows it, without loading the demo (stdlib only).

A login of the demo identity while no demo runs would fail on "connection refused" at the demo
provider's port, a cause a person cannot guess: the broker asks ``stopped`` first and says
that the demo is not running, and how to start it.
"""

import socket
from typing import Any
from urllib.parse import urlsplit

from exec_helper import version

CLIENT_ID = "kubetray-demo"
"""The demo provider's one client (the demo kubeconfig's --oidc-client-id)."""


def is_demo(settings: Any) -> bool:
    """``settings`` log in at a demo provider: its client, on this machine's loopback."""
    if getattr(settings, "client_id", None) != CLIENT_ID:
        return False
    parts = urlsplit(str(getattr(settings, "issuer", "")))
    return parts.scheme == "http" and parts.hostname == "127.0.0.1"


def stopped(settings: Any, timeout: float = 1.0) -> bool:
    """``settings`` are the demo's and nothing listens at its provider's address (refused:
    not a slow or busy one, which the login itself reports)."""
    if not is_demo(settings):
        return False
    parts = urlsplit(str(settings.issuer))
    try:
        port = parts.port or 80
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False
    return False


def start_hint() -> str:
    """How to start the demo: `make run` exists only in a source checkout (no build file)."""
    if version.BUILD is None:
        return "start it with `make run` (or `kubetray demo`)"
    return "start it with `kubetray demo`"
