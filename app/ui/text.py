"""Words and numbers as the app shows them (Qt-free, so they are easy to test)."""

import shlex
import sys
from datetime import datetime, timedelta

from app.model import Caller, CallRecord, IdentityStatus, State


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


def details(identity: IdentityStatus) -> str:
    """What a provider shows besides who: ``tenant contoso · project p`` (not the account
    again when it is who)."""
    shown = [f"{label} {value}" for label, value in identity.details if value != identity.who]
    return " · ".join(shown)


def kubectl_line(context: str) -> str:
    """A command to try ``context`` with, quoted for the platform's usual shell."""
    if sys.platform == "win32":
        quoted = f'"{context}"' if any(c in context for c in ' &|<>^"') else context
    else:
        quoted = shlex.quote(context)
    return f"kubectl --context {quoted} get ns"


def caller_chain(caller: Caller) -> str:
    """Who ran kubetray-exec, nearest first: "kubectl (pid 4242) ← bash ← sshd", or the SSH host
    a forwarded call came from."""
    if caller.remote:
        return f"remote: {caller.remote} (over SSH)"
    names = [n for n in (caller.name, *caller.parents) if n]
    if not names:
        return f"pid {caller.pid}" if caller.pid else "unknown"
    pids = [caller.pid, caller.parent_pid]  # only the helper's and its parent's are known
    return " ← ".join(
        f"{n} (pid {pids[i]})" if i < len(pids) and pids[i] else n for i, n in enumerate(names)
    )


def call_details(rec: CallRecord) -> list[tuple[str, str]]:
    """Everything about one call, as (label, text) rows of the Diagnostics detail pane."""
    caller = rec.caller
    rows = [
        ("Time", f"{rec.time.astimezone():%Y-%m-%d %H:%M:%S %Z}"),
        ("Identity", rec.identity or "-"),
        ("Cluster", rec.cluster or "-"),
        ("Caller", caller_chain(caller)),
    ]
    if caller.remote:
        via = f"through the local {caller.name or 'ssh'} (pid {caller.pid})"
        if caller.parent_pid:
            via += f"; the helper's parent on the host: pid {caller.parent_pid}"
        rows.append(("", via))
    rows.append(("Result", f"{'ok' if rec.ok else 'failed'} in {rec.latency_ms:.1f} ms"))
    if rec.error:
        rows.append(("Error", rec.error))
    return rows


def elide(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, the middle left out ("https://idp…xyz")."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


LONG_WORD = 40
"""Characters after which a word (a URL, a token in an error) may break across lines."""


def breakable(text: str) -> str:
    """``text`` with a zero-width space inside every word longer than LONG_WORD characters
    (after a ``/``, ``&``, ``?`` or ``=``, else every LONG_WORD characters), so that a wrapping
    label breaks it instead of growing as wide as the word (a window wider than the screen)."""
    out = []
    for word in text.split(" "):
        if len(word) <= LONG_WORD:
            out.append(word)
            continue
        pieces, run = [], 0
        for ch in word:
            pieces.append(ch)
            run += 1
            if run >= LONG_WORD or (ch in "/&?=" and run >= 8):
                pieces.append("\u200b")
                run = 0
        out.append("".join(pieces))
    return " ".join(out)


def plural(count: int, one: str, many: str | None = None) -> str:
    """ "1 identity", "2 identities", "0 contexts"."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


STATE_WORDS = {
    State.READY: "signed in",
    State.EXPIRING: "signed in, expiring soon",
    State.LOGGING_IN: "logging in…",
    State.NEEDS_LOGIN: "signed out",
    State.EXPIRED: "expired: log in again",
    State.NOT_YET_VALID: "not valid yet",
    State.ERROR: "login failed",
    State.STORED: "stored",
}


def state_words(state: State) -> str:
    """An identity's state as a person says it ("signed out", not "needs login")."""
    return STATE_WORDS.get(state, str(state))


REASON_IN_ROW = 70
"""Characters of a failure's reason shown in the row itself (all of it in the detail line)."""


def state_line(identity: IdentityStatus) -> str:
    """The state, with the reason of a failure cut to fit a row."""
    text = state_words(identity.state)
    if not identity.logs_in and identity.state is State.ERROR:
        text = "not usable"  # a stored credential has no login to fail
    reason = identity.error
    if not reason:
        return text
    if identity.state is State.NEEDS_LOGIN:
        # a refused refresh token is no failed login; the reason says what happened
        text = "log in again" if identity.refresh_error else "login failed"
    if len(reason) > REASON_IN_ROW:
        reason = reason[: REASON_IN_ROW - 1].rstrip() + "…"
    return f"{text}: {reason}"


CAPABILITY_WORDS = {
    "PKCE (S256)": "secure browser login (PKCE)",
    "device code login": "login with a code on another device",
    "refresh tokens": "staying signed in (refresh tokens)",
    "logout at the provider": "logging out at the provider",
    "token revocation": "cancelling tokens on log out",
}


def capability_words(name: str) -> str:
    """A provider capability as Add cluster lists it."""
    return CAPABILITY_WORDS.get(name, name)


def about_text() -> str:
    """The About box: which kubetray, which build, from where."""
    from exec_helper import version

    where = version.build_file() or "a development install (no build file)"
    return (
        f"kubetray {version.VERSION}\n"
        + (f"build {version.BUILD}\n" if version.BUILD else "")
        + f"Python {sys.version.split()[0]}\n{where}\n\n"
        "Kubernetes logins from your desktop. After an upgrade kubetray restarts by itself "
        "once no login is in flight and its windows are closed."
    )
