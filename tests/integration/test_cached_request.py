"""The real agent and the installed launcher's fast request (protocol.CACHED_CREDENTIAL), over
its socket: answered from memory with what the full request prints, else "not answered" with
nothing done, so the Python helper's full request after it is the only one that counts."""

import json
import os

from exec_helper import protocol
from tests.integration.test_ipc_security import hello, raw_exchange
from tests.peers import V1, KubetrayEnv, StartAgent


def ask(kt: KubetrayEnv, op: str, name: str, exec_info: str = V1) -> dict[str, object]:
    request = {
        "op": op,
        "exec_info": exec_info,
        "args": ["--stored", name],
        "env": [],
        "stdin_tty": False,
        "stderr_tty": False,
        "ppid": os.getpid(),
    }
    frames = raw_exchange(
        kt.runtime / "agent.sock", hello(), protocol.frame(json.dumps(request).encode())
    )
    assert [f["type"] for f in frames] == ["hello", "result"], frames  # never a message
    return frames[1]


def test_the_agent_answers_at_once_only_what_memory_holds(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None, name: str
) -> None:
    kt.store_token(name, "cached-token")
    start_agent(kt)
    try:
        first = ask(kt, protocol.CACHED_CREDENTIAL, name)  # in the keyring, not in memory yet
        assert first[protocol.ANSWERED] is False and first["stdout"] == ""
        assert kt.calls() == []  # nothing done, nothing recorded
        full = kt.run_helper("--stored", name)
        assert full.returncode == 0 and "cached-token" in full.stdout
        fast = ask(kt, protocol.CACHED_CREDENTIAL, name)
        assert fast[protocol.ANSWERED] is True
        assert (fast["exit"], fast["stdout"], fast["stderr"]) == (0, full.stdout, "")
        assert [c["ok"] for c in kt.calls()] == [True, True]

        # What the full request would refuse is refused at once, in the same words.
        bad = ask(kt, protocol.CACHED_CREDENTIAL, name, exec_info='{"spec": 1}\x1b[2J')
        helper = kt.run_helper("--stored", name, exec_info='{"spec": 1}\x1b[2J')
        assert bad[protocol.ANSWERED] is True and bad["exit"] == 1 == helper.returncode
        assert "\x1b" not in str(bad["stderr"])  # printable already: the launcher prints it
        assert f"{bad['stderr']}\n" == helper.stderr
    finally:
        kt.kubetray("forget", name)


def test_an_unknown_name_is_the_full_requests_work(
    kt: KubetrayEnv, start_agent: StartAgent, name: str
) -> None:
    start_agent(kt)
    answer = ask(kt, protocol.CACHED_CREDENTIAL, name)
    assert answer[protocol.ANSWERED] is False
    assert kt.calls() == [] and name not in kt.kubetray("status").stdout
