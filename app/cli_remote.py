"""kubectl on SSH hosts through your desktop's agent: ssh-config, ssh, remote (like ssh-add).

The remote end needs only kubetray-exec (the standard-library helper) and
``KUBETRAY_AGENT_SOCK`` naming the socket ssh forwards there from the desktop's agent.
"""

import argparse
import io
import json
import os
import shlex
import subprocess
import sys
import tarfile

from app.cli_help import add_command
from app.errors import AgentNotRunning, AppError, UsageError
from exec_helper import paths

REMOTE_SOCKET = paths.FORWARD_PATH
"""Where the forward lands on the remote host: one per remote user (sshd makes it 600, theirs)."""


def local_socket() -> str:
    """The desktop agent's socket, which ssh forwards."""
    return os.path.join(paths.runtime_dir(), paths.SOCKET_NAME)


def _ssh_settings(ssh_args: list[str]) -> tuple[str, list[str]]:
    """The user ssh logs in as on the remote host, and the remote ends of the forwards its
    configuration already makes (``ssh -G`` applies ssh_config)."""
    try:
        out = subprocess.run(
            ["ssh", "-G", *ssh_args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise AppError("ssh is not installed here", "install OpenSSH's client") from None
    except subprocess.TimeoutExpired:
        raise AppError("ssh -G did not answer within 10 s") from None
    user, forwards = None, []
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "user" and value:
            user = value
        elif key == "remoteforward":
            forwards.append(value.partition(" ")[0])
    if user is None:
        said = out.stderr.strip().splitlines() or ["no answer"]
        raise AppError(f"cannot tell which user ssh logs in as: {said[-1]}")
    return user, forwards


def _quoted(path: str) -> str:
    return f'"{path}"' if " " in path else path


def _no_windows() -> None:
    if sys.platform == "win32":
        raise AppError(
            "forwarding kubetray over SSH from a Windows desktop is not supported: its agent "
            "listens on a named pipe, which OpenSSH cannot forward",
            "run kubetray on the remote host itself, or forward from a Linux or macOS desktop",
        )


def _destination(ssh_args: list[str]) -> str:
    from app.agent.peer import ssh_destination

    host = ssh_destination(["ssh", *ssh_args])
    if host is None:
        raise UsageError("name the host to connect to, as for ssh: kubetray ssh [SSH-OPTIONS] HOST")
    return host


def forward_options(remote_socket: str, configured: bool = False) -> list[str]:
    """ssh options that forward the agent for one session and name it on the remote host
    (``configured``: ssh_config forwards it already; a second forward of it would fail)."""
    options = ["-o", f"SetEnv={paths.FORWARD_ENV}={remote_socket}"]
    if not configured:
        options += [
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "StreamLocalBindUnlink=yes",
            "-R",
            f"{remote_socket}:{local_socket()}",
        ]
    return options


def cmd_ssh_config(args: argparse.Namespace) -> int:
    """Print the ~/.ssh/config block that forwards the agent to HOST."""
    _no_windows()
    given_user, _, host = args.host.rpartition("@")  # `Host` matches names, never user@name
    user = args.user or given_user or _ssh_settings([args.host])[0]
    remote = REMOTE_SOCKET.format(user=user)
    profile = REMOTE_SOCKET.format(user="$USER")
    print(f"# kubetray: kubectl on {host} gets its credentials from this desktop's kubetray")
    print(f"Host {host}")
    if given_user:
        print(f"    User {given_user}")
    print(f"    RemoteForward {remote} {_quoted(local_socket())}")
    print("    StreamLocalBindUnlink yes")
    print(f"    SetEnv {paths.FORWARD_ENV}={remote}")
    env = paths.FORWARD_ENV
    print(f"# SetEnv arrives only where {host}'s sshd_config has: AcceptEnv {env}")
    print(f"# Otherwise add this line to ~/.profile (or ~/.bashrc) on {host}:")
    print(f'#   [ -S "{profile}" ] && export {paths.FORWARD_ENV}="{profile}"')
    print(f"# And in {host}'s sshd_config, StreamLocalBindUnlink yes lets a new session")
    print("# replace the socket an ended one left behind.")
    return 0


def cmd_ssh(args: argparse.Namespace) -> int:
    """ssh with the agent forwarded for this session (or --install-helper: copy kubetray-exec)."""
    ssh_args: list[str] = list(args.ssh_args)
    if ssh_args[:1] == ["--"]:
        ssh_args = ssh_args[1:]
    host = _destination(ssh_args)
    if args.install_helper:
        print(install_helper(ssh_args, host))
        return 0
    _no_windows()
    user, forwards = _ssh_settings(ssh_args)
    remote = REMOTE_SOCKET.format(user=user)
    if not _agent_runs():
        print(
            "kubetray: no kubetray runs on this desktop, so nothing will answer the forward: "
            "start it (kubetray) and it asks you before serving "
            f"{host}",
            file=sys.stderr,
        )
    cmd = ["ssh", *forward_options(remote, configured=remote in forwards), *ssh_args]
    try:
        return subprocess.call(cmd)
    except FileNotFoundError:
        raise AppError("ssh is not installed here", "install OpenSSH's client") from None


def _agent_runs() -> bool:
    from app.agent import client

    try:
        client.call("status")
    except (AgentNotRunning, AppError):
        return False
    return True


_INSTALLER = """
import io, os, sys, tarfile, tempfile, shutil
if sys.version_info < (3, 11):
    sys.exit("kubetray-exec needs python3 >= 3.11 here; this one is " + sys.version.split()[0])
home = os.path.expanduser("~")
lib = os.path.join(home, ".local", "lib", "kubetray-exec")
bin_dir = os.path.join(home, ".local", "bin")
os.makedirs(lib, exist_ok=True)
os.makedirs(bin_dir, exist_ok=True)
new = tempfile.mkdtemp(dir=lib)
with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read())) as tar:
    # Our own archive; "filter" arrived in 3.11.4 (Debian 12 has 3.11.2)
    tar.extractall(new, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
old = os.path.join(lib, "exec_helper")
if os.path.isdir(old):
    shutil.rmtree(old)
os.rename(os.path.join(new, "exec_helper"), old)
os.rmdir(new)
dest = os.path.join(bin_dir, "kubetray-exec")
with open(dest + ".tmp", "w") as f:
    f.write(TEMPLATE.format(python=os.path.realpath(sys.executable), path=lib))
os.chmod(dest + ".tmp", 0o755)
os.replace(dest + ".tmp", dest)
print(dest)
"""


def _helper_tar() -> bytes:
    import exec_helper

    package = os.path.dirname(os.path.abspath(exec_helper.__file__))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(os.listdir(package)):
            if name.endswith(".py"):
                tar.add(os.path.join(package, name), arcname=f"exec_helper/{name}")
    return buf.getvalue()


def install_helper(ssh_args: list[str], host: str) -> str:
    """Copy kubetray-exec to ~/.local/bin on the host (its python3 runs it); say where."""
    from exec_helper.dev_launcher import TEMPLATE

    code = f"TEMPLATE = {TEMPLATE!r}\n{_INSTALLER}"
    remote_cmd = "python3 -I -c " + shlex.quote(code)
    try:
        done = subprocess.run(
            ["ssh", *ssh_args, remote_cmd], input=_helper_tar(), capture_output=True, check=False
        )
    except FileNotFoundError:
        raise AppError("ssh is not installed here", "install OpenSSH's client") from None
    out = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not out:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise AppError(
            f"could not install kubetray-exec on {host}: {said[-1] if said else 'no answer'}",
            # 255: ssh itself failed (name, network, keys); else the installer did
            "check that plain ssh reaches it"
            if done.returncode == 255
            else "it needs python3 (3.11 or newer) there",
        )
    return (
        f"installed {out[-1]} on {host}; name it as the command of the kubeconfig user there "
        f"(kubetray setup --helper-command {out[-1]} writes one), and connect with: "
        f"kubetray ssh {host}"
    )


def cmd_remote(args: argparse.Namespace) -> int:
    """kubetray remote list / allow HOST IDENTITY / deny HOST / forget HOST [IDENTITY]."""
    from app import compose
    from app.agent import client
    from app.broker import consent

    if args.action != "list" and not args.host:
        raise UsageError(f"kubetray remote {args.action} needs a HOST")
    if args.action == "allow" and not args.identity:
        raise UsageError(
            f"kubetray remote allow needs the identity too: kubetray remote allow {args.host} "
            "IDENTITY (kubetray status lists them)"
        )
    try:
        result = client.call(
            "remote", action=args.action, host=args.host or "", identity=args.identity or ""
        )
    except AgentNotRunning:  # the kept decisions, which the agent reads when it starts
        code, out, err = consent.manage(
            compose.remote_hosts(), args.action, args.host or "", args.identity
        )
        result = {"exit": code, "stdout": out, "stderr": err}
    if result.get("exit") != 0:
        raise AppError(str(result.get("stderr") or "the agent refused"))
    out = str(result.get("stdout") or "")
    if args.action != "list":
        print(out, end="")
        return 0
    hosts = json.loads(out or "{}").get("remote") or []
    if not hosts:
        print(
            "no SSH host has asked yet; kubetray remote allow HOST IDENTITY allows one beforehand"
        )
    for h in hosts:
        used = f", last used {h['last_used']}, {h['calls']} calls" if h.get("last_used") else ""
        print(f"{h['host']}: {h['standing']}{used}")
        for name, standing in sorted((h.get("identities") or {}).items()):
            print(f"  as {name}: {standing}")
    return 0


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """ssh-config, ssh and remote."""
    p = add_command(
        sub,
        "ssh-config",
        "print the ~/.ssh/config lines that forward kubetray to HOST",
        "Print the ~/.ssh/config block that forwards this desktop's kubetray agent to HOST, so "
        "kubectl there gets its credentials from here (the login happens in your browser; only "
        "short-lived tokens cross).",
        ["kubetray ssh-config bastion >> ~/.ssh/config"],
    )
    p.add_argument("host", metavar="HOST", help="the Host name you ssh to")
    p.add_argument("--user", metavar="USER", help="the remote user (default: what ssh -G says)")
    p.set_defaults(func=cmd_ssh_config)

    p = add_command(
        sub,
        "ssh",
        "ssh to a host with kubetray forwarded for this session",
        "Run ssh with this desktop's kubetray agent forwarded (like ssh -A for ssh-agent). SSH "
        "options and a remote command go to ssh as given. The first request from the host asks "
        "you in the tray app; kubetray remote allow HOST IDENTITY allows one identity ahead.",
        [
            "kubetray ssh --install-helper bastion",
            "kubetray ssh bastion",
            "kubetray ssh -p 2222 me@devvm kubectl get ns",
        ],
    )
    p.add_argument(
        "--install-helper",
        action="store_true",
        help="copy kubetray-exec to ~/.local/bin on the host (needs python3 there) and exit",
    )
    p.add_argument("ssh_args", nargs=argparse.REMAINDER, metavar="[SSH-OPTIONS] HOST [COMMAND]")
    p.set_defaults(func=cmd_ssh)

    p = add_command(
        sub,
        "remote",
        "which SSH hosts may have credentials through a forward (like ssh-add -l/-d)",
        "List, allow or deny the SSH hosts whose kubectl asks this desktop's kubetray for "
        "credentials. allow HOST IDENTITY: that identity always served to that host; deny: "
        "the host always refused; forget: ask again (about one identity, or all). The "
        "headless agent serves only what was allowed.",
        [
            "kubetray remote list",
            "kubetray remote allow bastion dev",
            "kubetray remote deny bastion",
        ],
    )
    p.add_argument("action", choices=("list", "allow", "deny", "forget"))
    p.add_argument("host", nargs="?", metavar="HOST")
    p.add_argument("identity", nargs="?", metavar="IDENTITY")
    p.set_defaults(func=cmd_remote)
