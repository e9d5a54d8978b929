"""SSH forwarding's decisions, without OpenSSH: which host a forwarded request comes from, what
the person decided about it, and what a remote request may not name on the desktop."""

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.agent.peer import ssh_destination
from app.broker.broker import utcnow
from app.broker.consent import QUESTIONS_PER_HOST, Consent, ConsentRefused
from app.model import Decision, Question, Standing
from app.usecases.get_credential import _refuse_desktop_paths, _remote_env
from exec_helper import options


@pytest.mark.parametrize(
    ("argv", "host"),
    [
        ("ssh bastion", "bastion"),
        ("ssh -p 2222 -i key me@devvm kubectl get ns", "devvm"),
        ("ssh -NfT -oSetEnv=A=b -R /tmp/a.sock:/run/b.sock h1", "h1"),
        ("ssh -p2222 -l me [fd00::1]:22", "fd00::1"),
        ("ssh ssh://me@host.example:2200", "host.example"),
        ("ssh -v -- h2 ls", "h2"),
        ("ssh -o ExitOnForwardFailure=yes", None),
    ],
)
def test_the_host_is_the_ssh_destination_as_typed(argv: str, host: str | None) -> None:
    assert ssh_destination(argv.split()) == host


@pytest.fixture
def consent(tmp_path: Path) -> Consent:
    # questions a test holds open wait for its answer, however slow the machine; a test of
    # the silence sets its own
    return Consent(str(tmp_path / "remote-hosts.json"), utcnow, timeout=30.0)


def test_the_headless_agent_refuses_what_nobody_allowed(consent: Consent) -> None:
    with pytest.raises(ConsentRefused) as e:
        consent.check("bastion", "alice@idp", "https://api:6443")
    assert "kubetray remote allow bastion alice@idp" in e.value.one_line()
    consent.allow("bastion", "alice@idp")
    consent.check("bastion", "alice@idp", "https://api:6443")  # no question asked
    with pytest.raises(ConsentRefused, match="nobody is there to ask whether bastion may have "):
        consent.check("bastion", "prodadmin", None)  # another identity: not allowed
    consent.deny("bastion")
    with pytest.raises(ConsentRefused, match="refuses requests forwarded from bastion"):
        consent.check("bastion", "alice@idp", None)
    listed = {h.host: h for h in consent.hosts()}
    assert listed["bastion"].standing is Standing.DENIED
    assert listed["bastion"].calls == 4


def test_decisions_are_kept_across_agents(consent: Consent, tmp_path: Path) -> None:
    consent.allow("a", "dev")
    consent.deny("b")
    again = Consent(str(tmp_path / "remote-hosts.json"), utcnow)
    assert {h.host: (h.standing, h.identities) for h in again.hosts()} == {
        "a": (Standing.ALWAYS, (("dev", Standing.ALWAYS),)),
        "b": (Standing.DENIED, ()),
    }
    assert again.forget("b") and not again.forget("never-seen")
    again.check("a", "dev", None)
    assert again.forget("a", "dev") and not again.granted("a", "dev")


def test_an_always_grant_with_a_key_serves_only_that_identity(consent: Consent) -> None:
    consent.allow("a", "dev", "oidc:key-1")
    assert consent.granted("a", "dev", "oidc:key-1")
    assert not consent.granted("a", "dev", "oidc:key-2")  # a later identity of that name


def test_allowing_the_name_a_refusal_gave_allows_that_identity_by_key(consent: Consent) -> None:
    """The headless agent's line names a new identity as it would be named; if a local
    kubectl makes it first under another name, the grant still serves it (and no other)."""
    with pytest.raises(ConsentRefused) as e:
        consent.check("h", "kubectl@idp", None, key="oidc:k1", new=True)
    assert e.value.one_line().endswith("kubetray remote allow h kubectl@idp")
    consent.allow("h", "kubectl@idp")
    consent.check("h", "u", None, key="oidc:k1")  # named u by the desktop's kubeconfig
    assert not consent.granted("h", "kubectl@idp", "oidc:k2")


