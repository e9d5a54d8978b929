"""Back the moment a fault ends: the real oidc-provider behind tests/fault_proxy.py, the real
keyring and agent, kubetray-exec as kubectl runs it.

A call whose token is unusable asks the provider at once instead of waiting for the backoff,
and hears what the provider does now; a provider that answers again ends the backoff of all
its identities; a refresh's requests share its long deadline; a provider's clock off either
way makes no refresh loop; why a login is needed outlives the agent.
"""

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime

import pytest

from tests.integration.test_refresh import LIFETIME, TIME, Rig, rig, sleep_until, until
from tests.peers import KubetrayEnv


def retry_ahead(r: Rig) -> float:
    """Seconds from now to the backoff's next try that status shows (0: none)."""
    retry_at = r.status()["retry_at"]
    if not retry_at:
        return 0.0
    return (datetime.fromisoformat(retry_at) - datetime.now().astimezone()).total_seconds()


def clock_of(line: str) -> datetime:
    """The "tries again at HH:MM:SS" of ``line`` as a time today."""
    found = re.search(f"kubetray tries again at ({TIME})", line)
    assert found, line
    clock = datetime.strptime(found[1], "%H:%M:%S").time()
    return datetime.combine(datetime.now().date(), clock).astimezone()


def test_an_outage_that_ends_is_over_at_the_next_call_for_every_identity(
    kt: KubetrayEnv, keyring_session: None
) -> None:
    """Two identities of one provider, both backing off far: the line during the outage says
    what the provider does now, and the first call after it ends is served, for both."""
    with rig(kt) as carol:
        dave = replace(carol, name="dave")
        carol.login()
        issued = dave.login()
        carol.proxy.mode = "down"
        sleep_until(issued + LIFETIME + 0.5)

        def backing_off_far() -> bool:
            for r in (carol, dave):
                assert r.call().returncode == 1
            return min(retry_ahead(carol), retry_ahead(dave)) > 25

        until(backing_off_far, 120, "both identities back off for more than 25 s")
        # The fault changes under the backoff: the next call says what the provider does now.
        carol.proxy.mode = "5xx"
        time.sleep(3.5)  # a probe of this provider is at most one every 3 s
        now = carol.call()
        assert now.returncode == 1
        assert re.search(
            f"cannot refresh {carol.name} \\(its token expired at {TIME}\\): the provider "
            f"answered HTTP 503 for https://{re.escape(carol.where())}/token; the provider or a "
            f"proxy in front of it is down: try again later; kubetray tries again at {TIME}$",
            now.stderr.strip(),
        ), now.stderr
        assert clock_of(now.stderr) < datetime.fromisoformat(carol.status()["retry_at"])
        # Callers of both identities at once: one probe asks the provider for all of them.
        time.sleep(3.5)
        since = time.monotonic()
        with ThreadPoolExecutor(6) as pool:
            calls = list(pool.map(lambda r: r.call(), [carol, dave] * 3))
        assert all(done.returncode == 1 and "HTTP 503" in done.stderr for done in calls), calls
        assert len([t for t in carol.proxy.refreshes if t >= since]) == 1
        # The outage ends long before either backoff would: the next calls are served.
        carol.proxy.mode = "ok"
        assert min(retry_ahead(carol), retry_ahead(dave)) > 6
        time.sleep(3.5)
        first = carol.call()
        assert first.returncode == 0, first.stderr
        assert dave.call().returncode == 0  # its backoff ended with carol's refresh
        counts = carol.counts()
        assert counts.get("password") == 2, counts  # no login asked again
        assert counts.get("error:invalid_grant", 0) == 0 and counts.get("revoked", 0) == 0


