"""What kubetray keeps, as every version reads it (app/formats.py).

Fixtures (tests/formats/): what kubetray 0.1.0 wrote (tests/formats/write.py, run at 948a89d),
and a made-up kubetray 9.0.0 that adds fields (kept by this version's readers) or writes newer
formats (refused in one line naming both versions, and never rewritten).
"""

import base64
import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app import formats
from app.broker.consent import Consent
from app.broker.logins import store_key
from app.broker.registry import Registry
from app.kubeconfig import records
from app.kubeconfig.backups import Backups
from app.model import Standing
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.static_credentials import StoredCredential, StoredCredentials
from app.store.keyring_store import KeyringSecretStore
from exec_helper.version import VERSION
from tests.formats.write import DictKeyring

FIXTURES = Path(__file__).parents[1] / "formats"
NOW = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@dataclass
class Home:
    """A fixture's files in a fresh place, read and written by this version."""

    config: Path
    state: Path
    keyring: DictKeyring
    store: KeyringSecretStore

    def registry(self) -> Registry:
        return Registry(str(self.config / "identities.json"))

    def stored(self) -> StoredCredentials:
        return StoredCredentials(self.store, str(self.config / "stored.json"))

    def consent(self) -> Consent:
        return Consent(str(self.config / "remote-hosts.json"), lambda: NOW)

    def backups(self) -> Backups:
        return Backups(str(self.state / "kubeconfig-backups.json"), lambda: self.store)

    def imports(self) -> records.Records:
        return records.Records(self.store, records.IMPORTS)

    def item(self, key: str) -> dict[str, Any]:
        """A keyring item's JSON document as kept (inline)."""
        value = self.keyring.items[key]
        return dict(json.loads(base64.b64decode(value.split(":", 1)[1])))

    def tokens_key(self) -> str:
        return next(k for k in self.keyring.items if k.startswith("oidc/"))

    def files(self) -> dict[str, bytes]:
        return {
            str(p.relative_to(self.config.parent)): p.read_bytes()
            for p in self.config.parent.rglob("*")
            if p.is_file()
        }


def home(release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    base = tmp_path / release
    shutil.copytree(FIXTURES / release, base)
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(base / "config"))
    keyring = DictKeyring()
    keyring.items = json.loads((base / "keyring.json").read_text())
    store = KeyringSecretStore(str(base / "config" / "secrets"))
    store._chosen = keyring  # the backend, as the Secret Service would be picked
    return Home(base / "config", base / "state", keyring, store)


# 0.1.0's files, read by this version -------------------------------------------------------


def test_what_0_1_0_wrote_reads_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = home("0.1.0", tmp_path, monkeypatch)
    settings = Settings.load()
    assert (settings.start_at_login, settings.browser_command, settings.notify_expiring) == (
        True,
        "firefox",
        False,
    )
    assert (settings.refresh_margin_seconds, settings.secret_store) == (120, "keyring")

    entries = {e.identity.name: e for e in h.registry().known()}
    assert sorted(entries) == ["kubectl@dex.example.org", "prod"]
    prod = entries["prod"]
    assert prod.chosen and prod.settings is not None
    assert set(prod.settings.scopes) == {"openid", "email", "groups"}
    assert prod.settings.extra_params == (("audience", "k8s"),)

    tokens = TokenSet.from_bytes(h.store.get(store_key(prod.identity)) or b"")
    assert tokens.refresh_token == "refresh-0001" and tokens.who() == "ada@example.com"
    assert tokens.expires_at == NOW + timedelta(hours=1)

    stored = h.stored()
    assert [(s.name, s.kind) for s in stored.list()] == [
        ("admin", "client-certificate"),
        ("deploy", "token"),
    ]
    assert stored.load("deploy").token == "static-token-0001"
    admin = stored.load("admin")  # sealed in a file under the keyring's data key
    assert admin.subject == "CN=admin" and (admin.certificate_pem or "").startswith("-----BEGIN")

    consent = h.consent()
    # 0.1.0's "always" was the host, for any identity: kept, but asks about each now.
    hosts = {h.host: h.standing for h in consent.hosts()}
    assert hosts == {"build.example.com": Standing.OLD_ALLOW, "old.example.com": Standing.DENIED}
    assert not consent.granted("build.example.com", "oidc")
    [backup] = h.backups().entries()
    assert (backup.operation, backup.where) == ("setup", "file")
    [[change]] = h.imports().batches()
    assert change.user == "oidc" and change.after["exec"]["command"] == "kubetray-exec"


