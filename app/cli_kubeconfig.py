"""The kubeconfig commands: setup, import, secure, unsecure, backups (printing lives here).

The kubeconfig machinery is imported by the command that runs, not with the parser: every
`kubetray` start builds the parser, and `kubetray agent` (started by kubetray-exec when kubectl
waits) needs none of it.
"""

import argparse
import base64
import contextlib
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from app.cli_help import add_command
from app.errors import AppError, UsageError
from exec_helper.errors import printable

if TYPE_CHECKING:
    from app.kubeconfig import edit as edits
    from app.kubeconfig import secure
    from app.kubeconfig.edit import Edit
    from app.kubeconfig.view import View


def _warn(line: str) -> None:
    print(f"kubetray: {line}", file=sys.stderr)


class _Progress:
    """Progress of a long kubeconfig command on stderr (stdout keeps the report): on a terminal
    one line redrawn in place, with a bar; elsewhere (a log, CI) a line per step. Nothing for a
    single step: its report follows at once."""

    BAR = 24

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._drawn = False

    def __call__(self, step: str, done: int, total: int, item: str) -> None:
        if total < 2:
            return
        item = printable(item)  # a user's name comes from a file: no terminal escapes
        if not self._tty:
            print(f"kubetray: {step} {done}/{total}: {item}", file=self._stream, flush=True)
            return
        filled = self.BAR * done // total
        line = f"{step} [{'#' * filled}{'-' * (self.BAR - filled)}] {done}/{total}  {item}"
        width = shutil.get_terminal_size().columns - 1
        self._stream.write("\r\x1b[K" + line[:width])
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Clear the bar, so the report starts on a clean line."""
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False


@contextlib.contextmanager
def _progress() -> Iterator[_Progress]:
    shown = _Progress()
    try:
        yield shown
    finally:
        shown.close()


def _confirm(args: argparse.Namespace, what: str) -> None:
    """Ask on a terminal; elsewhere --yes must say so (a script never edits by surprise)."""
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"not applied: {what}", "add --yes to apply without a prompt")
    answer = input(f"{what}? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("not applied")


def _review(view: "View", edit: "Edit", args: argparse.Namespace, what: str) -> bool:
    """Show the diff (secrets redacted); True when it should be written (asked on a terminal)."""
    from app.kubeconfig import edit as edits

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


def _report(written: "list[edits.Written]") -> None:
    for w in written:
        if w.backup is None:
            print(f"wrote {w.path} (new file)")
        elif w.backup.in_store:
            print(f"wrote {w.path} (it holds secrets: its backup is in the OS keyring)")
        else:
            print(f"wrote {w.path} (backup: {w.backup.ref})")


def _write(edit: "Edit", operation: str) -> None:
    from app import compose
    from app.kubeconfig import edit as edits

    _report(edits.apply(edit, compose.kubeconfig_backups(), operation))


def existing_kubeconfig(path: str | None) -> list[str] | None:
    """``--kubeconfig FILE`` as the paths to load; a UsageError when FILE does not exist (one
    named on the command line is more likely a typo than a file to create)."""
    if not path:
        return None
    if not os.path.lexists(path):
        raise UsageError(f"the kubeconfig {path} does not exist")
    return [path]


def _paths(args: argparse.Namespace) -> list[str] | None:
    return existing_kubeconfig(args.kubeconfig)


def _b64_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return base64.b64encode(f.read()).decode()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def cmd_setup(args: argparse.Namespace) -> int:
    from app import compose, installation
    from app.kubeconfig import setup
    from app.usecases import setup_cluster

    if args.server is None and args.certificate_authority:
        raise UsageError("--certificate-authority goes with --server")
    ca_data = _b64_file(args.certificate_authority) if args.certificate_authority else None
    request = setup.Setup(
        issuer=args.issuer,
        client_id=args.client_id,
        helper=args.helper_command or installation.helper_path(),
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
    planned = setup_cluster.plan(request, [args.kubeconfig] if args.kubeconfig else None)
    if _review(planned.view, planned.edit, args, f"write context {planned.context}"):
        _report(setup_cluster.apply(planned, compose.kubeconfig_backups()).written)
        where = f"--kubeconfig {args.kubeconfig} " if args.kubeconfig else ""
        print(f"try: kubectl {where}--context {planned.context} get namespaces")
    return 0


IMPORTED_TOOLS = (
    "int128/kubelogin, Azure kubelogin, gke-gcloud-auth-plugin, aws eks get-token or "
    "aws-iam-authenticator"
)


def _keyring_missing(why: str | None) -> "AppError | None":
    """When ``why`` needs the keyring and there is none here: the error saying so."""
    from app import compose
    from app.store.keyring_store import NoKeyring

    if why is None:
        return None
    try:
        compose.secret_store().check_usable()
    except NoKeyring as e:
        return AppError(f"this import needs the OS keyring ({why}), but {e.why}", e.hint)
    return None


def cmd_import(args: argparse.Namespace) -> int:
    from app import compose

    imports = compose.import_kubelogin()
    if args.undo:
        undo = imports.plan_undo(_paths(args))
        for c in undo.changed_since:
            _warn(f"left {c.user} in {c.file} as it is: it changed since the import")
        if _review(undo.view, undo.edit, args, "undo the last import"):
            with _progress() as shown:
                written = imports.apply_undo(undo, shown)
            _report(written)
            left = {id(c) for c in undo.changed_since}
            restored = [c.user for c in undo.found.changes if id(c) not in left]
            if restored:
                print(f"restored {', '.join(restored)} as before the import")
        return 0
    p = imports.plan_import(_paths(args))
    for s in p.skipped:
        _warn(f"left {s.user} in {s.file} as it is: {s.reason}")
    if not p.changes:
        print(f"no users of {IMPORTED_TOOLS} found: nothing to import")
        return 1 if p.skipped else 0
    missing = _keyring_missing(imports.keyring_needed(p))
    if missing is not None:
        if not args.dry_run:  # before the diff: not a diff, then a failure
            raise missing
        _warn(f"the import would fail: {missing.message}")
    if _review(p.view, p.edit, args, f"switch {len(p.changes)} user(s) to kubetray-exec"):
        with _progress() as shown:
            written = imports.apply_import(p, shown)
        _report(written)
        named = f" --kubeconfig {shlex.quote(args.kubeconfig)}" if args.kubeconfig else ""
        print(
            f"imported {', '.join(c.user for c in p.changes)}; undo: kubetray import{named} --undo"
        )
    return 0


def cmd_secure(args: argparse.Namespace) -> int:
    from app import compose

    if not args.users and not args.all:
        raise UsageError("name the users to secure", "or give --all for every static secret")
    now = datetime.now(UTC)
    secrets = compose.secrets()
    p = secrets.plan_secure(_paths(args), None if args.all else args.users, now)
    for s in p.skipped:
        _warn(f"left {s.user} in {s.file} as it is: {s.reason}")
    if not p.moves:
        print("no static secrets kubetray can move" if p.leftovers else "no static secrets to move")
        _report_leftovers(p.leftovers)
        return 1 if p.skipped or p.leftovers else 0
    if not _review(
        p.view, p.edit, args, f"move the secrets of {len(p.moves)} user(s) to the keyring"
    ):
        return 0
    with _progress() as shown:
        written = secrets.apply_secure(p, now, shown)
    _report(written)
    for m in p.moves:
        print(f"{m.change.user}: now kubetray-exec --stored {m.credential.name}")
    for path in p.files_still_holding_secrets():
        print(f"{path} still holds the secret: delete it once kubectl works (unsecure inlines it)")
    _report_leftovers(p.leftovers)
    return 0


def _report_leftovers(left: "list[secure.Leftover]") -> None:
    """Say which secrets stay in the kubeconfig and what to do (never their values)."""
    for item in left:
        _warn(f"{item.user} in {item.file} still holds {item.what}: {item.todo}")


def cmd_unsecure(args: argparse.Namespace) -> int:
    from app import compose

    secrets = compose.secrets()
    with _progress() as shown:
        p = secrets.plan_unsecure(None if args.all else args.users, shown)
    for c in p.changed_since:
        _warn(f"left {c.user} in {c.file} as it is: it changed since kubetray secured it")
    if _review(p.view, p.edit, args, "put the secrets back"):
        with _progress() as shown:
            written = secrets.apply_unsecure(p, shown)
        _report(written)
    return 0


def cmd_backups(args: argparse.Namespace) -> int:
    from app import compose
    from app.kubeconfig import files
    from app.kubeconfig.edit import Edit, Exact
    from app.kubeconfig.view import View

    backups = compose.kubeconfig_backups()
    rows = backups.entries(os.path.realpath(args.file) if args.file else None)
    if args.restore:
        found = [b for b in rows if b.id == args.restore]
        if not found:
            raise UsageError(f"no backup {args.restore}", "kubetray backups lists them")
        b = found[0]
        content = backups.content(b)
        files.parse(b.file, content.decode("utf-8-sig"))  # a kubeconfig, or one line why not
        view = View.load([b.file], lock=True)
        edit = Edit(exact={b.file: Exact(content)})  # the backup's bytes, as they were
        if _review(view, edit, args, f"restore {b.file} as of {b.time}"):
            _write(edit, f"restore {b.id}")
        return 0
    if not rows:
        print("no kubeconfig backups yet")
    for b in rows:
        where = "in the OS keyring" if b.in_store else b.ref
        print(f"{b.id}  {b.time}  {b.operation:<14} {b.file}  ({where})")
    return 0


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register the kubeconfig commands."""

    def common(p: argparse.ArgumentParser, dry_run: bool = True) -> None:
        p.add_argument("--kubeconfig", metavar="FILE", help="this file instead of $KUBECONFIG")
        p.add_argument("--yes", "-y", action="store_true", help="apply without asking")
        if dry_run:
            p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")

    p = add_command(
        sub,
        "setup",
        "add an OIDC cluster login to kubeconfig",
        "Add a context whose user logs in through kubetray-exec to an OpenID provider, for an "
        "existing cluster (--cluster) or a new one (--server, --certificate-authority). It asks "
        "the provider first (--no-probe skips that), shows the diff and asks before writing.",
        [
            "kubetray setup --issuer https://idp.example.com --client-id kubernetes "
            "--server https://api.example.com:6443 --certificate-authority ca.crt --context prod",
            "kubetray setup --issuer https://idp.example.com --client-id kubernetes "
            "--cluster prod --dry-run",
        ],
    )
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
        "--helper-command",
        metavar="PATH",
        help="the kubetray-exec the kubeconfig runs (default: this one); for a kubeconfig on an "
        "SSH host, the path kubetray ssh --install-helper printed",
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

    p = add_command(
        sub,
        "import",
        "switch kubelogin, gke-gcloud-auth-plugin and EKS users to kubetray-exec",
        "Switch every kubeconfig user that runs int128/kubelogin (kubectl oidc-login), Azure "
        "kubelogin (as az aks get-credentials and kubelogin convert-kubeconfig write it, and "
        "the old auth-provider: azure), gke-gcloud-auth-plugin (as gcloud container clusters "
        "get-credentials writes it), aws eks get-token or aws-iam-authenticator (as aws eks "
        "update-kubeconfig writes them) to kubetray-exec, keeping every flag's meaning and the "
        "env: a client registered for kubelogin keeps working, one Entra or Google login serves "
        "every AKS or GKE cluster, and an EKS profile signs as before. --undo puts the last "
        "import back.",
        ["kubetray import --dry-run", "kubetray import", "kubetray import --undo"],
    )
    p.add_argument("--undo", action="store_true", help="put the last import back")
    common(p)
    p.set_defaults(func=cmd_import)

    p = add_command(
        sub,
        "secure",
        "move static tokens and keys into the OS keyring",
        "Move the static tokens and client keys of kubeconfig users into the OS keyring; each "
        "user then runs kubetray-exec --stored NAME. No secret is left in the kubeconfig or its "
        "backups; kubetray unsecure puts them back.",
        ["kubetray secure --all", "kubetray secure ci-bot admin --dry-run"],
    )
    p.add_argument("users", nargs="*", help="kubeconfig users")
    p.add_argument("--all", action="store_true", help="every user with a static secret")
    common(p)
    p.set_defaults(func=cmd_secure)

    p = add_command(
        sub,
        "unsecure",
        "put secured secrets back into kubeconfig",
        "Put the secrets kubetray secure moved to the keyring back into the kubeconfig users "
        "they came from (a user changed since is left as it is).",
        ["kubetray unsecure --all", "kubetray unsecure ci-bot"],
    )
    p.add_argument("users", nargs="*", help="kubeconfig users")
    p.add_argument("--all", action="store_true", help="every user kubetray secured")
    common(p)
    p.set_defaults(func=cmd_unsecure)

    p = add_command(
        sub,
        "backups",
        "list kubetray's kubeconfig backups, or restore one",
        "List the backups kubetray made before each kubeconfig change (the newest five per "
        "file; those of files holding secrets are in the OS keyring), or put one back after "
        "backing up the current file.",
        ["kubetray backups", "kubetray backups --restore ID"],
    )
    p.add_argument(
        "--file",
        "--kubeconfig",
        dest="file",
        metavar="FILE",
        help="only this file's backups (--kubeconfig, as every other command spells it)",
    )
    p.add_argument("--restore", metavar="ID", help="put this backup back (after a new backup)")
    p.add_argument("--yes", "-y", action="store_true", help="apply without asking")
    p.set_defaults(func=cmd_backups, kubeconfig=None)
