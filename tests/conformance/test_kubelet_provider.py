"""EXEC-CONSUMERS.md §6: kubetray-exec as a kubelet image credential provider.

`strict_decode` refuses what the kubelet's strict codec refuses: unknown, duplicate or
mis-cased fields, another kind, another apiVersion, a bad cacheKeyType or duration.
"""

import base64
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from exec_helper.kubelet import go_duration, matches
from tests.idp import BROWSE, browser_log, run_idp
from tests.peers import KubetrayEnv

VERSIONS = [
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
]
TOP = {"kind", "apiVersion", "cacheKeyType", "cacheDuration", "auth"}
DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


class StrictError(ValueError):
    pass


def strict_decode(text: str, api_version: str) -> dict[str, Any]:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise StrictError(f"duplicate field in {keys}")
        return dict(pairs)

    doc = json.loads(text, object_pairs_hook=no_duplicates)
    if doc.get("apiVersion") != api_version:
        raise StrictError(f"apiVersion {doc.get('apiVersion')} is not {api_version}")
    if doc.get("kind") != "CredentialProviderResponse" or set(doc) - TOP:
        raise StrictError(f"unknown fields or kind: {sorted(doc)}")
    if doc.get("cacheKeyType") not in ("Image", "Registry", "Global"):
        raise StrictError("cacheKeyType")
    if "cacheDuration" in doc and not DURATION.match(doc["cacheDuration"]):
        raise StrictError("cacheDuration")
    for value in (doc.get("auth") or {}).values():
        if set(value) - {"username", "password"}:
            raise StrictError(f"unknown auth fields {sorted(value)}")
    return doc


def test_the_strict_decoder_refuses_what_the_kubelet_refuses() -> None:
    v1 = VERSIONS[0]
    good = {"kind": "CredentialProviderResponse", "apiVersion": v1, "cacheKeyType": "Registry"}
    strict_decode(json.dumps(good), v1)
    for bad in (
        {**good, "expirationTimestamp": "x"},
        {**good, "CacheKeyType": "Registry"},
        {**good, "cacheKeyType": "registry"},
        {**good, "apiVersion": VERSIONS[1]},
        {**good, "kind": "Foo"},
        {**good, "cacheDuration": "5 minutes"},
        {**good, "auth": {"r": {"username": "u", "password": "p", "token": "t"}}},
    ):
        with pytest.raises(StrictError):
            strict_decode(json.dumps(bad), v1)
    with pytest.raises(StrictError):
        strict_decode('{"kind":"CredentialProviderResponse","kind":"x"}', v1)


@pytest.mark.parametrize(
    ("pattern", "image", "ok"),
    [
        ("registry.example.com", "registry.example.com/team/app", True),
        ("*.example.com", "registry.example.com/app", True),
        ("*.example.com", "example.com/app", False),
        ("*.example.com", "a.b.example.com/app", False),  # one label per *
        ("registry.example.com:5000", "registry.example.com:5000/app", True),
        ("registry.example.com:5000", "registry.example.com/app", False),
        ("registry.example.com", "registry.example.com:5000/app", False),
        ("registry.example.com/team", "registry.example.com/team/app", True),
        ("registry.example.com/team", "registry.example.com/other/app", False),
        ("docker.io", "docker.io/library/nginx", True),
    ],
)
def test_image_matching_follows_the_kubelet(pattern: str, image: str, ok: bool) -> None:
    assert matches(pattern, image) is ok


def test_go_durations() -> None:
    assert go_duration(299.9) == "299s" and go_duration(-5) == "0s"


def provider(
    kt: KubetrayEnv, image: str, config: Path, version: str = VERSIONS[0]
) -> subprocess.CompletedProcess[str]:
    request = (
        json.dumps({"kind": "CredentialProviderRequest", "apiVersion": version, "image": image})
        + "\n"
    )
    return subprocess.run(
        [str(kt.helper), "kubelet-credential-provider", "--config", str(config)],
        input=request,
        env=kt.env,
        capture_output=True,
        text=True,
        timeout=55,
    )


def jwt_with_exp(exp: float) -> str:
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': 'bot', 'exp': int(exp)})}.sig"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stored_registry_token_for_each_version(
    kt: KubetrayEnv, keyring_session: None, name: str, tmp_path: Path, version: str
) -> None:
    token = jwt_with_exp(time.time() + 3600)
    kt.store_token(name, token)
    config = tmp_path / "kubelet.json"
    config.write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "match": ["*.registry.example.com:5000/team"],
                        "args": ["--stored", name],
                        "username": "robot$ci",
                        "cacheKeyType": "Image",
                    }
                ]
            }
        )
    )
    done = provider(kt, "eu.registry.example.com:5000/team/app", config, version)
    assert done.returncode == 0, done.stderr
    doc = strict_decode(done.stdout, version)
    assert doc["auth"] == {
        "*.registry.example.com:5000/team": {"username": "robot$ci", "password": token}
    }
    assert doc["cacheKeyType"] == "Image"
    assert 3000 < int(doc["cacheDuration"].rstrip("s")) <= 3600
    assert token not in done.stderr
    other = provider(kt, "docker.io/library/nginx", config, version)  # no provider matches
    assert other.returncode == 0 and "auth" not in strict_decode(other.stdout, version)
    kt.kubetray("forget", name)


def test_a_login_the_kubelet_cannot_wait_for_fails_fast(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    log = tmp_path / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
    with run_idp() as idp:
        config = tmp_path / "kubelet.json"
        config.write_text(
            json.dumps(
                {
                    "providers": [
                        {
                            "match": ["registry.example.com"],
                            "args": [f"--oidc-issuer-url={idp.issuer}", "--oidc-client-id=kubectl"],
                        }
                    ]
                }
            )
        )
        # the agent started first, untimed: the bound is the kubelet's call, not a cold start
        assert "no stored credential" in kt.run_helper("--stored", "nothing").stderr
        start = time.monotonic()
        done = provider(kt, "registry.example.com/app", config)
        assert time.monotonic() - start < 10
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("kubetray: login required for kubectl@127.0.0.1")
    )
    assert "kubetray login" in done.stderr
    assert browser_log(log) == []  # no login was started for the kubelet


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("", "decode:"),
        ("{}", "decode: stdin does not hold a CredentialProviderRequest"),
        (
            '{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v2","image":"x"}',
            "unsupported apiVersion",
        ),
    ],
)
def test_bad_requests(kt: KubetrayEnv, tmp_path: Path, stdin: str, message: str) -> None:
    config = tmp_path / "kubelet.json"
    config.write_text('{"providers": []}')
    done = subprocess.run(
        [str(kt.helper), "kubelet-credential-provider", "--config", str(config)],
        input=stdin,
        env=kt.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr
