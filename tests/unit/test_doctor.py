"""doctor's keyring check reports a failing disk under the keyring as one failed check, and
the run goes on to the checks after it."""

import errno

from app.doctor import check_keyring
from app.store.memory_store import MemorySecretStore


class FullDisk(MemorySecretStore):
    def set(self, key: str, value: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/home/u/.config/kubetray/secrets")


def test_a_disk_error_under_the_keyring_is_a_failed_check_not_the_end_of_doctor() -> None:
    check = check_keyring(FullDisk)
    assert not check.ok
    assert "No space left on device" in check.detail and "secrets" in check.detail
    assert check_keyring(MemorySecretStore).ok


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
