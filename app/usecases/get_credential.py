"""kubectl asks for a credential: the story of one kubetray-exec call, top to bottom.

Read what kubectl sent → the settings it names → for a request forwarded over SSH, the
person's consent to the identity it would be (nothing made or written before) → which
identity → its credential (memory, the store, a refresh, or the one
login every caller shares) → the ExecCredential in the version kubectl asked for → one record
for Diagnostics. Every failure becomes one line for kubectl's stderr; the record says what
happened either way.
"""

import dataclasses
import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app import statefiles
from app.broker.broker import Broker
from app.broker.flight import Conversation, Silent
from app.errors import AppError, unexpected
from app.model import Caller, CallRecord, Credential
from app.providers import Providers
from app.providers import default as default_providers
from app.providers.base import Wanted
from exec_helper import exec_credential, options, paths
from exec_helper.exec_credential import ExecInfo, ExecInfoError

log = logging.getLogger(__name__)

FILES_LOOK_EVERY = 1.0
"""Seconds between two looks at kubetray's files for kubectl's line (app/statefiles.py)."""

REPEAT_WINDOW = 1.0
"""kubectl runs the helper again at once when it fails (discovery retries, 4-6 times): the
same failure for the same kubectl within this many seconds is answered from memory, with the
same line (a long-lived client shows only the last one it got), so the provider is not asked
six times."""
MAX_REPEATS = 256
MAX_RECORDED = 512
"""Characters of a cluster URL, name or error kept in the record of calls."""
_CACHE_KEY_LIMIT = 16 * 1024
BUS_ENV = "DBUS_SESSION_BUS_ADDRESS"
REMOTE_ENV_DROPPED = (
    "KUBECONFIG=",
    "PATH=",  # a remote host never chooses which program runs on the desktop
    "KUBETRAY_BROWSER=",
    "KUBETRAY_BROWSER_COMMAND=",
    f"{BUS_ENV}=",
    *paths.PASSED_ENV_PREFIXES,
)
"""A remote host's environment describes that host: its kubeconfig, browser, session bus, and
its cloud tools' profiles, files and keys (the desktop's own configuration serves it)."""
REMOTE_ENV_KEPT = tuple(
    f"{name}="
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_STS_REGIONAL_ENDPOINTS",
        "AWS_USE_FIPS_ENDPOINT",
        "AWS_USE_DUALSTACK_ENDPOINT",
    )
)
"""Of those, what names the request rather than describes the host: ``aws eks
update-kubeconfig`` puts the profile in the exec entry's ``env``, so it is as much the request
as an argument (the desktop's profile of that name serves it)."""

Answer = tuple[int, str, str]
"""(exit code, stdout, stderr) for kubetray-exec to print."""


@dataclass(frozen=True)
class CredentialRequest:
    """What kubetray-exec sent (already checked for type and size by the IPC service)."""

    exec_info: str
    args: tuple[str, ...]
    env: tuple[str, ...]
    """``KUBETRAY_*`` settings, the caller's ``KUBECONFIG`` and session bus, and the
    variables of the providers' tools (exec_helper.paths.PASSED_ENV_PREFIXES)."""
    stdin_tty: bool
    stderr_tty: bool
    caller: Caller


class BusTaker(Protocol):
    """The token store, which may move to the keyring on a caller's session bus."""

    def wants_bus(self, address: str) -> bool:
        """Whether offer_bus(address) would try it."""

    def offer_bus(self, address: str) -> bool:
        """Try the keyring on that bus; True when the store moved."""


_SILENT = Silent()


def no_flag(_pid: int | None) -> str | None:
    """Where a kubectl's command line cannot be read: no ``--kubeconfig`` is known."""
    return None


