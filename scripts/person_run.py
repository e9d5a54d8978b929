"""A person's session on a real X desktop, ten times: start, log in, cancel, log out, Add cluster
→ Log in now, Quit. No crash, no traceback, no Qt warning.

Xvfb with openbox (a window manager), trayer (a real tray host) and dunst (a real notification
daemon) where installed; the real app (`app.ui.app.run`, Qt's xcb platform) driven by
tests/ui/long_session.py against a real oidc-provider. Run by `make screenshots`, before the
screenshots; prints one line per run and exits non-zero if any run was not clean.
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.screenshots import start_display  # noqa: E402
from tests.idp import run_idp  # noqa: E402
from tests.peers import kubetray_env  # noqa: E402

RUNS = 10
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) [\w.]+: ")


def one_run(issuer: str, base: Path) -> tuple[bool, str]:
    """(clean, what was odd) for one session."""
    with kubetray_env(base) as kt:
        env = dict(kt.env, KUBETRAY_BROWSER="false")  # the browser does not open: a notice
        env.pop("QT_QPA_PLATFORM", None)
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "ui" / "long_session.py"),
                issuer,
                str(kt.helper),
                str(base / "kubeconfig"),
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    odd = [line for line in done.stderr.splitlines() if line and not LOG_LINE.match(line)]
    added = (base / "kubeconfig").exists() and "person-run" in (base / "kubeconfig").read_text()
    clean = done.returncode == 0 and not odd and added
    why = "; ".join(odd[:5]) or ("" if added else "Add cluster wrote nothing")
    return clean, f"exit {done.returncode}" + (f": {why}" if why else "")


def main() -> int:
    procs = [] if os.environ.get("DISPLAY") else start_display()
    clean = 0
    try:
        with run_idp(password=True) as idp:
            for i in range(RUNS):
                ok, said = one_run(idp.issuer, Path(tempfile.mkdtemp(prefix=f"person-{i}-")))
                clean += ok
                print(f"person run {i + 1}/{RUNS}: {'clean' if ok else 'NOT CLEAN'} ({said})")
    finally:
        for proc in procs:
            proc.terminate()
    print(f"person runs: {clean} of {RUNS} clean")
    return 0 if clean == RUNS else 1


if __name__ == "__main__":
    sys.exit(main())
