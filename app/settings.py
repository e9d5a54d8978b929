"""The app's settings, persisted as JSON in the config directory (no secrets here)."""

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app import formats, jsonfile
from app.errors import AppError
from exec_helper import paths

FORMAT = 1
"""settings.json's format (app/formats.py); 0.1.0 wrote it without a number."""


@dataclass
class Settings:
    """What the Settings window edits."""

    start_at_login: bool = False
    browser_command: str = ""
    """Empty: the desktop's default browser."""
    notify_login_needed: bool = True
    notify_expiring: bool = True
    notify_failures: bool = True
    refresh_margin_seconds: int = 60
    """Refresh tokens at least this long before they expire (10 % of the lifetime if larger)."""
    secret_store: str = "auto"
    """Where login tokens live: keyring, memory (until the agent stops), or auto (keyring if
    usable, else memory). Stored credentials always need the keyring."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Settings of a newer kubetray, kept as they were."""

    @classmethod
    def path(cls) -> str:
        return os.path.join(paths.config_dir(), "settings.json")

    @classmethod
    def load(cls) -> "Settings":
        """Saved settings, defaults for anything missing. A file kubetray cannot use is never
        guessed around nor written over: BadSettings names the file or the setting and the
        remedy (a person edits this file by hand); NewerFormat for a newer kubetray's."""
        path = cls.path()
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return cls()
        except OSError as e:
            said = jsonfile.unreadable(path, e)
            raise BadSettings(said.message, said.hint) from None
        try:
            doc = json.loads(raw)
        except ValueError as e:  # UnicodeDecodeError included
            where = (
                f" at line {e.lineno} column {e.colno}"
                if isinstance(e, json.JSONDecodeError)
                else ""
            )
            raise BadSettings(f"{path} is not valid JSON{where}", _FIX) from None
        except RecursionError:
            raise BadSettings(f"{path} is nested too deeply", _FIX) from None
        if not isinstance(doc, dict):
            raise BadSettings(f"{path} is not a JSON object ({{...}})", _FIX)
        formats.check(doc, path, FORMAT)
        known = {f.name for f in fields(cls) if f.name != "extra"}
        defaults = cls()
        for k, v in doc.items():
            want = getattr(defaults, k) if k in known else None
            if k in known and type(v) is not type(want):
                raise BadSettings(
                    f"the setting {k} in {path} is {json.dumps(v)[:40]}, not {_KINDS[type(want)]}",
                    f"set it to {_KINDS[type(want)]} (default: {json.dumps(want)}), or remove "
                    f'the line "{k}"',
                )
        if doc.get("secret_store", "auto") not in STORES:
            raise BadSettings(
                f"the setting secret_store in {path} is {json.dumps(doc['secret_store'])[:40]}, "
                f"not one of {', '.join(STORES)}",
                'set it to one of them, or remove the line "secret_store"',
            )
        values = {k: v for k, v in doc.items() if k in known}
        return cls(**values, extra=formats.unknown(doc, known))

    def save(self) -> None:
        """Write atomically, with what a newer kubetray set and this one does not know (never
        over a file load refuses)."""
        type(self).load()
        doc = asdict(self)
        doc.pop("extra")
        jsonfile.save(self.path(), formats.stamped({**self.extra, **doc}, FORMAT))


class BadSettings(AppError):
    """settings.json cannot be used as it is: kubetray neither guesses nor rewrites it."""


STORES = ("auto", "keyring", "memory")
_KINDS = {bool: "true or false", str: "a string", int: "a whole number"}
_FIX = "mend it (or move it away to start from the defaults), then try again"
