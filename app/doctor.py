"""``kubetray doctor``: each dependency checked once, with a line and a remedy each.

Checks the kubeconfig files, the helper every kubetray user runs (once per distinct command),
the agent and the identities it cannot renew or save (a provider that fails, a keyring that
refuses), the keyring (with a timeout: a locked or absent keyring never hangs it), each
provider's checks (for OIDC: its discovery and capabilities, the clock against its Date
header), the proxy and CA settings, and whether each kubetray user's cluster CA verifies its API
server (app.cluster_tls). Nothing secret is printed: a user's flags are read, never shown.
"""

import os
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from app import __version__, cluster_tls
from app.errors import AgentNotRunning, AppError
from app.kubeconfig.files import KubeconfigError, KubeconfigFile
from app.kubeconfig.uses import cluster_config, exec_env, is_helper
from app.kubeconfig.view import View, default_paths
from app.providers import Providers, default
from app.providers.base import Check, Settings, Wanted
from app.store.choice import CHOSEN_NOTICE, MEMORY_NOTICE
from app.store.keyring_store import NoKeyring
from app.store.secret_store import SecretStore
from exec_helper import paths
from exec_helper.options import OptionsError

__all__ = ["Check", "KubetrayUser", "kubetray_users", "run"]

HELPER_TIMEOUT = 5.0
KEYRING_TIMEOUT = 5.0


@dataclass(frozen=True)
class KubetrayUser:
    """A kubeconfig user that runs kubetray-exec, with the settings it resolves to."""

    file: str
    name: str
    command: str
    wanted: list[Wanted]


def kubetray_users(view: View, providers: Providers | None = None) -> Iterator[KubetrayUser]:
    """The users kubectl sees that run kubetray-exec, each with its per-context settings."""
    providers = providers or default()
    caller = dict(item.split("=", 1) for item in paths.kubetray_env())
    clusters_of: dict[str, list[object]] = {}  # user → the clusters its contexts name
    for _, e in view.merged("contexts"):
        ctx = e.get("context")
        if isinstance(ctx, dict) and isinstance(ctx.get("user"), str):
            clusters_of.setdefault(ctx["user"], []).append(ctx.get("cluster"))
    clusters = _entries(view, "clusters")
    for f, entry in view.merged("users"):
        body = entry.get("user")
        exec_ = body.get("exec") if isinstance(body, dict) else None
        if not isinstance(exec_, dict) or not is_helper(exec_.get("command")):
            continue
        args = [str(a) for a in exec_.get("args") or []]
        configs: list[dict[str, Any]] = [{}]
        for cluster in clusters_of.get(entry["name"], ()):
            configs.append(cluster_config(clusters.get(str(cluster), (None, None))[1]) or {})
        # What kubectl gives kubetray-exec: this shell's variables, the exec entry's over them.
        env = {**caller, **exec_env(exec_.get("env"))}
        wanted = []
        for config in configs:
            try:
                wanted.append(providers.wanted(args, config, env))
            except (OptionsError, AppError):
                continue
        yield KubetrayUser(f.path, str(entry["name"]), str(exec_["command"]), wanted)


def _entries(view: View, kind: str) -> dict[str, tuple[KubeconfigFile, dict[str, Any]]]:
    """Name → (file, entry) as kubectl uses them (View.holder and find, for every name at
    once: one lookup each made doctor quadratic in the contexts)."""
    return {str(e["name"]): (f, e) for f, e in view.merged(kind)}


def check_files(view: View) -> Iterator[Check]:
    for f in view.files:
        name = f"kubeconfig {f.path}"
        if f.text is None:
            yield Check(name, True, "does not exist yet (kubectl and kubetray create it)")
            continue
        directory = os.path.dirname(f.real) or "."
        if not os.access(f.real, os.W_OK) or not os.access(directory, os.W_OK):
            yield Check(
                name, False, "readable, not writable", f"fix its permissions: chmod u+w {f.real}"
            )
        elif os.path.exists(f.path + ".lock"):
            yield Check(
                name,
                False,
                f"locked ({f.path}.lock exists): kubectl config commands will fail",
                f"if no kubectl or kubetray is writing it, delete {f.path}.lock",
            )
        else:
            yield Check(name, True, "readable and writable")


