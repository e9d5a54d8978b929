"""bench/soak: log in once, work all day? kubetray under the faults of a laptop's life, for a while.

N identities (password logins to the real oidc-provider, rotating refresh tokens, short-lived
tokens) are used by kubetray-exec calls, one a second each, while a schedule repeats every
150 s: the provider goes down, answers 5xx, answers 20 s late, loses an answer after it
rotated (for a second), shows a clock 90 s ahead; the keyring daemon is killed and comes back locked, then
is unlocked; the agent is SIGKILLed at random, SIGKILLed right after a refresh answer, and
SIGTERMed (kubetray-exec starts the next one). Each minute a row: calls, failures by the
cause their line named, logins asked for again (each one a person would have had to do),
refresh requests and refreshes, grants the provider revoked, and the agent's RSS, threads
and descriptors.

``--before REV`` runs the same soak on the code of git revision REV beside this tree's, at
the same time on the same machine (each with its own provider, proxy, keyring and agent),
and prints both tables. Run with `make soak` (SOAK_ARGS="--before main --minutes 15").
"""

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fault_proxy import FaultProxy, provider_behind_proxy  # noqa: E402
from tests.keyring_daemon import Keyring  # noqa: E402
from tests.peers import V1  # noqa: E402

PERIOD = 150
"""Seconds of one round of the schedule."""
SCHEDULE: list[tuple[float, str]] = [
    (10, "kill"),
    (20, "down"),
    (35, "ok"),
    (55, "5xx"),
    (70, "ok"),
    (75, "kill"),
    (80, "slow"),
    (100, "ok"),
    (102, "kill-after-answer"),
    (110, "lost"),
    (111, "ok"),
    (120, "keyring-locked"),
    (135, "keyring-unlocked"),
    (137, "skew"),
    (145, "no-skew"),
    (147, "term"),
]
CAUSES = [
    ("answer was lost", "answer lost"),
    ("login required", "login asked"),
    ("connection refused", "provider down"),
    ("HTTP 5", "provider 5xx"),
    ("did not answer", "timeout"),
    ("has not answered", "timeout"),
    ("not trusted", "untrusted"),
    ("clock", "clock"),
    ("keyring", "keyring"),
    ("kubetray agent", "agent"),
    ("the connection", "agent"),
]
COLUMNS = [
    "min",
    "calls",
    "failed",
    "causes of failures",
    "logins",
    "refresh req",
    "refreshed",
    "revoked",
    "RSS MiB",
    "threads",
    "fds",
    "agents",
    "slowest s",
]


def cause_of(stderr: str) -> str:
    for needle, cause in CAUSES:
        if needle in stderr:
            return cause
    return "other: " + stderr.strip()[:60]


