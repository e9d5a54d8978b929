"""bench/recover: how soon is kubectl served again once the provider's outage ends?

N identities (password logins to the real oidc-provider behind tests/fault_proxy.py, tokens
that live ``--lifetime`` s) are used by kubetray-exec calls, one a second each. The provider
goes down (connection refused) for ``--outage`` s and comes back. Per identity: the seconds
from the end of the outage to its first served call, and the calls that failed after the
end; and what the last failed call before the end said (the cause and when kubetray said it
tries again, against the moment it was said).

``--before REV`` runs the same on the code of git revision REV beside this tree's, at the same
time on the same machine (each with its own provider, proxy, keyring and agent), and prints
the ratio. ``python bench/recover.py --before main``.
"""

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.soak import Side, _export  # noqa: E402
from tests.fault_proxy import provider_behind_proxy  # noqa: E402
from tests.keyring_daemon import Keyring  # noqa: E402

WARM = 15.0
"""Seconds of calls before the outage."""
AFTER = 90.0
"""Seconds of calls after it, at most (the side stops once every identity is served 5 s)."""


def run_side(args: argparse.Namespace) -> int:
    """One side (a process of its own): one JSON line on stdout."""
    base = Path(tempfile.mkdtemp(prefix="kt-recover-side-"))
    side = Side(Path(args.code).resolve(), base, args.identities, args.lifetime)
    keyring = Keyring(base / "keyring")
    ttl = {"IdToken": args.lifetime, "AccessToken": args.lifetime}
    calls: list[tuple[float, str, bool, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def caller(name: str) -> None:
        while not stop.is_set():
            start = time.monotonic()
            done = side.call(name)
            with lock:
                calls.append((start, name, done.returncode == 0, done.stderr.strip()))
            stop.wait(max(0.0, 1.0 - (time.monotonic() - start)))

    try:
        keyring.start()
        with provider_behind_proxy(password=True, ttl=ttl) as (idp, proxy):
            side.prepare(keyring, proxy, idp.issuer)
            for name in side.names:
                done = side.call(name, password=True)
                assert done.returncode == 0, done.stderr
            threads = [threading.Thread(target=caller, args=(n,), daemon=True) for n in side.names]
            for t in threads:
                t.start()
            time.sleep(WARM)
            proxy.mode = "down"
            time.sleep(args.outage)
            proxy.mode = "ok"
            ended = time.monotonic()
            while time.monotonic() < ended + AFTER:
                time.sleep(0.5)
                with lock:
                    served = {n for t, n, ok, _ in calls if ok and t >= ended}
                    last = max((t for t, _, ok, _ in calls if not ok), default=0.0)
                if served == set(side.names) and time.monotonic() > max(last, ended) + 5:
                    break
            stop.set()
            for t in threads:
                t.join(130)
            print(json.dumps(_summary(side.names, calls, ended)), flush=True)
            side.signal(signal.SIGTERM)
            time.sleep(1)
    finally:
        side.signal(signal.SIGKILL)
        keyring.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _summary(
    names: list[str], calls: list[tuple[float, str, bool, str]], ended: float
) -> dict[str, Any]:
    recover: dict[str, float | None] = {}
    failed_after = 0
    for name in names:
        mine = sorted(c for c in calls if c[1] == name and c[0] >= ended)
        first = next((t for t, _, ok, _ in mine if ok), None)
        recover[name] = None if first is None else round(first - ended, 1)
        failed_after += sum(1 for t, _, ok, _ in mine if not ok and (first is None or t < first))
    before = [c for c in calls if c[0] < ended and not c[2]]
    heard = before[-1][3] if before else ""
    stale = None  # how far ahead "tries again at" pointed in the last line before the end
    found = re.search(r"tries again at (\d\d:\d\d:\d\d)", heard)
    if found and before:
        said = datetime.now().replace(microsecond=0)
        said -= timedelta(seconds=time.monotonic() - before[-1][0])
        at = datetime.combine(said.date(), datetime.strptime(found[1], "%H:%M:%S").time())
        stale = round((at - said).total_seconds())
    return {
        "recover": recover,
        "failed_after_end": failed_after,
        "last_line": heard[-200:],
        "retry_ahead_s": stale,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--outage", type=float, default=90, help="seconds the provider is down")
    parser.add_argument("--identities", type=int, default=4)
    parser.add_argument("--lifetime", type=int, default=30, help="token lifetime, seconds")
    parser.add_argument("--before", metavar="REV", help="measure REV's code beside this tree's")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--code", default=str(ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return run_side(args)
    scratch = Path(tempfile.mkdtemp(prefix="kt-recover-code-"))
    sides: dict[str, Path] = {"after": ROOT}
    if args.before:
        sides = {f"before ({args.before})": _export(args.before, scratch / "before"), **sides}
    print(
        f"recover: {args.identities} identities, {args.lifetime} s tokens, a call a second "
        f"each; the provider down for {args.outage:g} s",
        flush=True,
    )
    procs = {
        label: subprocess.Popen(
            [
                sys.executable,
                __file__,
                *("--side", label, "--code", str(code), "--outage", str(args.outage)),
                *("--identities", str(args.identities), "--lifetime", str(args.lifetime)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for label, code in sides.items()
    }
    results: dict[str, dict[str, Any]] = {}
    for label, proc in procs.items():
        out, _ = proc.communicate()
        results[label] = json.loads(out.strip().splitlines()[-1])
    shutil.rmtree(scratch, ignore_errors=True)
    worst: dict[str, float] = {}
    for label, doc in results.items():
        times = [t for t in doc["recover"].values() if t is not None]
        never = [n for n, t in doc["recover"].items() if t is None]
        worst[label] = max(times) if times and not never else float("inf")
        print(f"\n== {label} ==")
        print(f"  seconds from the end of the outage to the first served call: {doc['recover']}")
        print(f"  failed calls after the end: {doc['failed_after_end']}")
        print(f"  last line before the end: {doc['last_line']}")
        print(f"  its 'tries again at' was {doc['retry_ahead_s']} s ahead of when it was said")
    if len(worst) == 2:
        before, after = worst.values()
        print(f"\nslowest identity back: {before:g} s before, {after:g} s after", end="")
        print(f" ({before / after:.1f}x)" if after > 0 else "")
    return max(p.returncode for p in procs.values())


if __name__ == "__main__":
    sys.exit(main())