def check_state_files() -> Iterator[Check]:
    """kubetray's own files (app/statefiles.py): each problem with its file and remedy."""
    from app import statefiles

    problems = statefiles.errors()
    if not problems:
        yield Check("kubetray's files", True, "readable, in formats this kubetray knows")
    for e in problems:
        yield Check("kubetray's files", False, e.message, e.hint)


def _users(names: list[str]) -> str:
    """``user a``, ``users a, b and c``, or ``500 users (a, b … and 498 more)``."""
    if len(names) == 1:
        return f"user {names[0]}"
    if len(names) <= 3:
        return f"users {', '.join(names[:-1])} and {names[-1]}"
    return f"{len(names)} users ({names[0]}, {names[1]} … and {len(names) - 2} more)"


def check_helpers(users: list[KubetrayUser]) -> Iterator[Check]:
    """One check per distinct helper command, naming the users that run it: a kubeconfig of
    500 users all running one kubetray-exec starts it once, not 500 times (issue 33)."""
    by_command: dict[str, list[str]] = {}
    for user in users:
        by_command.setdefault(user.command, []).append(user.name)
    for command, names in by_command.items():
        yield check_helper(command, names)


def check_helper(command: str, users: list[str]) -> Check:
    """Whether ``command`` (what kubeconfig says to run) is kubetray-exec, runs, and is found
    where desktop apps look; ``users``: the kubeconfig users that run it (for the report)."""
    name = f"helper of {_users(users)}"
    path = command if os.path.isabs(command) else shutil.which(command)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return Check(
            name,
            False,
            f"{command} does not exist or is not executable",
            "point kubeconfig at the installed helper: kubetray setup (or kubetray import) "
            "writes its absolute path",
        )
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=HELPER_TIMEOUT,
            check=False,
        )
        version = done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check(name, False, f"{path} does not run: {e}", "reinstall kubetray")
    if done.returncode != 0 or "kubetray-exec" not in version:
        return Check(name, False, f"{path} is not kubetray-exec", "reinstall kubetray")
    if not os.path.isabs(command):
        return Check(
            name,
            False,
            f"found on PATH as {path}; apps started from the desktop (Lens, IDEs) may not find it",
            f"use the absolute path: command: {path}",
        )
    note = "" if __version__ in version else f" (this kubetray is {__version__})"
    return Check(name, True, f"{path}: {version}{note}")


def check_agent(
    status: Callable[[], dict[str, Any]],
    blocker: Callable[[], AppError | None] = lambda: None,
) -> Check:
    """A running agent; none running is a warning (kubetray-exec starts one when needed), a
    failure where ``blocker`` says why none can start (its files' problem, said above)."""
    try:
        doc = status()
    except AgentNotRunning:
        blocked = blocker()
        if blocked is not None:
            return Check(
                "agent",
                False,
                "not running, and it cannot start until kubetray's files are mended: "
                + blocked.message,
                blocked.hint or "mend the file named above",
            )
        return Check(
            "agent",
            True,
            "not running (kubetray-exec starts it when kubectl needs a credential)",
            "to start it now: kubetray (the tray app) or kubetray agent",
            warn=True,
        )
    except AppError as e:
        return Check(
            "agent",
            False,
            e.message,
            "start kubetray (the tray app) or kubetray agent; kubetray-exec also starts it",
        )
    agent = doc.get("agent") or {}
    build = f", build {agent['build']}" if agent.get("build") else ""
    detail = f"running (pid {agent.get('pid')}, kubetray {agent.get('version')}{build})"
    if agent.get("store"):
        from app.store.choice import describe

        detail += f"; tokens in {describe(agent)}"
    if agent.get("version") != __version__:
        pending = agent.get("restart") or {}
        waits = pending.get("waits_for") if isinstance(pending, dict) else None
        return Check(
            "agent",
            True,
            f"{detail}; this kubetray is {__version__}"
            + (f": it restarts into it once {waits}" if waits else ""),
            "kubetray restart (it waits for logins in progress)",
            warn=True,
        )
    return Check("agent", True, detail)


