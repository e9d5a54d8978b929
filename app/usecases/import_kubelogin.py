"""Switch int128/kubelogin users to kubetray-exec (same flags), and undo the last switch.

What each import changed is recorded (in the keyring when it holds a secret: kubelogin's args
may hold a client secret; else in a journal file), so the undo puts back exactly what was
there, and only for users that still read as kubetray wrote. Without a keyring, an import
needs one only for such a record or for the backup of a file that holds secrets.
"""

from dataclasses import dataclass

from app.errors import UsageError
from app.kubeconfig import edit as edits
from app.kubeconfig import migrate, records
from app.kubeconfig.backups import Backups
from app.kubeconfig.edit import Edit, Written
from app.kubeconfig.migrate import Skipped
from app.kubeconfig.records import ImportRecords, UserChange
from app.kubeconfig.secrets import has_secrets
from app.kubeconfig.view import View
from app.progress import Progress, quiet


@dataclass(frozen=True)
class ImportPlan:
    view: View
    edit: Edit
    changes: list[UserChange]
    skipped: list[Skipped]


@dataclass(frozen=True)
class UndoPlan:
    view: View
    edit: Edit
    changed_since: list[UserChange]
    """Users changed since the import: left as they are."""


class ImportKubelogin:
    """Import and its undo, with their collaborators: the record of imports, kubeconfig
    backups, and the helper's path."""

    def __init__(self, imports: ImportRecords, backups: Backups, helper: str) -> None:
        self._imports = imports
        self._backups = backups
        self._helper = helper

    @staticmethod
    def keyring_needed(p: ImportPlan) -> str | None:
        """Why applying ``p`` needs the keyring, in the user's words; None when it does not."""
        if records.holds_secrets(p.changes):
            return "the record of this import, for --undo, holds a secret"
        by_path = {f.path: f for f in p.view.files}
        for path in p.edit.changes:
            f = by_path.get(path)
            if f is not None and f.text is not None and has_secrets(f.data):
                return f"{path} holds secrets: its backup goes there"
        return None

    def plan_import(self, paths: list[str] | None) -> ImportPlan:
        """Every kubelogin user of the merged view (shadowed ones too)."""
        view = View.load(paths, lock=True)
        edit, changes, skipped = migrate.plan(view, self._helper)
        return ImportPlan(view, edit, changes, skipped)

    def apply_import(self, p: ImportPlan, progress: Progress = quiet) -> list[Written]:
        """Record the changes (for the undo), then write them (``progress``: each file)."""
        self._imports.push(p.changes)
        return edits.apply(p.edit, self._backups, "import", progress)

    def plan_undo(self) -> UndoPlan:
        batch = self._imports.last()
        if not batch:
            raise UsageError("there is no import to undo")
        view = View.load(sorted({c.file for c in batch}), lock=True)
        changed = [c for c in batch if not records.still_as_written(view, c)]
        return UndoPlan(view, records.undo(batch), changed)

    def apply_undo(self, p: UndoPlan, progress: Progress = quiet) -> list[Written]:
        """Write the users back and drop the last import's record (``progress``: each file)."""
        written = edits.apply(p.edit, self._backups, "import --undo", progress)
        self._imports.drop_last()
        return written
