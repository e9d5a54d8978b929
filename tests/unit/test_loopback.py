"""The loopback listener honours kubelogin's --oidc-redirect-url and --local-server-cert/-key."""

import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.oidc.errors import LoginError
from app.oidc.loopback import LoopbackListener
from tests.pki import CA


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_redirect_url_is_used_byte_for_byte_and_only_its_path_is_served() -> None:
    port = free_port()
    url = f"http://localhost:{port}/callback"
    listener = LoopbackListener("st", redirect_url=url)
    try:
        assert listener.redirect_uri == url
        assert get(f"http://127.0.0.1:{port}/?state=st&code=wrong-path") == 404
        assert get(f"http://localhost:{port}/callback?state=st&code=c1") == 200
        assert listener.wait(5) == "c1"
    finally:
        listener.close()


def test_https_loopback_with_the_users_certificate(tmp_path: Path) -> None:
    ca = CA()
    issued = ca.issue("localhost", server=True)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(issued.cert_pem)
    key.write_bytes(issued.key_pem)
    listener = LoopbackListener("st", tls=(str(cert), str(key)))
    try:
        assert listener.redirect_uri.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
        assert get(listener.redirect_uri + "?state=st&code=c2", trust) == 200
        assert listener.wait(5) == "c2"
    finally:
        listener.close()


def test_mismatched_redirect_and_tls_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LoginError, match="is https, but no --local-server-cert"):
        LoopbackListener("st", redirect_url=f"https://localhost:{free_port()}/")
    with pytest.raises(LoginError, match="cannot use --local-server-cert"):
        LoopbackListener("st", tls=(str(tmp_path / "none.crt"), str(tmp_path / "none.key")))
