"""bench/scale: what kubetray costs as a setup grows to hundreds of contexts and identities.

For N = 1, 10, 50, 200, 500 (``--sizes``), from a fresh installation each time:

- **secure**: ``kubetray secure --all --yes`` over N kubeconfig files (KUBECONFIG lists them),
  each with one user holding a static token and one cluster: N credentials into the keyring,
  N files rewritten, N backups (in the keyring: the files held secrets).
- the app (``python -m app``, offscreen) serves each of the N stored credentials once
  through kubetray-exec, then: **status CLI** (``kubetray status``, a process, median of 3),
  **doctor** (``kubetray doctor``: N users running kubetray-exec, N clusters at a local
  HTTPS stand-in), and **idle CPU** of the app over ``--idle`` seconds.
- in process (bench/scale_probe, the same served credentials): **status** (Broker.status),
  **tick** (the tray's per-second update), the main **window**'s and **Diagnostics**' first
  open.
- **refresh burst**: N OIDC identities logged in at a real oidc-provider (password grant,
  150 s tokens), the agent stopped until every one is due, then started: the time from the
  first refresh to the last (``--no-refresh`` skips it; it costs about 1.5 minutes per size).

Each installation has its own session bus and gnome-keyring (no with-keyring needed).

Budgets (issue 33; the ones it leaves open are this bench's choice, marked *): at N = 500,
status <= 20 ms in process, idle CPU <= 1 %, window open <= 100 ms, doctor <= 2 s; tick
<= 10 ms* (1 % of a second), Diagnostics <= 100 ms*, status CLI <= 2x its N = 1 time*,
secure <= 60 ms per file*, refresh burst <= 180 ms per identity* (1,000 identities with 1 h
tokens refresh within the 3 minutes between due and stale).

With ``--before-tree DIR`` (a checkout of an older commit, e.g.
``git archive 948a89d | tar -x -C /tmp/kt-before``) every figure is measured for that tree too,
in the same run, through the same entry points (its code first on PYTHONPATH, its own
kubetray-exec launcher), and both tables are printed. Figures are medians on a shared machine:
read the shapes and ratios.

    make bench-scale BENCH_ARGS="--before-tree DIR"  (also part of make bench-all)
"""

import argparse
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.idle import cpu_seconds, oidc_users  # noqa: E402
from tests.apiserver import APIServer  # noqa: E402
from tests.pki import CA  # noqa: E402

SIZES = (1, 10, 50, 200, 500)
LIFETIME = 150
"""Token lifetime at the provider for the refresh burst. The agent refreshes 1.5 margins (60 s
each here) before expiry: due 60 s after issue, after the logins of 500 identities (~35 s
here), so that none is refreshing when the agent is stopped (a refresh cut short by the stop
would leave a rotated refresh token unsaved)."""
DUE_AFTER = LIFETIME - 90
PARALLEL = 4
"""kubectl-like callers at once when serving or logging in N identities (2 shared cores)."""

COLUMNS: list[tuple[str, str, str]] = [
    # key, heading, budget text
    ("exec", "kubectl call", "works"),
    ("status", "status ms", "<= 20 at 500"),
    ("status_cli", "status CLI ms", "<= 2x N=1"),
    ("tick", "tick ms", "<= 10"),
    ("idle_cpu", "idle CPU %", "<= 1 at 500"),
    ("window", "window ms", "<= 100 at 500"),
    ("diagnostics", "Diagnostics ms", "<= 100"),
    ("doctor", "doctor s", "<= 2 at 500"),
    ("secure", "secure s", "<= 60 ms/file"),
    ("burst", "refresh burst s", "<= 0.18 s x N"),
]


