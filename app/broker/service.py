"""The agent's requests: decode, ask the broker, encode. One function per request.

Frames to kubetray-exec stay flat (see exec_helper.protocol); the helper prints ``stdout``
and ``stderr`` as given and exits with ``exit``.
"""

import functools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from app import __version__
from app.broker import peer
from app.broker.broker import Broker, identity_for
from app.errors import AppError
from app.model import CallRecord, Credential
from app.oidc.settings import OIDCSettings
from exec_helper import exec_credential, options, protocol
from exec_helper.exec_credential import ExecInfo, ExecInfoError

log = logging.getLogger(__name__)
Send = Callable[[dict[str, Any]], None]
Receive = Callable[[float], dict[str, Any]]
PROMPT_TIMEOUT = 300.0


class CallerConversation:
    """A connected caller (kubetray-exec or the CLI) as the logins see it."""

    def __init__(self, send: Send, receive: Receive, interactive: bool, visible: bool) -> None:
        self._send = send
        self._receive = receive
        self.interactive = interactive
        self.visible = visible
        self.gone = False

    def _frame(self, doc: dict[str, Any]) -> None:
        if self.gone:
            return
        try:
            self._send(doc)
        except OSError:
            self.gone = True  # it hung up; the login goes on for the others

    def tell(self, text: str) -> None:
        self._frame({"type": protocol.MESSAGE, "text": text})

    def keepalive(self) -> None:
        self._frame({"type": protocol.KEEPALIVE})

    def device_code(self, user_code: str, uri: str) -> None:
        pass  # tell() already put it on the caller's terminal

    def ask(self, text: str, secret: bool) -> str | None:
        if not self.interactive or self.gone:
            return None
        self._frame({"type": protocol.PROMPT, "text": text, "secret": secret})
        try:
            reply = self._receive(PROMPT_TIMEOUT)
        except (OSError, ValueError):
            self.gone = True
            return None
        value = reply.get("value")
        return value if isinstance(value, str) and reply.get("op") == "answer" else None


def _result(exit_code: int, stdout: str = "", stderr: str = "") -> dict[str, Any]:
    return {"type": protocol.RESULT, "exit": exit_code, "stdout": stdout, "stderr": stderr}


def render(info: ExecInfo, credential: Credential) -> str:
    """The ExecCredential for a credential, in the version the caller asked for."""
    return exec_credential.render(
        info.api_version,
        token=credential.token,
        client_certificate_data=credential.certificate_pem,
        client_key_data=credential.key_pem,
        expiration=credential.expires,
    )


