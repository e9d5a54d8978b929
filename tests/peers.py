"""Finding and running the real peers: kubetray-exec as installed, the agent, kubectl."""

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
V1 = '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}\n'
B1 = V1.replace("/v1", "/v1beta1")
A1 = '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1alpha1","spec":{}}'
PY = (
    '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
    '"spec": {"interactive": false}}'
)


INSTALLED = "KUBETRAY_TEST_INSTALLED"
"""A directory holding installed kubetray and kubetray-exec to test instead of the source tree."""


def require(condition: bool, reason: str) -> None:
    """Skip when a peer is missing, or fail when CI said every peer must be there."""
    if condition:
        return
    if os.environ.get("KUBETRAY_REQUIRE_PEERS") == "1":
        pytest.fail(f"required peer missing: {reason}")
    pytest.skip(reason)


def steady(read: Callable[[], T], timeout: float, what: str, pause: float = 0.0) -> T:
    """What ``read()`` gives once two reads in a row agree and are not empty: a peer that
    settles in its own time (a panel's first paint, a process's first loads)."""
    deadline = time.monotonic() + timeout
    last = read()
    while True:
        time.sleep(pause)
        now = read()
        if now and now == last:
            return now
        assert time.monotonic() < deadline, f"{what} never settled"
        last = now


def secret_service_available() -> bool:
    return (
        bool(os.environ.get("DBUS_SESSION_BUS_ADDRESS"))
        and shutil.which("gnome-keyring-daemon") is not None
    )


def kubectl_binaries() -> dict[str, str]:
    """The versioned kubectl clients installed beside the machine's dispatcher."""
    found = shutil.which("kubectl")
    if not found:
        return {}
    directory = os.path.dirname(os.path.realpath(found))
    return {
        os.path.basename(p).removeprefix("kubectl."): p
        for p in sorted(glob.glob(os.path.join(directory, "kubectl.1.*")))
    }


def kubectl_bin(version: str = "1.33") -> str:
    """The kubectl ``version`` binary, or the test is skipped."""
    import pytest

    found = kubectl_binaries().get(version)
    if not found:
        pytest.skip(f"kubectl {version} is not installed (see PEERS.md)")
    return found


def cluster_info(server: str, config: Any = None, **extra: Any) -> str:
    """KUBERNETES_EXEC_INFO as client-go sends it with provideClusterInfo."""
    cluster = {"server": server, **extra, "config": config}
    doc = {
        "kind": "ExecCredential",
        "apiVersion": "client.authentication.k8s.io/v1",
        "spec": {"cluster": cluster, "interactive": False},
    }
    return json.dumps(doc, separators=(",", ":")) + "\n"


