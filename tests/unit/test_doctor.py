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
