"""The providers, and the one place that picks the provider of a request.

Order: each provider with a command line of its own (a cloud tool's: ``gke-gcloud-auth-plugin``,
Azure's ``kubelogin get-token --server-id``, ``aws eks get-token``) is asked whether the
request's arguments are its own, in the order of ``default()``; the first that says yes reads
them. Otherwise they are kubetray-exec's own flags, read once for the providers that share
them: ``--stored NAME`` (a stored credential) and then ``--oidc-issuer-url`` with
``--oidc-client-id`` (OpenID Connect). Nothing recognised: one line that says what to give.

A provider is added by writing its package (app/providers/<kind>/, see app.providers.base)
and naming it in ``default()``.
"""

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from app.errors import UsageError
from app.providers.base import Converted, Provider, Settings, Wanted
from exec_helper import options
from exec_helper.options import HelperOptions

__all__ = ["Providers", "default"]


class FlagsProvider(Provider, Protocol):
    """A provider of kubetray-exec's own flags (stored, OIDC)."""

    def from_options(self, opts: HelperOptions) -> Wanted | None:
        """The request, if ``opts`` name this provider's credential; else None."""


class Providers:
    """The providers in the order requests are matched (see the module)."""

    def __init__(self, own: Sequence[Provider], flags: Sequence[FlagsProvider]) -> None:
        """``own``: providers with a command line of their own; ``flags``: kubetray's flags."""
        self._own = tuple(own)
        self._flags = tuple(flags)
        self._kinds = {p.kind: p for p in (*self._own, *self._flags)}

    def __iter__(self) -> Iterator[Provider]:
        return iter((*self._own, *self._flags))

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def by_kind(self, kind: str) -> Provider:
        """The provider of identities of ``kind`` (KeyError for one this kubetray lacks)."""
        return self._kinds[kind]

    def of(self, settings: Settings) -> Provider:
        return self._kinds[settings.kind]

    def wanted(
        self,
        args: Sequence[str],
        config: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Wanted:
        """What a request asks for: its arguments, the cluster's exec extension and the
        caller's environment. OptionsError or UsageError (one line) when nothing fits."""
        for provider in self._own:
            if provider.recognises(args):
                return provider.wanted(args, config, env or {})
        return self.from_options(options.resolve(list(args), dict(config or {}), dict(env or {})))

    def from_options(self, opts: HelperOptions) -> Wanted:
        """The request kubetray-exec's own flags make (stored, then OIDC)."""
        for provider in self._flags:
            found = provider.from_options(opts)
            if found is not None:
                return found
        raise UsageError(
            "kubetray-exec was not told which credential to serve",
            "give "
            + ", or ".join(p.usage for p in self._flags)
            + ", in the exec args or in the cluster's client.authentication.k8s.io/exec "
            "extension" + "".join(f"; or {p.usage}" for p in self._own),
        )

    def convert(self, exec_: Mapping[str, Any], user: str) -> tuple[Provider, Converted] | None:
        """The provider whose tool a kubeconfig exec entry runs, and its conversion to
        kubetray-exec (``kubetray import``); OptionsError when it cannot be converted."""
        for provider in self:
            converted = provider.convert(exec_, user)
            if converted is not None:
                return provider, converted
        return None


def default(engine: Any = None) -> Providers:
    """Every provider this kubetray has. ``engine``: the OIDC engine's client factory for the
    providers built on it (tests give a fake provider's; None: app.oidc.client)."""
    from app.providers.aws import AwsProvider
    from app.providers.entra import EntraProvider
    from app.providers.google import GoogleProvider
    from app.providers.oidc import OIDCProvider
    from app.providers.stored import StoredProvider

    return Providers(
        own=[GoogleProvider(engine), EntraProvider(), AwsProvider()],
        flags=[StoredProvider(), OIDCProvider(engine)],
    )
