"""--login azurecli / azd: the tools' answers read as azure-identity reads them, their
refusals in one line, and renewal that never loops on a token the tool keeps handing back."""

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.broker.logins import _spread
from app.oidc.errors import LoginError
from app.oidc.tokens import MIN_MARGIN
from app.providers.entra import tools
from app.providers.entra.settings import AKS_SERVER, parse

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def settings(mode: str = "azurecli", *extra: str, **env: str):  # type: ignore[no-untyped-def]
    return parse(["get-token", "--login", mode, "--server-id", AKS_SERVER, *extra], env)


def write_tool(where: Path, name: str, stdout: str, stderr: str = "", code: int = 0) -> None:
    script = where / name
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write({stdout!r})\n"
        f"sys.stderr.write({stderr!r})\nsys.exit({code})\n"
    )
    script.chmod(0o755)


def test_az_epoch_expiry_wins_over_its_local_time() -> None:
    end = int((NOW + timedelta(minutes=70)).timestamp())
    out = json.dumps(
        {"accessToken": "a.b.c", "expiresOn": "2000-01-01 00:00:00.000000", "expires_on": end}
    )
    tokens = tools._parse(settings(), out, lambda: NOW)
    assert tokens.expires_at == datetime.fromtimestamp(end, UTC) and tokens.issued_at == NOW


def test_old_az_local_time_and_azd_utc_time() -> None:
    local = (NOW + timedelta(hours=1)).astimezone().replace(tzinfo=None)
    out = json.dumps({"accessToken": "x", "expiresOn": local.strftime("%Y-%m-%d %H:%M:%S.%f")})
    assert tools._parse(settings(), out, lambda: NOW).expires_at == NOW + timedelta(hours=1)
    out = json.dumps({"token": "y", "expiresOn": "2026-11-21T13:00:00Z"})
    assert tools._parse(settings("azd"), out, lambda: NOW).expires_at == NOW + timedelta(hours=1)


def test_an_answer_that_is_not_the_token_json_is_one_line() -> None:
    with pytest.raises(LoginError, match="the Azure CLI's answer is not the token JSON"):
        tools._parse(settings(), "Please upgrade", lambda: NOW)


@pytest.mark.parametrize(
    ("stderr", "message", "hint"),
    [
        (
            "ERROR: Please run 'az login' to setup account.\n",
            "the Azure CLI is not logged in (Please run 'az login' to setup account.)",
            "run az login --tenant T1",
        ),
        (
            "ERROR: AADSTS70043: The refresh token has expired due to sign-in frequency checks"
            " by conditional access. Please run 'az login'\n",
            "the Azure CLI gave no token (AADSTS70043: The refresh token has expired",
            "check az login",
        ),
    ],
)
def test_the_tools_refusals(tmp_path: Path, stderr: str, message: str, hint: str) -> None:
    write_tool(tmp_path, "az", "", stderr, 1)
    s = settings("azurecli", "--tenant-id", "T1", PATH=str(tmp_path))
    with pytest.raises(LoginError) as failed:
        tools.token(s, lambda: NOW)
    assert failed.value.message.startswith(message) and failed.value.hint == hint


def test_the_token_never_reaches_an_error_message(tmp_path: Path) -> None:
    write_tool(tmp_path, "az", '{"accessToken": "SECRET-TOKEN"', "", 1)
    with pytest.raises(LoginError) as failed:
        tools.token(settings(PATH=str(tmp_path)), lambda: NOW)
    assert "SECRET-TOKEN" not in failed.value.one_line()


def test_a_slow_tool_is_cut_off_at_azure_kubelogins_timeout(tmp_path: Path) -> None:
    (tmp_path / "az").write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    (tmp_path / "az").chmod(0o755)
    s = settings("azurecli", "--timeout", "1s", PATH=str(tmp_path))
    with pytest.raises(LoginError, match="did not answer within 1 s"):
        tools.token(s, lambda: NOW)


@pytest.mark.parametrize("left", [75, 60, 30, 12, 9])
def test_renewal_of_a_token_the_tool_hands_back_waits_for_the_tools_own_refresh(left: int) -> None:
    """az and azd answer from their cache until 5 minutes before the end. Whenever kubetray's
    refresh ahead runs and gets the same token back, the next run it plans comes inside those
    5 minutes (when the tool gives a new one), never at once again."""
    expires = NOW + timedelta(minutes=left)
    out = json.dumps({"accessToken": "t", "expires_on": int(expires.timestamp())})
    tokens = tools._parse(settings(), out, lambda: NOW)
    earliest = tokens.refresh_due(MIN_MARGIN) - _spread(tokens, MIN_MARGIN)
    if left <= 12:  # a renewal ahead got this token back: the next comes after az refreshes
        assert expires - tools.TOOL_CACHE_MARGIN <= earliest < expires
    assert earliest > NOW