def test_what_this_version_writes_0_1_0_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1.0 read token sets, stored credentials, undo records and backup rows with cls(**doc):
    rewritten by this version, they carry exactly 0.1.0's fields (a downgrade keeps working);
    the JSON files gain their format and writer at the top, where 0.1.0 looks for neither."""
    h = home("0.1.0", tmp_path, monkeypatch)
    key = h.tokens_key()
    before = {k: set(h.item(k)) for k in (key, "stored/deploy")}
    h.store.set(key, TokenSet.from_bytes(h.store.get(key) or b"").to_bytes())
    deploy = h.stored().load("deploy")
    h.stored().save(deploy, NOW)
    assert {k: set(h.item(k)) for k in before} == before
    imports = h.imports()
    imports.save(imports.batches())
    assert set(json.loads(h.store.get(records.IMPORTS) or b"")[0][0]) == {
        "file",
        "user",
        "before",
        "after",
        "stored",
    }
    row_keys = set(json.loads((h.state / "kubeconfig-backups.json").read_text())["backups"][0])
    h.backups()._write_journal(h.backups().entries())
    journal = json.loads((h.state / "kubeconfig-backups.json").read_text())
    assert set(journal["backups"][0]) == row_keys
    assert (journal["version"], journal["kubetray"]) == (1, VERSION)

    Settings.load().save()
    written = json.loads((h.config / "settings.json").read_text())
    assert (written["version"], written["kubetray"], written["browser_command"]) == (
        1,
        VERSION,
        "firefox",
    )
    registry = h.registry()
    registry.oidc(OIDCSettings(issuer="https://new.example", client_id="k"))  # a write
    index = json.loads((h.config / "identities.json").read_text())
    assert index["version"] == 2 and len(index["identities"]) == 3  # what 0.1.0 reads


# A newer kubetray's extra fields: read, and kept --------------------------------------------


def test_fields_of_a_newer_version_are_read_past_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = home("9.0.0-fields", tmp_path, monkeypatch)

    settings = Settings.load()
    assert settings.browser_command == "firefox"
    settings.notify_failures = False
    settings.save()
    doc = json.loads((h.config / "settings.json").read_text())
    assert doc["theme"] == "dark" and doc["notify_failures"] is False

    registry = h.registry()
    prod = next(e for e in registry.known() if e.identity.name == "prod")
    assert prod.settings is not None
    registry.adopt(prod, OIDCSettings.from_dict({**_settings_of(h, "prod"), "timeout": 60.0}))
    index = json.loads((h.config / "identities.json").read_text())
    entry = next(e for e in index["identities"].values() if e["name"] == "prod")
    assert entry["color"] == "red" and entry["settings"]["pkce_method"] == "S512"
    assert entry["settings"]["timeout"] == 60.0 and index["order"] == ["prod"]

    key = h.tokens_key()
    tokens = TokenSet.from_bytes(h.store.get(key) or b"")
    refreshed = tokens.with_refresh(
        TokenSet(expires_at=NOW + timedelta(hours=2), issued_at=NOW, access_token="a-2")
    )
    h.store.set(key, refreshed.to_bytes())
    assert h.item(key)["dpop_key"] == "kid-1" and h.item(key)["access_token"] == "a-2"

    stored = h.stored()
    stored.save(stored.load("deploy"), NOW)
    assert h.item("stored/deploy")["rotate_after"] == "2027-02-01"
    index_doc = json.loads((h.config / "stored.json").read_text())
    assert index_doc["last_audit"] == "2027-01-01"
    assert index_doc["credentials"]["admin"]["kind"] == "client-certificate"

    consent = h.consent()
    consent.allow("new.example.com", "dev")
    assert json.loads((h.config / "remote-hosts.json").read_text())["ask"] == "x"

    backups = h.backups()
    backups._write_journal(backups.entries())
    journal = json.loads((h.state / "kubeconfig-backups.json").read_text())
    assert journal["pruned"] == 3 and journal["backups"][0]["sha256"] == "00" * 32

    imports = h.imports()
    imports.save(imports.batches())
    assert json.loads(h.store.get(records.IMPORTS) or b"")[0][0]["tool"] == "kubelogin 1.30"


def _settings_of(h: Home, name: str) -> dict[str, Any]:
    index = json.loads((h.config / "identities.json").read_text())
    settings = next(e for e in index["identities"].values() if e["name"] == name)["settings"]
    return dict(settings)


# A newer kubetray's formats: one line naming both versions, and nothing changed ------------


def _refused(error: formats.NewerFormat, writer: str) -> str:
    line = error.one_line()
    assert "\n" not in line and writer in line and f"this kubetray {VERSION}" in line, line
    return line


def test_newer_formats_are_refused_in_one_line_and_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = home("9.0.0-format", tmp_path, monkeypatch)
    files, items = h.files(), dict(h.keyring.items)
    attempts = {
        "settings.json": lambda: Settings.load(),
        "stored.json": lambda: h.stored().save(StoredCredential(name="x", token="t"), NOW),
        "stored.json ": lambda: h.stored().remove("deploy"),
        "remote-hosts.json": lambda: h.consent().allow("new.example.com", "dev"),
        "kubeconfig-backups.json": lambda: h.backups().entries(),
        "the tokens": lambda: TokenSet.from_bytes(h.store.get(h.tokens_key()) or b""),
        "a stored credential": lambda: StoredCredential.from_bytes(
            h.store.get("stored/deploy") or b""
        ),
        "record of kubeconfig changes": lambda: h.imports().push([]),
        "the keyring item stored/envelope": lambda: h.store.get("stored/envelope"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(formats.NewerFormat) as refused:
            attempt()
        # A keyring item's prefix names its format only; every document names its writer too.
        writer = "a newer kubetray" if "envelope" in what else "kubetray 9.0.0"
        line = _refused(refused.value, writer)
        assert what.strip() in line and "format" in line, line
    # The identities a newer kubetray named: this one still serves the login asked for, from
    # memory, and says why it remembers none of them (the index is never written).
    registry = h.registry()
    st = registry.oidc(OIDCSettings(issuer="https://new.example", client_id="k"))
    assert st.identity.name == "k@new.example"
    assert isinstance(registry.problem, formats.NewerFormat)
    assert "identities.json" in _refused(registry.problem, "kubetray 9.0.0")
    assert h.files() == files  # not one byte of any file changed
    assert h.keyring.items == items  # nor of the keyring


def test_a_format_number_that_is_not_one_reads_as_the_first() -> None:
    assert formats.number({}) == 1
    assert formats.number({"version": True}) == 1
    assert formats.number({"version": "2"}) == 1
    assert formats.number({"version": 3}) == 3
    with pytest.raises(formats.NewerFormat):
        formats.check({"version": 2}, "a file", 1)
