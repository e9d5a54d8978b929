"""The agent's requests: decode, ask the broker, encode. One function per request.

Frames to kubetray-exec stay flat (see exec_helper.protocol); the helper prints ``stdout``
and ``stderr`` as given and exits with ``exit``.
"""

import functools
import json
import logging
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
from exec_helper import exec_credential, options, protocol
from exec_helper.exec_credential import ExecInfo, ExecInfoError

log = logging.getLogger(__name__)
Send = Callable[[dict[str, Any]], None]


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

    def handle(self, request: dict[str, Any], pid: int | None, send: Send) -> None:
        """Answer one request; every path ends with exactly one result frame."""
        op = request.get("op")
        if op == "get_credential":
            self._get_credential(request, pid, send)
        elif op == "status":
            send(_result(0, stdout=self._json(self.status())))
        elif op == "calls":
            calls = [_record_dict(r) for r in self._broker.calls(int(request.get("limit") or 100))]
            send(_result(0, stdout=self._json({"calls": calls})))
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
        import os

        doc = self._broker.status()
        doc["agent"] = {"pid": os.getpid(), "version": __version__, "socket": self._socket}
        return doc

    def _get_credential(self, request: dict[str, Any], pid: int | None, send: Send) -> None:
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
                tuple(request.get("args") or ()), info.cluster.config if info.cluster else None
            )
            identity_name = identity_for(opts).name
            _identity, credential = self._broker.get_credential(
                opts, cluster=cluster, skip_cache=info.response_code == 401
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
def _resolve_cached(args: tuple[str, ...], config_json: str | None) -> options.HelperOptions:
    return options.resolve(list(args), json.loads(config_json) if config_json else None)


def _resolve(args: tuple[str, ...], config: dict[str, Any] | None) -> options.HelperOptions:
    """options.resolve, memoized: kubectl sends the same arguments every time."""
    return _resolve_cached(args, json.dumps(config, sort_keys=True) if config else None)


def _record_dict(rec: CallRecord) -> dict[str, Any]:
    doc = asdict(rec)
    doc["time"] = rec.time.isoformat()
    return doc
