"""Loopback addresses and the trust store, without a provider."""

import socket
import ssl
import urllib.request
from pathlib import Path

import pytest

from app.errors import UsageError
from app.oidc.errors import LoginError
from app.oidc.http import ssl_context
from app.oidc.loopback import LoopbackListener
from tests.pki import CA


def test_listen_addresses_are_tried_in_order() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    listener = LoopbackListener(
        "s", addresses=(f"127.0.0.1:{busy}", "127.0.0.1:0"), hostname="localhost"
    )
    try:
        assert (
            listener.redirect_uri.startswith("http://localhost:")
            and f":{busy}/" not in listener.redirect_uri
        )
        port = int(listener.redirect_uri.rsplit(":", 1)[1].rstrip("/"))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/?code=c&state=s", timeout=5) as r:
            assert r.status == 200 and b"You can close" in r.read()
        assert listener.wait(5) == "c"
        with pytest.raises(LoginError, match="could not listen"):
            LoopbackListener("s", addresses=(f"127.0.0.1:{busy}",)).close()
    finally:
        listener.close()
        taken.close()


def test_extra_cas_add_to_the_system_trust(tmp_path: Path) -> None:
    system = len(ssl.create_default_context().get_ca_certs())
    ca = CA("kubetray extra CA")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    context = ssl_context(ca_files=(str(tmp_path / "ca.crt"),))
    subjects = [dict(x[0] for x in c["subject"]) for c in context.get_ca_certs()]
    assert {"commonName": "kubetray extra CA"} in subjects
    assert len(subjects) == system + 1  # added, nothing replaced
    with pytest.raises(UsageError, match="cannot use the CA file"):
        ssl_context(ca_files=(str(tmp_path / "missing.crt"),))
    with pytest.raises(UsageError, match="not a base64 PEM CA"):
        ssl_context(ca_data=("not base64!",))
