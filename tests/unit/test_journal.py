"""The token journal (app/store/journal.py): what a killed agent left comes back at the next
start, and nothing in the file can be read without the keyring's key."""

import json
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.errors import StoreUnavailable
from app.store import journal as jr
from app.store.choice import KEYRING, StoreChoice, TokenStore
from app.store.journal import TokenJournal
from app.store.memory_store import MemorySecretStore

SECRET = b'{"refresh_token": "rt-SECRET-1", "access_token": "at-SECRET-1"}'
NEWER = b'{"refresh_token": "rt-SECRET-2", "access_token": "at-SECRET-2"}'


def killed_after_record(path: Path, keyring: MemorySecretStore, *values: bytes | None) -> None:
    """An agent that recorded ``values`` for oidc/a and was killed before its keyring write."""
    j = TokenJournal(str(path), keyring)
    j.open()
    for value in values:
        assert j.record("oidc/a", value)
    j.close()


class Refusing(MemorySecretStore):
    """A keyring holding what ``source`` holds, that refuses the writes ``refuses(key, value)``
    names (a timeout, a full disk for a sealed file)."""

    def __init__(
        self, source: MemorySecretStore, refuses: Callable[[str, bytes], bool] = lambda k, v: False
    ) -> None:
        super().__init__()
        for k, v in source.items():
            super().set(k, v)
        self.refuses = refuses

    def set(self, key: str, value: bytes) -> None:
        if self.refuses(key, value):
            raise StoreUnavailable("the OS keyring did not answer within 15 s")
        super().set(key, value)


