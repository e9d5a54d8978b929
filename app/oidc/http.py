"""HTTP sessions for talking to the provider: system trust plus any extra CAs, proxies honoured.

Extra CAs (``--certificate-authority``, ``--certificate-authority-data``) are *added* to the
system's trust store, never used instead of it. ``HTTPS_PROXY``/``NO_PROXY`` work as in requests.
"""

import base64
import binascii
import ssl
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from app.errors import UsageError

TIMEOUT = 15.0


class _TrustAdapter(HTTPAdapter):
    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)

    def proxy_manager_for(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["ssl_context"] = self._context
        return super().proxy_manager_for(*args, **kwargs)


def ssl_context(ca_files: tuple[str, ...] = (), ca_data: tuple[str, ...] = ()) -> ssl.SSLContext:
    """The system's trust with the given CAs added."""
    context = ssl.create_default_context()
    for path in ca_files:
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as e:
            raise UsageError(f"cannot use the CA file {path}: {e}") from None
    for data in ca_data:
        try:
            context.load_verify_locations(cadata=base64.b64decode(data).decode())
        except (binascii.Error, UnicodeDecodeError, ssl.SSLError) as e:
            raise UsageError(f"--certificate-authority-data is not a base64 PEM CA: {e}") from None
    return context


def mount_trust(
    session: requests.Session, context: ssl.SSLContext | None, insecure: bool = False
) -> requests.Session:
    """Make ``session`` verify TLS with ``context`` (see ssl_context), or not at all."""
    if insecure:
        session.verify = False
    elif context is not None:
        session.mount("https://", _TrustAdapter(context))
    return session