def check_identities(status: Callable[[], dict[str, Any]]) -> Iterator[Check]:
    """What the running agent cannot do for an identity now: renew its token (the provider
    fails, or refused it: a login is needed) or keep its newest tokens in the store."""
    try:
        doc = status()
    except AppError:
        return  # check_agent said why
    for ident in doc.get("identities") or []:
        name = f"identity {ident.get('name')}"
        refresh, store = ident.get("refresh_error"), ident.get("store_error")
        if refresh and ident.get("state") == "needs login":
            yield Check(name, False, refresh, f"run: kubetray login {ident.get('name')}")
        elif refresh:
            yield Check(
                name,
                False,
                f"cannot refresh its token: {refresh}",
                "kubetray keeps trying (the token it holds is served until it expires)",
            )
        if store:
            yield Check(
                name,
                False,
                f"its newest tokens are in memory only: {store}",
                "kubetray saves them once the store works again; stopping it before then "
                "loses this login",
            )


def check_tokens(status: Callable[[], dict[str, Any]]) -> Iterator[Check]:
    """Where the running agent keeps login tokens: in memory only (and why), or in the
    keyring with the token journal in front of it (or why that is off)."""
    try:
        doc = status()
    except AppError:
        return  # check_agent said why
    agent = doc.get("agent") or {}
    if agent.get("store") == "memory":
        why = agent.get("store_reason") or 'the setting "secret_store" is "memory"'
        yield Check(
            "tokens",
            True,
            f"in memory only ({why}): every login ends when the agent stops",
            "start a Secret Service (the keyring check says how); kubetray moves the tokens "
            "into it once a caller brings its session bus"
            if agent.get("store_reason")
            else 'set "secret_store": "auto" in settings.json',
            warn=True,
        )
    elif agent.get("store") == "keyring":
        journal = agent.get("store_journal") or ""
        if journal.startswith("off: "):
            yield Check(
                "tokens",
                True,
                f"in the OS keyring; the token journal is off ({journal[5:]}): an agent killed "
                "while the keyring saves a refreshed token loses that login",
                "kubetray keeps working; see the agent's log",
                warn=True,
            )
        elif journal.startswith("on"):
            yield Check(
                "tokens",
                True,
                "in the OS keyring, and each refreshed one in the token journal first (a "
                "killed agent keeps it)",
            )


def check_keyring(store: Callable[[], SecretStore], setting: str = "auto") -> Check:
    """The keyring round trip; no keyring at all is a warning when logins can do without."""
    key = "doctor/probe"
    try:
        s = store()
        s.set(key, b"kubetray doctor")
        same = s.get(key) == b"kubetray doctor"
        s.delete(key)
    except NoKeyring as e:
        if setting == "keyring":
            return Check("keyring", False, f"{e.message} (setting secret_store: keyring)", e.hint)
        return Check(
            "keyring",
            True,
            f"{MEMORY_NOTICE} ({e.why}); stored credentials, secure and keyring backups need one",
            e.hint,
            warn=True,
        )
    except AppError as e:
        return Check("keyring", False, e.message, e.hint)
    except OSError as e:  # a file under it failed (the sealed-secret directory): say which
        return Check("keyring", False, f"the keyring's files failed: {e}", "check the disk")
    if setting == "memory":
        return Check(
            "keyring",
            True,
            f"writes, reads and deletes; but {CHOSEN_NOTICE}",
            'to keep logins across restarts, set "secret_store": "auto" in settings.json',
            warn=True,
        )
    if not same:
        return Check("keyring", False, "what was written did not read back", "check the keyring")
    return Check("keyring", True, "writes, reads and deletes")


def _proxy_env() -> dict[str, str]:
    names = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")
    return {n: os.environ[n] for n in names if os.environ.get(n)}