def test_a_name_allowed_before_its_login_exists_lets_no_host_make_one(consent: Consent) -> None:
    """`kubetray remote allow h kubectl@idp` before any login of that name exists: a host could
    send an issuer path, client secret or scopes of its own whose identity would be named
    kubectl@idp. A grant by name alone serves only an identity that exists; a new one is
    refused, in a line saying to allow it again, which binds the grant to that login."""
    consent.allow("h", "kubectl@idp")  # no refusal named it in this run: by name alone
    with pytest.raises(ConsentRefused) as e:
        consent.check("h", "kubectl@idp", None, key="oidc:attacker", new=True)
    line = e.value.one_line()
    assert "has no login kubectl@idp yet" in line and "allow it again there" in line
    assert line.endswith("kubetray remote allow h kubectl@idp")
    consent.check("h", "kubectl@idp", None, key="oidc:known")  # an existing one: served
    with pytest.raises(ConsentRefused):
        consent.check("h", "kubectl@idp", None, key="oidc:mine", new=True)
    consent.allow("h", "kubectl@idp")  # after the refusal: that login, by key
    consent.check("h", "kubectl@idp", None, key="oidc:mine", new=True)
    assert not consent.granted("h", "kubectl@idp", "oidc:attacker", new=True)


def test_an_older_host_wide_allow_grants_no_identity(consent: Consent, tmp_path: Path) -> None:
    """What kubetray before per-identity consent kept for "Always allow": the host, for any
    identity. It is kept in the file (an older kubetray still reads it) but grants nothing:
    the person is asked about each identity, and the list says why."""
    path = tmp_path / "remote-hosts.json"
    path.write_text('{"allow": ["devvm"], "deny": [], "future": 1}')
    assert not consent.granted("devvm", "prodadmin")
    with pytest.raises(ConsentRefused, match="nobody is there to ask"):
        consent.check("devvm", "prodadmin", None)
    [host] = consent.hosts()
    assert host.standing is Standing.OLD_ALLOW
    consent.allow("devvm", "dev")
    doc = json.loads(path.read_text())
    assert doc["allow"] == ["devvm"] and doc["future"] == 1
    assert doc["always"] == [{"host": "devvm", "identity": "dev"}]
    assert consent.forget("devvm")
    assert json.loads(path.read_text())["allow"] == []


def answer_with(consent: Consent, decision: Decision | None) -> list[Question]:
    asked: list[Question] = []

    def ask(q: Question) -> None:
        asked.append(q)
        if decision is not None:
            threading.Timer(0.2, q.answer, [decision]).start()

    consent.ask = ask
    return asked


def test_allow_for_the_session_asks_once_for_concurrent_and_later_requests(
    consent: Consent,
) -> None:
    asked = answer_with(consent, Decision.SESSION)
    errors: list[Exception] = []

    def call() -> None:
        try:
            consent.check("devvm", "alice@idp", "https://api:6443")
        except ConsentRefused as e:
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    call()  # later: served without asking
    assert len(asked) == 1 and errors == []
    assert asked[0].text == "devvm wants a token for https://api:6443 as alice@idp, over SSH"
    assert {h.host: h.standing for h in consent.hosts()} == {"devvm": Standing.SESSION}


def test_once_allows_this_request_only_and_always_is_kept(consent: Consent) -> None:
    asked = answer_with(consent, Decision.ONCE)
    consent.check("h", "id", None)
    consent.check("h", "id", None)
    assert len(asked) == 2
    asked = answer_with(consent, Decision.ALWAYS)
    consent.check("h", "id", None)
    consent.check("h", "id", None)
    assert len(asked) == 1
    assert consent.hosts()[0].standing is Standing.ALWAYS


