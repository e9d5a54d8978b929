"""bench/idle: the tray app's footprint when nobody needs it.

Starts the app (`python -m app`, offscreen Qt) with five identities (stored credentials, each
used once so it is loaded), waits, then measures RSS and CPU over an idle window (default 60 s)
from /proc. Target (issue 4): RSS <= 90 MB, CPU ~0 %. For scale, it also prints a bare
`python -c "import PySide6.QtWidgets"` QApplication's RSS measured the same way.

Run with `make bench-idle`.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.peers import kubetray_env  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--idle", type=float, default=60.0, help="seconds of idle to measure (default 60)"
    )
    args = parser.parse_args()
    with kubetray_env(Path(tempfile.mkdtemp(prefix="kt-bench-idle-"))) as kt:
        kt.env["QT_QPA_PLATFORM"] = "offscreen"
        for i in range(5):
            kt.store_token(f"identity-{i}", f"idle-bench-token-{i}")
        app = subprocess.Popen(
            [sys.executable, "-m", "app"],
            env=kt.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while kt.agent_pid() != app.pid and time.monotonic() < deadline:
                time.sleep(0.1)
            for i in range(5):
                assert kt.run_helper("--stored", f"identity-{i}").returncode == 0
            time.sleep(5)  # settle
            cpu0, t0 = cpu_seconds(app.pid), time.monotonic()
            time.sleep(args.idle)
            cpu1, t1 = cpu_seconds(app.pid), time.monotonic()
            rss = rss_mb(app.pid)
        finally:
            app.terminate()
            app.wait(timeout=20)
            for i in range(5):
                kt.kubetray("forget", f"identity-{i}")
        bare = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from PySide6.QtWidgets import QApplication; import time; a = QApplication([]); time.sleep(3)",
            ],
            env=dict(kt.env),
        )
        time.sleep(2)
        bare_rss = rss_mb(bare.pid)
        bare.wait()
    print(f"tray app, 5 identities, idle {t1 - t0:.0f} s")
    print(
        f"  RSS {rss:.1f} MB   CPU {100 * (cpu1 - cpu0) / (t1 - t0):.2f} %  ({cpu1 - cpu0:.2f} s of CPU)"
    )
    print(f"  for scale: a bare PySide6 QApplication  RSS {bare_rss:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