def check_network(ca_files: set[str]) -> Iterator[Check]:
    env = _proxy_env()
    proxy = env.get("HTTPS_PROXY") or env.get("https_proxy")
    if not proxy:
        yield Check("proxy", True, "none set (HTTPS_PROXY): direct connections")
    else:
        where = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        shown = f"{where.hostname}:{where.port or 80}"  # never the proxy's user:password
        try:
            socket.create_connection((where.hostname or "", where.port or 80), timeout=5).close()
            no = env.get("NO_PROXY") or env.get("no_proxy") or "-"
            yield Check("proxy", True, f"HTTPS_PROXY {shown} answers; NO_PROXY {no}")
        except OSError as e:
            yield Check(
                "proxy",
                False,
                f"HTTPS_PROXY {shown} does not answer: {e.strerror or e}",
                "fix HTTPS_PROXY, or unset it",
            )
    try:
        stats = ssl.create_default_context().cert_store_stats()
        yield Check("system CAs", True, f"{stats.get('x509_ca', 0)} trusted CA certificates")
    except ssl.SSLError as e:
        yield Check("system CAs", False, str(e), "reinstall the ca-certificates package")
    for path in sorted(ca_files):
        try:
            ssl.create_default_context().load_verify_locations(cafile=path)
            yield Check(f"CA file {path}", True, "readable PEM (added to the system trust)")
        except (OSError, ssl.SSLError) as e:
            yield Check(f"CA file {path}", False, f"unusable: {e}", "fix --certificate-authority")


def check_clusters(
    view: View, users: list[KubetrayUser], timeout: float = cluster_tls.TIMEOUT
) -> Iterator[Check]:
    """Each cluster a kubetray user's context reaches: does its CA verify the server? (All at
    once: an unreachable one is a warning that costs one timeout.)"""
    names = {u.name for u in users}
    contexts: dict[str, list[str]] = {}
    for _, entry in view.merged("contexts"):
        ctx = entry.get("context")
        if isinstance(ctx, dict) and ctx.get("user") in names:
            contexts.setdefault(str(ctx.get("cluster")), []).append(str(entry["name"]))
    defaults = set(default_paths())
    defined = _entries(view, "clusters")
    clusters = []
    for name, used_by in contexts.items():
        holder, found = defined.get(name, (None, None))
        if holder is None or found is None:
            yield Check(
                f"cluster {name}",
                False,
                f"context {used_by[0]} names it, but no kubeconfig file defines it: kubectl "
                "will fail",
                f"add it: kubectl config set-cluster {name} --server=https://HOST:PORT "
                "--certificate-authority=FILE --embed-certs",
            )
            continue
        clusters.append(
            cluster_tls.ClusterTLS.from_entry(found, holder.path, holder.path in defaults)
        )
    for cluster, seen in zip(clusters, cluster_tls.check_all(clusters, timeout), strict=True):
        yield Check(
            f"cluster {cluster.name}",
            seen.verdict != cluster_tls.FAIL,
            seen.detail,
            seen.remedy,
            warn=seen.verdict == cluster_tls.WARN,
        )


def run(
    view_paths: list[str] | None,
    status: Callable[[], dict[str, Any]],
    store: Callable[[], SecretStore],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    store_setting: str = "auto",
) -> Iterator[Check]:
    """Every check, in the order a person would fix them."""
    try:
        view = View.load(view_paths)
    except KubeconfigError as e:
        yield Check("kubeconfig", False, e.message, e.hint)
        view = View([])
    yield from check_files(view)
    yield from check_state_files()
    users = list(kubetray_users(view))
    if not users:
        yield Check("kubetray users", True, "none in the kubeconfig yet (kubetray setup adds one)")
    yield from check_helpers(users)
    from app import statefiles

    yield check_agent(status, statefiles.start_blocker)
    yield from check_identities(status)
    yield from check_tokens(status)
    yield check_keyring(store, store_setting)
    providers = default()
    logins: dict[tuple[str, str, str], Settings] = {}
    ca_files: set[str] = set()
    for user in users:
        for wanted in user.wanted:
            s = wanted.settings
            # once per provider and client: what a provider offers may differ per client
            logins.setdefault((s.kind, s.group, str(getattr(s, "client_id", ""))), s)
            ca_files.update(s.ca_files)
    for settings in logins.values():
        yield from providers.of(settings).checks(settings, now)
    yield from check_network(ca_files)
    yield from check_clusters(view, users)
