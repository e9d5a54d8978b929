"""bench/hot_path: what kubetray-exec adds to every kubectl command.

From one run, median of N (default 30) interleaved rounds:
- `kubectl get ns` wall time with a static token in kubeconfig (the baseline), with exec `cat`
  of a credential file (the floor for any exec plugin), with gke-gcloud-auth-plugin answering
  from its cache (a Go plugin, the anchor), and with kubetray-exec on the cached path;
  each with its ratio to the static-token run;
- each credential process alone, next to a bare `python3 -I -S`; for the packaged helper also
  with its fast path off (KUBETRAY_EXEC_FAST=0: today's Python path) and a request it cannot
  answer from memory (--force-refresh) with the fast path on and off: the fallback's cost.
Targets (issue 23, packaged helper): cached path <= 3 ms and below gke-gcloud-auth-plugin;
kubectl ratio <= 1.04; fallback <= 1 ms over the path without the fast path.

Run with `make bench` (it provides the keyring session). kubetray-exec is the one
`make install` put in .venv/bin, as the README installs it.
"""

import argparse
import atexit
import base64
import contextlib
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

from exec_helper.paths import FAST_ENV  # noqa: E402
from tests.apiserver import APIServer  # noqa: E402
from tests.peers import kubectl_binaries  # noqa: E402
from tests.pki import CA  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
EXEC_INFO = (
    '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",'
    '"spec":{"interactive":false}}\n'
)


