"""Set a cluster up for kubetray: plan the kubeconfig change, then write it with a backup.

The CLI shows the plan and asks before writing; the app writes at once (the dialog was the
question) on a worker thread.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from app.kubeconfig import edit as edits
from app.kubeconfig import setup
from app.kubeconfig.backups import Backups
from app.kubeconfig.edit import Edit, Written
from app.kubeconfig.view import View
from app.oidc.settings import Metadata

SETUP_CA_HINT = "pass --provider-ca with the CA certificate that signed the provider's certificate"


@dataclass(frozen=True)
class Plan:
    """A setup ready to write: the files as read, the change, and the context it makes."""

    view: View
    edit: Edit
    context: str


@dataclass(frozen=True)
class Done:
    """What a setup wrote."""

    context: str
    written: list[Written]


def plan(request: setup.Setup, paths: list[str] | None = None) -> Plan:
    """Read the kubeconfig (under its lock) and work out the change."""
    view = View.load(paths, lock=True)
    edit, context = setup.plan(request, view)
    return Plan(view, edit, context)


def apply(p: Plan, backups: Backups, operation: str = "setup") -> Done:
    """Write the planned change (backed up, atomically)."""
    return Done(p.context, edits.apply(p.edit, backups, operation))


def run(request: setup.Setup, paths: list[str] | None, backups: Backups, operation: str) -> Done:
    """Plan and write in one go."""
    return apply(plan(request, paths), backups, operation)


def probe(
    issuer: str, client_id: str, provider_ca_data: str | None, ca_hint: str = SETUP_CA_HINT
) -> Metadata:
    """The provider's discovery document, or an AppError in a person's words (before anything
    is written: a wrong issuer or an untrusted CA would only show at the first kubectl call).

    ``ca_hint``: what to do about an untrusted provider CA where the question was asked.
    """
    from app.errors import AppError
    from app.identity import normalize_issuer
    from app.oidc import explain
    from app.oidc.client import OIDCClient
    from app.oidc.settings import OIDCSettings

    settings = OIDCSettings(
        issuer=normalize_issuer(issuer),
        client_id=client_id,
        ca_data=(provider_ca_data,) if provider_ca_data else (),
    )
    try:
        return OIDCClient(settings, lambda: datetime.now(UTC)).metadata()
    except AppError as e:
        hint = ca_hint if e.hint == explain.untrusted_hint() else e.hint
        raise AppError(e.message, hint) from None
