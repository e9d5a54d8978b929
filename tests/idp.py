"""The real OpenID Provider (npm oidc-provider) for tests, and a way to read its counters."""

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.peers import ROOT, require

OIDC_DIR = ROOT / "tests" / "oidc"
BROWSE = f"{sys.executable} {OIDC_DIR / 'browse.py'}"


@dataclass
class IdP:
    issuer: str
    process: subprocess.Popen[str]
    direct: str = ""
    """Its own address (the issuer may name a proxy in front of it: tests/fault_proxy.py)."""

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen((self.direct or self.issuer) + path, timeout=10) as r:
            return json.load(r)

    def counts(self) -> dict[str, int]:
        return dict(self._get("/test/counts"))

    def jwks(self) -> dict[str, Any]:
        return dict(self._get("/jwks"))

    def set_clock(self, offset: float) -> None:
        """Move the provider's clock ``offset`` seconds ahead of the real one."""
        self._get(f"/test/clock?offset={offset:g}")


def idp_available() -> bool:
    return (
        shutil.which("node") is not None and (OIDC_DIR / "node_modules" / "oidc-provider").is_dir()
    )


START_TIMEOUT = 60.0
"""oidc-provider announces itself within a second or two; a start that hangs is tried again."""


def _start(
    settings: dict[str, Any], script: str, timeout: float
) -> tuple[subprocess.Popen[str], str | None, str]:
    """Start ``script``; (process, its announcement line or None if it said nothing in time,
    its stderr so far)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(
            ["node", str(OIDC_DIR / script), json.dumps(settings)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=OIDC_DIR,
        )
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else None
        err.seek(0)
        return proc, line or None, err.read()[-2000:]


def stop_node(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def start_node(
    script: str, settings: dict[str, Any], name: str, timeout: float = START_TIMEOUT
) -> tuple[subprocess.Popen[str], str]:
    """Start tests/oidc/``script`` (provider.mjs, google.mjs: Google's stand-in, entra.mjs:
    Entra's) with ``settings``: (process, the JSON line it announced itself with). ``name``
    says which in a failure. The caller stops the process (stop_node)."""
    proc, line, err = _start(settings, script, timeout)
    if line is None:  # seen once in a full run: node said nothing for 300 s
        stop_node(proc)
        print(f"{name} did not start within {timeout:g} s; trying again: {err}")
        proc, line, err = _start(settings, script, timeout)
    if not line:
        stop_node(proc)
        raise AssertionError(f"{name} did not start: {err}")
    return proc, line


@contextlib.contextmanager
def run_idp(script: str = "provider.mjs", **settings: Any) -> Iterator[IdP]:
    """Start oidc-provider on 127.0.0.1 with the given settings (see provider.mjs; with
    ``script="google.mjs"``, Google's stand-in)."""
    require(
        idp_available(), "oidc-provider is not installed: run `make test` (npm ci in tests/oidc)"
    )
    proc, line = start_node(script, settings, "oidc-provider")
    try:
        announced = json.loads(line)
        yield IdP(announced["issuer"], proc, announced.get("direct", ""))
    finally:
        stop_node(proc)


def browser_available() -> bool:
    if not os.path.exists("/usr/bin/chromium"):
        return False
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return True


def browser_log(path: Path) -> list[dict[str, Any]]:
    """The browser's events so far (a line still being written is left for the next read)."""
    if not path.exists():
        return []
    text = path.read_text()
    whole = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


def browser_events(path: Path, event: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The browser's ``event`` entries, once there is one: the browser writes "done" after its
    form reached kubetray, so it may come after the kubectl that the login served has exited."""
    deadline = time.monotonic() + timeout
    while not (found := [e for e in browser_log(path) if e["event"] == event]):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {event!r} in the browser's log within {timeout:.0f} s")
        time.sleep(0.1)
    return found
