"""kubetray-exec's exchange with an agent that dies mid-call: asked once more, against a fresh
agent, unless the dead one had asked the person something (then nobody is asked twice)."""

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exec_helper import exchange, protocol
from exec_helper.errors import AgentGone, HelperError

Behaviour = Callable[[socket.socket], None]


def _read_frame(conn: socket.socket) -> dict[str, object]:
    head = b""
    while len(head) < protocol.HEADER_SIZE:
        head += conn.recv(protocol.HEADER_SIZE - len(head))
    size = protocol.frame_length(head)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    return protocol.decode_flat(body.decode())


def _send(conn: socket.socket, doc: dict[str, object]) -> None:
    conn.sendall(protocol.frame(protocol.encode(doc)))


def dies(conn: socket.socket) -> None:
    """Takes the request, then goes away without a word."""
    _read_frame(conn)
    _read_frame(conn)


def answers(conn: socket.socket) -> None:
    _read_frame(conn)
    _read_frame(conn)
    _send(conn, {"type": protocol.HELLO, "version": protocol.PROTOCOL_VERSION})
    _send(conn, {"type": protocol.RESULT, "exit": 0, "stdout": "token", "stderr": ""})


def prompts_then_dies(conn: socket.socket) -> None:
    """Asks the person for a password, takes the answer, then goes away."""
    _read_frame(conn)
    _read_frame(conn)
    _send(conn, {"type": protocol.HELLO, "version": protocol.PROTOCOL_VERSION})
    _send(conn, {"type": protocol.PROMPT, "text": "Password: ", "secret": True})
    _read_frame(conn)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., list[str]]]:
    """``agent(behaviour, ...)``: one connection each, in order; returns the log of them."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("KUBETRAY_RUNTIME_DIR", str(runtime))
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(runtime / "agent.sock"))
    server.listen(8)
    served: list[str] = []

    def run(*behaviours: Behaviour) -> list[str]:
        def loop() -> None:
            for behaviour in behaviours:
                try:
                    conn, _ = server.accept()
                except OSError:  # the test ended (the socket closed) before its last caller
                    return
                with conn:
                    behaviour(conn)
                served.append(behaviour.__name__)

        threading.Thread(target=loop, daemon=True).start()
        return served

    def no_start(*_: object) -> None:
        raise AssertionError("a live socket: no agent to start")

    monkeypatch.setattr("exec_helper.agent_start.start_agent", no_start)
    yield run
    server.close()


def test_an_agent_that_dies_with_the_request_is_asked_again_once(agent) -> None:  # type: ignore[no-untyped-def]
    served = agent(dies, answers)
    assert exchange.exchange_starting_agent(b'{"op":"get_credential"}', "", []) == (0, "token", "")
    _until_served(served, 2)  # the stand-in records its turn after the caller has its answer
    assert served == ["dies", "answers"]


def test_twice_dead_is_said_not_retried_forever(agent) -> None:  # type: ignore[no-untyped-def]
    served = agent(dies, dies, answers)
    with pytest.raises(AgentGone, match="closed the connection without an answer"):
        exchange.exchange_starting_agent(b'{"op":"get_credential"}', "", [])
    _until_served(served, 2)  # the stand-in records its second turn as it closes
    assert served == ["dies", "dies"]


def test_never_again_once_the_person_was_asked(agent, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    asked: list[str] = []

    def answer(msg: dict[str, object]) -> bytes:
        asked.append(str(msg["text"]))
        return protocol.encode({"op": "answer", "value": "secret"})

    monkeypatch.setattr("exec_helper.prompt.answer", answer)
    served = agent(prompts_then_dies, answers)
    with pytest.raises(HelperError) as e:
        exchange.exchange_starting_agent(b'{"op":"get_credential"}', "", [])
    assert not isinstance(e.value, AgentGone)
    _until_served(served, 1)
    assert asked == ["Password: "] and served == ["prompts_then_dies"]


def _until_served(served: list[str], count: int) -> None:
    """Until the stand-in agent has recorded ``count`` turns (it runs in its own thread)."""
    deadline = time.monotonic() + 10
    while len(served) < count and time.monotonic() < deadline:
        time.sleep(0.01)
