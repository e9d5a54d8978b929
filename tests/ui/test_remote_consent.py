"""An SSH host's first request in the app (pytest-qt): the person is asked, and the answer
holds as chosen. The forward's local end is a real process named ``ssh`` (tests/sshrelay.py),
so the agent tells the request by its peer exactly as it does with OpenSSH."""

import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from app import compose
from app.broker.broker import utcnow
from app.broker.consent import QUESTIONS_PER_HOST
from app.model import Standing
from app.settings import Settings
from app.static_credentials import token_credential
from app.store.memory_store import MemorySecretStore
from app.ui.controller import TrayController
from app.ui.tray import TrayApp
from tests.peers import ROOT, V1, KubetrayEnv
from tests.ssh_standin import ssh_relay

TOKEN = "remote-test-token-1234"
DEV_TOKEN = "remote-dev-token-5678"


@pytest.fixture
def app(qtbot: QtBot, kt: KubetrayEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[TrayApp]:
    """The app's parts in this process: the IPC server on its thread, the tray on Qt's."""
    for key, value in kt.env.items():
        if key.startswith(("KUBETRAY_", "XDG_")):
            monkeypatch.setenv(key, value)
    store = MemorySecretStore()
    now = datetime.now(UTC)
    compose.stored_credentials(store).save(token_credential("prod", TOKEN, "test", now), now)
    compose.stored_credentials(store).save(token_credential("dev", DEV_TOKEN, "test", now), now)
    parts = compose.agent(store=store)
    parts.server.listener.open()
    import threading

    threading.Thread(target=parts.server.serve_forever, daemon=True).start()
    view = TrayApp(TrayController(parts.core, Settings(), utcnow), tray=True)
    yield view
    view.shutdown()
    parts.server.shutdown()
    parts.server.listener.close()
    parts.stop()
    (kt.runtime / "agent.lock").unlink()  # names this process: kt must not stop it
    qtbot.wait(50)


def remote_kubectl(
    kt: KubetrayEnv, forwarded: Path, identity: str = "prod", *args: str
) -> subprocess.Popen[str]:
    """kubetray-exec on the 'remote host': only KUBETRAY_AGENT_SOCK leads to the agent.
    ``args``: its arguments instead of ``--stored IDENTITY``."""
    argv = " ".join(shlex.quote(a) for a in args) if args else f"--stored {identity}"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(kt.home),
        "KUBERNETES_EXEC_INFO": V1,
        "KUBETRAY_AGENT_SOCK": str(forwarded),
        "KUBETRAY_RUNTIME_DIR": str(kt.runtime) + "-remote",  # where a local agent would be
    }
    return subprocess.Popen(  # through a shell: a new parent each time, as for kubectl
        ["/bin/sh", "-c", f"{sys.executable} -m exec_helper {argv}; exit $?"],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_each_identity_a_host_asks_for_waits_for_the_person(
    qtbot: QtBot, app: TrayApp, kt: KubetrayEnv, tmp_path: Path
) -> None:
    consent = app.controller.broker.consent
    assert consent is not None
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="devvm") as (sock, sent):
        # The question names the host, the identity, and what each answer grants.
        proc = remote_kubectl(kt, sock, "dev")
        qtbot.waitUntil(lambda: "devvm as dev" in app.consent_dialogs, timeout=15000)
        dialog = app.consent_dialogs["devvm as dev"]
        assert dialog.windowTitle() == "kubetray: devvm asks for a token as dev"
        said = " ".join(label.text() for label in dialog.findChildren(QLabel))
        assert "<b>devvm</b> wants a token as <b>dev</b>" in said
        assert "For this session: devvm may have tokens as dev until kubetray stops" in said
        assert "devvm is asked about any other identity" in said
        # Allow for this session: served now, and later without a question.
        dialog.buttons["Allow for this session"].click()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and DEV_TOKEN in out, err
        proc = remote_kubectl(kt, sock, "dev")
        out, _ = proc.communicate(timeout=30)
        assert DEV_TOKEN in out and list(app.consent_dialogs) == ["devvm as dev"]

        # Another identity from the same host: its own question, not dev's grant.
        proc = remote_kubectl(kt, sock, "prod")
        qtbot.waitUntil(lambda: "devvm as prod" in app.consent_dialogs, timeout=15000)
        assert app.consent_dialogs["devvm as prod"].isVisible()
        app.consent_dialogs["devvm as prod"].buttons["Deny"].click()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1 and out == ""
        lines = [line for line in err.splitlines() if not line.startswith("Asking on your")]
        assert lines == ["denied on your desktop: devvm wants a token as prod, over SSH"], err
        assert "Asking on your desktop whether devvm may have a token as prod" in err

        # Deny holds for the host until the agent stops: refused at once, nobody asked.
        for identity in ("prod", "dev"):
            proc = remote_kubectl(kt, sock, identity)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 1 and out == "" and "Asking" not in err
            assert "refuses requests forwarded from devvm until its agent stops" in err
        assert len(app.consent_dialogs) == 2

        # What crossed the forward: the ExecCredentials and messages, nothing else secret.
        assert sent.read_bytes().count(DEV_TOKEN.encode()) == 2
        assert TOKEN.encode() not in sent.read_bytes()

    # The record and the status say where the calls came from.
    calls = app.controller.calls(10)
    assert {c.caller.remote for c in calls} == {"devvm"}
    hosts = {h.host: str(h.standing) for h in app.controller.remote_hosts()}
    assert hosts == {"devvm": "denied"}


