"""The AWS CLI's IAM Identity Center cache (``~/.aws/sso/cache``): read once, never written.

After ``aws sso login`` the CLI keeps the login in plaintext at
``~/.aws/sso/cache/<sha1(session name or start URL)>.json`` (eks.md D.4). kubetray reads it
once, when it first needs a login for that session, so that a person who already logged in
with the CLI is not asked again; from then on kubetray keeps its own copy in the secret store
and refreshes it there. It never writes, moves or deletes the CLI's files: the CLI (or another
SDK) keeps using and refreshing them. A refresh by one side may end the other's refresh token
where the portal rotates them (not checked here: eks.md F.4); the other side then logs in.
"""

import json
import os
import threading
from datetime import UTC, datetime, timedelta

from app.providers.aws.profiles import SsoSession
from app.providers.aws.sso import SsoTokens

MAX_SIZE = 64 * 1024
_taken: set[str] = set()
"""The portals whose cache this agent read already (each once)."""
_lock = threading.Lock()


def cache_dir() -> str:
    """Where the CLI keeps it (``~`` of the user the agent runs as)."""
    return os.path.join(os.path.expanduser("~"), ".aws", "sso", "cache")


def read(sso: SsoSession, now: datetime, directory: str | None = None) -> SsoTokens | None:
    """The CLI's login for ``sso`` if it has one that is still good (or refreshable), else
    None. Anything unreadable is None: the person then logs in with kubetray."""
    path = os.path.join(directory or cache_dir(), sso.cache_key + ".json")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_SIZE + 1)
    except OSError:
        return None
    if len(data) > MAX_SIZE:
        return None
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict):
            return None
        tokens = SsoTokens.from_cli(doc, issued_at=now)
    except (KeyError, ValueError, TypeError):
        return None
    if tokens.start_url.rstrip("/") != sso.start_url.rstrip("/"):
        return None  # another portal under the same session name
    if tokens.expires_at <= now and not tokens.refreshable:
        return None
    if tokens.registration and tokens.registration.expires_at <= now and tokens.expires_at <= now:
        return None
    # the CLI's entry has no issue time: count its life from now, so that refresh-ahead
    # schedules from what is left
    return SsoTokens(
        start_url=tokens.start_url,
        region=tokens.region,
        access_token=tokens.access_token,
        expires_at=tokens.expires_at.astimezone(UTC),
        issued_at=min(now, tokens.expires_at),
        refresh_token=tokens.refresh_token,
        registration=tokens.registration,
    )


def available(sso: SsoSession, now: datetime) -> bool:
    """The CLI holds a login for ``sso`` that this agent has not taken yet: a login then needs
    nobody (``take`` adopts it)."""
    with _lock:
        if sso.key in _taken:
            return False
    found = read(sso, now)
    return found is not None and (
        found.expires_at > now + timedelta(minutes=5) or found.refreshable
    )


def take(sso: SsoSession, now: datetime) -> SsoTokens | None:
    """``read``, once per portal per agent (a login kubetray then refreshes itself)."""
    with _lock:
        if sso.key in _taken:
            return None
        _taken.add(sso.key)
    return read(sso, now)
