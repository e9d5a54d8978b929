"""Opening the login page: failures reported, and never a local browser over SSH."""

import threading
import time

import pytest

from app.broker.flight import Login, Silent
from app.oidc.browser import SETTLE, Browser, over_ssh, remote_grant

SSH = "192.0.2.10 50022 192.0.2.20 22"


def test_a_command_that_exits_non_zero_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    failed: list[str] = []
    done = threading.Event()

    def on_failure(why: str) -> None:
        failed.append(why)
        done.set()

    # At once (within SETTLE): known before open() returns.
    assert Browser("false").open("http://127.0.0.1:1/", on_failure) is False
    assert failed == ["false exited with code 1"]
    assert Browser("/nonexistent/browser").open("http://127.0.0.1:1/", on_failure) is False
    assert failed[-1] == "browser could not be started: No such file or directory"
    # Later (a slow xdg-open): open() said it opened; the watcher tells.
    failed.clear()
    done.clear()
    slow = Browser(f"sh -c 'sleep {SETTLE + 0.3}; exit 3' sh")
    assert slow.open("http://127.0.0.1:1/", on_failure) is True and failed == []
    assert done.wait(5) and failed == ["sh exited with code 3"]


class Recorder(Silent):
    """A caller's terminal: every line it is told (asked nothing)."""

    visible = True

    def __init__(self) -> None:
        self.told: list[str] = []

    def tell(self, text: str) -> None:
        self.told.append(text)


URL = "http://127.0.0.1:1/authorize?client_id=kubectl&state=abc"


def waiting(login: Login) -> None:
    """What a provider's client does (app.oidc.client): open, then say where to log in."""
    if login.open_browser(URL):
        login.show(f"Waiting for the login in your browser. If it did not open, visit: {URL}")


def test_a_browser_that_fails_at_once_gets_the_url_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    caller = Recorder()
    login = Login("idp", Browser("false"))
    login.join(caller)
    waiting(login)
    assert caller.told == [
        f"The browser did not open (false exited with code 1). Open this URL to log in: {URL}"
    ]
    assert login.browser_why == "false exited with code 1"


def test_a_browser_that_fails_later_does_not_repeat_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    caller = Recorder()
    login = Login("idp", Browser(f"sh -c 'sleep {SETTLE + 0.3}; exit 4' sh"))
    login.join(caller)
    waiting(login)
    deadline = time.monotonic() + 5
    while login.browser_error is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (
        caller.told[-1]
        == "The browser did not open (sh exited with code 4): open the URL above to log in."
    )
    assert sum(URL in line for line in caller.told) == 1
    late = Recorder()  # a kubectl that joins now hears the URL once, too
    login.join(late)
    assert late.told == caller.told


def test_over_ssh_no_local_browser_and_the_grant_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_CONNECTION", SSH)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert over_ssh()
    browser = Browser("true")
    assert not browser.available() and browser.open("http://127.0.0.1:1/") is False
    assert remote_grant(True) == (
        "device-code",
        "Over SSH: logging in with a device code (no browser opens here).",
    )
    grant, said = remote_grant(False) or ("", "")
    assert grant == "authcode-keyboard" and "no device code login" in said and "paste" in said
    monkeypatch.setenv("DISPLAY", ":0")  # ssh -X: the browser shows on the person's screen
    assert not over_ssh() and remote_grant(True) is None and browser.available()