class Side:
    """One kubetray (its code, directories, provider, proxy, keyring) under the schedule."""

    def __init__(self, code: Path, base: Path, identities: int, lifetime: int) -> None:
        self.code = code
        self.base = base
        self.lifetime = lifetime
        self.names = [f"user{i + 1}" for i in range(identities)]
        self.lock = threading.Lock()
        self.stats: Counter[str] = Counter()
        self.causes: Counter[str] = Counter()
        self.agents: set[int] = set()
        self.slowest = 0.0
        self.logouts: list[str] = []
        """When each login was asked for again: the second of the round, and the cause."""
        self.started = time.monotonic()
        self.events: list[tuple[float, str]] = []
        """(monotonic time, fault) of every fault set."""
        self.stop = threading.Event()
        self.env: dict[str, str] = {}
        self.helper = base / "bin" / "kubetray-exec"

    # -- set-up ---------------------------------------------------------------------------

    def prepare(self, keyring: Keyring, proxy: FaultProxy, issuer: str) -> None:
        runtime = Path(tempfile.mkdtemp(prefix="kt-soak-", dir="/tmp")) / "run"
        self.helper.parent.mkdir(parents=True)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("KUBETRAY_", "KUBERNETES_EXEC", "DBUS_", "XDG_"))
        }
        self.env.update(keyring.env)
        self.env.update(
            KUBETRAY_RUNTIME_DIR=str(runtime),
            KUBETRAY_CONFIG_DIR=str(self.base / "config"),
            KUBETRAY_STATE_DIR=str(self.base / "state"),
            KUBETRAY_AGENT_COMMAND=f"{sys.executable} -m app agent",
            PYTHONPATH=str(self.code),
            HOME=str(self.base / "home"),
        )
        (self.base / "home").mkdir()
        subprocess.run(
            [sys.executable, "-m", "exec_helper.dev_launcher", str(self.helper)],
            cwd=self.code,
            env=self.env,
            check=True,
        )
        assert proxy.ca is not None
        self.ca = self.base / "provider-ca.pem"
        self.ca.write_bytes(proxy.ca.cert_pem)
        self.issuer = issuer
        self.runtime = runtime

    def args(self, name: str, password: bool = False) -> list[str]:
        return [
            "get-token",
            f"--oidc-issuer-url={self.issuer}",
            "--oidc-client-id=kubectl",
            "--grant-type=password",
            f"--username={name}",
            f"--name={name}",
            f"--certificate-authority={self.ca}",
            *([f"--password=pw-{name}"] if password else []),
        ]

    def call(self, name: str, password: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.helper), *self.args(name, password)],
            env={**self.env, "KUBERNETES_EXEC_INFO": V1},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def agent_pid(self) -> int | None:
        try:
            pid = int((self.runtime / "agent.lock").read_text().strip())
        except (OSError, ValueError):
            return None
        with self.lock:
            self.agents.add(pid)
        return pid

    # -- the callers ----------------------------------------------------------------------

    def caller(self, name: str) -> None:
        needs_login = True
        while not self.stop.is_set():
            start = time.monotonic()
            if needs_login:  # what a person does when told to log in
                done = self.call(name, password=True)
                if done.returncode == 0:
                    needs_login = False
                    with self.lock:
                        self.stats["logins"] += 1
            else:
                done = self.call(name)
                took = time.monotonic() - start
                with self.lock:
                    self.stats["calls"] += 1
                    self.slowest = max(self.slowest, took)
                    if done.returncode != 0:
                        self.stats["failed"] += 1
                        cause = cause_of(done.stderr)
                        self.causes[cause] += 1
                        needs_login = cause in ("login asked", "answer lost")
                        if needs_login:
                            second = (start - self.started) % PERIOD
                            self.logouts.append(f"{second:.0f}s {cause}")
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - start)))

    # -- the faults -----------------------------------------------------------------------

    def fault(self, what: str, keyring: Keyring, proxy: FaultProxy, idp: Any) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what))
        if what in ("ok", "down", "5xx", "slow", "lost"):
            proxy.mode = what
        elif what == "kill":
            self.signal(signal.SIGKILL)
        elif what == "term":
            self.signal(signal.SIGTERM)
        elif what == "kill-after-answer":
            armed = threading.Event()
            armed.set()

            def hook(form: dict[str, str]) -> None:
                if form.get("grant_type") == "refresh_token" and armed.is_set():
                    armed.clear()
                    time.sleep(random.uniform(0, 0.05))
                    self.signal(signal.SIGKILL)

            proxy.on_answer = hook
        elif what == "keyring-locked":
            keyring.kill()
            keyring.start(locked=True)
        elif what == "keyring-unlocked":
            keyring.unlock()
        elif what == "skew":
            idp.set_clock(90)
        elif what == "no-skew":
            idp.set_clock(0)

    def last_fault(self, moment: float) -> str:
        """The fault set last before ``moment`` (what a refusal then is put down to)."""
        with self.lock:
            before = [what for t, what in self.events if t <= moment and what != "ok"]
        return before[-1] if before else "none"

    def signal(self, sig: signal.Signals) -> None:
        pid = self.agent_pid()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def sample(self) -> dict[str, Any]:
        pid = self.agent_pid()
        rss = threads = fds = None
        if pid:
            with contextlib.suppress(OSError, ValueError):
                status = Path(f"/proc/{pid}/status").read_text()
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                rss = round(int(fields["VmRSS"].split()[0]) / 1024, 1)
                threads = int(fields["Threads"])
                fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {"rss": rss, "threads": threads, "fds": fds}


