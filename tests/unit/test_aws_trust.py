"""What botocore is told to trust: the system's CA file, with the caller's bundle added in one
file kubetray keeps in its runtime directory (tests/aws/test_trust.py makes the handshakes)."""

import os
import stat
from pathlib import Path

import pytest
from botocore.httpsession import where

from app.providers.aws import data, trust
from app.providers.aws.command import parse
from app.providers.aws.engine import CredentialsError, Engine
from tests.pki import CA


@pytest.fixture
def system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's CA file (what ssl.create_default_context() loads: SSL_CERT_FILE)."""
    path = tmp_path / "system.pem"
    path.write_bytes(CA("system CA").cert_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(path))
    return path


def test_without_a_bundle_botocore_verifies_with_the_system_s_file(system: Path) -> None:
    assert trust.verify_path(None) == str(system)


def test_a_bundle_is_added_to_the_system_s_cas_in_one_private_file(
    system: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "team.pem"
    bundle.write_bytes(CA("team CA").cert_pem)
    run = tmp_path / "run"
    path = trust.verify_path(str(bundle), str(run))
    assert path is not None and Path(path).parent == run
    text = Path(path).read_bytes()
    assert text.startswith(system.read_bytes()) and bundle.read_bytes() in text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(run).st_mode) == 0o700
    # once per content: the same file again (not rewritten), a new one for a changed bundle
    written = os.stat(path).st_mtime_ns
    assert trust.verify_path(str(bundle), str(run)) == path
    assert os.stat(path).st_mtime_ns == written
    bundle.write_bytes(CA("team CA, renewed").cert_pem)
    again = trust.verify_path(str(bundle), str(run))
    assert again != path and bundle.read_bytes() in Path(str(again)).read_bytes()
    assert sorted(p.name for p in run.iterdir()) == sorted(Path(p).name for p in (path, again))


def test_only_the_bundle_s_certificates_are_copied_never_a_key_beside_them(
    system: Path, tmp_path: Path
) -> None:
    """People keep a client key and its CA in one PEM file and name it AWS_CA_BUNDLE: the
    key must not land in kubetray's runtime directory (botocore needs the CAs only)."""
    team, other = CA("team CA"), CA("other CA")
    client = team.issue("client")
    bundle = tmp_path / "team.pem"
    bundle.write_bytes(client.key_pem + team.cert_pem + b"a comment\n" + other.cert_pem)
    path = trust.verify_path(str(bundle), str(tmp_path / "run"))
    text = Path(path).read_bytes()
    assert team.cert_pem in text and other.cert_pem in text
    assert b"PRIVATE KEY" not in text and client.key_pem not in text
    # a file with a key and no certificate is no CA bundle: refused, nothing copied
    key_only = tmp_path / "key.pem"
    key_only.write_bytes(client.key_pem)
    with pytest.raises(trust.UnusableBundle, match="holds no PEM certificate") as failed:
        trust.verify_path(str(key_only), str(tmp_path / "run2"))
    assert "\n" not in failed.value.message
    assert not (tmp_path / "run2").exists()


def test_where_the_system_s_trust_is_no_file_botocore_s_bundle_stands_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS (keychain), Windows (certificate store): botocore's own CAs plus the bundle."""
    monkeypatch.setattr(trust, "system_ca_file", lambda: None)
    assert trust.verify_path(None) == where()  # botocore's own (a development install)
    bundle = tmp_path / "team.pem"
    bundle.write_bytes(CA("team CA").cert_pem)
    path = trust.verify_path(str(bundle), str(tmp_path / "run"))
    text = Path(str(path)).read_bytes()
    assert text.startswith(Path(where()).read_bytes().rstrip(b"\n")) and bundle.read_bytes() in text
    # the packaged agent: botocore's bundle as it was at start (an upgrade may remove the file)
    pinned = tmp_path / "pinned.pem"
    pinned.write_bytes(CA("certifi, pinned").cert_pem)
    monkeypatch.setattr(data, "ca_bundle", lambda: str(pinned))
    assert trust.verify_path(None) == str(pinned)
    path = trust.verify_path(str(bundle), str(tmp_path / "run"))
    assert Path(str(path)).read_bytes().startswith(pinned.read_bytes())


def test_an_unusable_bundle_is_one_line_naming_it(system: Path, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-1\naws_access_key_id = AKIA\n")
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    for bundle in (tmp_path / "missing.pem", not_pem):
        env = {"AWS_CONFIG_FILE": str(config), "AWS_CA_BUNDLE": str(bundle)}
        with pytest.raises(CredentialsError) as failed:
            Engine(lambda _s: None).world(parse(["eks", "get-token", "--cluster-name", "d"], env))
        assert f"cannot use the CA bundle {bundle}" in failed.value.message
        assert "\n" not in failed.value.message
    # the profile's ca_bundle is the same setting (botocore's), and is added the same way
    config.write_text(f"[default]\nregion = eu-west-1\nca_bundle = {not_pem}\n")
    with pytest.raises(CredentialsError, match="cannot use the CA bundle"):
        Engine(lambda _s: None).world(
            parse(["eks", "get-token", "--cluster-name", "d"], {"AWS_CONFIG_FILE": str(config)})
        )
