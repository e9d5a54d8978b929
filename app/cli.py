"""The kubetray command line: the one place that prints to a console and picks exit codes."""

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from app import cli_kubeconfig, cli_remote
from app.cli_help import HelpFormatter, add_command
from app.errors import AgentNotRunning, AppError, CredentialError, UsageError
from app.model import IdentityStatus, State
from exec_helper import protocol, version

__version__ = version.VERSION


def _read(path: str, what: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"cannot read the {what} {path}: {e.strerror}") from None


def _no_display() -> str | None:
    """Why the desktop app cannot show itself here, checked before Qt aborts the process."""
    if sys.platform != "linux":
        return None
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith(("xcb", "wayland")):
        return None  # offscreen, vnc, ...: Qt was told what to use
    wayland = os.environ.get("WAYLAND_DISPLAY")
    if not (os.environ.get("DISPLAY") or wayland):
        return "no display here for the tray app"
    if not wayland or platform.startswith("xcb"):
        from ctypes.util import find_library

        if find_library("xcb-cursor") is None:
            return "Qt cannot open the display: libxcb-cursor0 is missing (apt install it)"
    return None


def cmd_app(args: argparse.Namespace) -> int:
    """The tray app; if one already runs, bring it forward; a headless agent is taken over."""
    from app.agent import client
    from app.errors import AgentRunning

    store = _store_flag(args)
    why = _no_display()
    if why:
        try:
            running = client.call("status").get("exit") == 0
        except AppError:
            running = False
        if running:
            raise AppError(f"{why}; the headless kubetray agent runs here (kubetray status)")
        raise AppError(f'{why}: run the headless agent instead: "kubetray agent"')
    try:
        from app.ui.app import run
    except ImportError as e:
        raise AppError(
            f"the desktop app cannot start: {e}", "use the headless agent: kubetray agent"
        ) from None
    at_login = bool(getattr(args, "at_login", False))
    for _attempt in range(3):
        try:
            return run(store=store, at_login=at_login)
        except AgentRunning:
            if at_login:  # the session started it, nobody asked for a window
                print("kubetray is already running")
                return 0
            result = client.call("show")
            if result.get("exit") == 0:
                print("kubetray is already running: brought it forward")
                return 0
            _take_over()
    raise AppError(
        "kubetray agents keep starting while the app starts",
        'stop the program that starts them, then: "kubetray stop" and "kubetray" again',
    )


def _take_over() -> None:
    """Stop the headless agent once its logins in flight end, so the app can serve instead."""
    from app.agent import client

    try:
        doc = client.call_json("status")
    except AgentNotRunning:
        return  # it has just gone
    agent = doc.get("agent") or {}
    pid = agent.get("pid")
    rows = [IdentityStatus.from_dict(i) for i in doc.get("identities") or []]
    kept = [
        r.name for r in rows if r.logs_in and r.who and r.state in (State.READY, State.EXPIRING)
    ]
    if agent.get("store") == "memory" and kept:
        raise AppError(
            f"a headless kubetray agent (pid {pid}) holds the logins to {', '.join(kept)} in "
            "memory only: the app taking over would lose them",
            'keep using it, or stop it with "kubetray stop" (you log in again), then start '
            "kubetray",
        )
    print(
        f"kubetray: taking over from the headless agent (pid {pid}); "
        "it first finishes any login in progress",
        file=sys.stderr,
        flush=True,
    )
    try:
        result = client.call("stop", when_idle=True)
    except OSError:  # it went before its answer did
        result = {"exit": 0}
    if result.get("exit") != 0:
        raise AppError(
            f"a headless kubetray agent (pid {pid}) runs and cannot hand over to the app",
            f"end it (kill {pid}), then start kubetray again",
        )
    if not _wait_gone(900.0):
        raise AppError(f"the headless kubetray agent (pid {pid}) did not stop")


def _wait_gone(limit: float) -> bool:
    """Wait until no agent answers; False if one still does after ``limit`` seconds."""
    import time

    from app.agent import client

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            client.call("status")
        except AgentNotRunning:
            return True
        except AppError:
            pass  # it is closing: a connection it never accepted is reset
        time.sleep(0.1)
    return False


