"""Words and numbers as the app shows them (Qt-free, so they are easy to test)."""

import shlex
import sys
from datetime import datetime, timedelta

from app.model import IdentityStatus


def time_left(expires: str | None, now: datetime) -> str:
    """ "54m left", "2h 03m left", "3d left", "expired", or "" when it never expires."""
    if not expires:
        return ""
    left = datetime.fromisoformat(expires) - now
    if left <= timedelta(0):
        return "expired"
    minutes = int(left.total_seconds() // 60)
    if minutes < 1:
        return f"{int(left.total_seconds())}s left"
    if minutes < 60:
        return f"{minutes}m left"
    if minutes < 48 * 60:
        return f"{minutes // 60}h {minutes % 60:02d}m left"
    return f"{minutes // (24 * 60)}d left"


def who(identity: IdentityStatus) -> str:
    """Email or subject, with groups."""
    name = identity.who or identity.subject or ""
    if identity.groups:
        return f"{name} [{', '.join(identity.groups)}]"
    return name


def kubectl_line(context: str) -> str:
    """A command to try ``context`` with, quoted for the platform's usual shell."""
    if sys.platform == "win32":
        quoted = f'"{context}"' if any(c in context for c in ' &|<>^"') else context
    else:
        quoted = shlex.quote(context)
    return f"kubectl --context {quoted} get ns"
