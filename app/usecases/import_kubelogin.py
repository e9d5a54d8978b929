"""Switch int128/kubelogin users to kubetray-exec (same flags), and undo the last switch.

What each import changed is recorded (in the keyring when it holds a secret: kubelogin's args
may hold a client secret; else in a journal file), so the undo puts back exactly what was
there, and only for users that still read as kubetray wrote. Without a keyring, an import
needs one only for such a record or for the backup of a file that holds secrets.
"""

from dataclasses import dataclass

from app.errors import AppError, UsageError
from app.kubeconfig import edit as edits
from app.kubeconfig import migrate, records
from app.kubeconfig.backups import Backups
from app.kubeconfig.edit import Edit, Exact, Written
from app.kubeconfig.migrate import Skipped
from app.kubeconfig.records import Found, ImportRecords, UserChange
from app.kubeconfig.secrets import has_secrets
from app.kubeconfig.view import View, default_paths
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
    found: Found


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
        """Record the changes (for the undo), then write them (``progress``: each file), then
        note what was written, so that the undo knows whether a file changed since."""
        self._imports.push(p.changes)
        written = edits.apply(p.edit, self._backups, "import", progress)
        self._imports.note_written(
            {w.path: {"digest": w.digest, "backup": w.backup.id} for w in written if w.backup}
        )
        return written

    def plan_undo(self, paths: list[str] | None = None) -> UndoPlan:
        """Undo the newest import of the files ``paths`` names (None: the kubeconfig files
        kubectl reads here): only those files. A file still as the import left it gets the
        backup's exact bytes; one changed since gets only its imported users put back."""
        asked = paths or default_paths()
        found = self._imports.last(asked)
        if found is None:
            other = self._imports.last(None)
            if other is not None:
                files = sorted({c.file for c in other.changes})
                raise UsageError(
                    f"there is no import of {', '.join(asked)} to undo",
                    f"the last import changed {', '.join(files)}: kubetray import "
                    f"--kubeconfig {files[0]} --undo",
                )
            raise UsageError("there is no import to undo")
        view = View.load(sorted({c.file for c in found.changes}), lock=True)
        changed = [c for c in found.changes if not records.still_as_written(view, c)]
        edit = records.undo(found.changes)
        for path, written in found.written.items():
            exact = self._exact(written)
            if exact is not None:
                edit.exact[path] = exact
        return UndoPlan(view, edit, changed, found)

    def _exact(self, written: object) -> Exact | None:
        """The backup's bytes, for a file whose digest is still ``written["digest"]``."""
        if not isinstance(written, dict):
            return None
        digest, backup_id = written.get("digest"), written.get("backup")
        if not isinstance(digest, str) or not isinstance(backup_id, str):
            return None
        backup = next((b for b in self._backups.entries() if b.id == backup_id), None)
        if backup is None:
            return None
        try:
            return Exact(self._backups.content(backup), when=digest)
        except (AppError, OSError):  # the backup is gone or unreadable: a minimal edit then
            return None

    def apply_undo(self, p: UndoPlan, progress: Progress = quiet) -> list[Written]:
        """Write the users back and drop what was undone from the record (``progress``: each
        file)."""
        written = edits.apply(p.edit, self._backups, "import --undo", progress)
        self._imports.drop(p.found)
        return written