def run_side(args: argparse.Namespace) -> int:
    """One side (a process of its own): the soak, one JSON line a minute on stdout."""
    base = Path(tempfile.mkdtemp(prefix="kt-soak-side-"))
    side = Side(Path(args.code).resolve(), base, args.identities, args.lifetime)
    side.started = time.monotonic()
    keyring = Keyring(base / "keyring")
    ttl = {"IdToken": args.lifetime, "AccessToken": args.lifetime}
    try:
        keyring.start()
        with provider_behind_proxy(password=True, ttl=ttl) as (idp, proxy):
            proxy.slow_seconds = 20
            side.prepare(keyring, proxy, idp.issuer)
            callers = [
                threading.Thread(target=side.caller, args=(name,), daemon=True)
                for name in side.names
            ]
            for t in callers:
                t.start()
            start = side.started = time.monotonic()
            end = start + args.minutes * 60
            plan = iter(_plan(start, end))
            when, what = next(plan)
            next_row, minute = start + 60, 0
            last: Counter[str] = Counter()
            while time.monotonic() < end:
                now = time.monotonic()
                while when <= now:
                    side.fault(what, keyring, proxy, idp)
                    when, what = next(plan)
                if now >= next_row:
                    minute += 1
                    row = _row(side, idp, proxy, minute, last)
                    print(json.dumps(row), flush=True)
                    next_row += 60
                time.sleep(0.2)
            side.stop.set()
            proxy.mode = "ok"
            for t in callers:
                t.join(130)
            row = _row(side, idp, proxy, None, last)
            print(json.dumps(row), flush=True)
            side.signal(signal.SIGTERM)
            time.sleep(2)
    finally:
        side.signal(signal.SIGKILL)
        keyring.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _plan(start: float, end: float) -> Iterator[tuple[float, str]]:
    round_start = start
    while True:
        for offset, what in SCHEDULE:
            yield round_start + offset, what
        round_start += PERIOD
        if round_start > end + PERIOD:
            yield float("inf"), "ok"


def _row(
    side: Side, idp: Any, proxy: FaultProxy, minute: int | None, last: Counter[str]
) -> dict[str, Any]:
    counts = idp.counts()
    with side.lock:
        stats, causes, agents = Counter(side.stats), Counter(side.causes), len(side.agents)
        slowest, side.slowest = side.slowest, 0.0
        logouts = list(side.logouts)
    row = {
        "min": minute if minute is not None else "total",
        "calls": stats["calls"],
        "failed": stats["failed"],
        "causes": dict(causes),
        "logins": stats["logins"] - len(side.names),  # after the first one each
        "refresh req": len(proxy.refreshes),
        "refreshed": counts.get("refresh_token", 0),
        "revoked": counts.get("revoked", 0),
        **side.sample(),
        "agents": agents,
        "slowest": round(slowest, 1),
    }
    if minute is None:
        row["logouts"] = logouts
        row["refused after"] = dict(Counter(side.last_fault(t) for t in proxy.refusals))
    if minute is not None:  # per-minute figures: what changed since the last row
        now = dict(row)
        for key in ("calls", "failed", "logins", "refresh req", "refreshed", "revoked"):
            row[key] = now[key] - last.get(key, 0)
            last[key] = now[key]
    return row


# -- two sides at once, and the tables --------------------------------------------------------


def _export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (app and exec_helper) in ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "app", "exec_helper"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # Python before 3.11.4; the archive is this repository's own
            tar.extractall(into)
    return into


