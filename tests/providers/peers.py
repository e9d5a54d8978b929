"""Real OpenID Providers other than oidc-provider, started on 127.0.0.1 with a free port.

Each is set up the way its own documentation says (see docs/providers.md) and offers what the
tests need to look at it from the provider's side: which refresh tokens it still honours.
"""

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.peers import ROOT, require

HERE = Path(__file__).resolve().parent
BROWSE = f"{sys.executable} {HERE / 'browse.py'}"


@dataclass
class Provider:
    """One running provider: its issuer, its demo account and its registered clients."""

    name: str
    version: str
    issuer: str
    user: str
    password: str
    email: str
    client_id: str
    """A public native client, PKCE, the RFC 8252 loopback redirect (any port)."""
    kubelogin_client_id: str
    """A public client whose only redirect URIs are kubelogin's: http://localhost:8000 (18000)."""
    device_client_id: str | None = None
    who: str = ""
    """What kubetray shows as the logged-in user: the email claim, else sub."""
    rotates_refresh_tokens: bool = True
    revocation: bool = True
    """Whether the provider has a revocation endpoint at all (advertised or not)."""
    redirect_args: tuple[str, ...] = ()
    """kubetray flags that make its redirect URI the one registered for ``client_id``."""
    live_refresh_tokens: Callable[[], list[str]] = field(default=lambda: [])
    log: Path | None = None

    def discovery(self) -> dict[str, Any]:
        url = self.issuer + "/.well-known/openid-configuration"
        with urllib.request.urlopen(url, timeout=10) as r:
            return dict(json.load(r))

    def jwks(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.discovery()["jwks_uri"], timeout=10) as r:
            return dict(json.load(r))

    def token_request(self, **form: str) -> tuple[int, dict[str, Any]]:
        """POST to the token endpoint as a public client: (status, JSON body or {})."""
        data = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(self.discovery()["token_endpoint"], data=data)
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, dict(json.load(r))
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                return e.code, dict(json.loads(body))
            except ValueError:
                return e.code, {}

    def refresh_honoured(self, refresh_token: str, client_id: str | None = None) -> bool:
        """Whether the provider still answers this refresh token with new tokens."""
        status, _ = self.token_request(
            grant_type="refresh_token",
            refresh_token=refresh_token,
            client_id=client_id or self.client_id,
        )
        return status == 200


def stop(proc: "subprocess.Popen[str]") -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def django_oauth_toolkit_available() -> bool:
    try:
        import oauth2_provider  # noqa: F401
    except ImportError:
        return False
    return True


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def _read_issuer(proc: "subprocess.Popen[str]", log: Path, what: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise AssertionError(f"{what} did not start:\n{tail}")
    return dict(json.loads(line))


@contextlib.contextmanager
def run_dot(**settings: Any) -> Iterator[Provider]:
    """django-oauth-toolkit (OIDC on): settings as tests/providers/dot/serve.py takes them."""
    require(
        django_oauth_toolkit_available(),
        "django-oauth-toolkit is not installed: run `make install` (the test extra)",
    )
    workdir = Path(tempfile.mkdtemp(prefix="kt-dot-"))
    log = workdir / "server.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.providers.dot.serve",
                json.dumps({**settings, "dir": str(workdir)}),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        started = _read_issuer(proc, log, "django-oauth-toolkit")
        db = started["db"]

        def live() -> list[str]:
            with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
                rows = conn.execute(
                    "SELECT token FROM oauth2_provider_refreshtoken WHERE revoked IS NULL"
                ).fetchall()
            return [r[0] for r in rows]

        yield Provider(
            name="django-oauth-toolkit",
            version=_version("django-oauth-toolkit"),
            issuer=started["issuer"],
            user="alice",
            password="alice-password",
            email="alice@example.test",
            who="alice@example.test",
            client_id="kubectl",
            kubelogin_client_id="kubelogin",
            device_client_id="kubectl-device",
            # Registered the RFC 8252 way (http://127.0.0.1/, any port): say so to kubetray,
            # whose default is kubelogin's exact http://localhost:8000.
            redirect_args=(
                "--listen-address=127.0.0.1:0",
                "--oidc-redirect-url-hostname=127.0.0.1",
            ),
            live_refresh_tokens=live,
            log=log,
        )
    finally:
        stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def run_llng(access_ttl: int = 3600, id_ttl: int = 3600) -> Iterator[Provider]:
    """LemonLDAP::NG from Debian behind nginx (tests/providers/llng): token lifetimes per RP."""
    from tests.providers import llng

    require(llng.available(), "lemonldap-ng and nginx are not installed: run `make system-deps`")
    with llng.run(ttl=min(access_ttl, id_ttl)) as started:
        sessions = Path(started["dir"]) / "sessions"

        def live() -> list[str]:
            """Refresh tokens are OIDC sessions on disk, named by the token itself."""
            found = []
            for f in sessions.iterdir():
                if f.is_file() and b'"_type":"refresh_token"' in f.read_bytes().replace(b" ", b""):
                    found.append(f.name)
            return found

        yield Provider(
            name="LemonLDAP::NG",
            version=llng.version(),
            issuer=started["issuer"],
            user="dwho",
            password="dwho",
            email="dwho@badwolf.org",
            # Its id_tokens carry sub only: the claims are at the userinfo endpoint.
            who="dwho",
            rotates_refresh_tokens=False,
            revocation=False,
            client_id="kubectl",
            kubelogin_client_id="kubelogin",
            redirect_args=(f"--oidc-redirect-url=http://127.0.0.1:{started['loopback_port']}/",),
            live_refresh_tokens=live,
            log=Path(started["dir"]) / "fastcgi.log",
        )
