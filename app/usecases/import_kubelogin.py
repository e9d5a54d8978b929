"""Switch int128/kubelogin users to kubetray-exec (same flags), and undo the last switch.

What each import changed is recorded (in the keyring: args may hold a client secret), so the
undo puts back exactly what was there, and only for users that still read as kubetray wrote.
"""

from dataclasses import dataclass

from app import compose, installation
from app.errors import UsageError
from app.kubeconfig import edit as edits
from app.kubeconfig import migrate, records
from app.kubeconfig.edit import Edit, Written
from app.kubeconfig.migrate import Skipped
from app.kubeconfig.records import Records, UserChange
from app.kubeconfig.view import View


@dataclass(frozen=True)
class ImportPlan:
    view: View
    edit: Edit
    changes: list[UserChange]
    skipped: list[Skipped]


def plan_import(paths: list[str] | None) -> ImportPlan:
    """Every kubelogin user of the merged view (shadowed ones too)."""
    view = View.load(paths, lock=True)
    edit, changes, skipped = migrate.plan(view, installation.helper_path())
    return ImportPlan(view, edit, changes, skipped)


def apply_import(p: ImportPlan) -> list[Written]:
    """Record the changes (for the undo), then write them."""
    Records(compose.secret_store(), records.IMPORTS).push(p.changes)
    return edits.apply(p.edit, compose.kubeconfig_backups(), "import")


@dataclass(frozen=True)
class UndoPlan:
    view: View
    edit: Edit
    changed_since: list[UserChange]
    """Users changed since the import: left as they are."""


def plan_undo() -> UndoPlan:
    batches = Records(compose.secret_store(), records.IMPORTS).batches()
    if not batches:
        raise UsageError("there is no import to undo")
    batch = batches[-1]
    view = View.load(sorted({c.file for c in batch}), lock=True)
    changed = [c for c in batch if not records.still_as_written(view, c)]
    return UndoPlan(view, records.undo(batch), changed)


def apply_undo(p: UndoPlan) -> list[Written]:
    """Write the users back and drop the last import's record."""
    imports = Records(compose.secret_store(), records.IMPORTS)
    written = edits.apply(p.edit, compose.kubeconfig_backups(), "import --undo")
    imports.save(imports.batches()[:-1])
    return written
