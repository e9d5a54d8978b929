"""The kubeconfig commands: setup, import, secure, unsecure, backups (printing lives here)."""

import argparse
import base64
import contextlib
import copy
import os
import sys
from datetime import UTC, datetime

from app import compose, installation
from app.broker import client
from app.errors import AppError, UsageError
from app.kubeconfig import edit as edits
from app.kubeconfig import files, migrate, records, secure, setup
from app.kubeconfig.backups import IN_STORE
from app.kubeconfig.edit import Edit
from app.kubeconfig.records import Records, UserChange
from app.kubeconfig.view import View
from app.usecases import setup_cluster


def _warn(line: str) -> None:
    print(f"kubetray: {line}", file=sys.stderr)


def _confirm(args: argparse.Namespace, what: str) -> None:
    """Ask on a terminal; elsewhere --yes must say so (a script never edits by surprise)."""
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"not applied: {what}", "add --yes to apply without a prompt")
    answer = input(f"{what}? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("not applied")


def _review(view: View, edit: Edit, args: argparse.Namespace, what: str) -> bool:
    """Show the diff (secrets redacted); True when it should be written (asked on a terminal)."""
    diff = edits.diff(edit, view)
    if not diff:
        print("the kubeconfig already says this: nothing to change")
        return False
    print(diff, end="")
    if getattr(args, "dry_run", False):
        print("(dry run: nothing written)")
        return False
    _confirm(args, what)
    return True


def _report(written: list[edits.Written]) -> None:
    for w in written:
        if w.backup is None:
            print(f"wrote {w.path} (new file)")
        elif w.backup.where == IN_STORE:
            print(f"wrote {w.path} (it holds secrets: its backup is in the OS keyring)")
        else:
            print(f"wrote {w.path} (backup: {w.backup.ref})")


def _write(edit: Edit, operation: str) -> None:
    _report(edits.apply(edit, compose.kubeconfig_backups(), operation))


def _paths(args: argparse.Namespace) -> list[str] | None:
    return [args.kubeconfig] if args.kubeconfig else None


def _b64_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return base64.b64encode(f.read()).decode()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def cmd_setup(args: argparse.Namespace) -> int:
    if args.server is None and args.certificate_authority:
        raise UsageError("--certificate-authority goes with --server")
    ca_data = _b64_file(args.certificate_authority) if args.certificate_authority else None
    request = setup.Setup(
        issuer=args.issuer,
        client_id=args.client_id,
        helper=installation.helper_path(),
        scopes=tuple(s for item in args.scope for s in item.replace(",", " ").split()),
        context=args.context,
        cluster=args.cluster,
        server=args.server,
        ca_data=ca_data,
        user=args.user,
        in_extension=args.per_cluster,
        name=args.name,
        provider_ca_data=_b64_file(args.provider_ca) if args.provider_ca else None,
        listen_addresses=tuple(args.listen_address),
    )
    if not args.no_probe:
        setup_cluster.probe(request.issuer, request.client_id, request.provider_ca_data)
    planned = setup_cluster.plan(request, _paths(args))
    if _review(planned.view, planned.edit, args, f"write context {planned.context}"):
        _report(setup_cluster.apply(planned).written)
        print(f"try: kubectl --context {planned.context} get namespaces")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    store = compose.secret_store()
    imports = Records(store, records.IMPORTS)
    if args.undo:
        return _undo(args, imports)
    view = View.load(_paths(args), lock=True)
    edit, changes, skipped = migrate.plan(view, installation.helper_path())
    for s in skipped:
        _warn(f"left {s.user} in {s.file} as it is: {s.reason}")
    if not changes:
        print("no kubelogin users found: nothing to import")
        return 1 if skipped else 0
    if _review(view, edit, args, f"switch {len(changes)} user(s) to kubetray-exec"):
        imports.push(changes)
        _write(edit, "import")
        print(f"imported {', '.join(c.user for c in changes)}; undo: kubetray import --undo")
    return 0


def _undo(args: argparse.Namespace, imports: Records) -> int:
    batches = imports.batches()
    if not batches:
        raise UsageError("there is no import to undo")
    batch = batches[-1]
    view = View.load(sorted({c.file for c in batch}), lock=True)
    kept = [c for c in batch if not records.still_as_written(view, c)]
    for c in kept:
        _warn(f"left {c.user} in {c.file} as it is: it changed since the import")
    if _review(view, records.undo(batch), args, "undo the last import"):
        _write(records.undo(batch), "import --undo")
        imports.save(batches[:-1])
    return 0


def cmd_secure(args: argparse.Namespace) -> int:
    if not args.users and not args.all:
        raise UsageError("name the users to secure", "or give --all for every static secret")
    store = compose.secret_store()
    creds = compose.stored_credentials(store)
    now = datetime.now(UTC)
    view = View.load(_paths(args), lock=True)
    taken = {c.name for c in creds.list()}
    edit, moves, skipped = secure.plan(
        view, None if args.all else args.users, installation.helper_path(), taken, now
    )
    for s in skipped:
        _warn(f"left {s.user} in {s.file} as it is: {s.reason}")
    left = secure.leftovers(view) if args.all else []
    if not moves:
        print("no static secrets kubetray can move" if left else "no static secrets to move")
        _report_leftovers(left)
        return 1 if skipped or left else 0
    if not _review(view, edit, args, f"move the secrets of {len(moves)} user(s) to the keyring"):
        return 0
    secured = Records(store, records.SECURED)
    before = secured.batches()
    saved = []
    try:
        for m in moves:  # secrets first: a crash before the write leaves the kubeconfig as it was
            creds.save(m.credential, now)
            saved.append(m)
            client.invalidate(m.credential.name)
        secured.save([*before, [m.change for m in moves]])
        _write(edit, "secure")
    except (AppError, OSError):
        with contextlib.suppress(AppError, OSError):  # undo what we can; report the first error
            secured.save(before)
        for m in saved:
            with contextlib.suppress(AppError, OSError):
                creds.remove(m.credential.name)
        raise
    for m in moves:
        print(f"{m.change.user}: now kubetray-exec --stored {m.credential.name}")
    files = {
        str(m.change.before[k])
        for m in moves
        for k in ("tokenFile", "client-certificate", "client-key")
        if k in m.change.before
    }
    for path in sorted(files):
        print(f"{path} still holds the secret: delete it once kubectl works (unsecure inlines it)")
    _report_leftovers(left)
    return 0


def _report_leftovers(left: list[secure.Leftover]) -> None:
    """Say which secrets stay in the kubeconfig and what to do (never their values)."""
    for item in left:
        _warn(f"{item.user} in {item.file} still holds {item.what}: {item.todo}")


def cmd_unsecure(args: argparse.Namespace) -> int:
    store = compose.secret_store()
    creds = compose.stored_credentials(store)
    secured = Records(store, records.SECURED)
    changes = [c for batch in secured.batches() for c in batch]
    chosen = [c for c in changes if args.all or c.user in args.users]
    if not chosen:
        raise UsageError(
            "nothing to unsecure" if args.all else f"kubetray did not secure {args.users}",
            None if args.all else "kubetray unsecure --all puts back every secret it moved",
        )
    restore: list[UserChange] = []
    for c in chosen:
        cred = creds.load(c.stored) if c.stored else None
        restore.append(secure.restorable(c, cred))
    view = View.load(sorted({c.file for c in chosen}), lock=True)
    for c in chosen:
        if not records.still_as_written(view, c):
            _warn(f"left {c.user} in {c.file} as it is: it changed since kubetray secured it")
    if not _review(view, records.undo(restore), args, "put the secrets back"):
        return 0
    _write(records.undo(restore), "unsecure")
    view = View.load(sorted({c.file for c in chosen}), lock=True)
    done = []
    for c in restore:
        f = next(f for f in view.files if f.path == c.file)
        entry = f.find("users", c.user)
        if entry is not None and entry.get("user") == c.before:
            if c.stored:
                creds.remove(c.stored)
                client.invalidate(c.stored)
            done.append((c.file, c.user))
    secured.save(
        [[c for c in batch if (c.file, c.user) not in done] for batch in secured.batches()]
    )
    return 0


def cmd_backups(args: argparse.Namespace) -> int:
    backups = compose.kubeconfig_backups()
    rows = backups.entries(os.path.realpath(args.file) if args.file else None)
    if args.restore:
        found = [b for b in rows if b.id == args.restore]
        if not found:
            raise UsageError(f"no backup {args.restore}", "kubetray backups lists them")
        b = found[0]
        restored = files.parse(b.file, backups.content(b).decode("utf-8"))

        def put_back(data: dict[str, object]) -> None:
            data.clear()
            data.update(copy.deepcopy(restored))

        view = View.load([b.file], lock=True)
        edit = Edit()
        edit.add(b.file, put_back)
        if _review(view, edit, args, f"restore {b.file} as of {b.time}"):
            _write(edit, f"restore {b.id}")
        return 0
    if not rows:
        print("no kubeconfig backups yet")
    for b in rows:
        where = "in the OS keyring" if b.where == IN_STORE else b.ref
        print(f"{b.id}  {b.time}  {b.operation:<14} {b.file}  ({where})")
    return 0


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register the kubeconfig commands."""

    def common(p: argparse.ArgumentParser, dry_run: bool = True) -> None:
        p.add_argument("--kubeconfig", metavar="FILE", help="this file instead of $KUBECONFIG")
        p.add_argument("--yes", "-y", action="store_true", help="apply without asking")
        if dry_run:
            p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")

    p = sub.add_parser("setup", help="add an OIDC cluster login to kubeconfig")
    p.add_argument("--issuer", required=True, metavar="URL", help="the OpenID provider")
    p.add_argument("--client-id", required=True, metavar="ID")
    p.add_argument("--scope", action="append", default=[], help="an extra scope (repeatable)")
    p.add_argument("--context", metavar="NAME", help="the context to write")
    p.add_argument("--cluster", metavar="NAME", help="an existing cluster (or the new one's name)")
    p.add_argument("--server", metavar="URL", help="a new cluster's API server")
    p.add_argument("--certificate-authority", metavar="FILE", help="the new cluster's CA")
    p.add_argument("--user", metavar="NAME", help="the user's name (default: the context's)")
    p.add_argument(
        "--name", metavar="NAME", help="the identity's name in kubetray (default: the user's)"
    )
    p.add_argument(
        "--provider-ca", metavar="FILE", help="the OpenID provider's CA, if private (embedded)"
    )
    p.add_argument(
        "--listen-address",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="loopback address for the browser login's redirect (repeatable)",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="write without asking the provider first (it is offline, or not reachable from here)",
    )
    p.add_argument(
        "--per-cluster",
        action="store_true",
        help="put the OIDC settings in the cluster's exec extension (one user for all)",
    )
    common(p)
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("import", help="switch kubelogin users to kubetray-exec")
    p.add_argument("--undo", action="store_true", help="put the last import back")
    common(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("secure", help="move static tokens and keys into the OS keyring")
    p.add_argument("users", nargs="*", help="kubeconfig users")
    p.add_argument("--all", action="store_true", help="every user with a static secret")
    common(p)
    p.set_defaults(func=cmd_secure)

    p = sub.add_parser("unsecure", help="put secured secrets back into kubeconfig")
    p.add_argument("users", nargs="*", help="kubeconfig users")
    p.add_argument("--all", action="store_true", help="every user kubetray secured")
    common(p)
    p.set_defaults(func=cmd_unsecure)

    p = sub.add_parser("backups", help="list kubetray's kubeconfig backups, or restore one")
    p.add_argument("--file", metavar="FILE", help="only this file's backups")
    p.add_argument("--restore", metavar="ID", help="put this backup back (after a new backup)")
    p.add_argument("--yes", "-y", action="store_true", help="apply without asking")
    p.set_defaults(func=cmd_backups, kubeconfig=None)
