"""The JSON files kubetray keeps, and what stops it from using them, in a person's words.

Status, doctor and kubectl's line (once per agent) say each problem in one sentence naming the
file and the remedy: a copy set aside as unreadable (app/jsonfile.py), a file kubetray cannot
read, a newer kubetray's format, settings it cannot use.
"""

import os

from app import formats, jsonfile
from app.errors import AppError
from exec_helper import paths


def files() -> list[tuple[str, int]]:
    """Every JSON file kubetray keeps, with the newest format this kubetray reads."""
    from app.broker.consent import FORMAT as REMOTE_HOSTS
    from app.broker.registry import INDEX_VERSION
    from app.kubeconfig.backups import FORMAT as BACKUPS
    from app.kubeconfig.records import JOURNAL_FORMAT
    from app.settings import FORMAT as SETTINGS
    from app.static_credentials import INDEX_FORMAT

    config, state = paths.config_dir(), paths.state_dir()
    return [
        (os.path.join(config, "settings.json"), SETTINGS),
        (os.path.join(config, "identities.json"), INDEX_VERSION),
        (os.path.join(config, "stored.json"), INDEX_FORMAT),
        (os.path.join(config, "remote-hosts.json"), REMOTE_HOSTS),
        (os.path.join(state, "kubeconfig-backups.json"), BACKUPS),
        (os.path.join(state, "kubeconfig-imports.json"), JOURNAL_FORMAT),
    ]


def problems() -> list[str]:
    """One line per problem (what, then the remedy), in the order of ``files``."""
    return [e.one_line() for e in errors()]


def errors() -> list[AppError]:
    """Each problem as an error (message and hint), in the order of ``files``."""
    from app.settings import Settings

    out: list[AppError] = [*directory_errors()]
    kept = files()
    settings = Settings.path()
    for path, readable in kept:
        try:
            if path == settings:
                Settings.load()  # a person's file: refused, never set aside
                continue
            doc = jsonfile.load(path)  # sets a damaged one aside
            if isinstance(doc, dict):
                formats.check(doc, path, readable)
        except AppError as e:
            if all(e.message != o.message for o in out):  # a directory's: said once
                out.append(e)
    out += [jsonfile.aside_notice(p, a) for p, a in jsonfile.set_aside([p for p, _ in kept])]
    return out


class UnusableDirectory(AppError):
    """The config or state directory cannot hold kubetray's files."""


def directory_errors() -> list[UnusableDirectory]:
    """The config and state directories kubetray cannot use, each in one line."""
    out: list[UnusableDirectory] = []
    for kind, where in (("config", paths.config_dir()), ("state", paths.state_dir())):
        if os.path.isdir(where) and os.access(where, os.W_OK | os.X_OK):
            continue
        try:  # kubetray makes them when it first writes: making them now costs nothing
            os.makedirs(where, mode=0o700, exist_ok=True)
            if not os.access(where, os.W_OK | os.X_OK):
                raise PermissionError(13, "Permission denied", where)
        except OSError as e:
            out.append(UnusableDirectory(paths.unusable_dir(kind, where, e)))
    return out


def start_blocker() -> AppError | None:
    """What stops an agent or the app from starting, if anything: a directory it cannot use,
    a settings.json it refuses (both said in one line at its start)."""
    from app.settings import Settings

    for e in directory_errors():
        return e
    try:
        Settings.load()
    except AppError as e:
        return e
    return None


NOT_STARTING = "not running, and it cannot start until the file problem below is mended"
"""The agent's line in status where start_blocker() says why."""


def check_directories() -> None:
    """At an agent's or the app's start: UnusableDirectory for the first directory it cannot
    use (an agent that cannot keep its files or its log would fail later, and less clearly)."""
    for e in directory_errors():
        raise e
