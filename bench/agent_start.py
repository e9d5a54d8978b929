"""bench/agent_start: the agent's first start, as a user meets it.

No agent runs; kubectl starts kubetray-exec, which starts `kubetray agent` beside it and waits
for its first answer (a stored credential). Wall time of that one helper run, median of N
(default 10), for each helper given (the installed one, the development launcher...), from the
same run. Target (issue 17): <= 300 ms from the package.

    python bench/agent_start.py HELPER [HELPER...]     (bench/all.py runs it)
"""

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXEC_INFO = (
    '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",'
    '"spec":{"interactive":false}}\n'
)
TOKEN = "bench-agent-start-token"


def _stop_agent(run_dir: Path) -> None:
    lock = run_dir / "agent.lock"
    with contextlib.suppress(OSError, ValueError):
        pid = int(lock.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)


def first_start(helper: Path, n: int = 10) -> list[float]:
    """Wall ms of ``n`` helper runs that each had to start the agent beside ``helper``."""
    kubetray = helper.parent / "kubetray"
    work = Path(tempfile.mkdtemp(prefix="kt-bench-start-"))
    env = dict(
        os.environ,
        HOME=str(work / "home"),
        KUBETRAY_RUNTIME_DIR=str(work / "run"),
        KUBETRAY_CONFIG_DIR=str(work / "config"),
        KUBETRAY_STATE_DIR=str(work / "state"),
    )
    env.pop("KUBETRAY_AGENT_COMMAND", None)
    (work / "token").write_text(TOKEN)
    times = []
    try:
        store = [str(kubetray), "store", "bench", "--token-file", str(work / "token")]
        subprocess.run(store, env=env, check=True, capture_output=True)
        _stop_agent(work / "run")
        run_env = dict(env, KUBERNETES_EXEC_INFO=EXEC_INFO)
        for _ in range(n):
            start = time.perf_counter()
            done = subprocess.run(
                [str(helper), "--stored", "bench"],
                env=run_env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
            elapsed = (time.perf_counter() - start) * 1000
            if done.returncode != 0 or TOKEN.encode() not in done.stdout:
                raise SystemExit(f"{helper}: {done.stderr.decode(errors='replace').strip()}")
            if b"started the kubetray agent" not in done.stderr:
                raise SystemExit(f"{helper} did not start an agent: one was running")
            times.append(elapsed)
            _stop_agent(work / "run")
    finally:
        subprocess.run(
            [str(kubetray), "forget", "bench"], env=env, check=False, capture_output=True
        )
        _stop_agent(work / "run")
        shutil.rmtree(work, ignore_errors=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("helpers", nargs="+", type=Path, help="kubetray-exec programs")
    parser.add_argument("-n", type=int, default=10, help="rounds (default 10)")
    args = parser.parse_args()
    print(f"agent's first start to its first answer, median of {args.n} (target <= 300 ms)")
    for helper in args.helpers:
        times = first_start(helper, args.n)
        print(f"  {helper!s:56s} {statistics.median(times):7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
