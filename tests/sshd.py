"""A private OpenSSH server on 127.0.0.1 and local accounts that stand for "the remote host".

The test process (root in CI) is the desktop: it runs the agent and the ``ssh`` client. sshd
runs in the foreground as root with its own config, a host key made for this run and a free
loopback port; it lets in only two local accounts, ``kubetray-remote`` (the remote user) and
``kubetray-other`` (another user on the same remote host), each through a client key made for
this run. Accounts are created once and reused; what a run adds (its authorized key, the
sockets it forwards) is removed when it ends.
"""

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.peers import ROOT, require

REMOTE_USER = "kubetray-remote"
"""The account on "the remote host" that runs kubectl through the forward."""
OTHER_USER = "kubetray-other"
"""Another account on the same host (it may own a socket the remote user is pointed at)."""
SSHD = "/usr/sbin/sshd"
SSH = "/usr/bin/ssh"
REMOTE_PYTHON = "/usr/bin/python3"
"""The remote side runs kubetray-exec with the system Python (stdlib only), not the venv's."""
START_TIMEOUT = 20.0


@dataclass
class Account:
    """A local account reached over SSH as if it were on another machine."""

    name: str
    uid: int
    gid: int
    home: Path

    @property
    def destination(self) -> str:
        return f"{self.name}@127.0.0.1"

    @property
    def forwarded_socket(self) -> str:
        """Where ``kubetray ssh`` puts the forwarded agent socket on the remote host."""
        return f"/tmp/kubetray-{self.name}.sock"

    @property
    def runtime_dir(self) -> Path:
        """kubetray-exec's own socket directory there (no XDG_RUNTIME_DIR: sshd runs no PAM)."""
        return Path(f"/tmp/kubetray-{self.uid}")

    @property
    def helper(self) -> str:
        """Where ``kubetray ssh --install-helper`` puts kubetray-exec on the remote host."""
        return str(self.home / ".local" / "bin" / "kubetray-exec")

    def put(self, relative: str, data: bytes | str, mode: int = 0o644) -> Path:
        """Write a file into this account's home as this account would own it."""
        path = self.home / relative
        parents = []
        parent = path.parent
        while parent != self.home and not parent.exists():
            parents.append(parent)
            parent = parent.parent
        for directory in reversed(parents):
            directory.mkdir(mode=0o755)
            os.chown(directory, self.uid, self.gid)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        os.chown(path, self.uid, self.gid)
        path.chmod(mode)
        return path


