"""kubetray's own files when it cannot use them: never replaced, said in one sentence (naming
the file or directory and the remedy) by kubetray-exec (kubectl's line), status and doctor, and
every other command still works (issue 38: "Nothing lost")."""

import json
import os
from pathlib import Path

import pytest

from tests.peers import KubetrayEnv

PERSON = ("--oidc-issuer-url", "https://idp.example", "--oidc-client-id", "kubectl")
"""A login kubetray-exec cannot show here: it records the identity and fails in one line."""


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if not line.startswith("kubetray-exec: started")]
    assert len(lines) == 1, text
    for raw in ("Traceback", "Error:", "Errno", "failed: "):
        assert raw not in lines[0], lines[0]
    return lines[0]


def doctor_fails_on(kt: KubetrayEnv, *expected: str) -> str:
    done = kt.kubetray("doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("FAIL  kubetray's files"))
    for text in expected:
        assert text in done.stdout, done.stdout
    return line


def test_a_truncated_index_is_kept_aside_and_said(kt: KubetrayEnv) -> None:
    kt.config.mkdir(parents=True)
    index = kt.config / "identities.json"
    damaged = b'{"version": 2, "identities": {"k": {"name": "prod", "sett'
    index.write_bytes(damaged)

    line = one_line(kt.run_helper(*PERSON).stderr)
    assert "login required for kubectl@idp.example" in line
    assert "identities.json could not be read (it is not JSON) and was kept as" in line
    (aside,) = kt.config.glob("identities.json.unreadable-*")
    assert aside.read_bytes() == damaged  # every byte the person had
    status = kt.kubetray("status")
    assert f"files: identities.json could not be read (it is not JSON) and was kept as {aside}" in (
        status.stdout
    )
    assert "take back what you need from the copy, then delete it" in status.stdout
    assert "kubectl@idp.example" in status.stdout  # it goes on working
    doctor_fails_on(kt, f"was kept as {aside}", "fix: take back what you need from the copy")
    # kubectl hears it once per agent, not on every call
    assert "could not be read" not in kt.run_helper(*PERSON).stderr
    aside.unlink()  # the person took what they needed
    assert "files:" not in kt.kubetray("status").stdout
    assert kt.kubetray("doctor").stdout.count("ok    kubetray's files") == 1


@pytest.mark.parametrize("file", ["stored.json", "remote-hosts.json", "identities.json"])
def test_garbage_in_a_file_kubetray_writes_is_kept_aside(kt: KubetrayEnv, file: str) -> None:
    kt.config.mkdir(parents=True)
    garbage = b"\xff\xfe not json at all"
    (kt.config / file).write_bytes(garbage)
    status = kt.kubetray("status")
    assert status.returncode == 0, status.stderr
    (aside,) = kt.config.glob(f"{file}.unreadable-*")
    assert aside.read_bytes() == garbage
    assert f"files: {file} could not be read (it is not JSON) and was kept as {aside}" in (
        status.stdout
    )
    assert "Traceback" not in status.stderr


def test_a_newer_index_is_left_alone_and_stop_still_stops(kt: KubetrayEnv) -> None:
    kt.config.mkdir(parents=True)
    index = kt.config / "identities.json"
    newer = json.dumps(
        {"version": 3, "kubetray": "9.0.0", "identities": {"x": {"name": "prod"}}}
    ).encode()
    index.write_bytes(newer)

    line = one_line(kt.run_helper(*PERSON).stderr)
    assert "login required for kubectl@idp.example" in line  # still served, from memory
    both = "was written by kubetray 9.0.0 (format 3); this kubetray"
    assert both in line and "reads up to format 2" in line and "identities.json" in line
    status = kt.kubetray("status")
    assert status.returncode == 0 and both in status.stdout, status.stdout + status.stderr
    assert "NewerFormat" not in status.stdout + status.stderr
    doctor_fails_on(kt, both, "fix: ")
    login = kt.kubetray("login", "prod")  # a name only that file knows: the cause, not a typo
    assert login.returncode == 1, login.stderr
    assert "error: no identity to log in to named 'prod': " in login.stderr and both in (
        login.stderr
    )
    pid = kt.agent_pid()
    stop = kt.kubetray("stop")
    assert stop.returncode == 0 and f"stopped kubetray (pid {pid})" in stop.stdout, stop.stderr
    assert index.read_bytes() == newer  # never rewritten
    assert not list(kt.config.glob("identities.json.unreadable-*"))


def test_an_index_that_cannot_be_read_is_never_written_over(kt: KubetrayEnv) -> None:
    """A directory where the file should be (root reads through permissions; see below)."""
    kt.config.mkdir(parents=True)
    index = kt.config / "identities.json"
    index.mkdir()
    (index / "mine").write_text("keep")
    line = one_line(kt.run_helper(*PERSON).stderr)
    assert "login required for kubectl@idp.example" in line
    assert f"kubetray cannot read {index} (it is a directory)" in line
    status = kt.kubetray("status")
    assert f"files: kubetray cannot read {index} (it is a directory)" in status.stdout
    doctor_fails_on(kt, f"fix: move the directory {index} away, then try again")
    assert (index / "mine").read_text() == "keep"


def test_stored_credentials_are_served_while_their_index_cannot_be_read(
    kt: KubetrayEnv, keyring_session: None
) -> None:
    kt.store_token("deploy", "stored-token-1")
    stored = kt.config / "stored.json"
    kept = stored.read_bytes()
    stored.rename(kt.config / "stored.mine")
    stored.mkdir()  # something the person put there
    served = kt.run_helper("--stored", "deploy")
    assert served.returncode == 0 and "stored-token-1" in served.stdout
    line = one_line(served.stderr)  # kubectl hears why, once
    assert f"kubetray cannot read {stored} (it is a directory)" in line
    status = kt.kubetray("status")
    assert status.returncode == 0 and f"files: kubetray cannot read {stored}" in status.stdout
    assert "deploy" in status.stdout  # the rest of status goes on
    refused = kt.kubetray("store", "other", "--token-file", str(kt.inputs() / "deploy.token"))
    assert refused.returncode == 1 and f"kubetray cannot read {stored}" in refused.stderr
    assert stored.is_dir() and (kt.config / "stored.mine").read_bytes() == kept
    stored.rmdir()
    (kt.config / "stored.mine").rename(stored)
    kt.kubetray("forget", "deploy")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its permissions")
def test_an_index_without_read_permission_is_never_written_over(kt: KubetrayEnv) -> None:
    kt.config.mkdir(parents=True)
    index = kt.config / "identities.json"
    index.write_text('{"version": 2, "identities": {}}')
    index.chmod(0o200)
    try:
        line = one_line(kt.run_helper(*PERSON).stderr)
        assert f"kubetray cannot read {index} (permission denied)" in line
        assert f"chmod u+rw {index}" in line
        assert "permission denied" in kt.kubetray("status").stdout
    finally:
        index.chmod(0o600)
    assert index.read_text() == '{"version": 2, "identities": {}}'


def _refused_everywhere(kt: KubetrayEnv, *expected: str) -> None:
    helper = kt.run_helper(*PERSON)
    assert helper.returncode == 1
    line = one_line(helper.stderr)
    for text in expected:
        assert text in line, line
    status = kt.kubetray("status")
    assert all(text in status.stdout + status.stderr for text in expected), status
    doctor_fails_on(kt, *expected)
    agent = kt.kubetray("agent", timeout=30)  # started by hand: refuses at once, in words
    assert agent.returncode == 1 and "Traceback" not in agent.stderr, agent.stderr
    assert all(text in agent.stderr for text in expected), agent.stderr
    assert kt.kubetray("stop").returncode == 0


def test_a_state_directory_under_a_file(kt: KubetrayEnv, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    kt.env["KUBETRAY_STATE_DIR"] = str(blocker / "state")
    _refused_everywhere(
        kt,
        f"kubetray cannot use {blocker}/state as its state directory ({blocker} is a file, not "
        "a directory); move that file away, or set KUBETRAY_STATE_DIR to a directory you can "
        "write",
    )
    assert blocker.read_text() == "mine"


def test_a_config_directory_under_a_file(kt: KubetrayEnv, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    kt.env["KUBETRAY_CONFIG_DIR"] = str(blocker / "config")
    _refused_everywhere(
        kt,
        f"kubetray cannot use {blocker}/config as its config directory ({blocker} is a file",
        "set KUBETRAY_CONFIG_DIR to a directory you can write",
    )
    assert blocker.read_text() == "mine"


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="no /sys here")
def test_a_state_directory_in_sys(kt: KubetrayEnv) -> None:
    kt.env["KUBETRAY_STATE_DIR"] = "/sys/kubetray"
    _refused_everywhere(
        kt,
        "kubetray cannot use /sys/kubetray as its state directory (it is on a read-only file "
        "system); set KUBETRAY_STATE_DIR to a directory you can write",
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '{"secret_store": "bogus"}',
            'the setting secret_store in {path} is "bogus", not one of auto, keyring, memory; '
            'set it to one of them, or remove the line "secret_store"',
        ),
        (
            '{"refresh_margin_seconds": "soon"}',
            'the setting refresh_margin_seconds in {path} is "soon", not a whole number',
        ),
        ('{"start_at_login": tru', "{path} is not valid JSON at line 1 column 20"),
    ],
)
def test_settings_it_cannot_use_are_said_and_kept(kt: KubetrayEnv, text: str, said: str) -> None:
    kt.config.mkdir(parents=True)
    settings = kt.config / "settings.json"
    settings.write_text(text)
    expected = said.format(path=settings)
    helper = kt.run_helper(*PERSON)
    assert helper.returncode == 1 and expected in one_line(helper.stderr), helper.stderr
    status = kt.kubetray("status")
    assert f"files: {expected}" in status.stdout, status.stdout + status.stderr
    # Not "kubetray-exec starts it": nothing can start it until the file is mended.
    assert "agent: not running, and it cannot start until" in status.stdout, status.stdout
    doctor_fails_on(kt, expected.split("; ")[0])
    doctor = kt.kubetray("doctor")
    assert "FAIL  agent: not running, and it cannot start" in doctor.stdout, doctor.stdout
    agent = kt.kubetray("agent")  # the agent itself, started by hand
    assert agent.returncode != 0 and expected.split("; ")[0] in agent.stderr, agent.stderr
    assert "Traceback" not in agent.stderr
    assert settings.read_text() == text  # neither guessed around nor rewritten
