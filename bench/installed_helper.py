"""bench/installed_helper: the packaged kubetray-exec's speed, which is what users get.

Runs bench/hot_path.py against the installed programs (/usr/bin/kubetray-exec and kubetray from
the .deb, or the bundle in build/dist/kubetray when nothing is installed): start-up
(`--version`) and the cached path (median of 30), next to a bare `python3 -I -S` and
gke-gcloud-auth-plugin, and the kubectl ratio, all from the same run.
Targets (issue 23): ≤ 3 ms on the cached path, below the Go plugin; kubectl ratio ≤ 1.04;
the fallback ≤ 1 ms over the path without the fast path.

    make bench-installed            (or: python bench/installed_helper.py [DIR])
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    candidates = [Path(sys.argv[1])] if len(sys.argv) > 1 else []
    candidates += [Path("/usr/bin"), ROOT / "build" / "dist" / "kubetray"]
    where = next((d for d in candidates if (d / "kubetray-exec").exists()), None)
    if where is None or not os.path.realpath(where / "kubetray-exec").endswith("kubetray-exec"):
        raise SystemExit("no packaged kubetray-exec: install the .deb or run make package")
    helper = where / "kubetray-exec"
    with open(os.path.realpath(helper), "rb") as f:
        if f.read(2) == b"#!":
            raise SystemExit(f"{helper} is a development launcher, not the packaged helper")
    python3 = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    print(f"packaged helper: {helper} -> {os.path.realpath(helper)}")
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "hot_path.py"),
            "--helper",
            str(helper),
            "--kubetray",
            str(where / "kubetray"),
            "--python",
            python3,
            *sys.argv[2:],
        ],
        check=False,
    ).returncode


if __name__ == "__main__":
    sys.exit(main())
