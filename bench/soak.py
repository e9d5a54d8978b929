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

``--case`` picks what is measured (``faults``, the schedule above, by default):

* ``kill``: every 20 s the agent is SIGKILLed 0-130 ms after the provider's next refresh
  answer left (0-12, 12-25 or 25-130 ms, each as often: the early kills are the ones that
  matter). A login lost is a refresh token presented again after its rotation (the
  provider then revokes the grant): each is put down to the kill whose refresh sent it, or
  to another identity's rotation in flight at that kill. Printed: logins lost of N kills,
  by how long after the answer the kill came.
* ``outage``: every 150 s the provider is down ``--down`` s (default 45: past a token's
  life), then up. Printed: each identity's seconds from "up" to its first served call after
  a failure (time to recover), and the calls that failed during and after the outage.
* ``skew``: the provider's clock 25 s behind for the whole soak (``--lifetime`` 30 s tokens):
  refresh requests per minute and per identity (a storm is many more than 60 / lifetime).

``--before REV`` runs the same soak on the code of git revision REV beside this tree's, at
the same time on the same machine (each with its own provider, proxy, keyring and agent),
and prints both tables. Run with `make soak` (SOAK_ARGS="--before main --minutes 15"); a
quick look: SOAK_ARGS="--before main --case kill --minutes 3".
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
KILL_PERIOD = 20
KILLS: list[tuple[float, str]] = [(5, "kill-0-130")]
"""The kill case: SIGKILL 0-130 ms after the next refresh answer, once every KILL_PERIOD s."""
OUTAGE_AT = 20
SKEW_BEHIND = -25
CASES = ("faults", "kill", "outage", "skew")


def schedule(case: str, down: float) -> tuple[float, list[tuple[float, str]]]:
    """(period, schedule) of ``case``."""
    if case == "kill":
        return KILL_PERIOD, KILLS
    if case == "outage":
        return PERIOD, [(OUTAGE_AT, "down"), (OUTAGE_AT + down, "up")]
    if case == "skew":
        return 24 * 3600, [(0, "skew-behind")]
    return PERIOD, SCHEDULE


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
        self.period: float = PERIOD
        self.kills: list[tuple[float, str, list[str]]] = []
        """Kill case: (ms after the answer, refresh token the answered refresh sent, refresh
        tokens of other refreshes in flight at the kill)."""
        self.in_flight: dict[int, tuple[float, str]] = {}
        """Refresh requests sent and not answered yet: thread → (when, refresh token sent)."""
        self.ups: list[float] = []
        """Outage case: monotonic times the provider came back."""
        self.failing: dict[str, float] = {}
        """name → monotonic time of its first failed call since it was last served."""
        self.recovered: list[tuple[str, float]] = []
        """(name, seconds from the provider's return to its first served call after failing)."""
        self.failed_down = 0
        self.failed_after = 0
        """Outage case: calls failed while the provider was down, and after it was back."""
        self.down = False
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
                    self._recovery(name, start, done.returncode == 0)
                    if done.returncode != 0:
                        self.stats["failed"] += 1
                        cause = cause_of(done.stderr)
                        self.causes[cause] += 1
                        needs_login = cause in ("login asked", "answer lost")
                        if needs_login:
                            second = (start - self.started) % PERIOD
                            self.logouts.append(f"{second:.0f}s {cause}")
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - start)))

    def _recovery(self, name: str, start: float, served: bool) -> None:
        """Outage figures for one call of ``name`` begun at ``start`` (caller holds the lock)."""
        if not served:
            self.failing.setdefault(name, start)
            if self.down:
                self.failed_down += 1
            elif self.ups:
                self.failed_after += 1
            return
        failed_at = self.failing.pop(name, None)
        if failed_at is None or self.down:
            return
        now = time.monotonic()  # the call was served now (it may have begun in the outage)
        up = max((t for t in self.ups if t <= now), default=None)
        if up is not None:
            self.recovered.append((name, max(0.0, now - up)))

    def watch_refreshes(self, proxy: FaultProxy) -> None:
        """Keep the refresh requests in flight (which refresh token each presents)."""

        def sent(form: dict[str, str]) -> None:
            if form.get("grant_type") == "refresh_token":
                with self.lock:
                    rt = form.get("refresh_token", "")
                    self.in_flight[threading.get_ident()] = (time.monotonic(), rt)

        proxy.on_request = sent
        proxy.on_answer = lambda form: self.answered()

    def answered(self) -> None:
        with self.lock:
            self.in_flight.pop(threading.get_ident(), None)

    # -- the faults -----------------------------------------------------------------------

    def fault(self, what: str, keyring: Keyring, proxy: FaultProxy, idp: Any) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what))
        if what in ("ok", "5xx", "slow", "lost"):
            self.down = False
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
        elif what == "kill-0-130":
            armed = threading.Event()
            armed.set()

            def kill_soon(form: dict[str, str]) -> None:
                self.answered()
                if form.get("grant_type") == "refresh_token" and armed.is_set():
                    armed.clear()
                    lo, hi = random.choice(BUCKETS)  # as many kills early as late
                    delay = random.uniform(lo, hi) / 1000
                    time.sleep(delay)
                    with self.lock:  # an answer that never left is no longer in flight
                        now = time.monotonic()
                        others = [rt for t, rt in self.in_flight.values() if now - t < 30]
                    self.signal(signal.SIGKILL)
                    with self.lock:
                        self.kills.append((delay * 1000, form.get("refresh_token", ""), others))

            proxy.on_answer = kill_soon
        elif what == "down":
            self.down = True
            proxy.mode = "down"
        elif what == "up":
            with self.lock:
                self.down = False
                self.ups.append(time.monotonic())
            proxy.mode = "ok"
        elif what == "skew-behind":
            idp.set_clock(SKEW_BEHIND)
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
    side.period, plan_of = schedule(args.case, args.down)
    keyring = Keyring(base / "keyring")
    ttl = {"IdToken": args.lifetime, "AccessToken": args.lifetime}
    try:
        keyring.start()
        with provider_behind_proxy(password=True, ttl=ttl) as (idp, proxy):
            proxy.slow_seconds = 20
            side.prepare(keyring, proxy, idp.issuer)
            if args.case == "kill":
                side.watch_refreshes(proxy)
            callers = [
                threading.Thread(target=side.caller, args=(name,), daemon=True)
                for name in side.names
            ]
            for t in callers:
                t.start()
            start = side.started = time.monotonic()
            end = start + args.minutes * 60
            plan = iter(_plan(start, end, side.period, plan_of))
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
            row["case"] = {"name": args.case, **_figures(side, proxy, args)}
            print(json.dumps(row), flush=True)
            side.signal(signal.SIGTERM)
            time.sleep(2)
    finally:
        side.signal(signal.SIGKILL)
        keyring.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _plan(
    start: float, end: float, period: float, plan: list[tuple[float, str]]
) -> Iterator[tuple[float, str]]:
    round_start = start
    while True:
        for offset, what in plan:
            yield round_start + offset, what
        round_start += period
        if round_start > end + period:
            yield float("inf"), "ok"


