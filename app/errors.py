"""Typed errors: a message in the user's words, a hint saying what to do, an exit code.

The CLI prints them as ``error: ...`` / ``hint: ...``; the agent sends them to kubetray-exec
as one line; the tray shows them as notifications.
"""


class AppError(Exception):
    """Base of every error kubetray reports to a person."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """Message and hint on one line (what kubetray-exec prints for kubectl)."""
        return f"{self.message}; {self.hint}" if self.hint else self.message


class UsageError(AppError):
    """The command line or the kubeconfig asks for something impossible."""

    exit_code = 2


class StoreError(AppError):
    """The OS keyring failed, or what it holds is unusable."""


class SecretLost(StoreError):
    """An item exists but its secret is gone or unreadable (e.g. its sealed file was removed,
    or another kubetray configuration sharing the keyring wrote it)."""


class StoreUnavailable(StoreError):
    """No usable OS keyring (none installed, locked, or not answering)."""


class CredentialError(AppError):
    """A credential cannot be served: unknown, expired, invalid."""


class RenewalFailed(CredentialError):
    """A credential expired and could not be renewed; ``cause`` says why (the provider down or
    slow, an untrusted certificate, a clock apart, ...), so the line names the real reason."""

    def __init__(self, message: str, hint: str | None, cause: AppError | None) -> None:
        super().__init__(message, hint)
        self.cause = cause


class AgentRunning(AppError):
    """Another agent already serves this user."""


class AgentNotRunning(AppError):
    """A command needed the agent and none answers."""


def unexpected(e: BaseException) -> str:
    """One sentence for an error nobody foresaw (a bug): what it was, where to read more."""
    from exec_helper import paths

    # The class only: an unforeseen error's text may quote a secret.
    return (
        f"the kubetray agent could not answer: something it did not expect went wrong "
        f"({type(e).__name__}); its log in {paths.state_dir()} has the details"
    )
