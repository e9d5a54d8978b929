"""botocore sessions for one caller's AWS world, and the credentials they resolve.

The agent is one long-lived process serving many callers, each with its own ``AWS_PROFILE``,
``AWS_CONFIG_FILE``, ``AWS_REGION``...; botocore reads ``os.environ`` by default, which in the
agent is whatever environment started it. ``CallerSession`` hands botocore the caller's AWS_*
variables instead, in the three places botocore reads them: its configuration chain (a config
store built with the caller's environment), configured endpoint URLs
(``AWS_ENDPOINT_URL_<SERVICE>``) and the credential providers that take an ``environ``.

The credential chain is botocore's own (``create_credential_resolver``'s order), built by hand
as eks.md D.6 describes so that:
- IAM Identity Center profiles read kubetray's login (``sso.BotocoreTokenView``), never
  ``~/.aws/sso/cache``;
- role credentials (SSO GetRoleCredentials, AssumeRole) are cached in memory (``role_cache``);
- the instance metadata service is never asked (profiles.py says what is served).

Every client a ``CallerSession`` makes verifies TLS against the system's CAs plus the caller's
extra bundle (``trust.verify_path``), not botocore's bundle alone or the extra bundle alone.
``tests/unit/test_aws_session.py`` compares the order with botocore's, to notice upgrades.
"""

import threading
from collections.abc import Callable, Mapping
from typing import Any

import botocore.session
from botocore import UNSIGNED
from botocore.config import Config
from botocore.configprovider import (
    BOTOCORE_DEFAUT_SESSION_VARIABLES,
    DEFAULT_PROXIES_CONFIG_VARS,
    DEFAULT_S3_CONFIG_VARS,
    ConfigChainFactory,
    ConfiguredEndpointProvider,
    ConfigValueStore,
    SectionConfigProvider,
)
from botocore.credentials import (
    AssumeRoleCredentialFetcher,
    AssumeRoleProvider,
    CanonicalNameCredentialSourcer,
    ContainerProvider,
    CredentialProvider,
    CredentialResolver,
    DeferredRefreshableCredentials,
    EnvProvider,
    ProfileProviderBuilder,
)
from botocore.exceptions import ProfileNotFound

from app.providers.aws import data, trust
from app.providers.aws.command import EksCommand


def _mapping(chain: ConfigChainFactory, variables: Mapping[str, tuple[Any, ...]]) -> dict[str, Any]:
    return {
        name: chain.create_config_chain(
            instance_name=name,
            env_var_names=spec[1],
            config_property_names=spec[0],
            default=spec[2],
            conversion_func=spec[3],
        )
        for name, spec in variables.items()
    }


class CallerSession(botocore.session.Session):  # type: ignore[misc]
    """A botocore session that sees ``environ`` (the caller's AWS_* variables) as its
    environment, and ``profile`` as its profile; its clients trust the system's CAs plus the
    caller's bundle (trust.UnusableBundle: that bundle cannot be read)."""

    def __init__(self, environ: Mapping[str, str], profile: str | None = None) -> None:
        self._caller_environ = dict(environ)
        super().__init__(profile=profile)
        chain = ConfigChainFactory(session=self, environ=self._caller_environ)
        mapping = _mapping(chain, BOTOCORE_DEFAUT_SESSION_VARIABLES)
        mapping["s3"] = SectionConfigProvider("s3", self, _mapping(chain, DEFAULT_S3_CONFIG_VARS))
        mapping["proxies_config"] = SectionConfigProvider(
            "proxies_config", self, _mapping(chain, DEFAULT_PROXIES_CONFIG_VARS)
        )
        self.register_component("config_store", ConfigValueStore(mapping=mapping))
        loader = data.loader(self._setting("data_path", "AWS_DATA_PATH"))
        if loader is not None:  # the packaged agent: botocore's data as it was at start
            self.register_component("data_loader", loader)
        self.ca_bundle: str | None = self._setting("ca_bundle", "AWS_CA_BUNDLE") or None
        """The caller's extra CAs (AWS_CA_BUNDLE, --ca-bundle, the profile's ca_bundle)."""
        self.verify: str = trust.verify_path(self.ca_bundle)

    def _setting(self, name: str, env_name: str) -> Any:
        """A setting read before the profile is known to exist: a missing profile is said
        where credentials are looked for (profiles.classify: "Unable to locate credentials"),
        not here; its environment variable still counts."""
        try:
            return self.get_config_variable(name)
        except ProfileNotFound:
            return self._caller_environ.get(env_name)

    def create_client(self, *args: Any, **kwargs: Any) -> Any:
        # botocore's own providers (SSO, AssumeRole) make their clients here too
        if len(args) < 5 and kwargs.get("verify") is None:
            kwargs["verify"] = self.verify
        return super().create_client(*args, **kwargs)

    def _add_configured_endpoint_provider(self, client_name: str, config_store: Any) -> None:
        # botocore's own passes no environ, so os.environ (the agent's) would decide endpoints
        provider = ConfiguredEndpointProvider(
            full_config=self.full_config,
            scoped_config=self.get_scoped_config(),
            client_name=client_name,
            environ=self._caller_environ,
        )
        config_store.set_config_provider(logical_name="endpoint_url", provider=provider)


