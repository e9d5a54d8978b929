"""What Entra's refusals mean, in a person's words, as kubetray's typed errors.

Microsoft asks clients not to branch on AADSTS numbers or texts: classify by ``error``,
``suberror`` and whether a ``claims`` challenge came (learn.microsoft.com, "Microsoft identity
platform error codes"). The AADSTS line is kept in the message, for the person and their admin.
"""

import json
import re
import ssl
from http.client import HTTPException
from typing import Any

from app.oidc import explain
from app.oidc.errors import LoginError, ProviderUnavailable, RefreshRefused

INTERACTIVE_SUBERRORS = frozenset(
    {
        "basic_action",
        "additional_action",
        "message_only",
        "consent_required",
        "user_password_expired",
    }
)
"""Suberrors that a silent refresh cannot fix and one interactive login can (MFA, consent)."""
CA_FLAG = "--certificate-authority"


class InteractionRequired(RefreshRefused):
    """Entra wants the person at a login page (multi-factor authentication, consent, a
    Conditional Access step): refreshing again cannot help, one login can. ``claims``: the
    challenge that login must carry (``claims=``)."""

    def __init__(self, message: str, hint: str | None, claims: str | None) -> None:
        super().__init__(message, hint)
        self.claims = claims


class CredentialRefused(LoginError):
    """A machine identity's own credential (secret, certificate, federated token) was
    refused: trying again with it cannot help."""


class ConfigurationRefused(LoginError):
    """Entra refused what was asked (an unknown client, resource or tenant): the kubeconfig
    or the tenant's setup must change."""


_TRAILER = re.compile(r"\s*(Trace ID:|Correlation ID:|Timestamp:).*$", re.S)


def describe(result: dict[str, Any]) -> str:
    """``AADSTS50076: Due to a configuration change...`` without the trace trailer."""
    text = str(result.get("error_description") or "").strip()
    text = _TRAILER.sub("", text).strip().splitlines()[0] if text else ""
    return text or str(result.get("error") or "an error")


def from_result(result: dict[str, Any], doing: str, machine: bool = False) -> LoginError:
    """The typed error for MSAL's error ``result`` while ``doing`` (``refresh``, ``login``,
    ``token request``)."""
    error = str(result.get("error") or "")
    sub = str(result.get("suberror") or "")
    claims = result.get("claims") or None
    what = describe(result)
    if error in ("interaction_required", "consent_required", "login_required") or (
        error == "invalid_grant" and (sub in INTERACTIVE_SUBERRORS or claims)
    ):
        if machine:
            return CredentialRefused(
                f"Entra wants a person to sign in ({what})",
                "this login mode has nobody to ask: use --login devicecode or interactive, or "
                "have the tenant's admin exempt this account from the policy",
            )
        return InteractionRequired(
            f"Entra needs you to sign in again ({what})",
            "log in once more (kubetray login NAME, or the tray); kubetray sends Entra's "
            "challenge with it",
            str(claims) if claims else None,
        )
    if error == "invalid_grant":
        if machine:
            return CredentialRefused(f"Entra refused the credentials ({what})", None)
        return RefreshRefused(f"Entra no longer accepts the sign-in ({what})", "log in again")
    if error == "invalid_client":
        return CredentialRefused(
            f"Entra refused the client's credential ({what})",
            "check the client secret, certificate or federated token (and that it has not expired)",
        )
    if error in ("unauthorized_client", "invalid_scope", "invalid_resource", "invalid_request"):
        return ConfigurationRefused(f"Entra refused the {doing} ({what})", None)
    if error in ("temporarily_unavailable", "server_error"):
        return ProviderUnavailable(
            f"Entra could not answer the {doing} ({what})", "try again later"
        )
    return LoginError(f"the {doing} failed ({what})")


def from_exception(error: BaseException, url: str) -> LoginError:
    """A failure raised while talking to Entra (no usable answer, or MSAL's own refusal)."""
    from app.oidc.http import TransportError

    if isinstance(error, TransportError):
        message, hint = explain.failure(error, url, CA_FLAG)
        if isinstance(error.reason, ssl.SSLCertVerificationError):
            return LoginError(message, hint)
        if error.status and 400 <= error.status < 500:
            return ConfigurationRefused(message, hint)
        # The request may have reached Entra (a timeout, a cut connection, a gateway's answer):
        # a refresh token it carried may have been rotated (app.oidc.client._unreachable).
        sent = isinstance(
            error.reason, TimeoutError | ConnectionError | HTTPException
        ) and not isinstance(error.reason, ConnectionRefusedError)
        return ProviderUnavailable(message, hint, unsure=error.status in (502, 504) or sent)
    if isinstance(error, json.JSONDecodeError):  # MSAL reads whatever answered as JSON
        return LoginError(
            f"{url} answered with something that is not JSON: not Entra's answer",
            "a proxy may be in the way (HTTPS_PROXY, NO_PROXY), or the address is wrong",
        )
    text = str(error)
    if "Unable to get authority configuration" in text or "OIDC Discovery failed" in text:
        return ConfigurationRefused(
            f"Entra does not know the tenant of {url} (its discovery document was refused)",
            "check --tenant-id (and --environment: the tenant may be in another cloud)",
        )
    if type(error).__name__ == "MsalServiceError":  # a 5xx or a 429 MSAL throttles
        return ProviderUnavailable(f"Entra could not answer ({text})", "try again later")
    return LoginError(f"the Entra login failed: {text}")
