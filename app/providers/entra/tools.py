"""``--login azurecli`` and ``--login azd``: the token of the person's own Azure CLI (or Azure
Developer CLI) login, got by running the tool as Azure kubelogin (azidentity) does.

Sound because it is each tool's documented command, not its files: ``az account
get-access-token --output json --resource <server-id> [--tenant T] [--subscription S]`` and
``azd auth token --output json --no-prompt --scope <server-id>/.default [--tenant-id T]``.
kubetray never reads ``~/.azure`` (MSAL's cache there is the CLI's own, encrypted on Windows).
The login stays the tool's (``az login``); kubetray adds single flight (one ``az`` for every
waiting kubectl), memory, and renewal ahead of expiry. The tools answer from their own cache
until the token is within 5 minutes of its end (see :func:`_parse` for why that makes no loop).

``az aks get-credentials`` converts AKS users to this mode when Azure kubelogin is installed
(azure-cli 2.78+), so it is the mode most desktops have.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from app.oidc.errors import LoginError, ProviderUnavailable
from app.providers.base import TokenSet
from app.providers.entra import options as o
from app.providers.entra.settings import EntraSettings

TOOL_CACHE_MARGIN = timedelta(minutes=5)
"""MSAL (inside az and azd) hands out a cached token until it is this close to its end."""
EXTRA_DIRS = {
    "darwin": ("/opt/homebrew/bin", "/usr/local/bin"),
    "linux": ("/usr/bin", "/usr/local/bin", "/snap/bin"),
    "win32": (
        r"C:\Program Files\Microsoft SDKs\Azure\CLI2\wbin",
        r"C:\Program Files (x86)\Microsoft SDKs\Azure\CLI2\wbin",
    ),
}
"""Where the tools install, for an agent started by the desktop with a short PATH (a macOS
login item has /usr/bin:/bin:/usr/sbin:/sbin)."""


def command(s: EntraSettings) -> list[str]:
    """The tool's command line (without the executable's path)."""
    if s.mode == o.AZURECLI:
        args = ["az", "account", "get-access-token", "--output", "json"]
        args += ["--resource", s.server_id.rstrip("/")]
        if s.tenant_id:
            args += ["--tenant", s.tenant_id]
        if s.subscription:
            args += ["--subscription", s.subscription]
        return args
    args = ["azd", "auth", "token", "--output", "json", "--no-prompt", "--scope", s.scope]
    if s.tenant_id:
        args += ["--tenant-id", s.tenant_id]
    return args


def find(name: str, path: str | None) -> str | None:
    """The tool on the caller's PATH, else the agent's, else where it usually installs."""
    names = (name + ".cmd", name + ".exe", name) if sys.platform == "win32" else (name,)
    extra = os.pathsep.join(EXTRA_DIRS.get(sys.platform, ()))
    for search in (path, os.environ.get("PATH"), extra):
        if not search:
            continue
        for candidate in names:
            found = shutil.which(candidate, path=search)
            if found:
                return found
    return None


def _words(s: EntraSettings) -> tuple[str, str]:
    """(the tool's name, its login command)."""
    return (
        ("the Azure CLI", "az login")
        if s.mode == o.AZURECLI
        else (
            "the Azure Developer CLI",
            "azd auth login",
        )
    )


def token(s: EntraSettings, clock: Callable[[], datetime]) -> TokenSet:
    """Run the tool once and read its token."""
    tool = _words(s)[0]
    argv = command(s)
    exe = find(argv[0], s.tool_path)
    if exe is None:
        raise LoginError(
            f"--login {s.mode} runs {argv[0]}, which is not installed here (not on PATH)",
            f"install {tool}, or log in with kubetray instead: --login devicecode or interactive",
        )
    env = dict(os.environ, AZURE_CORE_NO_COLOR="true")
    env.pop("AZURE_CONFIG_DIR", None)
    if s.azure_config_dir:
        env["AZURE_CONFIG_DIR"] = s.azure_config_dir
    try:
        done = subprocess.run(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=s.timeout,
            env=env,
            cwd=os.environ.get("SYSTEMROOT", "/") if sys.platform == "win32" else "/",
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ProviderUnavailable(
            f"{argv[0]} did not answer within {s.timeout:g} s",
            "set AZURE_CLI_TIMEOUT (e.g. 120s) if it is slow here",
        ) from None
    except OSError as e:
        raise LoginError(f"cannot run {exe}: {e.strerror or e}") from None
    if done.returncode != 0:
        raise _failure(s, done.stderr or done.stdout)
    return _parse(s, done.stdout, clock)


def _failure(s: EntraSettings, output: str) -> LoginError:
    tool, login = _words(s)
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if "accessToken" not in line), "")
    last = last.removeprefix("ERROR: ")
    if ("az login" in output or "azd auth login" in output or "not logged in" in output) and (
        "AADSTS" not in output
    ):
        where = f" --tenant {s.tenant_id}" if s.tenant_id and s.mode == o.AZURECLI else ""
        return LoginError(f"{tool} is not logged in ({last})", f"run {login}{where}")
    return LoginError(f"{tool} gave no token ({last or 'no message'})", f"check {login}")


def _parse(s: EntraSettings, output: str, clock: Callable[[], datetime]) -> TokenSet:
    tool = _words(s)[0]
    try:
        doc = json.loads(output)
        if s.mode == o.AZURECLI:
            access = str(doc["accessToken"])
            if "expires_on" in doc:  # azure-cli 2.54+: epoch seconds
                expires = datetime.fromtimestamp(int(doc["expires_on"]), UTC)
            else:  # older: naive local time
                expires = datetime.strptime(doc["expiresOn"], "%Y-%m-%d %H:%M:%S.%f").astimezone(
                    UTC
                )
            tenant = doc.get("tenant") or s.tenant_id
        else:
            access = str(doc["token"])
            expires = datetime.strptime(doc["expiresOn"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            tenant = s.tenant_id
    except (ValueError, KeyError, TypeError):
        raise LoginError(f"{tool}'s answer is not the token JSON kubetray expects") from None
    # issued_at is now: a renewal that got the tool's cached token back sees it as a token
    # with only its remaining time to live, and the next renewal comes when little is left,
    # after the tool's own refresh point (TOOL_CACHE_MARGIN): never a loop of runs.
    return TokenSet(
        expires_at=expires,
        issued_at=min(clock(), expires),
        access_token=access,
        claims={"preferred_username": _who(access) or f"{s.mode} login", "tid": str(tenant or "")},
    )


def _who(access_token: str) -> str:
    """Whose token the tool gave, for status only (the tool is trusted; nothing is decided on
    it): the JWT's ``upn``, ``unique_name`` or ``appid``, unverified."""
    import base64

    try:
        part = access_token.split(".")[1]
        doc = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError):
        return ""
    if not isinstance(doc, dict):
        return ""
    return str(doc.get("upn") or doc.get("unique_name") or doc.get("appid") or "")
