"""The real app (`app.ui.app.run`, as `kubetray` runs it), with identities known beforehand:
`python tests/ui/tray_app.py [--at-login] [NAME=ISSUER ...]`, each a device-code identity at
ISSUER (client kubectl). Tokens live in memory. Run by tests/ui/desktop.py."""

import sys

from app import compose
from app.oidc.settings import OIDCSettings
from app.store.memory_store import MemorySecretStore
from exec_helper import paths


def main() -> int:
    args = sys.argv[1:]
    at_login = "--at-login" in args
    known = [a for a in args if "=" in a]
    if known:  # written to identities.json, which the app reads at start
        store = MemorySecretStore()
        core = compose.core(store, compose.stored_credentials(store), paths.config_dir())
        for item in known:
            name, issuer = item.split("=", 1)
            settings = OIDCSettings(
                issuer=issuer,
                client_id="kubectl",
                scopes=("openid", "email", "groups"),
                grant_type="device-code",
            )
            core.logins.identity(settings, name)
    from app.ui.app import run

    return run(store="memory", at_login=at_login)


if __name__ == "__main__":
    sys.exit(main())
