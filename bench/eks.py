"""bench/eks: what one kubectl call costs for its EKS token, `aws eks get-token` beside
kubetray-exec, in one run.

The AWS CLI v1 comes from PyPI into a scratch venv (.bench/awscli-venv, made on the first run),
as a person installs it; it and kubetray both sign for the same profiles against local
stand-ins (moto's STS, the IAM Identity Center stand-in of tests/aws), never AWS:
- keys: a profile with an IAM user's keys;
- sso: an IAM Identity Center profile (the CLI v1 calls GetRoleCredentials on every run);
- role: keys plus --role-arn (the CLI assumes the role on every run).
Per row, the median wall time of N (default 20) interleaved runs of the process kubectl would
start, each with its ratio to `aws eks get-token` for that profile, next to a bare
`python3 -I -S` (the floor for any Python plugin); and, in process, what the agent spends
signing one token. kubetray-exec is the development launcher (`make install`), asking an agent
that already holds the credentials (the cached path every kubectl call after the first takes).

Run with `make bench-eks`.
"""

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.aws import world  # noqa: E402
from tests.aws.moto_sts import MotoSTS  # noqa: E402
from tests.aws.sso import SsoStandIn  # noqa: E402

EXEC_INFO = (
    '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1",'
    '"spec":{"interactive":false}}\n'
)
GET_TOKEN = list(world.GET_TOKEN)
ROLE = world.ROLE_ARN


def awscli_venv(where: Path) -> Path:
    """The AWS CLI v1 from PyPI in a venv of its own (the person's install, not the tests')."""
    aws = where / "bin" / "aws"
    if not aws.exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        subprocess.run(
            [
                str(where / "bin" / "pip"),
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "awscli",
            ],
            check=True,
        )
    return aws


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, bool]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    took = time.perf_counter() - start
    ok = done.returncode == 0 and b'"token"' in done.stdout
    return took, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="runs per row (default 20)")
    parser.add_argument("--helper", default=str(ROOT / ".venv" / "bin" / "kubetray-exec"))
    parser.add_argument("--kubetray", default=str(ROOT / ".venv" / "bin" / "kubetray"))
    args = parser.parse_args()

    aws = awscli_venv(ROOT / ".bench" / "awscli-venv")
    version = subprocess.run([str(aws), "--version"], capture_output=True, text=True, check=True)
    work = Path(tempfile.mkdtemp(prefix="kubetray-bench-eks-"))
    home = work / "home"
    home.mkdir()
    kt_env = {
        "KUBETRAY_RUNTIME_DIR": str(work / "run"),
        "KUBETRAY_CONFIG_DIR": str(work / "config"),
        "KUBETRAY_STATE_DIR": str(work / "state"),
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base.update(HOME=str(home), KUBERNETES_EXEC_INFO=EXEC_INFO, **kt_env)

    def cleanup() -> None:
        subprocess.run([args.kubetray, "stop"], env=base, check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    atexit.register(cleanup)

    with MotoSTS() as sts, SsoStandIn(sts) as sso:
        keys = sts.user_keys("bench")
        # kubetray's files: the stand-ins through [services]; the CLI's: through the
        # environment, without an STS endpoint, which it would put into its token
        ours = world.write(work / "ours", sso.url, sts.url, keys=keys)
        theirs = world.write(work / "theirs", sso.url, sts.url, keys=keys, services=False)
        sso.auto_approve = True
        # the person logged in once with the CLI: its cache holds the login, which kubetray
        # reads once (and the CLI keeps using)
        from app.providers.aws.command import parse
        from app.providers.aws.engine import Engine
        from app.providers.aws.sso import SsoClient

        w = Engine(lambda _s: None).world(parse(GET_TOKEN, ours.env(AWS_PROFILE="sso-dev")))
        assert w.sso is not None
        login = SsoClient(w.sso, w.unsigned).login(world.QuickPerson(sso))
        cache = home / ".aws" / "sso" / "cache"
        cache.mkdir(parents=True)
        (cache / f"{w.sso.cache_key}.json").write_text(json.dumps(login.to_cli()))

        cli_env = {**base, **theirs.env(), **world.endpoint_env(sso.url)}
        cli_role_env = {**cli_env, "AWS_ENDPOINT_URL_STS": sts.url}
        kt = {**base, **ours.env()}
        cases = {
            "keys": ([], "dev", cli_env),
            "sso": ([], "sso-dev", cli_env),
            "role": (["--role-arn", ROLE], "dev", cli_role_env),
        }
        rows: dict[str, tuple[list[str], dict[str, str]]] = {
            "python3 -I -S (bare)": ([sys.executable, "-I", "-S", "-c", "pass"], base),
        }
        for case, (extra, profile, cli) in cases.items():
            rows[f"aws eks get-token ({case})"] = (
                [str(aws), *GET_TOKEN, *extra],
                {**cli, "AWS_PROFILE": profile},
            )
            rows[f"kubetray-exec ({case})"] = (
                [args.helper, *GET_TOKEN, *extra],
                {**kt, "AWS_PROFILE": profile},
            )
        # warm up: page cache, the agent started, the SSO login read, role credentials held
        served = {}
        for label, (cmd, env) in rows.items():
            _, ok = wall(cmd, env)
            _, ok = wall(cmd, env)
            served[label] = ok
        times: dict[str, list[float]] = {label: [] for label in rows}
        for _ in range(args.n):
            for label, (cmd, env) in rows.items():
                times[label].append(wall(cmd, env)[0])

        # in process: the agent's part of a cached call (sign a token)
        engine = Engine(lambda _s: None)
        world_keys = engine.world(parse(GET_TOKEN, ours.env(AWS_PROFILE="dev")))
        world_keys.token("demo")
        signs = []
        for _ in range(200):
            start = time.perf_counter()
            world_keys.token("demo")
            signs.append(time.perf_counter() - start)
        calls = dict(sso.calls)

    print(
        f"bench/eks: median of {args.n} runs per row; {version.stdout.strip() or version.stderr.strip()}"
    )
    print(f"{'process kubectl starts':<36} {'median':>9} {'min':>9}  vs aws eks get-token")
    for label, values in times.items():
        med = statistics.median(values)
        case = label.split("(")[-1].rstrip(")")
        ref = times.get(f"aws eks get-token ({case})")
        ratio = (
            f"{med / statistics.median(ref):7.3f}" if ref and not label.startswith("aws") else ""
        )
        note = "" if served[label] or label.startswith("python") else "  (FAILED: no token)"
        print(f"{label:<36} {med * 1000:7.1f} ms {min(values) * 1000:7.1f} ms  {ratio}{note}")
    print(
        f"agent: sign one token (in process, median of 200): "
        f"{statistics.median(signs) * 1e6:.0f} us"
    )
    print(f"IAM Identity Center calls during the run: {calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
