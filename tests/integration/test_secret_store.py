"""SecretStore contract, run against every implementation, plus the keyring's own promises."""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import StoreError
from app.store.keyring_store import INLINE_LIMIT, KeyringSecretStore
from app.store.memory_store import MemorySecretStore
from app.store.secret_store import SecretStore
from tests.peers import ROOT, KubetrayEnv, require, secret_service_available


@pytest.fixture(params=["memory", "auto-without-keyring", "keyring"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SecretStore]:
    if request.param == "memory":
        yield MemorySecretStore()
        return
    if request.param == "auto-without-keyring":
        # What `keyring` picks on a fresh headless Debian; the agent's default then keeps tokens
        # in memory: the store it uses must keep the same contract.
        import keyring.backends.fail
        import keyring.core

        from app.store import choice

        monkeypatch.setattr(keyring.core, "_keyring_backend", keyring.backends.fail.Keyring())
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path}/no-bus")
        chosen = choice.choose("auto", KeyringSecretStore(sealed_dir=str(tmp_path / "secrets")))
        assert chosen.kind == "memory" and chosen.notice == choice.MEMORY_NOTICE
        yield chosen.store
        assert not (tmp_path / "secrets").exists()  # nothing written, ever
        return
    require(secret_service_available(), "no Secret Service: run the tests with `make test`")
    yield KeyringSecretStore(sealed_dir=str(tmp_path / "secrets"))


@pytest.fixture
def key() -> str:
    return f"test/{uuid.uuid4().hex}"


def test_missing_is_none(store: SecretStore, key: str) -> None:
    assert store.get(key) is None
    assert store.delete(key) is False


@pytest.mark.parametrize("size", [1, INLINE_LIMIT, INLINE_LIMIT + 1, 4096, 64 * 1024])
def test_round_trip_and_replace(store: SecretStore, key: str, size: int) -> None:
    value = os.urandom(size)
    store.set(key, value)
    assert store.get(key) == value
    store.set(key, b"second")
    assert store.get(key) == b"second"
    assert store.delete(key) is True
    assert store.get(key) is None


def test_large_secrets_are_sealed_not_plaintext(
    tmp_path: Path, keyring_session: None, key: str
) -> None:
    store = KeyringSecretStore(sealed_dir=str(tmp_path / "secrets"))
    secret = b"-----BEGIN PRIVATE KEY-----" + b"S" * 3000
    store.set(key, secret)
    files = list((tmp_path / "secrets").iterdir())
    assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "secrets").stat().st_mode & 0o777 == 0o700
    assert b"PRIVATE KEY" not in files[0].read_bytes() and b"SSSS" not in files[0].read_bytes()
    store.set(key, b"small now")  # shrinking moves it into the item and removes the file
    assert list((tmp_path / "secrets").iterdir()) == []
    store.delete(key)


def test_a_swapped_or_damaged_sealed_file_is_refused(tmp_path: Path, keyring_session: None) -> None:
    store = KeyringSecretStore(sealed_dir=str(tmp_path / "secrets"))
    a, b = f"test/{uuid.uuid4().hex}", f"test/{uuid.uuid4().hex}"
    store.set(a, b"A" * 2000)
    store.set(b, b"B" * 2000)
    path_a = Path(store._sealed_path(a))
    path_a.write_bytes(Path(store._sealed_path(b)).read_bytes())
    with pytest.raises(StoreError, match="does not decrypt"):
        store.get(a)
    path_a.unlink()
    with pytest.raises(StoreError, match="is missing"):
        store.get(a)
    store.delete(a)
    store.delete(b)