def test_each_identity_is_asked_and_answered_on_its_own(consent: Consent) -> None:
    """Two identities from one host: two questions, and a session grant for one serves only
    that one."""
    asked: list[Question] = []
    consent.ask = asked.append
    results: dict[str, str] = {}

    def call(identity: str) -> None:
        try:
            consent.check("devvm", identity, None)
            results[identity] = "served"
        except ConsentRefused as e:
            results[identity] = e.one_line()

    dev = threading.Thread(target=call, args=("dev",))
    dev.start()
    wait_for(lambda: len(asked) == 1)
    prod = threading.Thread(target=call, args=("prodadmin",))
    prod.start()
    wait_for(lambda: len(asked) == 2)
    assert [q.identity for q in asked] == ["dev", "prodadmin"]
    asked[0].answer(Decision.SESSION)
    dev.join()
    assert results == {"dev": "served"} and prod.is_alive()  # prodadmin still waits
    asked[1].answer(Decision.ONCE)
    prod.join()
    assert results == {"dev": "served", "prodadmin": "served"}
    assert consent.granted("devvm", "dev") and not consent.granted("devvm", "prodadmin")
    [host] = consent.hosts()
    assert host.identities == (("dev", Standing.SESSION),)


def test_deny_is_remembered_and_questions_are_rate_limited(consent: Consent) -> None:
    asked = answer_with(consent, Decision.DENY)
    with pytest.raises(ConsentRefused):
        consent.check("h", "dev", None)
    for identity in ("dev", "prod", "other"):  # refused at once, nobody asked
        with pytest.raises(ConsentRefused, match="refuses requests forwarded from h until"):
            consent.check("h", identity, None)
    assert len(asked) == 1
    asked = answer_with(consent, Decision.ONCE)
    for n in range(QUESTIONS_PER_HOST):
        consent.check("flood", f"id{n}", None)
    with pytest.raises(ConsentRefused) as e:
        consent.check("flood", "one-more", None)
    assert e.value.one_line().startswith("kubetray on your desktop asks no more questions about")
    assert len(asked) == QUESTIONS_PER_HOST
    consent.check("other-host", "dev", None)  # another host is asked as before
    assert len(asked) == QUESTIONS_PER_HOST + 1


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_deny_and_silence_give_one_clear_line(consent: Consent) -> None:
    answer_with(consent, Decision.DENY)
    with pytest.raises(ConsentRefused, match=r"^denied on your desktop: h wants a token as id"):
        consent.check("h", "id", None)
    asked = answer_with(consent, None)
    consent.timeout = 0.5
    start = time.monotonic()
    with pytest.raises(ConsentRefused) as e:
        consent.check("h2", "id", None)
    assert time.monotonic() - start < 2
    assert "nobody answered on your desktop within 0.5 s" in e.value.one_line()
    assert asked[0].expired and asked[0].answered.is_set()  # the app's question closes itself


def test_a_remote_host_cannot_name_desktop_programs_or_files() -> None:
    env = (
        "KUBECONFIG=/home/them/.kube/config",
        "KUBETRAY_BROWSER=evil",
        "PATH=/tmp/evil:/usr/bin",  # would choose the `az` the desktop runs for azurecli
        "KUBETRAY_NAME=x",
    )
    assert _remote_env(env) == ("KUBETRAY_NAME=x",)
    for flag in ("--browser-command=sh -c id", "--certificate-authority=/etc/shadow"):
        opts = options.resolve([flag, "--oidc-issuer-url=https://idp", "--oidc-client-id=k"])
        with pytest.raises(options.OptionsError, match="on your desktop, not on bastion"):
            _refuse_desktop_paths(opts, "bastion")
    ok = options.resolve(["--oidc-issuer-url=https://idp", "--oidc-client-id=k"])
    _refuse_desktop_paths(ok, "bastion")


def test_kubetray_ssh_hands_ssh_its_own_options_before_the_host() -> None:
    """`kubetray ssh -p 2222 me@devvm kubectl get ns`, as its --help shows: -p is ssh's."""
    from app import cli

    args = cli._ssh_args(["ssh", "-p", "2222", "-i", "key", "me@devvm", "kubectl", "get", "ns"])
    assert args is not None and not args.install_helper
    assert args.ssh_args == ["-p", "2222", "-i", "key", "me@devvm", "kubectl", "get", "ns"]
    args = cli._ssh_args(["ssh", "--install-helper", "-F", "cfg", "devvm"])
    assert args is not None and args.install_helper and args.ssh_args == ["-F", "cfg", "devvm"]
    assert cli._ssh_args(["ssh", "--help"]) is None  # argparse prints the help