def cmd_stop(args: argparse.Namespace) -> int:
    """End the running agent or app (callers waiting for a login are told why)."""
    from app.agent import client

    if getattr(args, "all_users", False):
        return _all_users(["stop", *(["--remove-autostart"] if args.remove_autostart else [])])
    if getattr(args, "remove_autostart", False):
        _remove_autostart()
    # Stop asks nothing else first: an agent that cannot give its status (a file it cannot
    # read) still stops.
    try:
        result = client.call("stop")
    except AgentNotRunning:
        print("kubetray is not running")
        return 0
    except AppError:  # it went before its answer did (the connection was reset)
        result = {"exit": 0, "stdout": json.dumps({"pid": _lock_pid()})}
    if result.get("exit") != 0:
        raise AppError(
            str(result.get("stderr") or "the running agent refused to stop"),
            "it may be an older kubetray: end it with kill PID (kubetray status shows it)",
        )
    pid = json.loads(result.get("stdout") or "{}").get("pid")
    if not _wait_gone(10.0):
        raise AppError(f"kubetray (pid {pid}) did not stop within 10 s", f"end it: kill {pid}")
    print(f"stopped kubetray (pid {pid})")
    return 0


def _lock_pid() -> int | None:
    """The running agent's pid, from its lock file (None where there is none)."""
    from exec_helper import paths

    try:
        with open(os.path.join(paths.runtime_dir(), paths.LOCK_NAME), encoding="utf-8") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _remove_autostart() -> None:
    """kubetray is being removed: its start-at-login entry goes too, if it runs this one."""
    from app import autostart, installation

    program = installation.app_command()[0]
    if autostart.remove_for(program):
        print(f"removed the start-at-login entry for {program}")


def cmd_restart(args: argparse.Namespace) -> int:
    """Restart the running agent or app in place, as installed now (after an update)."""
    from app.agent import client

    if args.all_users:
        return _all_users(["restart", *(["--if-outdated"] if args.if_outdated else [])])
    try:
        before = client.call_json("status")
    except AgentNotRunning:
        print("kubetray is not running (kubectl starts it when it needs a credential)")
        return 0
    agent = before.get("agent") or {}
    pid, running = agent.get("pid"), agent.get("version")
    # --if-outdated (a package's scripts): the agent may have noticed the upgrade and
    # restarted into it already; a second restart would serve nobody. Asked twice: status
    # first (agents that do not know the request's field), then the request itself (it may
    # have restarted in between).
    unless = version.BUILD if args.if_outdated else None
    if unless is not None and agent.get("build") == unless:
        print(_current(running, pid))
        return 0
    fields: dict[str, Any] = {protocol.UNLESS_BUILD: unless} if unless else {}
    result = client.call("restart", **fields)
    if result.get("exit") != 0:
        if "does not know the request" not in str(result.get("stderr")):
            raise AppError(str(result.get("stderr") or "the running agent refused to restart"))
        # kubetray before 0.2 cannot restart itself: it stops once idle, and the next kubectl
        # command starts the kubetray installed now.
        client.call("stop", when_idle=True)
        app = " (start the app again from your desktop's menu)" if agent.get("kind") else ""
        print(
            f"kubetray {running} (pid {pid}) cannot restart itself: it stops once no login is "
            f"in flight, and the next kubectl command starts kubetray {__version__}{app}"
        )
        return 0
    doc = _outcome(result)
    if doc.get("current") is True:
        print(_current(doc.get("version") or running, doc.get("pid") or pid))
        return 0
    waits = doc.get("waits_for") or []
    when = f"once the login to {', '.join(waits)} ends" if waits else "now"
    print(f"kubetray {running} (pid {pid}) restarts {when}, as installed now")
    if args.wait:
        return _wait_restarted(str(before.get("started")), 900.0 if waits else 60.0)
    return 0


def _current(running: object, pid: object) -> str:
    return f"kubetray {running} (pid {pid}) already runs the kubetray installed now: not restarted"


