"""Set a cluster up for kubetray: plan the kubeconfig change, then write it with a backup.

The CLI shows the plan and asks before writing; the app writes at once (the dialog was the
question) on a worker thread.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from app import cluster_tls
from app.kubeconfig import edit as edits
from app.kubeconfig import setup
from app.kubeconfig.backups import Backups
from app.kubeconfig.edit import Edit, Written
from app.kubeconfig.view import View
from app.oidc.settings import Metadata

SETUP_CA_HINT = "pass --provider-ca with the CA certificate that signed the provider's certificate"
EXAMPLE_ISSUER = "https://idp.example/realms/k8s"
EXAMPLE_SERVER = "https://api.cluster.example:6443"


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


def issuer_problem(issuer: str) -> str | None:
    """What is wrong with an issuer URL as typed, in a person's words (None: worth asking)."""
    issuer = issuer.strip()
    if not issuer:
        return f"Enter the provider's URL (its issuer), e.g. {EXAMPLE_ISSUER}"
    parts = urlsplit(issuer)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return (
            f"The provider's URL must start with https://, e.g. {EXAMPLE_ISSUER} (not {issuer!r})"
        )
    return None


def server_problem(server: str) -> str | None:
    """What is wrong with an API server URL as typed (None: worth a handshake)."""
    server = server.strip()
    if not server:
        return f"Enter the cluster's API server URL, e.g. {EXAMPLE_SERVER}"
    parts = urlsplit(server)
    if parts.scheme != "https" or not parts.hostname:
        return (
            f"The API server URL must start with https://, e.g. {EXAMPLE_SERVER} (not {server!r})"
        )
    return None


def check_server(
    context: str,
    server: str,
    ca_data: str | None,
    kubeconfig: str,
    ca_hint: str | None = None,
    timeout: float = cluster_tls.TIMEOUT,
) -> cluster_tls.Finding:
    """Would kubectl's TLS connection to ``server`` verify with ``ca_data``? doctor's check
    (app.cluster_tls), made before a cluster is written: an AppError saying what to fix when
    kubectl would fail; a warning (unreachable, not checked) or a pass otherwise.

    ``ca_hint``: what to do about a CA that does not verify, where the question was asked
    (cluster_tls says it as a ``kubectl config set-cluster`` line).
    """
    from app.errors import AppError

    cluster = cluster_tls.ClusterTLS(name=context, server=server, file=kubeconfig, ca_data=ca_data)
    found = cluster_tls.check(cluster, timeout)
    remedy = ca_hint if ca_hint and found.remedy == cluster.set_ca else found.remedy
    if found.verdict == cluster_tls.FAIL:
        raise AppError(found.detail, remedy)
    return cluster_tls.Finding(found.verdict, found.detail, remedy)


def identity_args(context: str, paths: list[str]) -> list[str]:
    """The kubetray-exec args of the user ``context`` runs, as written ([] if none)."""
    view = View.load(paths)
    ctx = (view.get("contexts", context) or {}).get("context") or {}
    user = (view.get("users", str(ctx.get("user"))) or {}).get("user") or {}
    exec_ = user.get("exec") or {}
    args = exec_.get("args") if isinstance(exec_, dict) else None
    return [str(a) for a in args] if isinstance(args, list) else []


def probe(
    issuer: str, client_id: str, provider_ca_data: str | None, ca_hint: str = SETUP_CA_HINT
) -> Metadata:
    """The provider's discovery document, or an AppError in a person's words (before anything
    is written: a wrong issuer or an untrusted CA would only show at the first kubectl call).

    ``ca_hint``: what to do about an untrusted provider CA where the question was asked.
    """
    from app.errors import AppError, UsageError
    from app.identity import normalize_issuer
    from app.oidc import explain
    from app.oidc.client import OIDCClient
    from app.oidc.settings import OIDCSettings

    problem = issuer_problem(issuer)
    if problem:
        raise UsageError(problem)
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