def test_discovery_slower_than_its_old_timeout_is_waited_for_within_the_refresh(
    kt: KubetrayEnv, keyring_session: None
) -> None:
    """A new agent (nothing of the provider known yet) refreshes while the provider takes
    20 s for each document (discovery, keys): the refresh's deadline covers them all, where
    discovery alone used to give up after 15 s and the identity went without a token."""
    with rig(kt, lifetime=60) as r:
        first = r.token(r.call(password=True))
        r.kt.stop_agent()
        r.proxy.slow_gets = 20
        assert r.token(r.call()) == first  # from the keyring; the provider is not asked
        until(lambda: r.status()["refreshes"] >= 1, 100, "a refresh through the slow documents")
        assert r.proxy.faulted.get("slow-get", 0) >= 2  # discovery and the keys
        status = r.status()
        assert status["refresh_error"] is None and status["state"] == "ready", status
        assert r.token(r.call()) != first
        counts = r.counts()
        assert counts.get("password") == 1 and counts.get("refresh_token", 0) >= 1, counts
        assert not any(k.startswith("error:") for k in counts), counts


@pytest.mark.parametrize("offset", [-25, 25, -45], ids=["behind", "ahead", "behind-past-exp"])
def test_a_provider_clock_off_either_way_makes_no_refresh_loop(
    kt: KubetrayEnv, keyring_session: None, offset: int
) -> None:
    """30 s tokens from a provider whose clock is ``offset`` s off: each identity is refreshed
    about every quarter lifetime, as with a right clock (25 s behind used to look like 5 s
    tokens, refreshed a few times a second). 45 s behind, the id_token's exp has passed here
    when it arrives (within the leeway of its check): it is served for its lifetime, and
    kubectl hears that a cluster on this machine's time refuses it."""
    lifetime, window = 30, 30.0
    with rig(kt, lifetime=lifetime, clockOffset=offset) as carol:
        dave = replace(carol, name="dave")
        for r in (carol, dave):
            r.login()
        since = time.monotonic()
        lines = []
        while time.monotonic() < since + window:
            for r in (carol, dave):
                done = r.call()
                assert done.returncode == 0, done.stderr
                lines.append(done.stderr.strip())
            time.sleep(1)
        asked = len([t for t in carol.proxy.refreshes if t >= since])
        print(
            f"provider clock {offset:+d} s, {lifetime} s tokens: {asked} refreshes in {window:g} s"
        )
        assert 2 <= asked <= 2 * 10  # 4 to 8 each; 25 s behind was ~30 each
        late = [line for line in lines if line]
        n = abs(offset)
        said = (
            f"the provider's clock is ({n - 1}|{n}|{n + 1}) s behind this machine's, so the "
            f"id_token of (carol|dave) expired at {TIME} by this machine's clock; a cluster on "
            "this machine's time refuses it: have the provider's clock set right"
        )
        if offset > 0:
            assert not late, late
        else:  # from its exp on (at once, 45 s behind), a token is served with that line
            assert late and all(re.fullmatch(said, line) for line in late), late
            if offset == -45:
                assert len(late) == len(lines), lines
        counts = carol.counts()
        assert counts.get("password") == 2 and counts.get("error:invalid_grant", 0) == 0, counts


def test_why_a_login_is_needed_outlives_the_agent(kt: KubetrayEnv, keyring_session: None) -> None:
    with rig(kt) as r:
        issued = r.login()
        r.proxy.mode = "lost"
        until(lambda: r.proxy.faulted.get("lost", 0) >= 1, 10, "a lost answer")
        r.proxy.mode = "ok"
        until(lambda: r.status()["state"] == "needs login", 15, "the spent token refused")
        reason = r.status()["error"]
        assert reason.startswith("the provider rotated the refresh token but its answer was lost")
        r.kt.stop_agent()
        sleep_until(issued + LIFETIME + 0.5)
        done = r.call()  # a new agent
        assert done.returncode == 1
        assert done.stderr.strip().endswith(
            f"login required for {r.name}: {reason}; its login needs an answer typed in a "
            f'terminal; run "kubetray login {r.name}" in a terminal'
        ), done.stderr
        assert r.status()["error"] == reason and r.status()["state"] == "needs login"
        r.login()  # a login ends it, for the next agent too
        r.kt.stop_agent()
        assert r.call().returncode == 0
        assert r.status()["error"] is None
