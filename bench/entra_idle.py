"""bench/entra_idle: what an Entra identity costs an idle agent (MSAL and requests loaded).

MSAL for Python is imported only when an Entra identity is used. This measures the headless
agent (`kubetray agent`) and the tray app idle with three OIDC identities, then the same with a
fourth, Entra one (a service principal at the Entra stand-in, tests/oidc/entra.mjs: no person
needed), and prints RSS and CPU for each and the ratio with/without, in one run.

Run with `.venv/bin/python bench/entra_idle.py [--idle 30]` (needs node and oidc-provider:
`make test` installs them).
"""

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.idle import measure, oidc_users  # noqa: E402
from tests.entra import AKS_SERVER, run_entra  # noqa: E402
from tests.idp import run_idp  # noqa: E402
from tests.peers import kubetray_env  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle (default 30)")
    args = parser.parse_args()
    rows = []
    with run_idp(password=True) as idp, run_entra() as entra:
        oidc = oidc_users(idp.issuer, 3)
        spn = [
            "get-token",
            "--login=spn",
            f"--server-id={AKS_SERVER}",
            f"--client-id={entra.sp_secret['client_id']}",
            f"--client-secret={entra.sp_secret['client_secret']}",
            f"--tenant-id={entra.tenant}",
            f"--authority-host={entra.base}/",
            f"--certificate-authority={entra.ca_file}",
        ]
        scenarios = (
            ("nothing served yet", [], "none"),
            ("1 Entra identity", [spn], "none"),
            ("3 OIDC identities", oidc, "oidc"),
            ("3 OIDC + 1 Entra", [*oidc, spn], "oidc"),
        )
        agent = [sys.executable, "-m", "app", "agent"]
        for label, command in (("agent", agent), ("tray app", None)):
            for what, identities, base in scenarios:
                with kubetray_env(Path(tempfile.mkdtemp(prefix="kt-bench-entra-"))) as kt:
                    kt.env["QT_QPA_PLATFORM"] = "offscreen"
                    rss, cpu, _ = measure(kt, identities, args.idle, command)
                    rows.append((label, what, base, spn in identities, rss, cpu))
    print(f"idle {args.idle:.0f} s after serving each identity once (RSS; ratio to without)")
    without: dict[tuple[str, str], float] = {}
    for label, what, base, with_entra, rss, cpu in rows:
        extra = ""
        if with_entra:
            before = without[(label, base)]
            extra = f"   x{rss / before:.2f} ({rss - before:+.1f} MB)"
        else:
            without[(label, base)] = rss
        print(f"  {label:9s} {what:19s} RSS {rss:5.1f} MB   CPU {cpu:.2f} %{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
