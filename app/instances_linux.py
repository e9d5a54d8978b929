"""Every user's running kubetray of this installation, for the package's scripts (as root).

An agent answers only its own user (the peer uid is checked), so root cannot ask it anything.
``kubetray restart --all-users`` and ``kubetray stop --all-users`` (run by the .deb's
maintainer scripts and install.sh) find the processes whose program is this installation's
``kubetray`` (also after an upgrade replaced the file: ``/proc/PID/exe`` then ends in
`` (deleted)``), and run the same command as each of their users, with the environment that
says where that user's agent listens (its runtime directory, HOME), read from the process.
Linux only (``/proc``): macOS and Windows installers do this their own way (packaging/).
"""

import sys

assert sys.platform == "linux"  # tells mypy the rest is Linux-only

import os
import pwd
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

KEPT_ENV = (
    "HOME",
    "USER",
    "LOGNAME",
    "PATH",
    "LANG",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "KUBETRAY_RUNTIME_DIR",
    "KUBETRAY_CONFIG_DIR",
    "KUBETRAY_STATE_DIR",
)
"""What a user's agent is found by (and what its own commands read): copied from its process."""
TIMEOUT = 60.0


@dataclass(frozen=True)
class Instance:
    """One user's running kubetray (the first process found of that user and runtime dir)."""

    pid: int
    uid: int
    user: str
    env: dict[str, str]


def _program(pid: str) -> str | None:
    try:
        target = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
    return target.removesuffix(" (deleted)")


def _environ(pid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        name = key.decode("utf-8", "replace")
        if sep and name in KEPT_ENV:
            out[name] = value.decode("utf-8", "surrogateescape")
    return out


def running(program: str) -> Iterator[Instance]:
    """The processes running ``program`` (a path), one per user and runtime directory: also
    those whose file an upgrade replaced, and, install.sh having moved the old directory aside
    before removing it, those running ``<directory>.old/kubetray``."""
    directory, name = os.path.split(program)
    ours = {program, os.path.join(directory + ".old", name)}
    seen: set[tuple[int, str]] = set()
    own = str(os.getpid())
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if pid == own or _program(pid) not in ours:
            continue
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue  # it has just ended
        env = _environ(pid)
        where = env.get("KUBETRAY_RUNTIME_DIR") or env.get("XDG_RUNTIME_DIR") or ""
        if (uid, where) in seen:
            continue  # the same user's agent, already asked (or the command asking it)
        seen.add((uid, where))
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            continue
        env.setdefault("HOME", entry.pw_dir)
        env.setdefault("USER", entry.pw_name)
        env.setdefault("LOGNAME", entry.pw_name)
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        yield Instance(int(pid), uid, entry.pw_name, env)


def run_as(instance: Instance, command: list[str]) -> subprocess.CompletedProcess[str]:
    """``command`` as the instance's user (its uid, group and groups), with its environment."""
    entry = pwd.getpwuid(instance.uid)
    return subprocess.run(
        command,
        user=instance.uid,
        group=entry.pw_gid,
        extra_groups=os.getgrouplist(entry.pw_name, entry.pw_gid),
        env=instance.env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
