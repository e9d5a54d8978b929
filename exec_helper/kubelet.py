"""`kubetray-exec kubelet-credential-provider`: image pull credentials for the kubelet (KEP-2133).

The kubelet writes a CredentialProviderRequest on stdin and decodes our stdout *strictly*: the
same apiVersion, no unknown, duplicate or mis-cased field. A small JSON config maps image
patterns to kubetray identities and says how a token becomes a registry login:

    {"providers": [{"match": ["registry.example.com", "*.registry.example.com:5000/team"],
                    "args": ["--stored", "registry-bot"],
                    "username": "oauth2accesstoken",
                    "cacheKeyType": "Registry"}]}

``args`` are kubetray-exec's own flags (a stored credential, or OIDC flags); ``username`` is
the registry username that goes with the token as password. The kubelet cannot wait for a
person, so a credential that needs a login fails at once (``--no-login``), with a remedy.
The config file: ``--config F``, else ``$KUBETRAY_KUBELET_CONFIG``, else
``<config dir>/kubelet-credential-provider.json``.
"""

import fnmatch
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from exec_helper import paths, protocol
from exec_helper.errors import HelperError

GROUP = "credentialprovider.kubelet.k8s.io"
API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1", f"{GROUP}/v1alpha1")
CACHE_KEY_TYPES = ("Image", "Registry", "Global")
EXEC_INFO_V1 = (
    '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",'
    '"spec":{"interactive":false}}\n'
)


def _split(ref: str) -> tuple[str, str, str]:
    """host, port, path of an image reference or a match pattern (no scheme, no tag)."""
    ref = ref.split("://", 1)[-1]
    host_port, _, path = ref.partition("/")
    host, _, port = host_port.partition(":")
    return host.lower(), port, path


def matches(pattern: str, image: str) -> bool:
    """The kubelet's rule: host labels glob one by one, ports equal, the path a prefix."""
    p_host, p_port, p_path = _split(pattern)
    i_host, i_port, i_path = _split(image)
    p_labels, i_labels = p_host.split("."), i_host.split(".")
    if len(p_labels) != len(i_labels) or p_port != i_port:
        return False
    if not all(fnmatch.fnmatchcase(i, p) for p, i in zip(p_labels, i_labels, strict=True)):
        return False
    return i_path.startswith(p_path)


def go_duration(seconds: float) -> str:
    """A Go duration string the kubelet parses (time.ParseDuration)."""
    return f"{max(0, int(seconds))}s"


def _config_path(args: list[str]) -> str:
    if "--config" in args:
        i = args.index("--config")
        if i + 1 < len(args):
            return args[i + 1]
    for arg in args:
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return os.environ.get("KUBETRAY_KUBELET_CONFIG") or os.path.join(
        paths.config_dir(), "kubelet-credential-provider.json"
    )


def load_config(path: str) -> list[dict[str, Any]]:
    """The providers of the config file, checked."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise HelperError(f"cannot read the kubetray kubelet config {path}: {e.strerror}") from None
    except ValueError as e:
        raise HelperError(f"the kubetray kubelet config {path} is not JSON: {e}") from None
    providers = doc.get("providers") if isinstance(doc, dict) else None
    if not isinstance(providers, list):
        raise HelperError(f'{path} needs a "providers" list')
    for i, p in enumerate(providers):
        if (
            not isinstance(p, dict)
            or not isinstance(p.get("match"), list)
            or not isinstance(p.get("args"), list)
        ):
            raise HelperError(f'{path}: providers[{i}] needs "match" and "args" lists')
        if p.get("cacheKeyType", "Registry") not in CACHE_KEY_TYPES:
            raise HelperError(
                f"{path}: providers[{i}].cacheKeyType must be one of {CACHE_KEY_TYPES}"
            )
    return providers


def read_request(text: str) -> tuple[str, str]:
    """(apiVersion, image) of a CredentialProviderRequest."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise HelperError(
            f"decode: the CredentialProviderRequest on stdin is not JSON: {e}"
        ) from None
    if not isinstance(doc, dict) or doc.get("kind") != "CredentialProviderRequest":
        raise HelperError("decode: stdin does not hold a CredentialProviderRequest")
    version = doc.get("apiVersion")
    if version not in API_VERSIONS:
        raise HelperError(
            f"unsupported apiVersion {version!r}: kubetray speaks {', '.join(API_VERSIONS)}"
        )
    image = doc.get("image")
    if not isinstance(image, str) or not image:
        raise HelperError("decode: the request has no image")
    return str(version), image


def _token(args: list[str]) -> tuple[str, datetime | None]:
    """The identity's token and its expiry, from the agent (never starting a login)."""
    from exec_helper.exchange import exchange_starting_agent

    request = protocol.encode(
        {
            "op": protocol.GET_CREDENTIAL,
            "exec_info": EXEC_INFO_V1,
            "args": [*args, "--no-login"],
            "env": [],
            "stdin_tty": False,
            "stderr_tty": False,
        }
    )
    code, out, err = exchange_starting_agent(request, EXEC_INFO_V1, args)
    if code != 0:
        raise HelperError(err.strip() or "the kubetray agent refused")
    status = json.loads(out).get("status", {})
    token = status.get("token")
    if not token:
        raise HelperError(
            "the identity has a client certificate, not a token: registries need a token"
        )
    expiry = status.get("expirationTimestamp")
    when = datetime.strptime(expiry, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if expiry else None
    return str(token), when


def respond(
    version: str, image: str, providers: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    """The CredentialProviderResponse for ``image`` (no ``auth`` when no provider matches)."""
    for provider in providers:
        pattern = next((m for m in provider["match"] if matches(str(m), image)), None)
        if pattern is None:
            continue
        token, expiry = _token([str(a) for a in provider["args"]])
        response: dict[str, Any] = {
            "kind": "CredentialProviderResponse",
            "apiVersion": version,
            "cacheKeyType": provider.get("cacheKeyType", "Registry"),
        }
        if expiry is not None:
            response["cacheDuration"] = go_duration((expiry - now).total_seconds())
        response["auth"] = {
            pattern: {
                "username": str(provider.get("username", "oauth2accesstoken")),
                "password": token,
            }
        }
        return response
    return {
        "kind": "CredentialProviderResponse",
        "apiVersion": version,
        "cacheKeyType": "Image",
        "cacheDuration": "0s",
    }


def run_provider(args: list[str]) -> int:
    """The kubelet's entry: request on stdin, response on stdout, exit 1 with one line on error."""
    try:
        version, image = read_request(sys.stdin.read())
        response = respond(version, image, load_config(_config_path(args)), datetime.now(UTC))
    except HelperError as e:
        sys.stderr.write(f"kubetray: {e}\n")
        return 1
    sys.stdout.write(json.dumps(response, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0
