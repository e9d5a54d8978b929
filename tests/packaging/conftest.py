"""The bundle, built once for the packaging tests, and packages made of it."""

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers import ROOT, require


def as_root() -> list[str]:
    """The prefix that runs a command as root (nothing when the tests are root)."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], check=False).returncode == 0:
        return ["sudo", "-n"]
    require(False, "installing a .deb needs root or password-less sudo")
    return []


@pytest.fixture(scope="session")
def bundle() -> Path:
    """packaging/build.py's bundle (PyInstaller and the launcher): git's version, a new build."""
    require(shutil.which("dpkg-deb") is not None, "needs dpkg-deb (Debian or Ubuntu)")
    done = subprocess.run(
        [sys.executable, "packaging/build.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    print(done.stdout.strip().splitlines()[-2:])  # its size, version and build
    return ROOT / "build" / "dist" / "kubetray"


def restamp(bundle: Path, into: Path, version: str) -> Path:
    """A copy of ``bundle`` that says it is ``version``, with a build id of its own: another
    release, as far as an installed kubetray can tell (the code is the same)."""
    copy = into / "kubetray"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(bundle, copy, symlinks=True)
    build = f"test-{version}-{secrets.token_hex(4)}"
    (copy / "_internal" / "kubetray-build.json").write_text(
        json.dumps({"version": version, "build": build}) + "\n"
    )
    return copy


def pack(bundle: Path, dist: Path, quick: bool = False) -> tuple[Path, Path | None]:
    """packaging/linux/pack.sh: (the .deb, the .tar.gz); ``quick``: an uncompressed .deb only
    (a throw-away package for a test: seconds instead of a minute)."""
    env = dict(os.environ)
    if quick:
        env.update(KUBETRAY_DEB_COMPRESSION="none", KUBETRAY_PACK="deb")
    done = subprocess.run(
        [str(ROOT / "packaging" / "linux" / "pack.sh"), str(bundle), str(dist), sys.executable],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    made = re.findall(r"^(\S+\.(?:deb|tar\.gz))\s", done.stdout, re.MULTILINE)
    deb = next(Path(p) for p in made if p.endswith(".deb"))
    tarball = next((Path(p) for p in made if p.endswith(".tar.gz")), None)
    return deb, tarball