@dataclass
class SSHServer:
    """A running private sshd: ``ssh_options`` reach it, ``run`` runs a command as an account."""

    port: int
    directory: Path
    client_key: Path
    log: Path
    process: "subprocess.Popen[bytes]"
    accounts: dict[str, Account] = field(default_factory=dict)

    @property
    def remote(self) -> Account:
        return self.accounts[REMOTE_USER]

    @property
    def other(self) -> Account:
        return self.accounts[OTHER_USER]

    def ssh_options(self) -> list[str]:
        """ssh client options reaching this server without touching anyone's ~/.ssh.

        ``-F none``: ssh reads ``~/.ssh/config`` from the passwd entry's home, not $HOME.
        """
        return [
            "-F",
            "none",
            "-p",
            str(self.port),
            "-i",
            str(self.client_key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "IdentityAgent=none",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=10",
        ]

    def run(
        self,
        account: Account,
        command: Sequence[str] | str,
        *,
        forward: tuple[str, str] | None = None,
        setenv: Mapping[str, str] | None = None,
        remote_env: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float = 60,
    ) -> "subprocess.CompletedProcess[str]":
        """Run ``command`` (argv, quoted for the remote shell; or a shell string) as ``account``.

        ``forward``: (remote socket, local socket) made with ``ssh -R``, as ``kubetray ssh`` does.
        ``setenv``: variables sent with ``-o SetEnv`` (sshd accepts only KUBETRAY_AGENT_SOCK).
        ``remote_env``: variables set for the command with ``env`` on the remote side.
        ``env``: the local ssh client's environment (the desktop user's).
        """
        line = command if isinstance(command, str) else shlex.join(command)
        if remote_env:
            line = shlex.join(["env", *(f"{k}={v}" for k, v in remote_env.items())]) + " " + line
        args = [SSH, *self.ssh_options()]
        if forward:
            args += [
                "-o",
                "ExitOnForwardFailure=yes",
                "-o",
                "StreamLocalBindUnlink=yes",
                "-R",
                f"{forward[0]}:{forward[1]}",
            ]
        for k, v in (setenv or {}).items():
            args += ["-o", f"SetEnv={k}={v}"]
        args += [account.destination, line]
        return subprocess.run(
            args,
            env=dict(client_env() if env is None else env),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def check(self, account: Account, command: Sequence[str] | str, **kwargs: object) -> str:
        """``run`` that must succeed; returns stdout."""
        done = self.run(account, command, **kwargs)  # type: ignore[arg-type]
        assert done.returncode == 0, (
            f"ssh {account.destination} {command!r} exited {done.returncode}\n"
            f"stderr: {done.stderr}\nsshd said:\n{self.said()}"
        )
        return done.stdout

    def said(self) -> str:
        """The end of sshd's log (for failure messages)."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""


def client_env() -> dict[str, str]:
    """The desktop's environment for ssh: no ssh-agent of whoever runs the tests."""
    return {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "SSH_AGENT_PID")}


def available() -> tuple[bool, str]:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "the private sshd and its test accounts need root (CI runs the tests as root)"
    for program in (SSHD, SSH, "/usr/bin/ssh-keygen", REMOTE_PYTHON):
        if not os.access(program, os.X_OK):
            return False, f"{program} is missing: run scripts/install-system-deps (openssh-server)"
    if shutil.which("useradd") is None and not os.access("/usr/sbin/useradd", os.X_OK):
        return False, "useradd is missing"
    return True, ""


def ensure_account(name: str) -> Account:
    """The local account ``name``: created once (useradd -m), reused by later runs."""
    if name not in {e.pw_name for e in pwd.getpwall()}:
        done = subprocess.run(
            ["/usr/sbin/useradd", "-m", "-s", "/bin/sh", "-c", "kubetray tests", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode not in (0, 9):  # 9: created meanwhile by a parallel run
            raise AssertionError(f"useradd {name} failed: {done.stderr}")
    entry = pwd.getpwnam(name)
    # useradd leaves the password "!" (locked), and sshd without PAM refuses locked accounts even
    # for keys; "*" matches no password, so the account takes keys only.
    with open("/etc/shadow", encoding="utf-8") as f:
        hashed = next((line.split(":")[1] for line in f if line.split(":")[0] == name), "")
    if hashed.startswith("!"):
        subprocess.run(["/usr/sbin/usermod", "-p", "*", name], check=True, capture_output=True)
    home = Path(entry.pw_dir)
    if not home.is_dir():
        home.mkdir(mode=0o755, parents=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    return Account(name, entry.pw_uid, entry.pw_gid, home)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(directory: Path, keys_name: str) -> str:
    return "\n".join(
        [
            f"HostKey {directory / 'host_ed25519'}",
            "PidFile none",
            "UsePAM no",
            "PermitRootLogin no",
            f"AllowUsers {REMOTE_USER} {OTHER_USER}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            # One file per run, so that parallel runs do not take each other's keys away.
            f"AuthorizedKeysFile .ssh/{keys_name}",
            "StrictModes yes",
            # Forwarding stays on: OpenSSH 9.2 refuses a Unix-socket -R too when
            # AllowTcpForwarding is no, whatever AllowStreamLocalForwarding says.
            "AllowStreamLocalForwarding yes",
            "StreamLocalBindUnlink yes",
            "X11Forwarding no",
            "PermitTTY yes",
            "AcceptEnv KUBETRAY_AGENT_SOCK",
            "PrintMotd no",
            "Subsystem sftp internal-sftp",  # scp speaks SFTP since OpenSSH 9.0
            "LogLevel VERBOSE",
            "",
        ]
    )


def _authorize(account: Account, keys_name: str, public_key: str) -> Path:
    ssh_dir = account.home / ".ssh"
    if not ssh_dir.is_dir():
        ssh_dir.mkdir(mode=0o700)
    os.chown(ssh_dir, account.uid, account.gid)
    ssh_dir.chmod(0o700)
    return account.put(f".ssh/{keys_name}", public_key, 0o600)


def _wait_listening(proc: "subprocess.Popen[bytes]", port: int, log: Path) -> bool:
    """True once sshd accepts connections; False when it exited (a port taken meanwhile)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5) as s:
            s.settimeout(2)
            if s.recv(64).startswith(b"SSH-"):
                return True
        time.sleep(0.05)
    raise AssertionError(f"sshd did not listen within {START_TIMEOUT} s:\n{log.read_text()}")


@contextlib.contextmanager
def run_sshd() -> Iterator[SSHServer]:
    """Start the private sshd (skipped, or failed under KUBETRAY_REQUIRE_PEERS, without root or
    OpenSSH) and stop it, with what the run left behind, when done."""
    ok, why = available()
    require(ok, why)
    accounts = {name: ensure_account(name) for name in (REMOTE_USER, OTHER_USER)}
    directory = Path(tempfile.mkdtemp(prefix="kubetray-sshd-"))
    keys_name = f"kubetray-tests-{directory.name}"
    authorized: list[Path] = []
    proc: subprocess.Popen[bytes] | None = None
    try:
        # The privilege separation directory (the package's service would make it at boot).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        for key, comment in (("host_ed25519", "kubetray-test-host"), ("client", "kubetray-test")):
            subprocess.run(
                [
                    "/usr/bin/ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    comment,
                    "-f",
                    str(directory / key),
                ],
                check=True,
                capture_output=True,
            )
        public = (directory / "client.pub").read_text()
        authorized = [_authorize(a, keys_name, public) for a in accounts.values()]
        config = directory / "sshd_config"
        config.write_text(_config(directory, keys_name))
        log = directory / "sshd.log"
        for _attempt in range(5):
            port = free_port()
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    [
                        SSHD,
                        "-D",
                        "-e",
                        "-f",
                        str(config),
                        "-p",
                        str(port),
                        "-o",
                        "ListenAddress=127.0.0.1",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            if _wait_listening(proc, port, log):
                break
            proc.wait()
        else:
            raise AssertionError(f"sshd did not start:\n{log.read_text()}")
        yield SSHServer(port, directory, directory / "client", log, proc, accounts)
    finally:
        if proc is not None and proc.poll() is None:
            # sshd's session processes are its children in its own session: end them too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for path in authorized:
            with contextlib.suppress(OSError):
                path.unlink()
        for account in accounts.values():
            with contextlib.suppress(OSError):
                os.unlink(account.forwarded_socket)
        shutil.rmtree(directory, ignore_errors=True)


def install_helper_copy(account: Account) -> str:
    """kubetray-exec for ``account`` the way ``kubetray ssh --install-helper`` lays it out
    (``~/.local/lib/kubetray-exec`` and a launcher in ``~/.local/bin``), written directly.

    For checking the harness itself; the tests of the feature use the product's command.
    """
    lib = account.home / ".local" / "lib" / "kubetray-exec"
    for path in sorted((ROOT / "exec_helper").glob("*.py")):
        account.put(f".local/lib/kubetray-exec/exec_helper/{path.name}", path.read_bytes())
    launcher = (
        f"#!{REMOTE_PYTHON} -IS\n"
        "import sys\n"
        f"sys.path.insert(0, {str(lib)!r})\n"
        "from exec_helper.__main__ import run\n"
        "run()\n"
    )
    account.put(".local/bin/kubetray-exec", launcher, 0o755)
    return account.helper


def remote_kubectl(server: SSHServer, account: Account, kubectl: str) -> str:
    """A kubectl ``account`` can run: the machine's own binary when it may execute it, else a
    copy in its home."""
    if server.run(account, ["test", "-x", kubectl]).returncode == 0:
        return kubectl
    copy = account.home / ".local" / "bin" / os.path.basename(kubectl)
    if not copy.exists():
        account.put(f".local/bin/{copy.name}", Path(kubectl).read_bytes(), 0o755)
    return str(copy)


def listening_socket(path: str, owner: Account | None = None, mode: int = 0o600) -> socket.socket:
    """A Unix socket listening at ``path`` (made by root, then given to ``owner``)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(8)
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    os.chmod(path, mode)
    return sock


def stale_socket(path: str, owner: Account) -> None:
    """A socket file nobody listens on any more (a session that ended without unlinking)."""
    listening_socket(path, owner).close()