class GetCredential:
    """The use case; ``conversation(interactive, visible)`` reaches the caller's terminal."""

    def __init__(
        self,
        broker: Broker,
        clock: Callable[[], datetime],
        kubeconfig_flag: Callable[[int | None], str | None] = no_flag,
        bus: "BusTaker | None" = None,
    ) -> None:
        """``kubeconfig_flag(pid)``: the ``--kubeconfig`` of the kubectl with that pid (read
        from the running process, where the platform allows). ``bus``: takes a local caller's
        D-Bus session bus, for an agent that found no keyring on its own."""
        self._broker = broker
        self._clock = clock
        self._kubeconfig_flag = kubeconfig_flag
        self._bus = bus
        self._failed: dict[tuple[object, ...], tuple[float, str]] = {}
        """(request, kubectl pid) → (when, error) of recent failures."""
        self._lock = threading.Lock()
        self._providers = broker.providers
        self._resolve_cached = functools.lru_cache(maxsize=64)(self._resolve_uncached)
        """kubectl sends the same arguments every time: resolved once (small keys only)."""
        self._files_looked = -FILES_LOOK_EVERY
        self._told: set[str] = set()
        """Problems with kubetray's files already said to a caller (app.statefiles)."""

    def do(
        self, req: CredentialRequest, conversation: Callable[[bool, bool], Conversation]
    ) -> Answer:
        answer = self._do(req, conversation, at_once=False)
        assert answer is not None
        told = self._untold()
        if told:  # a file kubetray keeps that it cannot use: said once to kubectl too
            code, out, err = answer  # one line: kubetray-exec's stderr is one
            answer = (code, out, ". Also: ".join([err, *told] if err else told))
        return answer

    def _untold(self) -> list[str]:
        """Problems with kubetray's files not yet said to a caller of this agent (looked for
        at most once a second: a look costs a few hundred µs, a kubectl call ~12 ms)."""
        now = time.monotonic()
        if now - self._files_looked < FILES_LOOK_EVERY:
            return []
        self._files_looked = now
        try:
            problems = statefiles.problems()
        except Exception:  # a look at the files must never cost the answer
            log.exception("looking at kubetray's files failed")
            return []
        new = [p for p in problems if p not in self._told]
        self._told.update(new)
        return new

    def at_once(self, req: CredentialRequest) -> Answer | None:
        """do(), if the answer needs nothing but memory: no new identity, keyring move,
        consent question, store read, refresh, login or prompt. None: nothing was done (not
        even recorded), so the caller may ask do() the same (the installed launcher's fast
        path; see exec_helper.protocol.CACHED_CREDENTIAL)."""
        return self._do(req, lambda interactive, visible: _SILENT, at_once=True)

    def _do(
        self,
        req: CredentialRequest,
        conversation: Callable[[bool, bool], Conversation],
        at_once: bool,
    ) -> Answer | None:
        start = time.perf_counter()
        repeat = self._repeat_of(req, start)
        if repeat is not None:  # kubectl retrying what just failed: the same answer, at once
            self._record(req, None, None, start, f"(repeated) {repeat}")
            return (1, "", repeat)
        name: str | None = None
        cluster: str | None = None
        remote = req.caller.remote
        env = _remote_env(req.env) if remote else req.env
        try:
            # What kubectl sent: the ExecCredential version, interactivity, the cluster.
            info = exec_credential.parse_exec_info(req.exec_info)
            cluster = _clip(info.cluster.server) if info.cluster else None
            # The provider and its settings: the arguments, the cluster's exec extension and
            # the environment (for kubetray's own flags: per-cluster, arguments, environment).
            wanted = self._resolve(req.args, info.cluster.config if info.cluster else None, env)
            if remote:
                _refuse_desktop_paths(wanted, remote)
            elif self._bus is not None:  # the keyring is the user's, not the first caller's
                bus = _env_value(env, BUS_ENV) or ""
                if at_once and self._bus.wants_bus(bus):
                    return None
                self._bus.offer_bus(bus)
            # A prompt only where a person sees and answers it: both ends are the terminal
            # (kubernetes_asyncio captures stderr while stdin is one).
            interactive = info.interactive and req.stdin_tty and req.stderr_tty
            conv = conversation(interactive, req.stderr_tty)
            consent = self._broker.consent
            if remote:
                # From an SSH host: only with the person's consent to this identity on this
                # host, asked before anything is made or written. The desktop names
                # identities: a forwarded --name is ignored.
                wanted = dataclasses.replace(wanted, name=None)
                if consent is None:
                    raise AppError(f"this kubetray agent serves no SSH forwards ({remote})")
                about, new = self._broker.proposed_identity(wanted, lambda: _kubeconfig(env))
                name = _clip(about.name)
                if at_once:
                    if new or not consent.granted(remote, about.name, about.key):
                        return None  # a question for the person: the full request asks it
                else:
                    consent.check(remote, about.name, cluster, conv, about.key, new)
            # Which identity (a new one is named after the caller's kubeconfig user).
            if at_once:
                known = self._broker.known_identity(wanted)
                if known is None:
                    return None
                st = known
            else:
                st = self._broker.identity(
                    wanted, lambda: self._kubeconfig_of(req) or _kubeconfig(env)
                )
            name = _clip(st.identity.name)
            # Its credential: memory, the store, a refresh, or the login all callers share.
            skip_cache = info.response_code == 401
            if at_once:
                cached = self._broker.cached_credential(st, wanted, cluster, skip_cache)
                if cached is None:
                    return None
                if remote:
                    assert consent is not None  # checked above
                    consent.note_seen(remote)  # as check() does: an answered call counts
                credential = cached
            else:
                credential = self._broker.get_credential(
                    st, wanted, conv, cluster=cluster, skip_cache=skip_cache
                )
            # The answer, in the version kubectl asked for.
            answer: Answer = (0, render(info, credential), credential.warning or "")
        except (ExecInfoError, options.OptionsError) as e:
            answer = (1, "", str(e))
        except AppError as e:
            answer = (1, "", e.one_line())
        except Exception as e:  # kubectl must get an answer whatever happens
            log.exception("get_credential failed")
            answer = (1, "", unexpected(e))
        # The record Diagnostics and `kubetray status` show.
        code, _, error_text = answer
        self._record(req, name, cluster, start, error_text if code else None)
        if code:
            self._remember_failure(req, start, error_text)
        return answer

    def _resolve(
        self, args: tuple[str, ...], config: dict[str, Any] | None, env: tuple[str, ...] = ()
    ) -> Wanted:
        """The providers' reading of a request, memoized: kubectl sends the same arguments
        every time. Only small keys are kept: the cache must not grow with what a caller
        chooses to send."""
        try:
            config_json = json.dumps(config, sort_keys=True) if config else None
        except RecursionError:
            raise ExecInfoError(
                "decode: the cluster's exec extension is nested too deeply"
            ) from None
        size = len(config_json or "") + sum(map(len, args)) + sum(map(len, env))
        if size > _CACHE_KEY_LIMIT:
            return self._resolve_uncached(args, config_json, env)
        return self._resolve_cached(args, config_json, env)

    def _resolve_uncached(
        self, args: tuple[str, ...], config_json: str | None, env: tuple[str, ...]
    ) -> Wanted:
        return resolve(self._providers, args, json.loads(config_json) if config_json else None, env)

    def _kubeconfig_of(self, req: CredentialRequest) -> str | None:
        """``kubectl --kubeconfig FILE``: the file, read from the running kubectl (local only)."""
        return None if req.caller.remote else self._kubeconfig_flag(req.caller.parent_pid)

    def _record(
        self,
        req: CredentialRequest,
        name: str | None,
        cluster: str | None,
        start: float,
        error: str | None,
    ) -> None:
        self._broker.record(
            CallRecord(
                time=self._clock(),
                identity=name,
                cluster=cluster,
                caller=req.caller,
                ok=error is None,
                error=_clip(error),
                latency_ms=(time.perf_counter() - start) * 1000,
            )
        )

    @staticmethod
    def _key(req: CredentialRequest) -> tuple[object, ...] | None:
        if req.caller.parent_pid is None:
            return None  # no way to tell one kubectl from another: never silence a call
        return (req.caller.remote, req.caller.parent_pid, req.exec_info, req.args, req.env)

    def _repeat_of(self, req: CredentialRequest, now: float) -> str | None:
        key = self._key(req)
        with self._lock:
            found = self._failed.get(key) if key else None
            if found is not None and now - found[0] < REPEAT_WINDOW:
                return found[1]
        return None

    def _remember_failure(self, req: CredentialRequest, now: float, error: str) -> None:
        key = self._key(req)
        if key is None:
            return
        with self._lock:
            for old in [k for k, (t, _) in self._failed.items() if now - t >= REPEAT_WINDOW]:
                del self._failed[old]
            if len(self._failed) < MAX_REPEATS:
                self._failed[key] = (now, error)