class _Given(CredentialProvider):  # type: ignore[misc]
    """A credential provider that hands out credentials made elsewhere (an assumed role)."""

    METHOD = "kubetray-assumed-role"

    def __init__(self, credentials: Any) -> None:
        super().__init__()
        self._credentials = credentials

    def load(self) -> Any:
        return self._credentials


def resolver(
    session: CallerSession,
    command: EksCommand,
    region: str | None,
    role_cache: dict[str, Any],
    sso_cache: Any,
) -> CredentialResolver:
    """botocore's default chain less the EC2 providers, with kubetray's caches."""
    environ = command.environ
    profile = session.get_config_variable("profile") or "default"
    env_provider = EnvProvider(environ=environ)
    container = ContainerProvider(environ=environ)

    def clients(service: str, **kwargs: Any) -> Any:
        return session.create_client(service, **{"region_name": region, **kwargs})

    builder = ProfileProviderBuilder(
        session, cache=role_cache, region_name=region, sso_token_cache=sso_cache
    )
    assume = AssumeRoleProvider(
        load_config=lambda: session.full_config,
        client_creator=clients,
        cache=role_cache,
        profile_name=profile,
        credential_sourcer=CanonicalNameCredentialSourcer([env_provider, container]),
        profile_provider_builder=builder,
    )
    # disable_env_vars: web identity from AWS_WEB_IDENTITY_TOKEN_FILE is refused (profiles.py),
    # and botocore's provider would read it from os.environ, the agent's
    providers = [
        env_provider,
        assume,
        *builder.providers(profile_name=profile, disable_env_vars=True),
        container,
    ]
    if command.profile_explicit:
        providers.remove(env_provider)
    return CredentialResolver(providers=providers)


def unsigned_clients(session: CallerSession) -> Callable[[str, str], Any]:
    """``(service, region) -> client`` for IAM Identity Center's unsigned APIs, one client per
    pair (botocore clients are thread-safe and costly to make)."""
    made: dict[tuple[str, str], Any] = {}
    lock = threading.Lock()

    def client(service: str, region: str) -> Any:
        with lock:
            if (service, region) not in made:
                made[service, region] = session.create_client(
                    service,
                    config=Config(region_name=region, signature_version=UNSIGNED),
                )
            return made[service, region]

    return client


def assumed(
    session: CallerSession,
    source: Any,
    command: EksCommand,
    region: str | None,
    role_cache: dict[str, Any],
    session_name: str | None,
) -> Any:
    """Refreshable credentials for ``command.role_arn`` assumed with ``source``, cached in
    memory (the AWS CLI assumes on every call; kubetray once per the role's session)."""
    extra: dict[str, Any] = {}
    if session_name:
        extra["RoleSessionName"] = session_name
    if command.external_id:
        extra["ExternalId"] = command.external_id

    def clients(service: str, **kwargs: Any) -> Any:
        return session.create_client(service, **{"region_name": region, **kwargs})

    fetcher = AssumeRoleCredentialFetcher(
        client_creator=clients,
        source_credentials=source,
        role_arn=command.role_arn,
        extra_args=extra,
        cache=role_cache,
    )
    return DeferredRefreshableCredentials(
        method="assume-role", refresh_using=fetcher.fetch_credentials
    )


def given(credentials: Any) -> CredentialResolver:
    """A resolver that answers ``credentials``: for a session that signs with an assumed role."""
    return CredentialResolver(providers=[_Given(credentials)])
