"""Microsoft Entra ID, as AKS clusters take it: kubetray-exec as a drop-in for Azure kubelogin.

``options`` reads Azure kubelogin's ``get-token`` command line and environment, ``settings``
says which identity that is and refuses the modes kubetray does not serve, ``client`` gets the
tokens through Microsoft's MSAL for Python (imported only when an Entra identity is used),
``tools`` runs ``az``/``azd`` for their modes, ``os_broker`` is the Windows/macOS broker,
``convert`` is ``kubetray import``'s part. This module is light: every agent loads it.
"""

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from app.errors import AppError
from app.providers.base import Check, Clock, Converted, Shown, TokenSet, Wanted
from app.providers.entra import convert as conversion
from app.providers.entra import options as o
from app.providers.entra.settings import KIND, EntraSettings, from_args
from exec_helper.options import OptionsError

if TYPE_CHECKING:
    from app.providers.entra.client import EntraClient

__all__ = ["KIND", "EntraProvider", "EntraSettings"]

_OVERRIDES = {
    "login": "the login mode",
    "client_id": "the client id",
    "tenant_id": "the tenant",
    "authority_host": "the login host",
}
"""Fields an environment variable may set over the kubeconfig, said in status."""


class EntraProvider:
    """Azure kubelogin's ``kubelogin get-token --server-id ...`` command line."""

    kind = KIND
    usage = "Azure kubelogin's get-token --server-id ID (--login MODE ...)"

    def recognises(self, args: Sequence[str]) -> bool:
        return o.recognises(args)

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        parsed = o.parse(list(args), dict(env))
        settings = from_args(parsed, dict(env))
        return Wanted(settings, parsed.name, local_paths=_local_paths(parsed))

    def from_index(self, doc: Mapping[str, Any]) -> EntraSettings:
        return EntraSettings.from_dict(dict(doc))

    def client(self, settings: Any, clock: Clock) -> "EntraClient":
        from app.providers.entra.client import EntraClient  # msal: only once used

        return EntraClient(settings, clock)

    def token(self, settings: Any, tokens: TokenSet, cluster: str | None) -> str | None:
        return tokens.access_token  # for the server application: what AKS checks

    def renewable(self, settings: Any, tokens: TokenSet) -> bool:
        if settings.machine and settings.mode != o.ROPC:
            return bool(settings.can_fetch)
        return bool(tokens.refresh_token) or bool(settings.can_fetch)

    def describe(self, settings: Any, tokens: TokenSet | None) -> Shown:
        s: EntraSettings = settings
        tenant = (tokens.claims.get("tid") if tokens else None) or s.tenant_id
        details = [("tenant", str(tenant))] if tenant else []
        if tokens is not None and tokens.who() != "?":
            details.append(("account", tokens.who()))
        details += [("cloud", s.cloud_name), ("login", s.mode)]
        return Shown(
            who=tokens.who() if tokens else None,
            issuer=s.authority if s.mode not in (o.AZURECLI, o.AZD, o.MSI) else s.where,
            client_id=s.client_id,
            details=tuple(details),
        )

    def note(self, settings: Any, tokens: TokenSet | None) -> str | None:
        """An unknown --environment, and environment variables that chose over the
        kubeconfig (as Azure kubelogin lets them: a stray AZURE_CLIENT_ID changes the app)."""
        s: EntraSettings = settings
        said = list(s.notes)
        for field, source in s.sources:
            if field in _OVERRIDES and not source.startswith("-"):
                said.append(f"{source} in the caller's environment set {_OVERRIDES[field]}")
        return "; ".join(said) or None

    def checks(self, settings: Any, now: Clock) -> Iterator[Check]:
        from app.providers.entra.client import EntraClient

        try:
            yield from EntraClient(settings, now).checks()
        except AppError as e:
            yield Check(f"Entra {settings.where}", False, e.message, e.hint)

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        """Azure kubelogin's exec entries, and the ``auth-provider: azure`` entries of old
        kubeconfigs (given as ``{"auth-provider": {...}}``): their command line, unchanged."""
        body = dict(exec_) if "auth-provider" in exec_ else {"exec": dict(exec_)}
        args = conversion.azure_args(body)
        if args is None:
            return None
        why = conversion.check(args)
        if why:
            raise OptionsError(why)
        return Converted(tuple(args))


def _local_paths(a: o.AzureArgs) -> tuple[str, ...]:
    """What names a file or a program on the agent's machine (refused from an SSH host)."""
    named = []
    for field, flag in (
        ("client_certificate", "--client-certificate"),
        ("federated_token_file", "--federated-token-file"),
    ):
        if getattr(a, field):
            source = a.source(field)
            named.append(flag if source.startswith("-") else source)
    if a.certificate_authority:
        named.append("--certificate-authority")
    if a.login in (o.AZURECLI, o.AZD):
        named.append(f"--login {a.login}")
    return tuple(named)
