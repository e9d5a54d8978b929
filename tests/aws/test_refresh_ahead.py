"""IAM Identity Center logins in kubetray's core (Logins, the refresh scheduler, the store): one
login for callers who arrive together, refreshed ahead so that nobody waits, and a refresh the
portal refuses turns into a login needed (with why), never into tokens served past their end."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.errors import AppError
from app.providers.aws import AwsProvider
from app.store.memory_store import MemorySecretStore
from tests.aws import world
from tests.aws.eks import EksVerifier
from tests.aws.moto_sts import MotoSTS
from tests.aws.sso import SsoStandIn
from tests.core import make_core
from tests.fakes import SilentCaller

ARGS = ["--region", "eu-west-1", "eks", "get-token", "--cluster-name", "demo"]


class Visible(SilentCaller):
    """A caller whose person sees the device code (the tray, a terminal) and approves it."""

    visible = True

    def __init__(self, sso: SsoStandIn) -> None:
        super().__init__()
        self.sso = sso

    def device_code(self, user_code: str, uri: str) -> None:
        threading.Thread(target=self.sso.approve, args=(user_code,), daemon=True).start()


@pytest.fixture
def short(sts: MotoSTS) -> "SsoStandIn":
    with SsoStandIn(sts, token_seconds=20, interval=0.2) as server:
        yield server


@pytest.mark.slow
def test_one_login_for_callers_together_then_refreshed_ahead(
    sts: MotoSTS, short: SsoStandIn, tmp_path: Path
) -> None:
    files = world.write(tmp_path / "aws", short.url, sts.url)
    core, _ = make_core(tmp_path, MemorySecretStore())
    core.start()
    try:
        wanted = AwsProvider().wanted(ARGS, None, files.env(AWS_PROFILE="sso-dev"))
        st = core.logins.identity(wanted.settings)
        verifier = EksVerifier(sts, "demo")

        def call(_: int) -> str:
            tokens = core.logins.token(st, Visible(short), settings=wanted.settings)
            given = AwsProvider().token(wanted.settings, tokens, None)
            return verifier.verify(given.value).arn

        with ThreadPoolExecutor(8) as pool:
            arns = set(pool.map(call, range(8)))
        assert len(arns) == 1 and "AWSReservedSSO_AdministratorAccess" in arns.pop()
        assert short.calls["StartDeviceAuthorization"] == 1
        # 20 s tokens: refreshed ahead (about 5 s in), with nobody asking
        first = short.calls["CreateToken"]
        deadline = time.monotonic() + 20
        while short.calls["CreateToken"] == first and time.monotonic() < deadline:
            time.sleep(0.2)
        assert short.calls["CreateToken"] == first + 1
        start = time.monotonic()
        tokens = core.logins.token(st, Visible(short), settings=wanted.settings)
        took = time.monotonic() - start
        assert short.calls["CreateToken"] == first + 1, took  # served from memory
        assert took < 1.0  # nobody waited (a refresh in the call would ask the portal)
        given = AwsProvider().token(wanted.settings, tokens, None)
        assert "AWSReservedSSO_AdministratorAccess" in verifier.verify(given.value).arn
        assert short.calls["StartDeviceAuthorization"] == 1
        # the portal ends the session: the next refresh is refused, and a login is needed
        short.revoke_all()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                core.logins.token(st, SilentCaller(), settings=wanted.settings)
            except AppError as e:
                assert "login required for aws-corp" in e.one_line()
                break
            time.sleep(0.5)
        else:
            pytest.fail("a refused refresh never became a login needed")
    finally:
        core.stop()
