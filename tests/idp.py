"""The real OpenID Provider (npm oidc-provider) for tests, and a way to read its counters."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
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

    def counts(self) -> dict[str, int]:
        with urllib.request.urlopen(self.issuer + "/test/counts", timeout=10) as r:
            return dict(json.load(r))

    def jwks(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.issuer + "/jwks", timeout=10) as r:
            return dict(json.load(r))


def idp_available() -> bool:
    return (
        shutil.which("node") is not None and (OIDC_DIR / "node_modules" / "oidc-provider").is_dir()
    )


@contextlib.contextmanager
def run_idp(**settings: Any) -> Iterator[IdP]:
    """Start oidc-provider on 127.0.0.1 with the given settings (see provider.mjs)."""
    require(
        idp_available(), "oidc-provider is not installed: run `make test` (npm ci in tests/oidc)"
    )
    proc = subprocess.Popen(
        ["node", str(OIDC_DIR / "provider.mjs"), json.dumps(settings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=OIDC_DIR,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, "oidc-provider did not start"
        yield IdP(json.loads(line)["issuer"], proc)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def browser_available() -> bool:
    if not os.path.exists("/usr/bin/chromium"):
        return False
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return True


def browser_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
