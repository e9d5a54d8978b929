"""doctor: a failing disk under the keyring is one failed check and the run goes on; each
distinct helper command is started once, however many users run it; what the agent cannot
renew or save for an identity is a failed check."""

import errno
from pathlib import Path

from app import __version__
from app.doctor import check_helpers, check_keyring, kubetray_users
from app.kubeconfig.view import View
from app.store.memory_store import MemorySecretStore


class FullDisk(MemorySecretStore):
    def set(self, key: str, value: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/home/u/.config/kubetray/secrets")


def test_a_disk_error_under_the_keyring_is_a_failed_check_not_the_end_of_doctor() -> None:
    check = check_keyring(FullDisk)
    assert not check.ok
    assert "No space left on device" in check.detail and "secrets" in check.detail
    assert check_keyring(MemorySecretStore).ok


def _helper(where: Path, runs: Path) -> str:
    """A kubetray-exec stand-in that notes each start and answers --version as the real one."""
    where.mkdir()
    path = where / "kubetray-exec"
    path.write_text(f'#!/bin/sh\necho started >> "{runs}"\necho "kubetray-exec {__version__}"\n')
    path.chmod(0o755)
    return str(path)


def test_doctor_starts_each_distinct_helper_once_and_names_the_users_of_each(
    tmp_path: Path,
) -> None:
    """A platform engineer's kubeconfig: many users, one kubetray-exec (issue 33: doctor
    started it once per user, 8 s for 500)."""
    runs = tmp_path / "runs"
    shared, other = _helper(tmp_path / "a", runs), _helper(tmp_path / "b", runs)
    missing = str(tmp_path / "gone" / "kubetray-exec")
    users = [(f"bot-{i:02d}", shared) for i in range(30)]
    users += [("solo", other), ("old-1", missing), ("old-2", missing)]
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\nusers:\n"
        + "".join(
            f"- name: {name}\n  user:\n    exec:\n      apiVersion: "
            f"client.authentication.k8s.io/v1\n      command: {command}\n"
            f"      args: [--stored, {name}]\n"
            for name, command in users
        )
    )
    checks = list(check_helpers(list(kubetray_users(View.load([str(config)])))))
    assert len(runs.read_text().splitlines()) == 2
    assert [(c.name, c.ok) for c in checks] == [
        ("helper of 30 users (bot-00, bot-01 … and 28 more)", True),
        ("helper of user solo", True),
        ("helper of users old-1 and old-2", False),
    ]
    assert f"{missing} does not exist" in checks[2].detail


def test_an_agent_of_another_version_is_a_warning_with_the_restart() -> None:
    from app.doctor import check_agent
    from exec_helper.version import VERSION

    def status(version: str, **more: object) -> dict[str, object]:
        return {"agent": {"pid": 42, "version": version, "build": "b-1", **more}}

    same = check_agent(lambda: status(VERSION))
    assert same.ok and not same.warn and f"kubetray {VERSION}, build b-1" in same.detail
    older = check_agent(
        lambda: status("0.1.0", restart={"reason": "x", "waits_for": "the login to prod"})
    )
    assert older.ok and older.warn and older.remedy and "kubetray restart" in older.remedy
    assert f"this kubetray is {VERSION}: it restarts into it once the login to prod" in older.detail


def test_identities_the_agent_cannot_renew_or_save_are_failed_checks() -> None:
    from app.doctor import check_identities

    status = {
        "identities": [
            {"name": "ok", "state": "ready"},
            {
                "name": "down",
                "state": "ready",
                "refresh_error": "nothing answers at idp:443 (connection refused); check ...",
            },
            {
                "name": "refused",
                "state": "needs login",
                "refresh_error": "the provider refused the refresh token (invalid_grant)",
            },
            {"name": "locked", "state": "ready", "store_error": "the OS keyring is locked"},
        ]
    }
    checks = list(check_identities(lambda: status))
    assert [(c.name, c.ok) for c in checks] == [
        ("identity down", False),
        ("identity refused", False),
        ("identity locked", False),
    ]
    assert checks[0].detail.startswith("cannot refresh its token: nothing answers")
    assert checks[1].remedy == "run: kubetray login refused"
    assert "in memory only: the OS keyring is locked" in checks[2].detail


def test_a_provider_without_verified_tls_is_a_warning_that_names_the_risk() -> None:
    """kubetray takes an http issuer and --insecure-skip-tls-verify as kubelogin does (the
    kubeconfig keeps working), and doctor says what that exposes; a loopback http issuer (a
    provider on this machine, a port-forward) is not a warning."""
    from datetime import UTC, datetime

    from app.oidc.settings import OIDCSettings
    from app.providers.oidc import check_provider

    def first(issuer: str, **more: object):  # type: ignore[no-untyped-def]
        settings = OIDCSettings(issuer=issuer, client_id="k", **more)  # type: ignore[arg-type]
        return next(check_provider(settings, lambda: datetime.now(UTC)))

    plain = first("http://dex.corp.invalid")
    assert plain.ok and plain.warn and "unencrypted" in plain.detail
    assert "https" in (plain.remedy or "")
    unchecked = first("https://dex.corp.invalid", insecure=True)
    assert unchecked.ok and unchecked.warn and "not checked" in unchecked.detail
    local = first("http://127.0.0.1:9")  # nothing listens: the reachability check, not a warning
    assert not local.warn and not local.ok


def test_doctor_says_where_the_agent_keeps_tokens_and_why() -> None:
    from app.doctor import check_tokens

    def agent(**facts: object) -> list[tuple[bool, str, str | None]]:
        checks = list(check_tokens(lambda: {"agent": {"pid": 1, **facts}}))
        return [(c.warn, c.detail, c.remedy) for c in checks]

    [(warn, detail, remedy)] = agent(
        store="memory", store_reason="there is no D-Bus session bus, so no Secret Service"
    )
    assert warn and detail.startswith("in memory only (there is no D-Bus session bus")
    assert "ends when the agent stops" in detail and remedy and "Secret Service" in remedy
    [(warn, detail, remedy)] = agent(store="memory")
    assert warn and '"secret_store" is "memory"' in detail
    [(warn, detail, _)] = agent(store="keyring", store_journal="off: its header is damaged")
    assert warn and "token journal is off (its header is damaged)" in detail
    [(warn, detail, _)] = agent(store="keyring", store_journal="on")
    assert not warn and "token journal first" in detail
    assert agent() == []  # an agent that says nothing of its store (an older one)
