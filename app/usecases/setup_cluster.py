"""Set a cluster up for kubetray: plan the kubeconfig change, then write it with a backup.

The CLI shows the plan and asks before writing; the app writes at once (the dialog was the
question) on a worker thread.
"""

from dataclasses import dataclass

from app import compose
from app.kubeconfig import edit as edits
from app.kubeconfig import setup
from app.kubeconfig.edit import Edit, Written
from app.kubeconfig.view import View


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


def apply(p: Plan, operation: str = "setup") -> Done:
    """Write the planned change (backed up, atomically)."""
    return Done(p.context, edits.apply(p.edit, compose.kubeconfig_backups(), operation))


def run(request: setup.Setup, paths: list[str] | None, operation: str) -> Done:
    """Plan and write in one go."""
    return apply(plan(request, paths), operation)