def _wait_restarted(started: str, limit: float) -> int:
    """Wait until the agent answers again as a new start; print what it is now."""
    import time

    from app.agent import client

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            doc = client.call_json("status")
        except AppError:
            doc = {}
        if doc.get("started") not in (None, started):
            agent = doc.get("agent") or {}
            took = agent.get("restart_seconds")
            after = f", {took:.2f} s to restart" if isinstance(took, int | float) else ""
            print(f"kubetray {agent.get('version')} serves (pid {agent.get('pid')}{after})")
            return 0
        time.sleep(0.1)
    raise AppError(f"kubetray did not restart within {limit:.0f} s", "kubetray status says why")


def _all_users(command: list[str]) -> int:
    """``command`` for every user's running kubetray of this installation (root: packages).

    All are asked at once and given instances_linux.LIMIT seconds in all; one that has not
    answered by then is named and left as it is. The exit is 0 all the same: the package's
    scripts go on whatever another user's process does (they ignore it, ``|| true``).
    """
    if sys.platform != "linux":
        raise UsageError("--all-users works on Linux only", "run the command as each user")
    if not getattr(sys, "frozen", False):
        raise UsageError("--all-users is for an installed kubetray (the package's scripts)")
    if os.geteuid() != 0:
        raise UsageError("--all-users needs root: other users' agents answer only them")
    from app import instances_linux

    program = os.path.realpath(sys.executable)
    for line in instances_linux.ask_everyone(instances_linux.running(program), [program, *command]):
        print(f"kubetray: {line}", flush=True)
    return 0


def _store_flag(args: argparse.Namespace) -> str | None:
    from app.store import choice

    store: str | None = getattr(args, "store", None)
    return choice.check(store) if store else None


def cmd_demo(args: argparse.Namespace) -> int:
    from app.demo import run

    return run.run(headless=True if args.headless else None, store=_store_flag(args))


def cmd_agent(args: argparse.Namespace) -> int:
    from app.agent import headless

    return headless.run(store=_store_flag(args))


def cmd_store(args: argparse.Namespace) -> int:
    from app import compose, static_credentials
    from app.agent import client

    now = datetime.now(UTC)
    if args.token_file and (args.client_certificate or args.client_key):
        raise UsageError("give either --token-file or --client-certificate with --client-key")
    if args.token_file:
        text = _read(args.token_file, "token file").decode("utf-8", "replace")
        source = "standard input" if args.token_file == "-" else args.token_file
        cred = static_credentials.token_credential(args.name, text, source, now)
    elif args.client_certificate and args.client_key:
        cred = static_credentials.certificate_credential(
            args.name,
            _read(args.client_certificate, "certificate file"),
            _read(args.client_key, "key file"),
            args.client_certificate,
            args.client_key,
            now,
        )
    else:
        raise UsageError(
            "nothing to store",
            "give --token-file FILE, or --client-certificate FILE and --client-key FILE",
        )
    compose.stored_credentials().save(cred, now)
    client.invalidate(cred.name)
    expiry = f", valid until {cred.not_after:%Y-%m-%d %H:%M} UTC" if cred.not_after else ""
    print(f"stored {cred.name} ({cred.kind}{expiry}) in the OS keyring")
    from app.installation import helper_path

    print(f"kubeconfig: user.exec.command {helper_path()}, args [--stored, {cred.name}]")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    """A stored credential leaves the keyring; an OIDC identity is logged out and removed."""
    from app import compose
    from app.agent import client
    from app.store.keyring_store import NoKeyring

    try:
        removed = compose.stored_credentials().remove(args.name)
    except NoKeyring:  # stored credentials need a keyring: without one there are none
        removed = False
    if removed:
        client.invalidate(args.name)
        print(f"forgot {args.name}")
        return 0
    try:
        result = client.call("forget", name=args.name)
    except AgentNotRunning:
        result = {"exit": 1}
    if result.get("exit") != 0:
        raise CredentialError(
            f"no stored credential or OIDC identity named {args.name!r}",
            "kubetray status lists them",
        )
    print(f"logged out of {args.name} and removed it")
    return 0