def test_no_keyring_is_a_clear_error_and_loses_nothing(kt: KubetrayEnv, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("no-keyring-secret-token")
    env = dict(kt.env, DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent/bus")
    done = subprocess.run(
        [sys.executable, "-m", "app", "store", "x", "--token-file", str(token)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and "keyring" in lines[0]
    assert lines[1].startswith("hint: ") and "Secret Service" in lines[1]
    assert "no-keyring-secret-token" not in done.stderr + done.stdout
    assert token.read_text() == "no-keyring-secret-token"
    assert not (kt.config / "stored.json").exists()


def test_store_leaves_no_plaintext_anywhere(
    kt: KubetrayEnv, keyring_session: None, name: str, tmp_path: Path
) -> None:
    from tests.pki import CA

    ca = CA()
    client = ca.issue("scan-user")
    files = tmp_path / "in"
    files.mkdir()
    (files / "t").write_text("plaintext-scan-token-value")
    (files / "c").write_bytes(client.cert_pem)
    (files / "k").write_bytes(client.key_pem)
    assert kt.kubetray("store", name, "--token-file", str(files / "t")).returncode == 0
    assert (
        kt.kubetray(
            "store",
            name + "c",
            "--client-certificate",
            str(files / "c"),
            "--client-key",
            str(files / "k"),
        ).returncode
        == 0
    )
    done = kt.run_helper("--stored", name)
    assert done.returncode == 0
    key_body = client.key_pem.decode().splitlines()[1]
    for directory in (kt.config, kt.state, kt.home, kt.runtime):
        for path in directory.rglob("*"):
            if path.is_file() and not path.is_socket():
                data = path.read_bytes()
                assert b"plaintext-scan-token-value" not in data, path
                assert key_body.encode() not in data, path
    status = kt.kubetray("status")
    assert name in status.stdout and "plaintext-scan-token-value" not in status.stdout
    for n in (name, name + "c"):
        assert kt.kubetray("forget", n).returncode == 0
    done = kt.run_helper("--stored", name)
    assert done.returncode == 1 and f"no stored credential named '{name}'" in done.stderr


def test_store_rejects_bad_input_and_keeps_the_old_value(
    kt: KubetrayEnv, keyring_session: None, name: str, tmp_path: Path
) -> None:
    from tests.pki import CA

    good = tmp_path / "good"
    good.write_text("the-good-token")
    assert kt.kubetray("store", name, "--token-file", str(good)).returncode == 0
    bad = tmp_path / "bad"
    bad.write_text("two words\n")
    done = kt.kubetray("store", name, "--token-file", str(bad))
    assert done.returncode == 1 and "has spaces, line breaks" in done.stderr
    ca = CA()
    a, b = ca.issue("a"), ca.issue("b")
    (tmp_path / "c").write_bytes(a.cert_pem)
    (tmp_path / "k").write_bytes(b.key_pem)
    done = kt.kubetray(
        "store",
        name,
        "--client-certificate",
        str(tmp_path / "c"),
        "--client-key",
        str(tmp_path / "k"),
    )
    assert done.returncode == 1 and "does not belong to the certificate" in done.stderr
    done = kt.kubetray("store", name, "--token-file", str(tmp_path / "missing"))
    assert done.returncode == 2 and "cannot read the token file" in done.stderr
    assert "the-good-token" in kt.run_helper("--stored", name).stdout
    assert (
        kt.kubetray("store", name, "--token-file", "-", input="from-stdin-token\n").returncode == 0
    )
    assert "from-stdin-token" in kt.run_helper("--stored", name).stdout  # the agent was told
    kt.kubetray("forget", name)


def test_the_direct_secret_service_shares_its_items_with_keyring(
    keyring_session: None, name: str, tmp_path: Path
) -> None:
    """Without keyring's ~90 ms import, the same items: what kubetray wrote through keyring's
    SecretService backend before is read now, and keyring reads what kubetray writes."""
    import keyring.backends.SecretService as through_keyring

    from app.store.secret_service import SecretService

    old, new = through_keyring.Keyring(), SecretService()
    old.set_password("kubetray-test", name, "written through keyring")
    assert new.get_password("kubetray-test", name) == "written through keyring"
    new.set_password("kubetray-test", name, "written directly")
    assert old.get_password("kubetray-test", name) == "written directly"
    assert new.delete("kubetray-test", name) and not new.delete("kubetray-test", name)
    assert old.get_password("kubetray-test", name) is None
    store = KeyringSecretStore(sealed_dir=str(tmp_path / "secrets"))
    assert isinstance(store._backend(), SecretService)  # chosen where keyring is not configured
