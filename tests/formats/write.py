"""Write every state file and keyring document kubetray keeps, as this checkout writes them.

    python -m tests.formats.write DIR

Run at a release to keep its formats as fixtures (tests/formats/<version>/, loaded by
tests/unit/test_formats.py): 0.1.0 was written by this script at 948a89d. What it writes:
config/ (settings, identities index, stored index, remote-hosts decisions, sealed secrets),
state/ (the kubeconfig backups' journal) and keyring.json (every keyring item as the OS keyring
would hold it: service "kubetray", key → the item's value, the data key included).
"""

import json
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.broker.consent import Consent
from app.broker.logins import store_key
from app.broker.registry import Registry
from app.kubeconfig import files, records
from app.kubeconfig.backups import Backups
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.static_credentials import StoredCredential, StoredCredentials
from app.store.keyring_store import KeyringSecretStore

NOW = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


class DictKeyring:
    """What a keyring backend holds, in a dict (the Secret Service's place)."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def get_password(self, service: str, key: str) -> str | None:
        return self.items.get(key)

    def set_password(self, service: str, key: str, value: str) -> None:
        self.items[key] = value

    def delete(self, service: str, key: str) -> bool:
        return self.items.pop(key, None) is not None


def write(out: Path) -> None:
    config, state = out / "config", out / "state"
    config.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_CONFIG_HOME"] = str(out / "xdg")  # Settings.path() must not be the user's

    keyring = DictKeyring()
    store = KeyringSecretStore(str(config / "secrets"))
    store._chosen = keyring  # the backend, as secret_service.available() would pick it

    Settings(
        start_at_login=True,
        browser_command="firefox",
        notify_expiring=False,
        refresh_margin_seconds=120,
        secret_store="keyring",
    ).save()
    os.replace(Settings.path(), config / "settings.json")

    registry = Registry(str(config / "identities.json"))
    prod = OIDCSettings(
        issuer="https://idp.example.com",
        client_id="kubernetes",
        scopes=("openid", "email", "groups"),
        extra_params=(("audience", "k8s"),),
    )
    dev = OIDCSettings(issuer="https://dex.example.org/dex", client_id="kubectl")
    prod_entry = registry.oidc(prod, chosen="prod")
    registry.oidc(dev)

    tokens = TokenSet(
        expires_at=NOW + timedelta(hours=1),
        issued_at=NOW,
        id_token="eyJ.id.token",
        access_token="access-0001",
        refresh_token="refresh-0001",
        claims={"sub": "u-1", "email": "ada@example.com", "groups": ["dev"]},
    )
    store.set(store_key(prod_entry.identity), tokens.to_bytes())

    stored = StoredCredentials(store, str(config / "stored.json"))
    stored.save(
        StoredCredential(
            name="deploy",
            token="static-token-0001",
            not_after=NOW + timedelta(days=30),
            not_before=NOW,
        ),
        NOW,
    )
    big = StoredCredential(  # over the inline limit: sealed in a file under the keyring's key
        name="admin",
        certificate_pem="-----BEGIN CERTIFICATE-----\n" + "A" * 1500 + "\n",
        key_pem="-----BEGIN PRIVATE KEY-----\n" + "B" * 400 + "\n",
        not_after=NOW + timedelta(days=365),
        subject="CN=admin",
        not_before=NOW,
    )
    stored.save(big, NOW)

    consent = Consent(str(config / "remote-hosts.json"), lambda: NOW)
    consent.allow("build.example.com", "oidc")
    consent.deny("old.example.com")

    # The user's kubeconfig is elsewhere (its backup beside it): only the journal is ours.
    kubeconfig = Path(tempfile.mkdtemp(prefix="kubetray-formats-")) / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n")
    backups = Backups(str(state / "kubeconfig-backups.json"), lambda: store)
    backups.save(files.read(str(kubeconfig)), "setup")

    imports = records.Records(store, records.IMPORTS)
    imports.push(
        [
            records.UserChange(
                file=str(kubeconfig),
                user="oidc",
                before={"exec": {"command": "kubectl", "args": ["oidc-login", "get-token"]}},
                after={"exec": {"command": "kubetray-exec", "args": ["get-token"]}},
            )
        ]
    )
    (out / "keyring.json").write_text(json.dumps(keyring.items, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(out / "xdg")


def main(argv: list[str]) -> int:
    write(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