def test_allow_once_serves_only_the_identity_its_question_named(
    qtbot: QtBot, app: TrayApp, kt: KubetrayEnv, tmp_path: Path
) -> None:
    """dev, then prod while dev's question is open: two questions; "Allow once" on dev's
    serves dev, and prod waits for its own answer."""
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="devvm") as (sock, _):
        dev = remote_kubectl(kt, sock, "dev")
        qtbot.waitUntil(lambda: "devvm as dev" in app.consent_dialogs, timeout=15000)
        prod = remote_kubectl(kt, sock, "prod")
        qtbot.waitUntil(lambda: "devvm as prod" in app.consent_dialogs, timeout=15000)
        app.consent_dialogs["devvm as dev"].buttons["Allow once"].click()
        out, err = dev.communicate(timeout=30)
        assert dev.returncode == 0 and DEV_TOKEN in out and TOKEN not in out, err
        assert prod.poll() is None and app.consent_dialogs["devvm as prod"].isVisible()
        app.consent_dialogs["devvm as prod"].buttons["Allow once"].click()
        out, err = prod.communicate(timeout=30)
        assert prod.returncode == 0 and TOKEN in out, err
        # Once is once: the next request asks again.
        again = remote_kubectl(kt, sock, "dev")
        qtbot.waitUntil(lambda: app.consent_dialogs["devvm as dev"].isVisible(), timeout=15000)
        app.consent_dialogs["devvm as dev"].buttons["Always allow"].click()
        out, err = again.communicate(timeout=30)
        assert again.returncode == 0 and DEV_TOKEN in out, err
    hosts = {h.host: h.identities for h in app.controller.remote_hosts()}
    assert hosts == {"devvm": (("dev", Standing.ALWAYS),)}


