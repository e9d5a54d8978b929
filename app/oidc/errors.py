"""Errors of the OIDC engine (light: the broker imports these without the HTTP stack)."""

from app.errors import AppError
from app.oidc.tokens import TokenSet


class LoginError(AppError):
    """A login that did not produce tokens: refused, timed out, cancelled, or unsafe."""


class RefreshRefused(LoginError):
    """The provider refused the refresh token for good (invalid_grant): only a login helps."""


class RefreshFailed(LoginError):
    """A refresh failed after the provider rotated the refresh token: ``tokens`` holds it."""

    def __init__(
        self, message: str, hint: str | None, tokens: TokenSet, cause: LoginError | None = None
    ) -> None:
        super().__init__(message, hint)
        self.tokens = tokens
        self.cause = cause
        """What was wrong with the answer (a ClockSkew, say)."""


class ProviderUnavailable(LoginError):
    """The provider could not be asked or did not answer properly (connection refused, DNS,
    timeout, a cut connection, HTTP 5xx): trying again later may work.

    ``unsure``: the request may have reached the provider (a timeout or a cut connection after
    it was sent, a gateway's 502/504), so a refresh token sent with it may have been rotated.
    """

    def __init__(self, message: str, hint: str | None = None, unsure: bool = False) -> None:
        super().__init__(message, hint)
        self.unsure = unsure


class ClockSkew(LoginError):
    """The provider's tokens do not fit this machine's clock: ``offset`` seconds is how far
    the provider's clock is ahead (negative: behind), measured on the token it issued."""

    def __init__(self, offset: float, detail: str) -> None:
        super().__init__(
            f"the provider's clock is {clock_words(offset)} this machine's ({detail})",
            "set this machine's clock right (e.g. timedatectl set-ntp true), or have the "
            "provider's clock set right",
        )
        self.offset = offset


def clock_words(offset: float) -> str:
    """``90 s ahead of``, ``3 h 2 min behind``: how far a clock is from this machine's."""
    seconds = round(abs(offset))
    if seconds < 120:
        amount = f"{seconds} s"
    elif seconds < 7200:
        amount = f"{seconds // 60} min"
    else:
        amount = f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{amount} {'ahead of' if offset > 0 else 'behind'}"
