"""Errors of the OIDC engine (light: the broker imports these without the HTTP stack)."""

from app.errors import AppError
from app.oidc.tokens import TokenSet


class LoginError(AppError):
    """A login that did not produce tokens: refused, timed out, cancelled, or unsafe."""


class RefreshRefused(LoginError):
    """The provider refused the refresh token for good (invalid_grant): only a login helps."""


class RefreshFailed(LoginError):
    """A refresh failed after the provider rotated the refresh token: ``tokens`` holds it."""

    def __init__(self, message: str, hint: str | None, tokens: TokenSet) -> None:
        super().__init__(message, hint)
        self.tokens = tokens