def test_a_record_the_keyring_lacks_is_replayed_and_the_file_cut_back(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    killed_after_record(path, keyring, NEWER)
    data = path.read_bytes()
    assert b"SECRET" not in data and b"rt-" not in data  # never a plaintext token
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    TokenJournal(str(path), keyring).open()
    assert keyring.get("oidc/a") == NEWER  # the newest record wins over the older keyring copy
    assert path.read_bytes() == data[: data.index(b"\n") + 1]  # compacted to the header


def test_records_the_keyring_has_are_dropped_without_a_write(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    killed_after_record(path, keyring, NEWER)
    keyring.set("oidc/a", NEWER)

    class Counting(MemorySecretStore):
        writes = 0

        def set(self, key: str, value: bytes) -> None:
            self.writes += 1
            super().set(key, value)

    counting = Counting()
    for k, v in keyring.items():
        MemorySecretStore.set(counting, k, v)
    TokenJournal(str(path), counting).open()
    assert counting.writes == 0


def test_settled_records_leave_only_the_header(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    j = TokenJournal(str(path), keyring)
    j.open()
    head = path.stat().st_size
    assert j.record("oidc/a", SECRET) and j.record("oidc/b", NEWER)
    j.settled("oidc/a", SECRET)
    assert path.stat().st_size > head  # b is not in the keyring yet
    j.settled("oidc/b", b"an older value")  # an older write settles nothing
    assert path.stat().st_size > head
    j.settled("oidc/b", NEWER)
    assert path.stat().st_size == head


def test_a_torn_last_record_is_ignored_and_the_rest_kept(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    j = TokenJournal(str(path), keyring)
    j.open()
    assert j.record("oidc/a", SECRET)
    assert j.record("oidc/b", SECRET)
    j.close()
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # killed in the middle of b's write
    TokenJournal(str(path), keyring).open()
    assert keyring.get("oidc/a") == SECRET
    assert keyring.get("oidc/b") is None


def test_a_logout_recorded_is_replayed_as_a_delete(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    killed_after_record(path, keyring, NEWER, None)
    TokenJournal(str(path), keyring).open()
    assert keyring.get("oidc/a") is None


def test_records_under_a_key_the_keyring_lost_are_set_aside_not_replaced(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    killed_after_record(path, keyring, NEWER)
    data = path.read_bytes()
    keyring.delete(jr.KEY_ITEM)  # the keyring was reset: a new key, the old one is gone
    j = TokenJournal(str(path), keyring)
    j.open()
    assert keyring.get("oidc/a") is None
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("token-journal.unreadable")]
    assert len(aside) == 1 and aside[0].read_bytes() == data
    assert j.record("oidc/a", SECRET)  # and the journal works on under the new key


def test_a_wrong_key_reads_nothing(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    killed_after_record(path, keyring, NEWER)
    with pytest.raises(KeyError):
        jr.parse(path.read_bytes(), os.urandom(32))


def test_a_newer_format_is_left_alone_and_not_written(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    doc = {"format": jr.KIND, "version": 2, "kubetray": "9.0", "key": "x"}
    data = json.dumps(doc).encode() + b"\n" + b"\x00\x00\x00\x40" + os.urandom(64)
    path.write_bytes(data)
    j = TokenJournal(str(path), keyring)
    j.open()
    assert j.off and "format 2" in j.off and "9.0" in j.off
    assert not j.record("oidc/a", SECRET)
    assert path.read_bytes() == data


def test_the_header_names_its_format(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    TokenJournal(str(path), keyring).open()
    doc = json.loads(path.read_bytes().split(b"\n")[0])
    assert doc["format"] == jr.KIND and doc["version"] == 1 and doc["kubetray"]


def test_an_old_key_is_rotated_when_the_journal_is_empty(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    later = datetime.now(UTC) + jr.ROTATE_AFTER + timedelta(days=1)
    TokenJournal(str(path), keyring).open()
    first = keyring.get(jr.KEY_ITEM)
    killed_after_record(path, keyring, NEWER)
    j = TokenJournal(str(path), keyring, clock=lambda: later)
    j.open()
    assert keyring.get(jr.KEY_ITEM) != first
    assert keyring.get("oidc/a") == NEWER  # replayed under the old key first
    assert j.record("oidc/b", SECRET)
    j.close()
    keyring.delete("oidc/b")
    TokenJournal(str(path), keyring).open()
    assert keyring.get("oidc/b") == SECRET


def test_the_token_store_replays_before_its_first_read(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    killed_after_record(path, keyring, NEWER)
    store = TokenStore(StoreChoice(keyring, KEYRING, None), keyring, journal=str(path))  # type: ignore[arg-type]
    assert store.get("oidc/a") == NEWER
    store.record("oidc/a", SECRET)
    store.set("oidc/a", SECRET)
    assert path.stat().st_size == path.read_bytes().index(b"\n") + 1


def test_a_replay_the_keyring_refused_is_what_the_store_reads(tmp_path: Path) -> None:
    """The keyring took the journal's key but refused the replayed tokens (a timeout, a full
    disk for the sealed file): the store reads the journal's newest tokens, never the keyring's
    older copy, whose refresh token the provider has already rotated away."""
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    killed_after_record(path, keyring, NEWER)

    refusing = Refusing(keyring, lambda k, v: k != jr.KEY_ITEM)
    store = TokenStore(StoreChoice(refusing, KEYRING, None), refusing, journal=str(path))  # type: ignore[arg-type]
    assert store.get("oidc/a") == NEWER
    assert store.journal is not None and store.journal.state() == "on (1 unsaved)"
    refusing.refuses = lambda k, v: False
    store.set("oidc/a", NEWER)  # the next save puts it right, and the journal is cut back
    assert refusing.get("oidc/a") == NEWER and store.get("oidc/a") == NEWER
    assert path.stat().st_size == path.read_bytes().index(b"\n") + 1


NEWEST = b'{"refresh_token": "rt-SECRET-3", "access_token": "at-SECRET-3"}'


def no_new_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk: no file can be written anew (the journal's rewrite), though one can still be
    cut and written where its freed bytes were."""

    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jr.atomic_file, "write", full)


def test_a_disk_full_at_start_never_brings_replayed_tokens_back_over_newer_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay reached the keyring but the journal could not be rewritten (off): its file is
    cut in place, so the next start does not write the replayed tokens over what the keyring
    got since (their refresh token was rotated away by then)."""
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    killed_after_record(path, keyring, NEWER)
    with monkeypatch.context() as m:
        no_new_files(m)
        store = TokenStore(StoreChoice(keyring, KEYRING, None), keyring, journal=str(path))  # type: ignore[arg-type]
        assert store.get("oidc/a") == NEWER
        assert store.journal is not None and store.journal.state().startswith("off: cannot write")
        store.record("oidc/a", NEWEST)  # a refresh while the disk is full
        store.set("oidc/a", NEWEST)
    assert path.stat().st_size == path.read_bytes().index(b"\n") + 1
    TokenJournal(str(path), keyring).open()  # the next start, with room on the disk
    assert keyring.get("oidc/a") == NEWEST


def test_what_the_keyring_refused_with_the_journal_off_is_read_until_newer_tokens_are_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    keyring.set("oidc/b", SECRET)
    j = TokenJournal(str(path), keyring)
    j.open()
    assert j.record("oidc/a", NEWER) and j.record("oidc/b", NEWER)
    j.close()  # killed before either keyring write

    refusing = Refusing(keyring, lambda k, v: (k, v) == ("oidc/a", NEWER))
    with monkeypatch.context() as m:
        no_new_files(m)
        store = TokenStore(StoreChoice(refusing, KEYRING, None), refusing, journal=str(path))  # type: ignore[arg-type]
        assert store.get("oidc/a") == NEWER  # refused: the journal's, kept on disk
        assert store.get("oidc/b") == NEWER  # taken by the keyring, and cut from the file
        store.record("oidc/b", NEWEST)
        store.set("oidc/b", NEWEST)
        then = Refusing(refusing)  # a kill now: the next start, on the keyring as it is
        TokenJournal(str(path), then).open()
        assert then.get("oidc/a") == NEWER  # back from the journal
        assert then.get("oidc/b") == NEWEST  # never oidc/b's older record over it
        store.record("oidc/a", NEWEST)
        store.set("oidc/a", NEWEST)
        assert store.get("oidc/a") == NEWEST  # the keyring's now: newer than the journal's
    assert path.stat().st_size == path.read_bytes().index(b"\n") + 1


def test_a_record_the_disk_refused_leaves_no_older_one_to_read_or_replay(tmp_path: Path) -> None:
    path, keyring = tmp_path / "token-journal", MemorySecretStore()
    keyring.set("oidc/a", SECRET)
    store = TokenStore(StoreChoice(keyring, KEYRING, None), keyring, journal=str(path))  # type: ignore[arg-type]
    assert store.get("oidc/a") == SECRET
    store.record("oidc/a", NEWER)  # its keyring write failed: the journal has it
    journal = store.journal
    assert journal is not None and journal._fd is not None
    os.close(journal._fd)
    journal._fd = os.open(path, os.O_RDONLY)  # the next record's write fails (EBADF)
    store.record("oidc/a", NEWEST)
    assert store.get("oidc/a") == SECRET  # the keyring's: the journal's NEWER is older than
    store.set("oidc/a", NEWEST)  # what memory holds, which goes to the keyring now
    TokenJournal(str(path), keyring).open()
    assert keyring.get("oidc/a") == NEWEST
