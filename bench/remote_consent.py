"""bench/remote_consent: an SSH host attacks the desktop's consent; questions and files counted.

The agent's parts run in a process of their own (a memory token store with two stored
credentials, ``dev`` and ``prodadmin``); the person is a function that answers each question as
the case says and counts it. The remote host is kubetray-exec behind the ``ssh``-named relay
(tests/ssh_standin.py), each call through its own shell (a new parent each time, so kubectl's
repeat-failure memory does not help). Every JSON file kubetray writes is counted by file.

Cases:
- ``burst``: 60 requests at once, 8 at a time, every question denied: 30 attacker issuers with
  4 KB client ids and ``--name=prod-admin``, 10 ``--stored dev --name=renamed-N``, 20 unknown
  stored names.
- ``burst-headless``: the same with nobody to ask (``kubetray agent``).
- ``deny``: 100 requests for prodadmin, 5 a second, each question denied at once.
- ``silent``: 100 requests for new identities, 5 a second, nobody answering (a question
  waits ``--timeout`` s, 2 by default; the app waits 60).
- ``two``: dev, then prodadmin 0.4 s later; "Allow once" on the first question only, 1 s
  after it was asked.
- ``session``: "Allow for this session" on dev's question, then a request for prodadmin.

``--before REV`` runs each case on the code of git revision REV too (ae58513: the code the
product owner measured), one after the other on the same machine, and prints both.
``python bench/remote_consent.py --before ae58513``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
V1 = '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}\n'
TOKENS = {"dev": "bench-dev-token-5678", "prodadmin": "bench-prodadmin-token-1234"}
CASES = ("burst", "burst-headless", "deny", "silent", "two", "session")


def burst_requests() -> list[list[str]]:
    oidc = [
        [
            "--oidc-issuer-url=https://login.attacker.invalid",
            f"--oidc-client-id=client-{n}-" + "x" * 4000,
            "--name=prod-admin",
        ]
        for n in range(30)
    ]
    renames = [["--stored", "dev", f"--name=renamed-{n}"] for n in range(10)]
    unknown = [["--stored", f"unknown-{n}"] for n in range(20)]
    return [*oidc, *renames, *unknown]


def run_side(args: argparse.Namespace) -> None:
    """One case on one code tree (a process of its own): one JSON line on stdout."""
    base = Path(tempfile.mkdtemp(prefix="kt-consent-side-", dir="/tmp"))
    for var, sub in (("CONFIG", "config"), ("STATE", "state"), ("RUNTIME", "run")):
        (base / sub).mkdir(mode=0o700)
        os.environ[f"KUBETRAY_{var}_DIR"] = str(base / sub)
    sys.path.insert(0, args.code)
    from datetime import UTC, datetime

    from app import compose, jsonfile
    from app.model import Decision
    from app.static_credentials import token_credential
    from app.store.memory_store import MemorySecretStore

    sys.path.insert(1, str(ROOT))
    from tests.ssh_standin import ssh_relay

    store = MemorySecretStore()
    now = datetime.now(UTC)
    for name, token in TOKENS.items():
        compose.stored_credentials(store).save(token_credential(name, token, "bench", now), now)
    writes: Counter[str] = Counter()
    save = jsonfile.save

    def counted(path: str, *a: Any, **kw: Any) -> None:
        writes[os.path.basename(path)] += 1
        save(path, *a, **kw)

    jsonfile.save = counted  # type: ignore[assignment]
    parts = compose.agent(store=store)
    parts.server.listener.open()
    threading.Thread(target=parts.server.serve_forever, daemon=True).start()
    consent = parts.broker.consent
    assert consent is not None
    consent.timeout = args.timeout
    asked: list[str] = []
    lock = threading.Lock()

    def answer_later(question: Any, decision: Any, after: float = 0.05) -> None:
        threading.Timer(after, question.answer, (decision,)).start()

    def ask(question: Any) -> None:
        with lock:
            asked.append(question.identity)
            first = len(asked) == 1
        if args.case in ("burst", "deny"):
            answer_later(question, Decision.DENY)
        elif args.case == "two" and first:
            answer_later(question, Decision.ONCE, 1.0)  # after the second request came
        elif args.case == "session" and first:
            answer_later(question, Decision.SESSION)

    consent.ask = None if args.case == "burst-headless" else ask

    def remote(sock: Path, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(base),
            "KUBERNETES_EXEC_INFO": V1,
            "KUBETRAY_AGENT_SOCK": str(sock),
            "KUBETRAY_RUNTIME_DIR": str(base / "remote-run"),
        }
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
        return subprocess.run(
            ["/bin/sh", "-c", f"{sys.executable} -m exec_helper {quoted}; exit $?"],
            env=env,
            cwd=args.code,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=args.timeout * 3 + 60,
            check=False,
        )

    def paced(sock: Path, requests: list[list[str]], every: float) -> list[Any]:
        out: list[Any] = []
        threads = []
        for argv in requests:
            t = threading.Thread(target=lambda a=argv: out.append(remote(sock, *a)))
            t.start()
            threads.append(t)
            time.sleep(every)
        for t in threads:
            t.join()
        return out

    served: dict[str, list[str]] = {}
    start = time.monotonic()
    with ssh_relay(base, str(base / "run" / "agent.sock"), host="devvm") as (sock, _):
        if args.case.startswith("burst"):
            with ThreadPoolExecutor(8) as pool:
                done = list(pool.map(lambda a: remote(sock, *a), burst_requests()))
        elif args.case == "deny":
            done = paced(sock, [["--stored", "prodadmin"]] * 100, 0.2)
        elif args.case == "silent":
            done = paced(sock, [["--stored", f"new-{n}"] for n in range(100)], 0.2)
        else:
            with ThreadPoolExecutor(2) as pool:
                first = pool.submit(remote, sock, "--stored", "dev")
                if args.case == "session":
                    first.result()
                else:
                    time.sleep(0.4)
                second = pool.submit(remote, sock, "--stored", "prodadmin")
                done = [first.result(), second.result()]
            for asked_for, d in zip(("dev", "prodadmin"), done, strict=True):
                served[asked_for] = [n for n, t in TOKENS.items() if t in d.stdout]
    elapsed = time.monotonic() - start
    index = base / "config" / "identities.json"
    doc = json.loads(index.read_text()) if index.exists() else {}
    names = [e.get("name") for e in (doc.get("identities") or {}).values()]
    print(
        json.dumps(
            {
                "questions": len(asked),
                "asked about": sorted({n if len(n) <= 24 else n[:21] + "..." for n in asked}),
                "requests": len(done),
                "refused": sum(d.returncode != 0 for d in done),
                "most lines, a refusal at once": max(
                    (len(d.stderr.strip().splitlines()) for d in done if "Asking" not in d.stderr),
                    default=0,
                ),
                "writes": dict(writes),
                "identities": len(names),
                "identities.json bytes": index.stat().st_size if index.exists() else 0,
                "prod-admin kept": "prod-admin" in names,
                "served": served,
                "seconds": round(elapsed, 1),
            }
        )
    )
    sys.stdout.flush()
    os._exit(0)  # the agent's threads: nothing to wait for


def side(code: Path, case: str, timeout: float) -> dict[str, Any]:
    argv = ["--side", "--code", str(code), "--case", case, "--timeout", str(timeout)]
    done = subprocess.run(
        [sys.executable, __file__, *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": done.stderr.strip().splitlines()[-1:] or ["no output"]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", default=str(ROOT), help=argparse.SUPPRESS)
    parser.add_argument("--case", action="append", choices=CASES)
    parser.add_argument("--before", metavar="REV", help="also run the code of git revision REV")
    parser.add_argument(
        "--timeout", type=float, default=2.0, help="seconds a question waits (the app's: 60)"
    )
    args = parser.parse_args()
    if args.side:
        args.case = args.case[0]
        run_side(args)
        return
    trees = {"this tree": ROOT}
    if args.before:
        from bench.soak import _export

        trees = {
            args.before: _export(args.before, Path(tempfile.mkdtemp(prefix="kt-consent-"))),
            **trees,
        }
    columns = ("questions", "refused", "writes", "identities", "identities.json bytes")
    print("case            code        " + "  ".join(columns) + "  served / asked about")
    for case in args.case or CASES:
        for label, code in trees.items():
            r = side(code, case, args.timeout)
            if "error" in r:
                print(f"{case:<15} {label:<11} error: {r['error']}", flush=True)
                continue
            r["refused"] = f"{r['refused']}/{r['requests']}"
            r["writes"] = sum(r["writes"].values())
            cells = "  ".join(f"{r[c]!s:>{len(c)}}" for c in columns)
            extra = r["served"] or r["asked about"][:4]
            kept = " (prod-admin kept)" if r["prod-admin kept"] else ""
            print(f"{case:<15} {label:<11} {cells}  {extra}{kept}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
