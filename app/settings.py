"""The app's settings, persisted as JSON in the config directory (no secrets here)."""

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app import formats, jsonfile
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
        """Saved settings, defaults for anything missing or unreadable; NewerFormat (one line)
        for the settings of a newer kubetray, which are left as they are."""
        try:
            with open(cls.path(), encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return cls()
        if not isinstance(doc, dict):
            return cls()
        formats.check(doc, cls.path(), FORMAT)
        known = {f.name for f in fields(cls) if f.name != "extra"}
        defaults = cls()
        values = {
            k: v for k, v in doc.items() if k in known and type(v) is type(getattr(defaults, k))
        }
        return cls(**values, extra=formats.unknown(doc, known))

    def save(self) -> None:
        """Write atomically, with what a newer kubetray set and this one does not know."""
        doc = asdict(self)
        doc.pop("extra")
        jsonfile.save(self.path(), formats.stamped({**self.extra, **doc}, FORMAT))