def _when(iso: str | None, now: datetime) -> str:
    if not iso:
        return "-"
    when = datetime.fromisoformat(iso)
    left = when - now
    if left.total_seconds() <= 0:
        return f"{when:%Y-%m-%d %H:%M} UTC (expired)"
    days, secs = left.days, left.seconds
    rel = f"{days}d" if days else f"{secs // 3600}h{secs % 3600 // 60:02d}m"
    return f"{when:%Y-%m-%d %H:%M} UTC (in {rel})"


def _agent_call(op: str, say: Callable[[dict[str, Any]], str], **fields: Any) -> int:
    """A request that needs the agent (started on demand, like kubetray-exec does); ``say``
    words its JSON outcome for the console."""
    from app.agent import client
    from exec_helper.agent_start import start_agent_for_cli
    from exec_helper.errors import HelperError

    try:
        result = client.call(op, talk=True, **fields)
    except AgentNotRunning:
        try:
            start_agent_for_cli()
        except HelperError as e:
            raise AppError(str(e)) from None
        result = client.call(op, talk=True, **fields)
    code = result.get("exit")
    if code == 0:
        print(say(_outcome(result)))
    elif result.get("stderr"):
        print(f"error: {result['stderr']}", file=sys.stderr)
    return code if isinstance(code, int) else 1


def _outcome(result: dict[str, Any]) -> dict[str, Any]:
    try:
        doc = json.loads(result.get("stdout") or "{}")
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise AppError(
            "the kubetray agent's answer is not what this kubetray expects",
            "restart it: kubetray stop",
        )
    return doc


def _logged_in(doc: dict[str, Any]) -> str:
    until = datetime.fromisoformat(str(doc["until"])).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"logged in to {doc['name']} as {doc['who']} (token valid until {until})"


def _logged_out(doc: dict[str, Any]) -> str:
    said = (
        "the refresh token is revoked at the provider"
        if doc.get("revoked")
        else f"the refresh token is not revoked: {doc.get('reason')}"
    )
    return f"logged out of {doc['name']} (tokens forgotten here); {said}"


def cmd_login(args: argparse.Namespace) -> int:
    rest = list(args.flags)
    head = rest[: rest.index("--")] if "--" in rest else rest
    if "--force" in head:  # `kubetray login NAME --force`: argparse left it in the remainder
        rest.remove("--force")
        args.force = True
    flags = [a for a in rest if a != "--"]
    if args.name and args.name.startswith("-"):  # `kubetray login -- --oidc-issuer-url=...`
        flags, args.name = [args.name, *flags], None
    if not args.name and not flags:
        raise UsageError(
            "name an identity (kubetray status lists them) or give kubetray-exec flags"
        )
    return _agent_call(
        "login",
        _logged_in,
        name=args.name or "",
        args=flags,
        force=args.force,
        interactive=sys.stdin.isatty(),
    )


def cmd_logout(args: argparse.Namespace) -> int:
    return _agent_call("logout", _logged_out, name=args.name)


def cmd_cancel(args: argparse.Namespace) -> int:
    return _agent_call(
        "cancel", lambda doc: f"cancelled the login to {doc['name']}", name=args.name
    )


def _who(row: IdentityStatus) -> str:
    who = row.who or row.subject or "-"
    return f"{who} [{','.join(row.groups)}]" if row.groups else who


