"""The app's settings, persisted as JSON in the config directory (no secrets here)."""

import json
import os
from dataclasses import asdict, dataclass, fields

from app import jsonfile
from exec_helper import paths


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

    @classmethod
    def path(cls) -> str:
        return os.path.join(paths.config_dir(), "settings.json")

    @classmethod
    def load(cls) -> "Settings":
        """Saved settings, defaults for anything missing or unreadable."""
        try:
            with open(cls.path(), encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return cls()
        known = {f.name for f in fields(cls)}
        return (
            cls(**{k: v for k, v in doc.items() if k in known}) if isinstance(doc, dict) else cls()
        )

    def save(self) -> None:
        """Write atomically."""
        jsonfile.save(self.path(), asdict(self))
