"""`kubetray stop`: the agent answers before it goes, it goes even if the caller hung up, and a
reset while it closes reads as stopping."""

import json
import os
from pathlib import Path

import pytest

from app.agent.service import Service
from tests.core import make_core


def test_stop_answers_first_and_stops_even_when_the_caller_is_gone(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    service = Service(core.broker, core.get_credential, core.account, str(tmp_path / "sock"))
    events: list[object] = []
    service.on_stop = lambda _when_idle: events.append("stopping")
    try:
        # A shutdown that starts before the answer is sent can cut the caller off
        # ("Connection reset by peer" from `kubetray stop` although the agent stopped).
        service.handle({"op": "stop"}, os.getpid(), lambda doc: events.append(doc["exit"]), dict)
        assert events == [0, "stopping"]

        def hung_up(_doc: object) -> None:
            raise BrokenPipeError

        with pytest.raises(OSError):
            service.handle({"op": "stop"}, os.getpid(), hung_up, dict)
        assert events == [0, "stopping", "stopping"]
    finally:
        core.stop()


def test_kubetray_stop_reads_a_reset_while_the_agent_closes_as_stopping(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent closes its listener with `kubetray stop`'s "gone yet?" connection still in the
    backlog: that connection is reset. It means "closing", not a failed stop (seen in a loaded
    full run as 'error: lost the connection to the kubetray agent: Connection reset by peer')."""
    from app import cli
    from app.agent import client
    from app.errors import AgentNotRunning, AppError

    answers: list[object] = [
        {"exit": 0, "stdout": json.dumps({"pid": 4242})},  # stop
        AppError("lost the connection to the kubetray agent: Connection reset by peer"),
        AgentNotRunning("no kubetray agent is running"),
    ]

    def call(op: str, **_fields: object) -> dict[str, object]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    monkeypatch.setattr(client, "call_json", lambda op: {"agent": {"pid": 4242}})
    monkeypatch.setattr(client, "call", call)
    assert cli.main(["stop"]) == 0
    assert capsys.readouterr().out == "stopped kubetray (pid 4242)\n"
    assert answers == []


def test_restart_with_the_installed_build_leaves_an_agent_on_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package's ``restart --if-outdated`` may reach an agent that restarted into the new
    build by itself between the CLI's status and its request: it answers current."""
    from app.agent import service as service_module
    from exec_helper import protocol

    monkeypatch.setattr(service_module.version, "BUILD", "two")
    core, _ = make_core(tmp_path)
    service = Service(core.broker, core.get_credential, core.account, str(tmp_path / "sock"))
    asked: list[str] = []
    service.on_restart = lambda: asked.append("restart") or []
    answers: list[dict[str, object]] = []
    try:
        for request in (
            {"op": "restart", protocol.UNLESS_BUILD: "two"},  # current: left alone
            {"op": "restart", protocol.UNLESS_BUILD: "one"},  # another build: restarts
            {"op": "restart"},  # kubetray restart, or a CLI before the field
        ):
            service.handle(request, os.getpid(), answers.append, dict)
    finally:
        core.stop()
    docs = [json.loads(str(a["stdout"])) for a in answers]
    assert [d["current"] for d in docs] == [True, False, False]
    assert asked == ["restart", "restart"]


def test_a_request_that_fails_is_answered_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file it cannot read, or a bug: status (and doctor, which asks it) hears a sentence,
    never 'the kubetray agent failed: NewerFormat'."""
    from app.formats import newer

    core, _ = make_core(tmp_path)
    service = Service(core.broker, core.get_credential, core.account, str(tmp_path / "sock"))
    answers: list[dict[str, object]] = []
    try:
        refusal = newer("identities.json", 3, 2, "9.0.0")
        monkeypatch.setattr(service, "status", lambda: (_ for _ in ()).throw(refusal))
        service.handle({"op": "status"}, os.getpid(), answers.append, dict)
        monkeypatch.setattr(service, "status", lambda: {}["missing"])
        service.handle({"op": "status"}, os.getpid(), answers.append, dict)
    finally:
        core.stop()
    said, bug = (str(a["stderr"]) for a in answers)
    assert said == refusal.one_line() and "NewerFormat" not in said
    assert bug.startswith("the kubetray agent could not answer: something it did not expect")
    assert "(KeyError)" in bug and "has the details" in bug and "failed:" not in bug
    assert [a["exit"] for a in answers] == [1, 1]