def cmd_status(args: argparse.Namespace) -> int:
    from app import compose, statefiles
    from app.agent import client

    try:
        doc = client.call_json("status")
    except AgentNotRunning:
        doc = {"agent": None, "identities": [i.to_dict() for i in compose.identities_at_rest()]}
    problems = statefiles.problems()
    if args.json:
        print(json.dumps({**doc, "files": problems}, indent=2))
        return 0
    agent = doc.get("agent")
    if agent:
        kind = f"{agent['kind']}, " if agent.get("kind") else ""
        build = f", build {agent['build']}" if agent.get("build") else ""
        print(f"agent: running ({kind}pid {agent['pid']}, kubetray {agent['version']}{build})")
        for said in _upkeep(agent):
            print(said)
        if agent.get("store"):
            from app.store.choice import describe

            print(f"tokens: {describe(agent)}")
        if agent.get("store_notice"):
            print(f"secrets: {agent['store_notice']}")
    elif statefiles.start_blocker() is not None:
        print(f"agent: {statefiles.NOT_STARTING}")
    else:
        print("agent: not running (kubetray-exec starts it when kubectl needs a credential)")
    for h in doc.get("remote") or []:
        used = f", last used {h['last_used']}, {h['calls']} calls" if h.get("last_used") else ""
        print(f"remote: {h['host']} (over SSH; {h['standing']}{used})")
    for problem in problems:
        print(f"files: {problem}")
    rows = [IdentityStatus.from_dict(r) for r in doc.get("identities") or []]
    if not rows:
        print(
            "no identities yet: kubetray setup adds an OIDC login to kubeconfig, "
            "kubetray store NAME --token-file FILE a static credential"
        )
        return 0
    now = datetime.now(UTC)
    table = [("NAME", "KIND", "STATE", "WHO", "EXPIRES", "CONTEXTS", "CALLS")]
    table += [
        (
            r.name,
            r.kind,
            str(r.state),
            _who(r),
            _when(r.expires, now),
            ",".join(r.contexts) or "-",
            str(r.calls),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for r in rows:
        shown = [f"{label} {value}" for label, value in r.details if value != r.who]
        for line in (", ".join(shown), r.error, r.note):
            if line:
                print(f"{r.name}: {line}")
    return 0


def _upkeep(agent: dict[str, Any]) -> list[str]:
    """Status lines about an update installed under the agent and its restart."""
    out = []
    update, restart = agent.get("update"), agent.get("restart")
    if isinstance(update, dict):
        waits = restart.get("waits_for") if isinstance(restart, dict) else None
        when = f"once {waits}" if waits else "now"
        out.append(
            f"update: kubetray {update.get('version')} is installed; the agent restarts into it "
            f"{when}"
        )
    elif isinstance(restart, dict):
        out.append(f"restart: {restart.get('reason')}, {restart.get('waits_for') or 'now'}")
    came = agent.get("restarted_from")
    if isinstance(came, dict):
        out.append(
            f"restarted: from kubetray {came.get('version')} in {agent.get('restart_seconds')} s"
        )
    return out


def cmd_doctor(args: argparse.Namespace) -> int:
    from app import compose, doctor
    from app.agent import client
    from app.settings import Settings

    try:
        setting = Settings.load().secret_store
    except AppError:  # doctor says what is wrong with the settings, among the rest
        setting = "auto"
    failed = warned = 0
    for check in doctor.run(
        cli_kubeconfig.existing_kubeconfig(args.kubeconfig),
        lambda: client.call_json("status"),
        lambda: compose.secret_store(timeout=doctor.KEYRING_TIMEOUT),
        store_setting=setting,
    ):
        mark = "FAIL" if not check.ok else "WARN" if check.warn else "ok  "
        print(f"{mark}  {check.name}: {check.detail}", flush=True)
        failed += not check.ok
        warned += check.ok and check.warn
        if check.remedy and (check.warn or not check.ok):
            print(f"      fix: {check.remedy}")
    warnings = f"{warned} warning(s)" if warned else ""
    if failed:
        print(f"{failed} problem(s) found" + (f", {warnings}" if warned else ""))
    else:
        print(f"no problems, {warnings} (see WARN above)" if warned else "all checks passed")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    """kubetray's commands."""
    parser = argparse.ArgumentParser(
        prog="kubetray",
        description="Log in to Kubernetes clusters; serve kubectl's credentials. kubetray alone "
        "starts the tray app; each COMMAND --help says what it does, with examples.",
        epilog="examples:\n  kubetray\n  kubetray status\n  kubetray setup --help",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kubetray {version.describe()}")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    store_help = (
        "where login tokens live: keyring, memory (until kubetray stops), or auto (the default: "
        "the keyring if usable, else memory)"
    )
    p = add_command(
        sub,
        "app",
        "the tray app (what `kubetray` alone runs)",
        "Start the tray app: the icon, the kubetray window, and the agent that serves kubectl's "
        "credentials. If kubetray already runs, its window comes forward instead; a headless "
        "agent hands over to the app once its logins in progress end.",
        ["kubetray", "kubetray app --store memory"],
    )
    p.add_argument("--store", metavar="KIND", help=store_help)
    p.add_argument(
        "--at-login",
        action="store_true",
        help="started with the desktop session (what Start at login runs): wait a few seconds "
        "for the panel's tray before the window stands in for it",
    )
    p.set_defaults(func=cmd_app)

    p = add_command(
        sub,
        "demo",
        "try kubetray: a demo provider, API server and kubeconfig",
        "Try kubetray with nothing of your own: start a demo OpenID provider, a demo API server "
        "and the agent or app, write a demo kubeconfig and print the kubectl line to run. The "
        "demo provider signs anyone in: never use it for a real cluster. kubetray stop ends it.",
        ["kubetray demo", "kubetray demo --headless"],
    )
    p.add_argument("--headless", action="store_true", help="run the agent instead of the app")
    p.add_argument("--store", metavar="KIND", help=store_help)
    p.set_defaults(func=cmd_demo)

    p = add_command(
        sub,
        "agent",
        "run the headless agent in the foreground",
        "Run the agent without a desktop (servers, WSL, containers, SSH sessions): it serves "
        "kubectl's credentials and does the logins (device code, or prompts in kubectl's "
        "terminal). kubetray-exec starts it by itself when none runs; stop it with Ctrl-C or "
        "kubetray stop.",
        ["kubetray agent", "kubetray agent --store keyring"],
    )
    p.add_argument("--store", metavar="KIND", help=store_help)
    p.set_defaults(func=cmd_agent)

    p = add_command(
        sub,
        "stop",
        "stop the running agent or app",
        "End the running agent or tray app. kubectl commands waiting for a login fail at once "
        "and say why; the next kubectl command starts the agent again.",
        ["kubetray stop"],
    )
    p.add_argument(
        "--all-users",
        action="store_true",
        help="(root) stop every user's kubetray of this installation: packages remove it so",
    )
    p.add_argument(
        "--remove-autostart",
        action="store_true",
        help="also remove the start-at-login entry, if it starts this kubetray",
    )
    p.set_defaults(func=cmd_stop)

    p = add_command(
        sub,
        "restart",
        "restart the running agent or app as installed now",
        "Restart the running agent or tray app in place, from the kubetray installed now (after "
        "an update it does so by itself). It waits until no login is in flight; kubectl "
        "commands meanwhile wait a moment and are not refused; logins come back from the "
        "keyring (or, without one, from the agent's memory, handed over).",
        ["kubetray restart", "kubetray restart --wait"],
    )
    p.add_argument("--wait", action="store_true", help="wait until it serves again")
    p.add_argument(
        "--if-outdated",
        action="store_true",
        help="only if it runs another build than the one installed (a package's upgrade: it "
        "may have restarted into it by itself)",
    )
    p.add_argument(
        "--all-users",
        action="store_true",
        help="(root) every user's kubetray of this installation: a package's upgrade does this",
    )
    p.set_defaults(func=cmd_restart)

    p = add_command(
        sub,
        "status",
        "identities with their state and expiry",
        "List the identities: who is logged in, their state, when the tokens expire, the "
        "kubeconfig contexts using them, and the SSH hosts that asked for credentials. Without "
        "a running agent, the credentials stored in the keyring.",
        ["kubetray status", "kubetray status --json"],
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = add_command(
        sub,
        "store",
        "keep a static credential in the OS keyring",
        "Keep a bearer token, or a client certificate and its key, in the OS keyring under NAME "
        "(the files can be deleted afterwards). A kubeconfig user then runs kubetray-exec "
        "--stored NAME instead of holding the secret.",
        [
            "kubetray store prod-admin --token-file ~/prod-token",
            "kubectl create token deployer | kubetray store deployer --token-file -",
            "kubetray store dev --client-certificate dev.crt --client-key dev.key",
        ],
    )
    p.add_argument("name", help="the name kubeconfig will use: kubetray-exec --stored NAME")
    p.add_argument("--token-file", metavar="FILE", help="a bearer token (- reads stdin)")
    p.add_argument("--client-certificate", metavar="FILE", help="PEM client certificate (chain)")
    p.add_argument("--client-key", metavar="FILE", help="PEM private key of that certificate")
    p.set_defaults(func=cmd_store)

    p = add_command(
        sub,
        "login",
        "log in to an OIDC identity now (browser, device code, ...)",
        "Log in to an OIDC identity now rather than at the next kubectl command: the browser, "
        "or the device code where there is none (--force: again, e.g. as someone else). Name "
        "the identity as kubetray status does, or give a kubeconfig user's kubetray-exec flags "
        "after --.",
        [
            "kubetray login prod",
            "kubetray login prod --force",
            "kubetray login -- --oidc-issuer-url=https://idp.example --oidc-client-id=kubectl",
        ],
    )
    p.add_argument("name", nargs="?", help="the identity, as kubetray status names it")
    p.add_argument("--force", action="store_true", help="log in again even if still logged in")
    p.add_argument(
        "flags", nargs=argparse.REMAINDER, help="or: -- and the kubetray-exec flags of the identity"
    )
    p.set_defaults(func=cmd_login)

    p = add_command(
        sub,
        "logout",
        "revoke and forget an OIDC identity's tokens",
        "Revoke the identity's refresh token at the provider (RFC 7009) and forget its tokens. "
        "The next kubectl command that needs it logs in again.",
        ["kubetray logout prod"],
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_logout)

    p = add_command(
        sub,
        "cancel",
        "cancel the login in progress for an identity",
        "Stop the login an identity is waiting for (a browser tab or a device code nobody "
        "completed). The kubectl commands waiting for it fail at once.",
        ["kubetray cancel prod"],
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_cancel)

    p = add_command(
        sub,
        "forget",
        "remove a stored credential, or log out of and remove an OIDC identity",
        "Remove a credential kubetray store kept in the keyring, or log out of an OIDC identity "
        "and remove it from kubetray (a kubeconfig user still running it brings it back). The "
        "kubeconfig is not changed.",
        ["kubetray forget dev"],
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_forget)

    cli_kubeconfig.add_parsers(sub)
    cli_remote.add_parsers(sub)

    p = add_command(
        sub,
        "doctor",
        "check kubeconfig, helper, agent, keyring, providers and cluster CAs",
        "Check what kubectl's logins depend on, one line each with what to do: the kubeconfig "
        "files, the helper each kubetray user runs, the agent, the keyring, each OpenID "
        "provider and the clock against it, the proxy and CA settings, and whether each "
        "cluster's CA verifies its API server (an unreachable one is a warning). Exits 1 if "
        "anything failed.",
        ["kubetray doctor", "kubetray doctor --kubeconfig ~/.kube/prod.yaml"],
    )
    p.add_argument("--kubeconfig", metavar="FILE", help="this file instead of $KUBECONFIG")
    p.set_defaults(func=cmd_doctor)
    return parser


def _ssh_args(argv: list[str]) -> argparse.Namespace | None:
    """`kubetray ssh [--install-helper] [SSH-OPTIONS] HOST [COMMAND]`: everything after it is
    ssh's, options before the host included (argparse would take `-p 2222` for its own)."""
    if argv[:1] != ["ssh"] or argv[1:2] in (["-h"], ["--help"]) or len(argv) < 2:
        return None
    rest = argv[1:]
    install = rest[:1] == ["--install-helper"]
    return argparse.Namespace(
        command="ssh",
        verbose=False,
        install_helper=install,
        ssh_args=rest[1:] if install else rest,
        func=cli_remote.cmd_ssh,
    )


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: Python's flush at exit would fail on the closed pipe too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become `error:`/`hint:` lines and the error's exit code."""
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args = _ssh_args(given) or parser.parse_args(given)
    func: Callable[[argparse.Namespace], int] = getattr(args, "func", cmd_app)
    try:
        return func(args)
    except AppError as e:
        if args.verbose:
            raise
        print(f"error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `kubetray status | head -1`: the reader has what it wanted
        _quiet_stdout()
        return 0
    except OSError as e:  # a file or device failed under us: one line, never a traceback
        if args.verbose:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
