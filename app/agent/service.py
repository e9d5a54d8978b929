"""The agent's requests: decode, run the use case (or ask the broker), encode.

Frames to kubetray-exec stay flat (see exec_helper.protocol); the helper prints ``stdout``
and ``stderr`` as given and exits with ``exit``.
"""

import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from app import __version__
from app.agent import peer
from app.broker import consent
from app.broker.broker import Broker
from app.errors import AppError, unexpected
from app.model import CallRecord
from app.oidc.errors import LoginError
from app.usecases.account import Account
from app.usecases.get_credential import CredentialRequest, GetCredential
from exec_helper import options, protocol, version
from exec_helper.errors import printable

log = logging.getLogger(__name__)
Send = Callable[[dict[str, Any]], None]
Receive = Callable[[float], dict[str, Any]]
PROMPT_GRACE = 5.0
"""kubetray-exec gives up on a prompt after protocol.PROMPT_TIMEOUT and says so; the agent
waits a little longer, for a helper that can no longer say anything."""

# What a request may carry. Everything the agent keeps (caches, states, the record of calls)
# is built from these, so capping them here bounds its memory whatever callers send.
MAX_EXEC_INFO = 256 * 1024
"""KUBERNETES_EXEC_INFO: Linux caps one environment string at 128 KiB, Windows at 32 K chars."""
MAX_ITEMS = 64
"""Arguments, or KUBETRAY_* environment settings."""
MAX_STRING = 4096
"""One argument, setting, name or path."""
MAX_ENV_STRING = 128 * 1024
"""One environment item: Linux's cap on one environment string. A KUBECONFIG that lists a
platform engineer's hundreds of files is far longer than MAX_STRING (issue 33)."""
MAX_LIMIT = 10_000


READS = frozenset({"status", "calls", "show"})
"""Requests that change nothing status shows: the views are not told of them."""


class BadRequest(ValueError):
    """A request whose fields are missing, of the wrong type or too large."""


def bad_request(reason: str) -> dict[str, Any]:
    """The answer to a request the agent cannot read (exit 2, as for a usage error)."""
    return _result(2, stderr=f"the kubetray agent refused a malformed request: {reason}")


def _str(request: dict[str, Any], key: str, limit: int = MAX_STRING) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    if len(value) > limit:
        raise BadRequest(f"{key} is longer than {limit} characters")
    return value


def _strings(request: dict[str, Any], key: str, limit: int = MAX_STRING) -> tuple[str, ...]:
    value = request.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{key} must be a list of strings")
    if len(value) > MAX_ITEMS:
        raise BadRequest(f"{key} has more than {MAX_ITEMS} items")
    if any(len(v) > limit for v in value):
        raise BadRequest(f"an item of {key} is longer than {limit} characters")
    return tuple(value)


def _flag(request: dict[str, Any], key: str) -> bool:
    value = request.get(key)
    if value is not None and not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false")
    return bool(value)


def _pid(request: dict[str, Any], key: str) -> int | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 2**32:
        raise BadRequest(f"{key} must be a process id")
    return value


def _limit(request: dict[str, Any]) -> int:
    value = request.get("limit")
    if value is None:
        return 100
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return value


class CallerConversation:
    """A connected caller (kubetray-exec or the CLI) as the logins see it."""

    def __init__(
        self,
        send: Send,
        receive: Receive,
        interactive: bool,
        visible: bool,
        origin: str | None = None,
    ) -> None:
        self._send = send
        self._receive = receive
        self.interactive = interactive
        self.visible = visible
        self.origin = origin
        """The SSH host the caller is on, when it reached the agent through a forward."""
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
        """tell() already put the code and the link on the caller's terminal; where a person
        reads it, a QR code of the link follows (a phone opens it: a server, an SSH session)."""
        if self.visible and uri:
            shown = terminal_qr(uri)
            if shown:
                self.tell(f"or scan this with your phone:\n{shown}")

    def ask(self, text: str, secret: bool) -> str | None:
        if not self.interactive or self.gone:
            return None
        self._frame({"type": protocol.PROMPT, "text": text, "secret": secret})
        try:
            reply = self._receive(protocol.PROMPT_TIMEOUT + PROMPT_GRACE)
        except TimeoutError:
            reply = {"op": "answer", "cancel": True, "timeout": True}
        except (OSError, ValueError):
            self.gone = True
            return None
        if reply.get("timeout") is True:
            raise LoginError(f"nobody answered within {protocol.PROMPT_TIMEOUT:.0f} s")
        value = reply.get("value")
        return value if isinstance(value, str) and reply.get("op") == "answer" else None


def _result(exit_code: int, stdout: str = "", stderr: str = "") -> dict[str, Any]:
    return {"type": protocol.RESULT, "exit": exit_code, "stdout": stdout, "stderr": stderr}


