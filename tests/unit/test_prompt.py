"""A prompt nobody answers ends with a clear line, on both sides of the socket."""

import os
import pty
import subprocess
import sys
import textwrap
import time

import pytest

from app.agent.service import CallerConversation
from app.broker.flight import Login
from app.oidc.errors import LoginError
from tests.fakes import NoBrowser
from tests.peers import ROOT

HELPER_SIDE = textwrap.dedent(
    """
    import sys
    from exec_helper import prompt
    sys.stdout.write(prompt.answer({"text": "Password: ", "secret": %s}, timeout=0.5).decode())
    """
)


@pytest.mark.parametrize("secret", [True, False], ids=["secret", "plain"])
def test_the_helper_gives_up_on_a_silent_terminal(secret: bool) -> None:
    primary, secondary = pty.openpty()
    try:
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", HELPER_SIDE % secret],
            cwd=ROOT,
            stdin=secondary,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert time.monotonic() - start < 5
    assert '"cancel":true' in done.stdout and '"timeout":true' in done.stdout
    assert done.stderr == "Password: \n"  # the prompt, then the line ends: nothing hangs


def test_the_agent_ends_the_login_with_one_line_naming_the_remedy() -> None:
    """The helper's "nobody answered" reaches every waiter as the login's error."""
    replies = [{"op": "answer", "cancel": True, "timeout": True}]
    conv = CallerConversation(lambda _doc: None, lambda _t: replies.pop(), True, True)
    login = Login("dev", NoBrowser(None))
    login.join(conv)
    with pytest.raises(LoginError) as e:
        login.prompt("Password: ", True)
    assert e.value.one_line() == (
        "the login to dev asked 'Password': nobody answered within 60 s; "
        'run "kubetray login dev" in a terminal'
    )


def test_an_agent_that_hears_nothing_ends_the_login_too() -> None:
    def silent(_timeout: float) -> dict[str, object]:
        raise TimeoutError

    login = Login("dev", NoBrowser(None))
    login.join(CallerConversation(lambda _doc: None, silent, True, True))
    with pytest.raises(LoginError, match="nobody answered within 60 s"):
        login.prompt("Username: ", False)