@dataclass
class Install:
    """One fresh kubetray installation running the code of ``tree``."""

    tree: Path
    base: Path
    env: dict[str, str] = field(default_factory=dict)
    helper: Path = Path()
    runtime: Path = Path()

    def kubetray(
        self, *args: str, timeout: float = 900
    ) -> tuple[float, subprocess.CompletedProcess[str]]:
        """Run ``kubetray ARGS`` of this tree; (wall seconds, the process)."""
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "app", *args],
            env=self.env,
            cwd=self.tree,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return time.perf_counter() - t0, done

    def helper_call(self, *args: str, kubeconfig: bool = True) -> subprocess.CompletedProcess[str]:
        """kubetray-exec ARGS as kubectl runs it (with KUBECONFIG unless told not to)."""
        env = dict(self.env)
        if not kubeconfig:
            env.pop("KUBECONFIG", None)
        env["KUBERNETES_EXEC_INFO"] = (
            '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",'
            '"spec":{"interactive":false}}\n'
        )
        return subprocess.run(
            [str(self.helper), *args],
            env=env,
            cwd=self.tree,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def status_json(self) -> dict[str, Any]:
        _, done = self.kubetray("status", "--json")
        if done.returncode != 0:
            raise RuntimeError(f"kubetray status failed: {done.stderr.strip()}")
        return dict(json.loads(done.stdout))

    def agent_pid(self) -> int | None:
        try:
            return int((self.runtime / "agent.lock").read_text().strip())
        except (OSError, ValueError):
            return None

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """``python -m app ARGS`` (the app, or ``agent``), once it serves."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            env=self.env,
            cwd=self.tree,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not (self.agent_pid() == proc.pid and (self.runtime / "agent.sock").exists()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{args or 'the app'} did not start in {self.tree}")
            time.sleep(0.05)
        return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def install(tree: Path) -> Iterator[Install]:
    """A fresh installation of ``tree``, with a session bus and an unlocked gnome-keyring of
    its own: no size inherits the last one's keyring items, or a keyring daemon the older tree
    overloaded (it dies under parallel calls, which kubetray before issue 33 made)."""
    base = Path(tempfile.mkdtemp(prefix="kt-scale-"))
    runtime_parent = Path(tempfile.mkdtemp(prefix="kt-", dir="/tmp"))  # AF_UNIX: short paths
    kt = Install(tree, base, runtime=runtime_parent / "run", helper=base / "bin" / "kubetray-exec")
    (base / "home").mkdir()
    kt.helper.parent.mkdir()
    subprocess.run(  # the tree's own fast launcher (its exec_helper)
        [sys.executable, "-m", "exec_helper.dev_launcher", str(kt.helper)], cwd=tree, check=True
    )
    kt.env = {k: v for k, v in os.environ.items() if not k.startswith("KUBETRAY_")}
    kt.env.update(
        KUBETRAY_RUNTIME_DIR=str(kt.runtime),
        KUBETRAY_CONFIG_DIR=str(base / "config"),
        KUBETRAY_STATE_DIR=str(base / "state"),
        KUBETRAY_AGENT_COMMAND=f"{sys.executable} -m app agent",
        PYTHONPATH=str(tree),
        HOME=str(base / "home"),
        QT_QPA_PLATFORM="offscreen",
    )
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, runtime_parent, ignore_errors=True)
        stack.callback(shutil.rmtree, base, ignore_errors=True)
        stack.enter_context(keyring_session(kt.env, runtime_parent / "keyring"))
        try:
            yield kt
        finally:
            pid = kt.agent_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                time.sleep(0.5)


@contextlib.contextmanager
def keyring_session(env: dict[str, str], where: Path) -> Iterator[None]:
    """A private session bus with an unlocked gnome-keyring on it, named in ``env`` (what
    scripts/with-keyring makes for a whole run, here for one installation)."""
    where.mkdir(mode=0o700)
    env.update(XDG_DATA_HOME=str(where / "data"), XDG_RUNTIME_DIR=str(where))
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert bus.stdout is not None
    env["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().strip()
    keyring = subprocess.Popen(
        ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert keyring.stdin is not None
        keyring.stdin.write(b"kubetray-bench")
        keyring.stdin.close()
        deadline = time.monotonic() + 20
        while not _owned(env, "org.freedesktop.secrets"):
            if time.monotonic() > deadline:
                raise RuntimeError("gnome-keyring did not start")
            time.sleep(0.05)
        yield
    finally:
        for proc in (keyring, bus):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _owned(env: dict[str, str], name: str) -> bool:
    done = subprocess.run(
        [
            "dbus-send",
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/",
            "org.freedesktop.DBus.NameHasOwner",
            f"string:{name}",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.split()[-1:] == ["true"]


def kubeconfigs(where: Path, n: int, api: APIServer) -> list[Path]:
    """N files, each one context whose user holds a static token (what secure moves)."""
    import base64

    ca = base64.b64encode(api.ca_pem).decode()
    where.mkdir(parents=True)
    paths = []
    for i in range(n):
        path = where / f"team-{i:03d}.yaml"
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: cluster-{i:03d}\n  cluster:\n    server: {api.url}\n"
            f"    certificate-authority-data: {ca}\n"
            f"users:\n- name: bot-{i:03d}\n  user:\n    token: static-token-{i:03d}\n"
            f"contexts:\n- name: ctx-{i:03d}\n  context:\n    cluster: cluster-{i:03d}\n"
            f"    user: bot-{i:03d}\n"
            f"current-context: ctx-{0:03d}\n"
        )
        paths.append(path)
    return paths


def in_parallel(calls: Sequence[Sequence[str]], kt: Install, kubeconfig: bool = True) -> None:
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        for done in pool.map(lambda a: kt.helper_call(*a, kubeconfig=kubeconfig), calls):
            if done.returncode != 0:
                raise RuntimeError(f"kubetray-exec failed: {done.stderr.strip()}")


def measure_stored(tree: Path, n: int, api: APIServer, idle: float) -> dict[str, Any]:
    """Every figure but the refresh burst, for N stored credentials."""
    out: dict[str, Any] = {}
    with install(tree) as kt:
        files = kubeconfigs(kt.base / "kube", n, api)
        kt.env["KUBECONFIG"] = os.pathsep.join(str(p) for p in files)
        secs, done = kt.kubetray("secure", "--all", "--yes")
        if done.returncode != 0:
            raise RuntimeError(f"secure failed: {done.stderr.strip()[-500:]}")
        out["secure"] = secs
        names = [i["name"] for i in kt.status_json()["identities"]]
        assert len(names) == n, f"secure stored {len(names)} credentials, not {n}"

        app = kt.start()
        try:
            # One call with the N-file KUBECONFIG, as kubectl makes it; the rest without, so
            # that a tree that refuses it (before issue 33) is still measured.
            first = kt.helper_call("--stored", names[0])
            out["exec"] = first.returncode == 0
            if first.returncode != 0:
                print(f"   kubetray-exec with KUBECONFIG: {first.stderr.strip()}", flush=True)
            in_parallel([("--stored", name) for name in names], kt, kubeconfig=False)
            out["status_cli"] = 1000 * statistics.median(kt.kubetray("status")[0] for _ in range(3))
            out["doctor"], _ = kt.kubetray("doctor")
            time.sleep(3)  # settle
            cpu0, t0 = cpu_seconds(app.pid), time.monotonic()
            time.sleep(idle)
            cpu1, t1 = cpu_seconds(app.pid), time.monotonic()
            out["idle_cpu"] = 100 * (cpu1 - cpu0) / (t1 - t0)
        finally:
            stop(app)

        probe = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "scale_probe.py")],
            env=kt.env,
            cwd=tree,
            input="\n".join(names),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if probe.returncode != 0:
            raise RuntimeError(f"scale_probe failed: {probe.stderr.strip()[-2000:]}")
        found = json.loads(probe.stdout.strip().splitlines()[-1])
        for key in ("status", "tick", "window", "diagnostics"):
            out[key] = found.get(key)
    return out


def measure_burst(tree: Path, n: int, issuer: str) -> float | str:
    """Seconds from the first to the last refresh when N identities are due at once (or what
    went wrong, in words)."""
    with install(tree) as kt:
        agent = kt.start("agent")
        try:
            in_parallel(
                oidc_users(issuer, n),
                kt,
            )
        finally:
            stop(agent)
        time.sleep(DUE_AFTER + 1)  # every token issued so far is now due, none stale
        agent = kt.start("agent")
        try:
            deadline = time.monotonic() + LIFETIME
            while True:
                rows = [i for i in kt.status_json()["identities"] if i.get("kind") == "oidc"]
                times = [
                    datetime.fromisoformat(i["refreshed_at"]) for i in rows if i.get("refreshes")
                ]
                if len(times) >= n:
                    return (max(times) - min(times)).total_seconds()
                if time.monotonic() > deadline:
                    errors = {str(i.get("error")) for i in rows if not i.get("refreshes")}
                    return f"{len(times)} of {n} refreshed in {LIFETIME} s; others: {errors}"
                time.sleep(2)
        finally:
            stop(agent)


def fmt(value: Any, key: str) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "works" if value else "FAILS"
    if key in ("doctor", "secure", "burst"):
        return f"{value:.2f}"
    if key == "idle_cpu":
        return f"{value:.2f}"
    return f"{value:.1f}"


def table(title: str, rows: dict[int, dict[str, Any]]) -> None:
    print(f"\n{title}")
    width = max(len(h) for _, h, _ in COLUMNS)
    print(f"  {'':{width}}  " + "  ".join(f"{'N=' + str(n):>8}" for n in rows) + "   budget")
    for key, heading, budget in COLUMNS:
        cells = "  ".join(f"{fmt(r.get(key), key):>8}" for r in rows.values())
        print(f"  {heading:{width}}  {cells}   {budget}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before-tree", type=Path, help="an older source tree, measured too")
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="N values (default 1,10,50,200,500)"
    )
    parser.add_argument("--idle", type=float, default=10.0, help="idle seconds per size (10)")
    parser.add_argument("--no-refresh", action="store_true", help="skip the refresh burst")
    args = parser.parse_args()
    missing = [p for p in ("dbus-daemon", "gnome-keyring-daemon") if not shutil.which(p)]
    if missing:
        print(f"bench/scale needs {' and '.join(missing)}: make system-deps", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    trees = {"this tree": ROOT}
    if args.before_tree:
        trees[f"before ({args.before_tree})"] = args.before_tree.resolve()
    results: dict[str, dict[int, dict[str, Any]]] = {t: {n: {} for n in sizes} for t in trees}
    notes: list[str] = []
    with APIServer(CA(), token="unused") as api:
        for n in sizes:
            for label, tree in trees.items():
                print(f"-- {label}, N = {n}", flush=True)
                try:
                    results[label][n] = measure_stored(tree, n, api, args.idle)
                except (RuntimeError, AssertionError, OSError, ValueError) as e:
                    notes.append(f"{label}, N = {n}: {e}")  # the other sizes still count
    if args.no_refresh:
        notes.append("refresh burst: not measured (--no-refresh)")
    else:
        from tests.idp import run_idp

        lifetimes = {"AccessToken": LIFETIME, "IdToken": LIFETIME}
        with run_idp(password=True, ttl=lifetimes, capacity=100_000) as idp:
            for n in sizes:
                for label, tree in trees.items():
                    print(f"-- {label}, refresh burst, N = {n}", flush=True)
                    try:
                        burst = measure_burst(tree, n, idp.issuer)
                    except (RuntimeError, OSError, ValueError) as e:
                        burst = str(e)
                    if isinstance(burst, str):
                        notes.append(f"{label}, refresh burst, N = {n}: {burst}")
                    else:
                        results[label][n]["burst"] = burst
    for label, rows in results.items():
        table(f"kubetray at scale: {label}", rows)
    for note in notes:
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