@dataclass
class KubetrayEnv:
    """One isolated kubetray installation: its directories and the environment naming them."""

    runtime: Path
    config: Path
    state: Path
    home: Path
    helper: Path
    env: dict[str, str] = field(default_factory=dict)

    def run_helper(
        self,
        *args: str,
        exec_info: str | None = V1,
        extra_env: Mapping[str, str] | None = None,
        timeout: float = 60,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[str]:
        """Run the installed kubetray-exec as kubectl would (stdin /dev/null by default)."""
        env = dict(self.env)
        if exec_info is not None:
            env["KUBERNETES_EXEC_INFO"] = exec_info
        env.update(extra_env or {})
        if "input" not in kwargs:
            kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(
            [str(self.helper), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,
        )

    def kubetray(
        self,
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run the kubetray CLI (``env``: variables added to this environment's)."""
        return subprocess.run(
            [sys.executable, "-m", "app", *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            check=False,
            cwd=ROOT,
        )

    def inputs(self) -> Path:
        """Where a test keeps the files it hands to kubetray (outside kubetray's own dirs)."""
        path = self.home.parent / "inputs"
        path.mkdir(exist_ok=True)
        return path

    def store_token(self, name: str, token: str) -> None:
        """`kubetray store NAME --token-file` with a file written for the purpose."""
        path = self.inputs() / f"{name}.token"
        path.write_text(token)
        done = self.kubetray("store", name, "--token-file", str(path))
        assert done.returncode == 0, done.stderr

    def store_certificate(self, name: str, cert_pem: bytes, key_pem: bytes) -> None:
        """`kubetray store NAME --client-certificate --client-key` likewise."""
        cert, key = self.inputs() / f"{name}.crt", self.inputs() / f"{name}.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        done = self.kubetray(
            "store", name, "--client-certificate", str(cert), "--client-key", str(key)
        )
        assert done.returncode == 0, done.stderr

    def agent_pid(self) -> int | None:
        try:
            return int((self.runtime / "agent.lock").read_text().strip())
        except (OSError, ValueError):
            return None

    def stop_agent(self) -> None:
        pid = self.agent_pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (self.runtime / "agent.sock").exists():
            time.sleep(0.02)

    def calls(self) -> list[dict[str, Any]]:
        """The agent's record of calls, newest first."""
        result = self.kubetray_json("calls")
        return list(result["calls"])

    def kubetray_json(self, op: str) -> dict[str, Any]:
        code = (
            "import json,sys; from app.agent import client; "
            f"print(json.dumps(client.call_json({op!r})))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        return dict(json.loads(out.stdout))


@contextlib.contextmanager
def kubetray_env(base: Path) -> Iterator[KubetrayEnv]:
    """Fresh directories (the runtime one short: AF_UNIX paths stop at 108 bytes)."""
    from exec_helper.dev_launcher import write_launcher

    runtime_parent = Path(tempfile.mkdtemp(prefix="kt-", dir="/tmp"))
    runtime = runtime_parent / "run"
    kt = KubetrayEnv(
        runtime=runtime,
        config=base / "config",
        state=base / "state",
        home=base / "home",
        helper=base / "bin" / "kubetray-exec",
    )
    kt.home.mkdir(parents=True)
    kt.helper.parent.mkdir(parents=True)
    installed = os.environ.get(INSTALLED)
    if installed:  # the packaged programs under test (tests/packaging sets this)
        kt.helper = Path(installed) / "kubetray-exec"
    else:
        write_launcher(str(kt.helper), sys.executable)
    kt.env = {
        k: v for k, v in os.environ.items() if not k.startswith(("KUBETRAY_", "KUBERNETES_EXEC"))
    }
    kt.env.update(
        KUBETRAY_RUNTIME_DIR=str(runtime),
        KUBETRAY_CONFIG_DIR=str(kt.config),
        KUBETRAY_STATE_DIR=str(kt.state),
        PYTHONPATH=str(ROOT),
        HOME=str(kt.home),
    )
    if not installed:  # an installed helper finds its own agent: the kubetray beside it
        kt.env["KUBETRAY_AGENT_COMMAND"] = f"{sys.executable} -m app agent"
    try:
        yield kt
    finally:
        kt.stop_agent()
        shutil.rmtree(runtime_parent, ignore_errors=True)


class Agent:
    """A ``kubetray agent`` a test started (running_agent): its process and its stderr."""

    def __init__(self, kt: KubetrayEnv, *args: str) -> None:
        # A file, not a pipe: nobody reads it while the agent runs. stop() closes it.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self._log: str | None = None
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "agent", *args],
            env=kt.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_until_serving(self, kt: KubetrayEnv, timeout: float) -> None:
        """Until it holds the agent lock and its socket accepts a connection."""
        deadline = time.monotonic() + timeout
        while not (kt.agent_pid() == self.pid and _accepts(kt.runtime / "agent.sock")):
            code = self.process.poll()
            if code is not None:
                pytest.fail(f"the agent exited with code {code} at start-up (stderr below)")
            if time.monotonic() > deadline:
                pytest.fail(f"the agent did not answer within {timeout:g} s")
            time.sleep(0.02)

    def stop(self) -> str:
        """Terminate it (SIGTERM, SIGKILL after 10 s) unless it has exited; its stderr."""
        if self._log is None:
            if self.process.poll() is None:
                self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self._stderr.seek(0)
            self._log = self._stderr.read().decode(errors="replace")
            self._stderr.close()
        return self._log


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


StartAgent = Callable[..., Agent]
"""The start_agent fixture: ``start_agent(kt, *args)`` (tests/conftest.py)."""


@contextlib.contextmanager
def running_agent(kt: KubetrayEnv, *args: str, timeout: float = 20) -> Iterator[Agent]:
    """``kubetray agent ARGS`` for ``kt``, once it answers; stopped on the way out.

    Its stderr goes to the test's captured stderr, which pytest shows beside a failure.
    """
    agent = Agent(kt, *args)
    try:
        agent.wait_until_serving(kt, timeout)
        yield agent
    finally:
        log = agent.stop()
        if log:
            print(f"--- kubetray agent (pid {agent.pid}) stderr ---\n{log}", file=sys.stderr)


INSTALLED_SUITES = (
    "tests/conformance/test_exec_consumers.py",
    "tests/conformance/test_kubelet_provider.py",
    "tests/integration/test_kubectl_e2e.py",
)
"""The exec-plugin checklist, the kubelet provider and real kubectl: what an installed
kubetray-exec must pass (tests/packaging)."""


def run_installed_suites(
    helper_dir: Path, label: str, timeout: float, env: Mapping[str, str] | None = None
) -> None:
    """INSTALLED_SUITES in a pytest of their own against the kubetray-exec (and kubetray) in
    ``helper_dir``: every test passes, none is skipped."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *INSTALLED_SUITES],
        cwd=ROOT,
        env={**os.environ, INSTALLED: str(helper_dir), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1]
    print(f"{label}: {summary} ({time.monotonic() - start:.0f} s)")
    assert done.returncode == 0, done.stdout[-6000:]
    assert "skipped" not in summary, summary


def exec_kubeconfig(
    kt: "KubetrayEnv",
    api: Any,
    args: list[str],
    path: Path,
    *,
    user: str = "u",
    mode: str = "Never",
) -> Path:
    """A kubeconfig whose one context runs ``kt``'s kubetray-exec against the API stand-in
    ``api``, with cluster info; its exec env names this test's kubetray directories (every
    client adds it to its own environment)."""
    import base64

    import yaml

    env = [
        {"name": k, "value": v}
        for k, v in kt.env.items()
        if k.startswith("KUBETRAY_") or k == "PYTHONPATH"
    ]
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(kt.helper),
        "args": args,
        "env": env,
        "interactiveMode": mode,
        "provideClusterInfo": True,
    }
    cluster = {
        "server": api.url,
        "certificate-authority-data": base64.b64encode(api.ca_pem).decode(),
    }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": user, "user": {"exec": exec_}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": user}}],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path
