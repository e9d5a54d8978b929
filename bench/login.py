"""bench/login: one login for many callers, and what the login pipeline itself costs.

1. Concurrency: N (default 50) kubetray-exec calls at once on an identity that needs a login,
   with a real headless browser as the user. Prints the logins started, the successes, and
   how long callers waited after the login completed (p50/p99 of caller end minus the moment the
   browser's redirect left for kubetray). Target: 1 login, p99 ≤ 0.5 s.
2. Pipeline overhead, excluding the user: redirect sent → credential printed, median of R
   (default 10) logins (each after `kubetray logout`).

Run with `make bench-login` (it provides the keyring session and the peers).
"""

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.idp import BROWSE, browser_log, run_idp  # noqa: E402
from tests.peers import kubetray_env  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=50, help="parallel callers (default 50)")
    parser.add_argument(
        "-r", type=int, default=10, help="logins for the overhead figure (default 10)"
    )
    args = parser.parse_args()

    with run_idp() as idp, kubetray_env(Path(tempfile.mkdtemp(prefix="kt-bench-login-"))) as kt:
        log = kt.home.parent / "browser.jsonl"
        kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
        flags = ["get-token", f"--oidc-issuer-url={idp.issuer}", "--oidc-client-id=kubectl"]
        name = "kubectl@" + idp.issuer.removeprefix("http://")

        def call(_: int) -> tuple[int, float]:
            done = kt.run_helper(*flags)
            return done.returncode, time.time()

        with ThreadPoolExecutor(args.n) as pool:
            results = list(pool.map(call, range(args.n)))
        events = browser_log(log)
        callback = next(e["time"] for e in events if e["event"] == "callback")
        waits = [end - callback for code, end in results if code == 0]
        print(f"concurrency: {args.n} callers needing a login")
        print(f"  logins started (browsers opened)   {sum(e['event'] == 'opened' for e in events)}")
        print(f"  provider code exchanges            {idp.counts().get('authorization_code', 0)}")
        print(f"  successes                          {len(waits)}/{args.n}")
        p50, p99 = pct(waits, 50), pct(waits, 99)
        print(f"  wait after the login completed     p50 {p50:.3f} s   p99 {p99:.3f} s")

        overheads = []
        for _ in range(args.r):
            kt.kubetray("logout", name)
            log.unlink()
            code, end = call(0)
            assert code == 0
            callback = next(e["time"] for e in browser_log(log) if e["event"] == "callback")
            overheads.append(end - callback)
        print(f"pipeline overhead (redirect sent -> credential printed), {args.r} logins")
        median, worst = statistics.median(overheads) * 1000, max(overheads) * 1000
        print(f"  median {median:.0f} ms   max {worst:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
