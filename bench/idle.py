"""bench/idle: the tray app's footprint when nobody needs it.

Starts the app (`python -m app`, offscreen Qt) with five identities, each used once so it is
loaded, waits, then measures RSS and CPU over an idle window (default 60 s) from /proc. Two
scenarios: five stored credentials, and five OIDC identities logged in at a real oidc-provider
(password grant; their refresh is scheduled). Target: RSS <= 95 MB (90 until id_tokens were
verified with joserfc), CPU ~0 %. For scale, it also prints a bare
`python -c "import PySide6.QtWidgets"` QApplication's RSS measured the same way.

With ``--packaged BUNDLE`` (a built bundle, build/dist/kubetray), it measures instead the
packaged headless agent and app with the five OIDC identities, each as shipped (app/frozen.py
pins the bundle: its archives held open, the extension modules it may need later imported at
start) and with ``KUBETRAY_PIN=0``: the cost of never importing from a replaced installation.

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


def oidc_users(issuer: str, n: int) -> list[list[str]]:
    """kubetray-exec's arguments for ``n`` OIDC identities at oidc-provider (password grant:
    nobody at a browser; tests/oidc/provider.mjs accepts userI / pw-userI)."""
    return [
        [
            "get-token",
            f"--oidc-issuer-url={issuer}",
            "--oidc-client-id=kubectl",
            "--grant-type=password",
            f"--username=user{i}",
            f"--password=pw-user{i}",
        ]
        for i in range(n)
    ]


def measure(  # type: ignore[no-untyped-def]
    kt, identities: list[list[str]], idle: float, command: list[str] | None = None, **env: str
) -> tuple[float, float, float]:
    """(RSS MB, CPU %, CPU s) of the app over ``idle`` seconds after serving each identity once."""
    app = subprocess.Popen(
        command or [sys.executable, "-m", "app"],
        env={**kt.env, **env},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while kt.agent_pid() != app.pid and time.monotonic() < deadline:
            time.sleep(0.1)
        for args in identities:
            done = kt.run_helper(*args)
            assert done.returncode == 0, done.stderr
        time.sleep(5)  # settle
        cpu0, t0 = cpu_seconds(app.pid), time.monotonic()
        time.sleep(idle)
        cpu1, t1 = cpu_seconds(app.pid), time.monotonic()
        return rss_mb(app.pid), 100 * (cpu1 - cpu0) / (t1 - t0), cpu1 - cpu0
    finally:
        app.terminate()
        app.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--idle", type=float, default=60.0, help="seconds of idle to measure (default 60)"
    )
    parser.add_argument("--packaged", type=Path, help="a built bundle: pinned or not (see above)")
    args = parser.parse_args()
    from tests.idp import run_idp

    if args.packaged:
        return packaged(args.packaged.resolve(), args.idle)

    results = {}
    with kubetray_env(Path(tempfile.mkdtemp(prefix="kt-bench-idle-"))) as kt:
        kt.env["QT_QPA_PLATFORM"] = "offscreen"
        for i in range(5):
            kt.store_token(f"identity-{i}", f"idle-bench-token-{i}")
        results["5 stored credentials"] = measure(
            kt, [["--stored", f"identity-{i}"] for i in range(5)], args.idle
        )
        with run_idp(password=True) as idp:
            oidc = oidc_users(idp.issuer, 5)
            results["5 OIDC identities (logged in)"] = measure(kt, oidc, args.idle)
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
    print(f"tray app idle for {args.idle:.0f} s (target: RSS <= 95 MB, CPU ~0 %)")
    for label, (rss, cpu, cpu_s) in results.items():
        print(f"  {label:32s} RSS {rss:5.1f} MB   CPU {cpu:.2f} % ({cpu_s:.2f} s)")
    print(f"  for scale: a bare PySide6 QApplication  RSS {bare_rss:.1f} MB")
    return 0


def packaged(bundle: Path, idle: float) -> int:
    from tests.idp import run_idp

    program = str(bundle / "kubetray")
    results = {}
    with kubetray_env(Path(tempfile.mkdtemp(prefix="kt-bench-idle-"))) as kt:
        kt.env["QT_QPA_PLATFORM"] = "offscreen"
        with run_idp(password=True) as idp:
            oidc = oidc_users(idp.issuer, 5)
            # Tokens in memory: each run logs in afresh (from the keyring, the second would not).
            runs = (("agent", [program, "agent"]), ("app", [program, "app"]))
            for label, command in runs:
                for pin in ("1", "0"):
                    results[(label, pin)] = measure(
                        kt, oidc, idle, [*command, "--store", "memory"], KUBETRAY_PIN=pin
                    )
    print(f"packaged, 5 OIDC identities, idle {idle:.0f} s: pinned (as shipped) vs KUBETRAY_PIN=0")
    for label in ("agent", "app"):
        (pinned, cpu, _), (loose, cpu0, _) = results[(label, "1")], results[(label, "0")]
        print(
            f"  {label:5s} RSS pinned {pinned:5.1f} MB, not {loose:5.1f} MB: "
            f"+{pinned - loose:4.1f} MB (ratio {pinned / loose:.3f}); CPU {cpu:.2f} % vs {cpu0:.2f} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