class Service:
    """Dispatches IPC requests to the broker."""

    def __init__(self, broker: Broker, get: GetCredential, account: Account, socket: str) -> None:
        self._broker = broker
        self._get = get
        self._account_actions = account
        self._socket = socket
        self.on_show: Callable[[], None] | None = None
        """Set by the tray: a second `kubetray` asks the running one to show itself."""
        self.on_stop: Callable[[bool], None] | None = None
        """Set by the agent and the app: `kubetray stop` (True: once no login is in flight)."""
        self.facts: dict[str, Any] = {}
        """More about this agent for status (what program serves)."""
        self.store_facts: Callable[[], dict[str, Any]] = dict
        """Where tokens are kept, asked at each status (the store can move to the keyring)."""
        self.on_request: Callable[[], None] | None = None
        """Called as each request arrives: a look at the installation (app/upgrade.py)."""
        self.on_restart: Callable[[], list[str]] | None = None
        """`kubetray restart`: restart once idle; returns the logins it waits for."""
        self.restart_facts: Callable[[], dict[str, Any]] = dict
        """An update installed, a restart pending (app/restart.py), for status."""

    def handle(
        self, request: dict[str, Any], pid: int | None, send: Send, receive: Receive
    ) -> None:
        """Answer one request; every path ends with exactly one result frame.

        Fields are checked before use: a malformed request gets an exit-2 answer saying what
        is wrong, never a traceback in the log and never silence.
        """
        if self.on_request is not None:
            try:
                self.on_request()
            except Exception:  # a look at the installation must never cost the answer
                log.exception("checking the installation failed")
        try:
            self._dispatch(request, pid, send, receive)
        except BadRequest as e:
            log.debug("malformed request from pid %s: %s", pid, e)
            send(bad_request(str(e)))
        except AppError as e:  # a file it cannot read, a store that refuses: in words
            send(_result(e.exit_code, stderr=e.one_line()))
        except OSError:
            raise  # the connection failed: nobody to answer
        except Exception as e:  # a bug: the caller still gets its one answer
            log.exception("a %s request failed", str(request.get("op"))[:64])
            send(_result(1, stderr=unexpected(e)))
        finally:
            op = request.get("op")
            if not (isinstance(op, str) and op in READS):  # served, logged in or out, ...
                self._broker.changes.tell()

    def _dispatch(
        self, request: dict[str, Any], pid: int | None, send: Send, receive: Receive
    ) -> None:
        op = request.get("op")
        if not isinstance(op, str):
            raise BadRequest("op must be a string")
        if op in (protocol.GET_CREDENTIAL, protocol.CACHED_CREDENTIAL):
            self._get_credential(request, pid, send, receive, op == protocol.CACHED_CREDENTIAL)
            return
        remote = peer.describe(pid).remote
        if remote is not None:  # a forward serves credentials; the rest is the desktop's
            send(
                _result(
                    1,
                    stderr=f"over an SSH forward kubetray serves credentials only: "
                    f"{op[:64]!r} is refused from {remote} (run it on your desktop)",
                )
            )
        elif op == "remote":
            self._remote(request, send)
        elif op in ("login", "logout", "cancel", "forget"):
            self._account(op, request, send, receive)
        elif op == "status":
            send(_result(0, stdout=self._json(self.status())))
        elif op == "calls":
            calls = [_record_dict(r) for r in self._broker.calls(_limit(request))]
            send(_result(0, stdout=self._json({"calls": calls})))
        elif op == "show":
            if self.on_show is None:
                send(_result(1, stderr="the headless kubetray agent is running here, not the app"))
            else:
                self.on_show()
                send(_result(0))
        elif op == "stop" and self.on_stop is not None:
            try:  # the answer leaves first; the stop happens even if the caller has gone
                send(_result(0, stdout=self._json({"pid": os.getpid()})))
            finally:
                self.on_stop(bool(request.get("when_idle")))
        elif op == "restart" and self.on_restart is not None:
            # A package's scripts ask with the build they installed: an agent that already
            # runs it (it noticed the upgrade and restarted itself) is current, not restarted
            # a second time. Agents before this field restart anyway (the CLI asks status first).
            unless = request.get(protocol.UNLESS_BUILD)
            current = version.BUILD is not None and unless == version.BUILD
            waiting = [] if current else self.on_restart()
            doc = {
                "pid": os.getpid(),
                "version": __version__,
                "build": version.BUILD,
                "current": current,
                "waits_for": waiting,
            }
            send(_result(0, stdout=self._json(doc)))
        elif op == "invalidate":
            self._broker.invalidate(_str(request, "name"))
            send(_result(0))
        else:
            send(_result(1, stderr=f"the kubetray agent does not know the request {op[:64]!r}"))

    @staticmethod
    def _json(doc: dict[str, Any]) -> str:
        return json.dumps(doc)

    def status(self) -> dict[str, Any]:
        """The broker's status plus facts about this agent."""
        ok, failed = self._broker.counts()
        consent = self._broker.consent
        return {
            "started": self._broker.started.isoformat(),
            "identities": [s.to_dict() for s in self._broker.status()],
            "calls": {"ok": ok, "failed": failed},
            "remote": [h.to_dict() for h in consent.hosts()] if consent else [],
            "agent": {
                "pid": os.getpid(),
                "version": __version__,
                "build": version.BUILD,
                "socket": self._socket,
                **self.store_facts(),
                **self.facts,
                **self.restart_facts(),
            },
        }

    def _remote(self, request: dict[str, Any], send: Send) -> None:
        """kubetray remote list / allow HOST IDENTITY / deny HOST / forget HOST [IDENTITY]."""
        action, host = _str(request, "action"), _str(request, "host")
        identity = _str(request, "identity")
        if action not in ("list", "allow", "deny", "forget") or (action != "list" and not host):
            raise BadRequest("remote needs an action (list, allow, deny, forget) and a host")
        if self._broker.consent is None:
            send(_result(1, stderr="this agent serves no SSH forwards"))
            return
        known = self._broker.registry.find(identity) if action == "allow" and identity else None
        key = known.identity.key if known else None
        code, out, err = consent.manage(self._broker.consent, action, host, identity, key)
        send(_result(code, stdout=out, stderr=err))

    def _account(self, op: str, request: dict[str, Any], send: Send, receive: Receive) -> None:
        """kubetray login / logout / cancel / forget NAME (or, for login, kubetray-exec flags).

        The outcome goes back as JSON; the words for it are the CLI's.
        """
        name = _str(request, "name")
        args = _strings(request, "args")
        interactive, force = _flag(request, "interactive"), _flag(request, "force")
        doc: dict[str, Any] = {"name": name}
        try:
            if op == "login":
                conv = CallerConversation(send, receive, interactive, visible=True)
                done = self._account_actions.log_in(conv, name, args, force)
                doc = {"name": done.name, "who": done.who, "until": done.until.isoformat()}
            elif op == "logout":
                outcome = self._account_actions.log_out(name)
                doc.update(revoked=outcome.revoked, reason=outcome.reason)
            elif op == "forget":
                self._account_actions.forget(name)
            else:
                self._account_actions.cancel(name)
        except options.OptionsError as e:
            send(_result(2, stderr=str(e)))
        except AppError as e:
            send(_result(e.exit_code, stderr=e.one_line()))
        else:
            send(_result(0, stdout=self._json(doc)))

    def _get_credential(
        self,
        request: dict[str, Any],
        pid: int | None,
        send: Send,
        receive: Receive,
        at_once: bool = False,
    ) -> None:
        """get_credential; or cached_credential (``at_once``), answered only from memory (the
        result says ``answered``; its stderr is printable but for newlines: the C launcher
        escapes only control characters)."""
        req = CredentialRequest(
            exec_info=_str(request, "exec_info", MAX_EXEC_INFO),
            args=_strings(request, "args"),
            env=_strings(request, "env", MAX_ENV_STRING),
            stdin_tty=_flag(request, "stdin_tty"),
            stderr_tty=_flag(request, "stderr_tty"),
            # Before answering: the helper exits the moment it has its answer, and with it
            # goes /proc/<pid> and the way to its parents (≈70 µs).
            caller=peer.describe(pid, _pid(request, "ppid")),
        )

        if at_once:
            answer = self._get.at_once(req)
            if answer is None:
                send({**_result(1), protocol.ANSWERED: False})
            else:
                code, out, err = answer
                stderr = printable(err, keep="\n")  # the launcher escapes what is left
                send({**_result(code, stdout=out, stderr=stderr), protocol.ANSWERED: True})
            return

        def conversation(interactive: bool, visible: bool) -> CallerConversation:
            return CallerConversation(send, receive, interactive, visible, origin=req.caller.remote)

        code, out, err = self._get.do(req, conversation)
        send(_result(code, stdout=out, stderr=err))


def _record_dict(rec: CallRecord) -> dict[str, Any]:
    doc = asdict(rec)
    doc["time"] = rec.time.isoformat()
    return doc


def terminal_qr(text: str) -> str | None:
    """``text`` as a QR code in Unicode half blocks, no colours (segno), or None if it does not
    fit one (a link over about 300 characters)."""
    import io

    import segno

    try:
        code = segno.make(text, error="l", micro=False)
    except (ValueError, segno.DataOverflowError):
        return None
    out = io.StringIO()
    code.terminal(out=out, compact=True, border=2)
    return out.getvalue().rstrip("\n")