class Service:
    """Dispatches IPC requests to the broker."""

    def __init__(self, broker: Broker, clock: Callable[[], datetime], socket: str) -> None:
        self._broker = broker
        self._clock = clock
        self._socket = socket
        self.on_show: Callable[[], None] | None = None
        """Set by the tray: a second `kubetray` asks the running one to show itself."""
        self.on_stop: Callable[[bool], None] | None = None
        """Set by the agent and the app: `kubetray stop` (True: once no login is in flight)."""
        self.facts: dict[str, Any] = {}
        """More about this agent for status (where tokens are kept)."""

    def handle(
        self, request: dict[str, Any], pid: int | None, send: Send, receive: Receive
    ) -> None:
        """Answer one request; every path ends with exactly one result frame."""
        op = request.get("op")
        if op == "get_credential":
            self._get_credential(request, pid, send, receive)
        elif op in ("login", "logout", "cancel"):
            self._account(op, request, send, receive)
        elif op == "status":
            send(_result(0, stdout=self._json(self.status())))
        elif op == "calls":
            calls = [_record_dict(r) for r in self._broker.calls(int(request.get("limit") or 100))]
            send(_result(0, stdout=self._json({"calls": calls})))
        elif op == "show":
            if self.on_show is None:
                send(_result(1, stderr="the headless kubetray agent is running here, not the app"))
            else:
                self.on_show()
                send(_result(0))
        elif op == "stop" and self.on_stop is not None:
            self.on_stop(bool(request.get("when_idle")))
            send(_result(0, stdout=self._json({"pid": os.getpid()})))
        elif op == "invalidate":
            self._broker.invalidate(str(request.get("name", "")))
            send(_result(0))
        else:
            send(_result(1, stderr=f"the kubetray agent does not know the request {op!r}"))

    @staticmethod
    def _json(doc: dict[str, Any]) -> str:
        return json.dumps(doc)

    def status(self) -> dict[str, Any]:
        """The broker's status plus facts about this agent."""
        doc = self._broker.status()
        doc["agent"] = {
            "pid": os.getpid(),
            "version": __version__,
            "socket": self._socket,
            **self.facts,
        }
        return doc

    def _account(self, op: str, request: dict[str, Any], send: Send, receive: Receive) -> None:
        """kubetray login / logout / cancel NAME (or, for login, kubetray-exec flags)."""
        logins = self._broker.logins
        name = str(request.get("name") or "")
        try:
            if logins is None:
                raise AppError("OIDC is not enabled in this agent")
            if op == "login":
                conv = CallerConversation(
                    send, receive, bool(request.get("interactive")), visible=True
                )
                if request.get("args"):
                    opts = options.resolve(list(request["args"]))
                    identity = identity_for(opts)
                    st = logins.state(identity, OIDCSettings.from_options(opts))
                else:
                    found = logins.find(name)
                    if found is None:
                        raise AppError(
                            f"no OIDC identity named {name!r}",
                            "kubetray status lists them; or give the kubetray-exec flags",
                        )
                    st = found
                tokens = logins.token(
                    st.identity,
                    st.settings,
                    conv,
                    explicit=True,
                    relogin=bool(request.get("force")),
                )
                until = tokens.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")
                send(
                    _result(
                        0,
                        stdout=f"logged in to {st.identity.name} as {tokens.who()} "
                        f"(token valid until {until})\n",
                    )
                )
            elif op == "logout":
                if not logins.logout(name):
                    raise AppError(f"no OIDC identity named {name!r}", "kubetray status lists them")
                send(_result(0, stdout=f"logged out of {name}\n"))
            else:
                if not logins.cancel(name):
                    raise AppError(f"no login in progress for {name!r}")
                send(_result(0, stdout=f"cancelled the login to {name}\n"))
        except options.OptionsError as e:
            send(_result(2, stderr=str(e)))
        except AppError as e:
            send(_result(e.exit_code, stderr=e.one_line()))

    def _get_credential(
        self, request: dict[str, Any], pid: int | None, send: Send, receive: Receive
    ) -> None:
        start = time.perf_counter()
        # Before answering: the helper exits the moment it has its answer, and with it goes
        # /proc/<pid> and the way to its parents (≈70 µs).
        caller = peer.describe(pid)
        identity_name: str | None = None
        cluster: str | None = None
        error: str | None = None
        try:
            info = exec_credential.parse_exec_info(request.get("exec_info"))
            cluster = info.cluster.server if info.cluster else None
            opts = _resolve(
                tuple(request.get("args") or ()),
                info.cluster.config if info.cluster else None,
                tuple(request.get("env") or ()),
            )
            identity_name = identity_for(opts).name
            conv = CallerConversation(
                send,
                receive,
                interactive=info.interactive and bool(request.get("stdin_tty")),
                visible=bool(request.get("stderr_tty")),
            )
            _identity, credential = self._broker.get_credential(
                opts, cluster=cluster, skip_cache=info.response_code == 401, conv=conv
            )
            send(_result(0, stdout=render(info, credential)))
        except (ExecInfoError, options.OptionsError) as e:
            error = str(e)
            send(_result(1, stderr=error))
        except AppError as e:
            error = e.one_line()
            send(_result(1, stderr=error))
        except Exception as e:  # the helper must get an answer whatever happens
            log.exception("get_credential failed")
            error = f"the kubetray agent failed: {type(e).__name__}"
            send(_result(1, stderr=error + " (see the agent's log)"))
        self._broker.record(
            CallRecord(
                time=self._clock(),
                identity=identity_name,
                cluster=cluster,
                caller=caller,
                ok=error is None,
                error=error,
                latency_ms=(time.perf_counter() - start) * 1000,
            )
        )


@functools.lru_cache(maxsize=256)
def _resolve_cached(
    args: tuple[str, ...], config_json: str | None, env: tuple[str, ...]
) -> options.HelperOptions:
    environ = dict(item.partition("=")[::2] for item in env)
    return options.resolve(list(args), json.loads(config_json) if config_json else None, environ)


def _resolve(
    args: tuple[str, ...], config: dict[str, Any] | None, env: tuple[str, ...] = ()
) -> options.HelperOptions:
    """options.resolve, memoized: kubectl sends the same arguments every time."""
    return _resolve_cached(args, json.dumps(config, sort_keys=True) if config else None, env)


def _record_dict(rec: CallRecord) -> dict[str, Any]:
    doc = asdict(rec)
    doc["time"] = rec.time.isoformat()
    return doc