def test_a_flood_of_identities_gets_a_few_questions_and_fails_fast(
    qtbot: QtBot, app: TrayApp, kt: KubetrayEnv, tmp_path: Path
) -> None:
    """A host asking for identity after identity (new issuers with 4 KB client ids and a
    --name, unknown stored credentials): QUESTIONS_PER_HOST questions, the rest refused at once
    in one line. One Deny refuses the host and closes its other questions; nothing is made,
    renamed or written for any of them."""
    identities = kt.config / "identities.json"
    before = identities.read_bytes() if identities.exists() else None
    known = sorted(i.name for i in app.controller.identities())
    attacker = [
        (
            "prodadmin",
            "--oidc-issuer-url=https://login.attacker.invalid",
            f"--oidc-client-id=client-{n}-" + "x" * 4000,
            "--name=prod-admin",
        )
        for n in range(8)
    ]
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="devvm") as (sock, _):
        procs = [remote_kubectl(kt, sock, *r) for r in attacker]  # each its own identity
        procs += [remote_kubectl(kt, sock, f"prodadmin-{n}") for n in range(12)]
        qtbot.waitUntil(
            lambda: sum(p.poll() is not None for p in procs) >= 20 - QUESTIONS_PER_HOST,
            timeout=30000,
        )
        asked = [k for k in app.consent_dialogs if k.startswith("devvm as ")]
        finished = {p: p.communicate() for p in procs if p.poll() is not None}
        assert len(asked) == QUESTIONS_PER_HOST, (asked, finished)
        assert len(finished) == 20 - QUESTIONS_PER_HOST, finished
        for p, (_out, err) in finished.items():
            assert p.returncode == 1
            [line] = err.splitlines()
            assert line.startswith(
                "kubetray on your desktop asks no more questions about devvm for now"
            ), err
        app.consent_dialogs[asked[0]].buttons["Deny"].click()  # the host's other questions
        for key in asked[1:]:  # close with it: one Deny refuses the host
            qtbot.waitUntil(lambda k=key: not app.consent_dialogs[k].isVisible(), timeout=5000)
        lines = []
        for p in procs:
            if p not in finished:
                _out, err = p.communicate(timeout=30)
                assert p.returncode == 1
                lines += [line for line in err.splitlines() if not line.startswith("Asking")]
        assert len(lines) == QUESTIONS_PER_HOST
        assert sum(line.startswith("denied on your desktop: devvm wants") for line in lines) == 1
        assert sum(
            line.startswith("kubetray on your desktop refuses requests forwarded from devvm until")
            for line in lines
        ) == (QUESTIONS_PER_HOST - 1)
        for later in (  # denied: refused without a question
            remote_kubectl(kt, sock, "dev"),
            remote_kubectl(kt, sock, "", "--stored", "dev", "--name=renamed"),
        ):
            out, err = later.communicate(timeout=30)
            assert out == "" and "refuses requests forwarded from devvm until its agent" in err
    assert (identities.read_bytes() if identities.exists() else None) == before
    assert sorted(i.name for i in app.controller.identities()) == known
    assert len(app.consent_dialogs) == QUESTIONS_PER_HOST


def test_an_unanswered_question_times_out_with_one_line(
    qtbot: QtBot, app: TrayApp, kt: KubetrayEnv, tmp_path: Path
) -> None:
    consent = app.controller.broker.consent
    assert consent is not None
    consent.timeout = 1.0
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="bastion") as (sock, _):
        proc = remote_kubectl(kt, sock)
        qtbot.waitUntil(lambda: "bastion as prod" in app.consent_dialogs, timeout=15000)
        assert app.consent_dialogs["bastion as prod"].isVisible()
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=15000)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and out == ""
    assert "nobody answered on your desktop within 1 s whether bastion may have a token" in err
    qtbot.waitUntil(lambda: not app.consent_dialogs["bastion as prod"].isVisible(), timeout=5000)


def test_a_forward_serves_credentials_only(kt: KubetrayEnv, app: TrayApp, tmp_path: Path) -> None:
    """kubetray stop, status or logout from the remote host are refused: the forward is not a
    remote control for the desktop."""
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock")) as (sock, _):
        env = {**kt.env, "KUBETRAY_AGENT_SOCK": str(sock)}
        for command in (["stop"], ["status"], ["logout", "prod"]):
            done = subprocess.run(
                [sys.executable, "-m", "app", *command],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert done.returncode != 0, command
            assert "over an SSH forward kubetray serves credentials only" in done.stderr
    assert kt.agent_pid() is not None  # still running