def _figures(side: Side, proxy: FaultProxy, args: argparse.Namespace) -> dict[str, Any]:
    """What the case measures, from the whole soak."""
    minutes = max(args.minutes, 1e-6)
    if args.case == "kill":
        presented = Counter(
            f.get("refresh_token", "")
            for f in list(proxy.forms)
            if f.get("grant_type") == "refresh_token"
        )
        reused = {rt for rt, n in presented.items() if n > 1 and rt}
        kills = []
        put_down: set[str] = set()
        for ms, sent, others in side.kills:
            lost_own = sent in reused
            lost_others = sum(1 for rt in set(others) if rt in reused and rt != sent)
            put_down.update(rt for rt in (sent, *others) if rt in reused)
            kills.append({"ms": round(ms, 1), "lost": lost_own, "others_lost": lost_others})
        return {"kills": kills, "reused": len(reused), "unexplained": len(reused - put_down)}
    if args.case == "outage":
        per: dict[str, list[float]] = {}
        for name, seconds in side.recovered:
            per.setdefault(name, []).append(round(seconds, 1))
        return {
            "recover": per,
            "outages": len(side.ups),
            "down": args.down,
            "failed_down": side.failed_down,
            "failed_after": side.failed_after,
        }
    if args.case == "skew":
        return {
            "refresh_per_min": round(len(proxy.refreshes) / minutes, 1),
            "per_identity": round(len(proxy.refreshes) / minutes / len(side.names), 2),
        }
    return {}


BUCKETS = ((0, 12), (12, 25), (25, 130))


def summary(fig: dict[str, Any], lifetime: int) -> list[str]:
    """The case's figures in sentences (the table's last lines)."""
    name = fig.get("name")
    if name == "kill":
        kills = fig["kills"]
        lost = sum(k["lost"] for k in kills)
        others = sum(k["others_lost"] for k in kills)
        parts = []
        for lo, hi in BUCKETS:
            some = [k for k in kills if lo <= k["ms"] < hi or (hi == 130 and k["ms"] >= hi)]
            parts.append(f"{sum(k['lost'] for k in some)}/{len(some)} at {lo}-{hi} ms")
        return [
            f"SIGKILL 0-130 ms after a refresh answer: logins lost {lost + others} of "
            f"{len(kills)} kills ({lost} the answered identity's: " + ", ".join(parts) + "; "
            f"{others} other identities' rotations in flight); refresh tokens presented "
            f"twice {fig['reused']} ({fig['unexplained']} not at a kill)"
        ]
    if name == "outage":
        lines = [
            f"provider down {fig.get('down', '?')} s, {fig['outages']} times: "
            f"{fig['failed_down']} calls failed while it was down, {fig['failed_after']} after "
            "it was back"
        ]
        for who, times in sorted(fig["recover"].items()):
            lines.append(
                f"  {who}: time to recover {', '.join(f'{t:g}' for t in times)} s "
                f"(worst {max(times):g} s)"
            )
        if not fig["recover"]:
            lines.append("  no identity failed a call (nothing to recover)")
        return lines
    if name == "skew":
        return [
            f"provider clock {-SKEW_BEHIND} s behind, {lifetime} s tokens: "
            f"{fig['refresh_per_min']} refresh requests a minute, {fig['per_identity']} per "
            f"identity (a token's life allows about {60 / lifetime:.1f})"
        ]
    return []


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


def _table(title: str, rows: list[dict[str, Any]], lifetime: int = 30) -> str:
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
    lines += summary(rows[-1].get("case") or {}, lifetime)
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
    parser.add_argument("--case", choices=CASES, default="faults", help="what to measure")
    parser.add_argument(
        "--down", type=float, default=45, help="outage case: seconds the provider is down"
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
    period, plan = schedule(args.case, args.down)
    print(
        f"soak ({args.case}): {args.minutes:g} min, {args.identities} identities, "
        f"{args.lifetime} s tokens, faults every {period:g} s: "
        + ", ".join(f"{w}@{t:g}s" for t, w in plan),
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
                "--case",
                args.case,
                "--down",
                str(args.down),
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
        print(_table(f"== {label} ==", rows[label], args.lifetime))
    return code


if __name__ == "__main__":
    sys.exit(main())
