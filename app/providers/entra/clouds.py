"""Which Microsoft Entra login host a command line means (``--environment``, ``--authority-host``).

Azure kubelogin (``GetCloudConfiguration``, azcore's ``cloud`` package): the environment's name
in any case; ``--authority-host`` (or ``AZURE_AUTHORITY_HOST`` for workloadidentity) wins for
every mode; any other name means the public cloud, silently. kubetray does the same but says
so (:func:`cloud`'s note), because a typo that lands on the wrong cloud fails far from its cause.
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

from exec_helper.options import OptionsError

DEFAULT_ENVIRONMENT = "AzurePublicCloud"
PUBLIC = "https://login.microsoftonline.com/"
US_GOVERNMENT = "https://login.microsoftonline.us/"
CHINA = "https://login.chinacloudapi.cn/"
ENVIRONMENTS = {
    "AZURECLOUD": PUBLIC,
    "AZUREPUBLIC": PUBLIC,
    "AZUREPUBLICCLOUD": PUBLIC,
    "AZUREUSGOVERNMENT": US_GOVERNMENT,
    "AZUREUSGOVERNMENTCLOUD": US_GOVERNMENT,
    "AZURECHINACLOUD": CHINA,
}
"""--environment (upper-cased) → authority host, as azcore's cloud package has them."""
NAMES = {PUBLIC: "public cloud", US_GOVERNMENT: "US Government cloud", CHINA: "China cloud"}


@dataclass(frozen=True)
class Cloud:
    """Where a person or a machine logs in: ``host`` (``https://login.microsoftonline.com/``,
    with Azure's trailing slash) and a ``note`` for status when the choice may surprise."""

    host: str
    name: str
    note: str = ""


def check_authority_host(value: str) -> None:
    """Azure kubelogin's rule: a URL with a scheme and a host, ending in ``/``; and kubetray's:
    https, for every host. Azure kubelogin's check lets ``http://`` through (MSAL then refuses
    it in a paragraph, modes without MSAL would send credentials in the clear); kubetray logs
    in over verified TLS only, so it says so at once. A stand-in or a private ADFS serves https
    with its CA given by --certificate-authority (as tests/oidc/entra.mjs does)."""
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        raise OptionsError(f'authority host "{value}" is not valid')
    if parts.scheme.lower() != "https":
        raise OptionsError(
            f'authority host "{value}" is not https: kubetray logs in over TLS only '
            "(a private CA: add --certificate-authority)"
        )
    if not value.endswith("/"):
        raise OptionsError(f'authority host "{value}" should have a trailing slash')


def cloud(environment: str, authority_host: str | None) -> Cloud:
    """The login host for ``--environment`` and ``--authority-host``."""
    if authority_host:
        check_authority_host(authority_host)
        return Cloud(authority_host, NAMES.get(authority_host, urlsplit(authority_host).netloc))
    host = ENVIRONMENTS.get(environment.upper())
    if host is None:
        return Cloud(
            PUBLIC,
            NAMES[PUBLIC],
            f"--environment {environment} is no cloud Azure kubelogin knows, so it uses the "
            "public cloud (login.microsoftonline.com), and so does kubetray; give "
            "--authority-host for another cloud's login host",
        )
    return Cloud(host, NAMES[host])
