"""Move static kubeconfig secrets into the keyring (secure) and back (unsecure).

Secure is a transaction: the credentials are stored first, then the record that lets
unsecure put things back, then the kubeconfig is written; if a step fails, what was done is
undone and the first error is raised. Unsecure writes the original user bodies back and
forgets only the credentials whose users now read as they did before.
"""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from app.errors import AppError, UsageError
from app.kubeconfig import edit as edits
from app.kubeconfig import records, secure
from app.kubeconfig.backups import Backups
from app.kubeconfig.edit import Edit, Written
from app.kubeconfig.migrate import Skipped
from app.kubeconfig.records import Records, UserChange
from app.kubeconfig.view import View
from app.progress import Progress, quiet
from app.static_credentials import StoredCredentials
from app.store.secret_store import SecretStore


@dataclass(frozen=True)
class SecurePlan:
    """What secure would do: the files as read, the change, and what it leaves."""

    view: View
    edit: Edit
    moves: list[secure.Move]
    skipped: list[Skipped]
    leftovers: list[secure.Leftover]
    """Secrets it cannot move (auth-provider tokens, client secrets in args or env)."""

    def files_still_holding_secrets(self) -> list[str]:
        """Files the moved users named (tokenFile, client-key ...): kubetray does not delete
        them, the user should once kubectl works."""
        return sorted(
            {
                str(m.change.before[k])
                for m in self.moves
                for k in ("tokenFile", "client-certificate", "client-key")
                if k in m.change.before
            }
        )


@dataclass(frozen=True)
class UnsecurePlan:
    """What unsecure would put back, and the users changed since (left as they are)."""

    view: View
    edit: Edit
    restore: list[UserChange]
    changed_since: list[UserChange]


class Secrets:
    """Secure and unsecure, with their collaborators: the keyring, the stored credentials on
    it, kubeconfig backups, the helper's path, and a way to tell a running agent that a
    stored credential changed."""

    def __init__(
        self,
        store: SecretStore,
        credentials: StoredCredentials,
        backups: Backups,
        helper: str,
        invalidate: Callable[[str], None],
    ) -> None:
        self._store = store
        self._creds = credentials
        self._backups = backups
        self._helper = helper
        self._invalidate = invalidate

    def plan_secure(
        self, paths: list[str] | None, users: list[str] | None, now: datetime
    ) -> SecurePlan:
        """``users`` None: every user with a static secret (and report the leftovers)."""
        creds = self._creds
        view = View.load(paths, lock=True)
        taken = {c.name for c in creds.list()}
        edit, moves, skipped = secure.plan(view, users, self._helper, taken, now)
        left = secure.leftovers(view) if users is None else []
        return SecurePlan(view, edit, moves, skipped, left)

    def apply_secure(
        self, p: SecurePlan, now: datetime, progress: Progress = quiet
    ) -> list[Written]:
        """Store the credentials, record the change, write the kubeconfig; all or nothing.
        ``progress`` hears of each credential stored and each file written."""
        store, creds = self._store, self._creds
        secured = Records(store, records.SECURED)
        before = secured.batches()
        names = [m.credential.name for m in p.moves]  # new names (plan_secure chose them)
        try:
            # Secrets first: a crash before the write leaves the kubeconfig as it was.
            creds.save_all([m.credential for m in p.moves], now, progress)
            for name in names:
                self._invalidate(name)
            secured.save([*before, [m.change for m in p.moves]])
            return edits.apply(p.edit, self._backups, "secure", progress)
        except (AppError, OSError):
            with contextlib.suppress(AppError, OSError):  # undo what we can; report the first error
                secured.save(before)
            with contextlib.suppress(AppError, OSError):
                creds.remove_all(names)
            raise

    def plan_unsecure(self, users: list[str] | None, progress: Progress = quiet) -> UnsecurePlan:
        """``users`` None: every user kubetray secured. ``progress`` hears of each credential
        read back from the store."""
        store, creds = self._store, self._creds
        changes = [c for batch in Records(store, records.SECURED).batches() for c in batch]
        chosen = [c for c in changes if users is None or c.user in users]
        if not chosen:
            raise UsageError(
                "nothing to unsecure" if users is None else f"kubetray did not secure {users}",
                None
                if users is None
                else "kubetray unsecure --all puts back every secret it moved",
            )
        restore = []
        for done, c in enumerate(chosen, 1):
            restore.append(secure.restorable(c, creds.load(c.stored) if c.stored else None))
            progress("read", done, len(chosen), c.stored or c.user)
        view = View.load(sorted({c.file for c in chosen}), lock=True)
        changed = [c for c in chosen if not records.still_as_written(view, c)]
        return UnsecurePlan(view, records.undo(restore), restore, changed)

    def apply_unsecure(self, p: UnsecurePlan, progress: Progress = quiet) -> list[Written]:
        """Write the users back, then forget the credentials of those that read as before.
        ``progress`` hears of each file written and each credential removed."""
        store, creds = self._store, self._creds
        secured = Records(store, records.SECURED)
        written = edits.apply(p.edit, self._backups, "unsecure", progress)
        view = View.load(sorted({c.file for c in p.restore}), lock=True)
        by_path = {f.path: f for f in view.files}
        done, gone = set(), []
        for c in p.restore:
            entry = by_path[c.file].find("users", c.user)
            if entry is not None and entry.get("user") == c.before:
                if c.stored:
                    gone.append(c.stored)
                done.add((c.file, c.user))
        creds.remove_all(gone, progress)
        for name in gone:
            self._invalidate(name)
        secured.save(
            [[c for c in batch if (c.file, c.user) not in done] for batch in secured.batches()]
        )
        return written