def test_ssh_config_for_user_at_host_matches_the_host(capsys: pytest.CaptureFixture[str]) -> None:
    """`Host me@devvm` would never match: the block is for devvm, with User me."""
    import argparse

    from app.cli_remote import cmd_ssh_config

    cmd_ssh_config(argparse.Namespace(host="me@devvm", user=None))
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert "Host devvm" in lines and "User me" in lines
    assert any(line.startswith("RemoteForward /tmp/kubetray-me.sock ") for line in lines)


def test_a_forwarded_socket_without_the_variable_is_named_in_the_helper_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host whose sshd drops SetEnv, kubetray-exec says to set KUBETRAY_AGENT_SOCK,
    not to install kubetray."""
    from exec_helper import agent_start, paths
    from exec_helper.errors import HelperError

    monkeypatch.setattr(paths, "FORWARD_PATH", str(tmp_path / "kubetray-{user}.sock"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KUBETRAY_AGENT_COMMAND", raising=False)
    monkeypatch.setattr(agent_start.sys, "argv", [str(tmp_path / "kubetray-exec")])
    with pytest.raises(HelperError, match="kubetray program was not found"):
        agent_start.agent_command()
    import pwd

    forwarded = tmp_path / f"kubetray-{pwd.getpwuid(os.getuid()).pw_name}.sock"
    forwarded.touch()
    with pytest.raises(HelperError) as e:
        agent_start.agent_command()
    assert f"KUBETRAY_AGENT_SOCK={forwarded}" in str(e.value)


def test_a_deny_settles_the_hosts_other_open_questions(consent: Consent) -> None:
    """Deny on one identity's question refuses the host: the questions still open about its
    other identities close, and their requests hear that the host is refused, not that the
    person denied a question they never answered. Another host's question stays open."""
    asked: list[Question] = []
    consent.ask = asked.append
    results: dict[str, str] = {}

    def call(host: str, identity: str) -> None:
        try:
            consent.check(host, identity, None)
            results[f"{host} {identity}"] = "served"
        except ConsentRefused as e:
            results[f"{host} {identity}"] = e.one_line()

    threads = [
        threading.Thread(target=call, args=args)
        for args in (("devvm", "dev"), ("devvm", "prodadmin"), ("bastion", "dev"))
    ]
    for n, t in enumerate(threads):
        t.start()
        wait_for(lambda n=n: len(asked) == n + 1)  # type: ignore[misc]
    asked[0].answer(Decision.DENY)
    threads[0].join()
    threads[1].join()
    assert asked[1].answered.is_set() and asked[1].decision is Decision.DENY
    assert results["devvm dev"].startswith("denied on your desktop: devvm wants a token as dev")
    assert results["devvm prodadmin"].startswith(
        "kubetray on your desktop refuses requests forwarded from devvm until its agent stops"
    )
    assert threads[2].is_alive() and not asked[2].answered.is_set()
    asked[2].answer(Decision.ONCE)
    threads[2].join()
    assert results["bastion dev"] == "served"


def test_kubetray_remote_deny_settles_the_hosts_open_questions(consent: Consent) -> None:
    asked: list[Question] = []
    consent.ask = asked.append
    refused: list[str] = []

    def call() -> None:
        with pytest.raises(ConsentRefused) as e:
            consent.check("devvm", "dev", None)
        refused.append(e.value.one_line())

    waiter = threading.Thread(target=call)
    waiter.start()
    wait_for(lambda: len(asked) == 1)
    consent.deny("devvm")
    waiter.join()
    [line] = refused
    assert line.startswith("kubetray on your desktop refuses requests forwarded from devvm;")
    assert "kubetray remote allow devvm dev" in line
