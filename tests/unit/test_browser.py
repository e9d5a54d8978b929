"""Opening the login page: failures reported, and never a local browser over SSH."""

import threading

import pytest

from app.oidc.browser import Browser, over_ssh, remote_grant

SSH = "192.0.2.10 50022 192.0.2.20 22"


def test_a_command_that_exits_non_zero_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    failed: list[str] = []
    done = threading.Event()

    def on_failure(why: str) -> None:
        failed.append(why)
        done.set()

    assert Browser("false").open("http://127.0.0.1:1/", on_failure) is True
    assert done.wait(5) and failed == ["false exited with code 1"]
    assert Browser("/nonexistent/browser").open("http://127.0.0.1:1/", on_failure) is False


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
