"""Build the PyInstaller bundle (both programs) for this OS: python packaging/build.py.

Prints where it is and its size. The per-OS scripts (linux/build.sh, macos/build.sh,
windows/build.ps1) call this first, then wrap the bundle in an installer.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "build" / "dist"


def version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())


def main() -> int:
    shutil.rmtree(DIST / "kubetray", ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level=WARN",
            "--distpath",
            str(DIST),
            "--workpath",
            str(ROOT / "build" / "pyinstaller"),
            str(ROOT / "packaging" / "kubetray.spec"),
        ],
        check=True,
        cwd=ROOT,
    )
    bundle = DIST / "kubetray"
    print(f"bundle: {bundle} ({size(bundle) / 1e6:.1f} MB), kubetray {version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