def _remote_env(env: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        item
        for item in env
        if item.startswith(REMOTE_ENV_KEPT) or not item.startswith(REMOTE_ENV_DROPPED)
    )


def _refuse_desktop_paths(wanted: Wanted | options.HelperOptions, remote: str) -> None:
    if isinstance(wanted, options.HelperOptions):
        wanted = default_providers().from_options(wanted)
    named = wanted.local_paths
    if named:
        raise options.OptionsError(
            f"{', '.join(named)} would name a program or file on your desktop, not on {remote}: "
            "over an SSH forward put certificates in the kubeconfig as data "
            "(--certificate-authority-data) and leave the browser to the desktop's settings"
        )


def render(info: ExecInfo, credential: Credential) -> str:
    """The ExecCredential for a credential, in the version the caller asked for."""
    return exec_credential.render(
        info.api_version,
        token=credential.token,
        client_certificate_data=credential.certificate_pem,
        client_key_data=credential.key_pem,
        expiration=credential.expires,
    )


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_RECORDED:
        return text
    return text[: MAX_RECORDED - 1] + "…"


def resolve(
    providers: Providers,
    args: tuple[str, ...] | list[str],
    config: dict[str, Any] | None,
    env: tuple[str, ...],
) -> Wanted:
    """What a request asks for: the provider whose command line ``args`` are, its settings."""
    environ = dict(item.partition("=")[::2] for item in env)
    if "KUBETRAY_BROWSER" in environ:  # the caller's browser, under any flag that names one
        environ.setdefault("KUBETRAY_BROWSER_COMMAND", environ["KUBETRAY_BROWSER"])
    return providers.wanted(list(args), config, environ)


def _env_value(env: tuple[str, ...], name: str) -> str | None:
    for item in env:
        if item.startswith(name + "="):
            return item.partition("=")[2]
    return None


def _kubeconfig(env: tuple[str, ...]) -> str:
    """The caller's KUBECONFIG, as kubetray-exec passed it on; "" (kubectl's default file)
    for a caller without one (client-node, Python's config_file=)."""
    return _env_value(env, "KUBECONFIG") or ""