def kubeconfig(server: str, ca_pem: bytes, user: dict[str, object]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "bench",
            "clusters": [
                {
                    "name": "bench",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": "bench", "user": user}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        }
    )


def exec_user(
    command: str, args: list[str], env: dict[str, str] | None = None, version: str = "v1"
) -> dict[str, object]:
    stanza: dict[str, object] = {
        "apiVersion": f"client.authentication.k8s.io/{version}",
        "command": command,
        "args": args,
        "interactiveMode": "Never",
    }
    if env:
        stanza["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"exec": stanza}


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=30, help="rounds (default 30)")
    parser.add_argument("--kubectl", default="1.33", help="kubectl version (default 1.33)")
    parser.add_argument(
        "--helper", default=str(ROOT / ".venv" / "bin" / "kubetray-exec"), help="kubetray-exec"
    )
    parser.add_argument(
        "--kubetray", default=str(ROOT / ".venv" / "bin" / "kubetray"), help="kubetray"
    )
    parser.add_argument(
        "--python", default=None, help="bare interpreter to compare (default: the launcher's)"
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        help="another kubetray-exec measured in the same interleaved rounds (repeatable)",
    )
    args = parser.parse_args()

    helper = Path(args.helper).resolve()
    kubectl = kubectl_binaries().get(args.kubectl)
    gke = shutil.which("gke-gcloud-auth-plugin")
    if not helper.exists() or not kubectl:
        raise SystemExit("needs `make install` and the machine's versioned kubectl binaries")

    work = Path(tempfile.mkdtemp(prefix="kt-bench-"))

    home = work / "home"
    (home / ".kube").mkdir(parents=True)
    kt_env = {
        "KUBETRAY_RUNTIME_DIR": str(work / "run"),
        "KUBETRAY_CONFIG_DIR": str(work / "config"),
        "KUBETRAY_STATE_DIR": str(work / "state"),
    }
    env = dict(os.environ, HOME=str(home), **kt_env)

    def cleanup() -> None:  # also when a run fails half-way: no agent is left behind
        pid_file = work / "run" / "agent.lock"
        if pid_file.exists():
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text().strip()), 15)
        subprocess.run(
            [args.kubetray, "forget", "bench"], env=env, check=False, capture_output=True
        )
        shutil.rmtree(work, ignore_errors=True)

    atexit.register(cleanup)
    (work / "token").write_text(TOKEN)
    cred_file = work / "cred.json"
    cred_file.write_text(
        json.dumps(
            {
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "status": {"token": TOKEN},
            }
        )
    )
    subprocess.run(
        [args.kubetray, "store", "bench", "--token-file", str(work / "token")],
        env=env,
        check=True,
        capture_output=True,
    )

    ca = CA()
    with APIServer(ca, token=TOKEN) as api:
        configs = {
            "static token": kubeconfig(api.url, api.ca_pem, {"token": TOKEN}),
            "exec cat (the floor)": kubeconfig(
                api.url, api.ca_pem, exec_user("cat", [str(cred_file)])
            ),
            "kubetray-exec": kubeconfig(
                api.url, api.ca_pem, exec_user(str(helper), ["--stored", "bench"], kt_env)
            ),
        }
        # the interpreter the installed launcher runs (its shebang), not whatever is on PATH
        first = helper.read_bytes()[:256].split(b"\n")[0]
        shebang = first[2:].split()[0].decode() if first.startswith(b"#!") else None
        packaged = shebang is None  # the C launcher, with its fast path
        slow_env = {**kt_env, FAST_ENV: "0"}
        if packaged:
            configs["kubetray-exec, fast path off"] = kubeconfig(
                api.url, api.ca_pem, exec_user(str(helper), ["--stored", "bench"], slow_env)
            )
        for other in args.compare:
            configs[f"compare {other}"] = kubeconfig(
                api.url, api.ca_pem, exec_user(other, ["--stored", "bench"], kt_env)
            )
        if gke:
            configs["gke-gcloud-auth-plugin"] = kubeconfig(
                api.url, api.ca_pem, exec_user(gke, [], version="v1beta1")
            )
            (home / ".kube" / "gke_gcloud_auth_plugin_cache").write_text(
                json.dumps(
                    {
                        "current_context": "bench",
                        "access_token": TOKEN,
                        "token_expiry": "2099-01-01T00:00:00Z",
                        "extra_args": "",
                    }
                )
            )
        paths: dict[str, Path] = {}
        for label, text in configs.items():
            name = label.split()[0] + (str(len(paths)) if label.startswith("compare") else "")
            path = home / ".kube" / ("config" if label.startswith("gke") else name + ".yaml")
            path.write_text(text)
            paths[label] = path
        kubectl_runs: dict[str, list[float]] = {label: [] for label in configs}
        # warm up: discovery cache, page cache, the agent started and holding the token
        for _ in range(3):
            for path in paths.values():
                wall([kubectl, "--kubeconfig", str(path), "get", "ns", "-o", "name"], env)
        for _ in range(args.n):
            for label, path in paths.items():
                kubectl_runs[label].append(
                    wall([kubectl, "--kubeconfig", str(path), "get", "ns", "-o", "name"], env)
                )

        alone: dict[str, list[float]] = {}
        helper_env = dict(env, KUBERNETES_EXEC_INFO=EXEC_INFO)
        slow = dict(helper_env, **{FAST_ENV: "0"})
        interpreter = args.python or shebang or "/usr/bin/python3"  # a packaged launcher
        cached = [str(helper), "--stored", "bench"]
        processes = {
            f"{interpreter} -IS (bare)": ([interpreter, "-IS", "-c", "pass"], helper_env),
            "cat (the floor)": (["cat", str(cred_file)], helper_env),
            "kubetray-exec --version (start-up)": ([str(helper), "--version"], helper_env),
            "kubetray-exec (cached path)": (cached, helper_env),
        }
        if packaged:  # the same program with its fast path off is today's path (Python)
            processes["kubetray-exec, fast path off"] = (cached, slow)
            # --force-refresh: never from memory, so the fast path always falls back
            processes["kubetray-exec --force-refresh (falls back)"] = (
                [*cached, "--force-refresh"],
                helper_env,
            )
            processes["kubetray-exec --force-refresh, fast path off"] = (
                [*cached, "--force-refresh"],
                slow,
            )
        for other in args.compare:
            processes[f"{other} (cached path)"] = ([other, "--stored", "bench"], helper_env)
        if gke:
            processes["gke-gcloud-auth-plugin (its cache)"] = ([gke], helper_env)
        for _ in range(args.n):
            for label, (cmd, cmd_env) in processes.items():
                alone.setdefault(label, []).append(wall(cmd, cmd_env))

    base = statistics.median(kubectl_runs["static token"])
    print(f"kubectl {args.kubectl} get ns, median of {args.n} interleaved rounds")
    for label, runs in kubectl_runs.items():
        med = statistics.median(runs)
        print(f"  {label[-40:]:40s} {med:7.1f} ms   ratio {med / base:5.3f}")
    print(f"process alone, median of {args.n}")
    for label, runs in alone.items():
        print(f"  {label[-48:]:48s} {statistics.median(runs):7.2f} ms")
    if packaged:
        med = {label: statistics.median(runs) for label, runs in alone.items()}
        fallback = (
            med["kubetray-exec --force-refresh (falls back)"]
            - med["kubetray-exec --force-refresh, fast path off"]
        )
        ratio = statistics.median(kubectl_runs["kubetray-exec"]) / base
        print("targets (issue 23)")
        print(f"  cached path {med['kubetray-exec (cached path)']:.2f} ms (<= 3 ms", end="")
        go = med.get("gke-gcloud-auth-plugin (its cache)")
        print(f", below the Go plugin's {go:.2f} ms)" if go else ")")
        print(f"  kubectl get ns ratio to static token {ratio:.3f} (<= 1.04)")
        print(f"  fallback cost {fallback:+.2f} ms over the path without the fast path (<= 1 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