def _table(title: str, rows: list[dict[str, Any]]) -> str:
    cells = [COLUMNS]
    before: Counter[str] = Counter()
    for row in rows:
        total = Counter(row.get("causes", {}))  # counted from the start
        new = total if row["min"] == "total" else total - before
        before = total
        causes = ", ".join(f"{k} {v}" for k, v in sorted(new.items())) or "-"
        cells.append(
            [
                str(row["min"]),
                str(row["calls"]),
                str(row["failed"]),
                causes,
                str(row["logins"]),
                str(row["refresh req"]),
                str(row["refreshed"]),
                str(row["revoked"]),
                str(row["rss"]),
                str(row["threads"]),
                str(row["fds"]),
                str(row["agents"]),
                str(row.get("slowest", "-")),
            ]
        )
    widths = [max(len(r[i]) for r in cells[:-1]) for i in range(len(COLUMNS))]
    lines = [title]
    for r in cells[:-1]:
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    total = cells[-1]
    lines.append(
        f"total: {total[1]} calls, {total[2]} failed ({total[3]}); {total[4]} logins asked "
        f"again; {total[5]} refresh requests, {total[6]} refreshes; {total[7]} grants revoked; "
        f"{total[11]} agents"
    )
    lines[-1] += f"; slowest call {max(float(r.get('slowest', 0)) for r in rows):.1f} s"
    refused = rows[-1].get("refused after") or {}
    if refused:
        lines.append(
            "refresh tokens the provider refused (a login lost), by the fault set last before: "
            + ", ".join(f"{what} {n}" for what, n in sorted(refused.items()))
        )
    logouts = rows[-1].get("logouts") or []
    if logouts:
        lines.append("logins asked again at (second of the round, cause): " + ", ".join(logouts))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--identities", type=int, default=4)
    parser.add_argument("--lifetime", type=int, default=30, help="token lifetime, seconds")
    parser.add_argument("--before", metavar="REV", help="soak REV's code beside the other's")
    parser.add_argument(
        "--after", metavar="REV", help="the code of REV instead of this working tree"
    )
    parser.add_argument("--tables", metavar="LOG", help="print the tables of a soak's output")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--code", default=str(ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return run_side(args)
    if args.tables:
        read: dict[str, list[dict[str, Any]]] = {}
        for line in Path(args.tables).read_text().splitlines():
            if line.startswith("[") and "] {" in line:
                label, _, doc = line[1:].partition("] ")
                read.setdefault(label, []).append(json.loads(doc))
        print("\n\n".join(_table(f"== {label} ==", rows) for label, rows in read.items()))
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="kt-soak-code-"))
    after = _export(args.after, scratch / "after") if args.after else ROOT
    sides = {f"after ({args.after})" if args.after else "after": after}
    if args.before:
        sides = {f"before ({args.before})": _export(args.before, scratch / "before"), **sides}
    print(
        f"soak: {args.minutes:g} min, {args.identities} identities, {args.lifetime} s tokens, "
        f"faults every {PERIOD} s: " + ", ".join(f"{w}@{t:g}s" for t, w in SCHEDULE),
        flush=True,
    )
    procs = {}
    for label, code in sides.items():
        procs[label] = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--side",
                label,
                "--code",
                str(code),
                "--minutes",
                str(args.minutes),
                "--identities",
                str(args.identities),
                "--lifetime",
                str(args.lifetime),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in sides}

    def read(label: str) -> None:
        out = procs[label].stdout
        assert out is not None
        for line in out:
            row = json.loads(line)
            rows[label].append(row)
            print(f"[{label}] {line.strip()}", flush=True)

    readers = [threading.Thread(target=read, args=(label,)) for label in sides]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    code = max(p.wait() for p in procs.values())
    shutil.rmtree(scratch, ignore_errors=True)
    for label in sides:
        print()
        print(_table(f"== {label} ==", rows[label]))
    return code


if __name__ == "__main__":
    sys.exit(main())
