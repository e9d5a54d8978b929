"""The OIDC engine (app.oidc.client) as a provider Client: which grant a login runs."""

from typing import TYPE_CHECKING, Any

from app.oidc.browser import remote_grant
from app.oidc.errors import LoginError
from app.oidc.settings import OIDCSettings
from app.providers.base import LoginUI, Revocation, TokenSet

if TYPE_CHECKING:
    from app.oidc.client import OIDCClient


class OIDCLogin:
    """One identity's OIDC client for one set of settings."""

    def __init__(self, settings: OIDCSettings, engine: "OIDCClient | Any") -> None:
        self.settings = settings
        self.engine = engine

    def login(self, ui: LoginUI, held: TokenSet | None) -> TokenSet:
        """The grant the settings name; ``auto``: the browser, else (no browser here) the
        device code where the provider offers it, or a pasted code over SSH."""
        engine, grant = self.engine, self.settings.grant_type
        if grant == "password":
            return engine.password(ui)  # type: ignore[no-any-return]
        if grant == "authcode-keyboard":
            return engine.authorization_code(ui, keyboard=True)  # type: ignore[no-any-return]
        if grant == "device-code":
            return engine.device_code(ui)  # type: ignore[no-any-return]
        if grant == "auto" and not ui.browser_available:
            device = bool(engine.metadata().device_authorization_endpoint)
            remote = remote_grant(device)
            if remote is not None:
                ui.show(remote[1])
                if remote[0] == "authcode-keyboard":
                    return engine.authorization_code(ui, keyboard=True)  # type: ignore[no-any-return]
            if device:
                return engine.device_code(ui)  # type: ignore[no-any-return]
        return engine.authorization_code(ui)  # type: ignore[no-any-return]

    def fetch(self) -> TokenSet:
        """The client credentials grant, with the secret these settings carry."""
        if not self.settings.client_secret:  # remembered settings carry no secret
            raise LoginError(
                f"client {self.settings.client_id} of {self.settings.issuer} needs its client "
                "secret, which kubetray does not keep",
                "run kubectl with the kubeconfig that names it, or: kubetray login -- "
                "--oidc-issuer-url=... --oidc-client-id=... --oidc-client-secret=... "
                "--grant-type=client-credentials",
            )
        return self.engine.client_credentials()  # type: ignore[no-any-return]

    def renew(self, tokens: TokenSet) -> TokenSet:
        if self.settings.machine:
            return self.fetch()
        return self.engine.refresh(tokens)  # type: ignore[no-any-return]

    def revoke(self, tokens: TokenSet) -> Revocation:
        return self.engine.revoke(tokens)  # type: ignore[no-any-return]

    def account_choice(self) -> dict[str, str]:
        """``prompt=select_account`` where the provider's discovery offers it."""
        if "select_account" in self.engine.metadata().prompt_values_supported:
            return {"prompt": "select_account"}
        return {}
