"""KUBERNETES_EXEC_INFO parsing and ExecCredential rendering."""

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from exec_helper.exec_credential import ExecInfoError, parse_exec_info, render
from tests.peers import A1, B1, PY, V1, cluster_info


def test_versions_and_interactive() -> None:
    assert parse_exec_info(V1).api_version.endswith("/v1")
    assert parse_exec_info(B1).api_version.endswith("/v1beta1")
    a1 = parse_exec_info(A1)
    assert a1.api_version.endswith("/v1alpha1") and a1.interactive is False
    assert parse_exec_info(PY).interactive is False
    assert parse_exec_info(V1.replace("false", "true")).interactive is True


def test_cluster_and_config() -> None:
    info = parse_exec_info(
        cluster_info("https://a:6443", config={"stored": "x"}, **{"proxy-url": "http://p:3128"})
    )
    assert info.cluster is not None
    assert info.cluster.server == "https://a:6443"
    assert info.cluster.config == {"stored": "x"}
    assert info.cluster.proxy_url == "http://p:3128"
    assert parse_exec_info(cluster_info("https://a", config=None)).cluster.config is None  # type: ignore[union-attr]


@pytest.mark.parametrize("text", [None, ""], ids=["unset", "empty"])
def test_no_exec_info_is_kubelogins_reading(text: str | None) -> None:
    info = parse_exec_info(text)
    assert info.api_version == "client.authentication.k8s.io/v1beta1"
    assert not info.interactive and info.cluster is None


def test_old_client_retry_carries_the_401() -> None:
    retry = A1.replace('"spec":{}', '"spec":{"response":{"code":401}}')
    assert parse_exec_info(retry).response_code == 401


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "^decode: KUBERNETES_EXEC_INFO is not valid JSON"),
        ("null", "^decode: KUBERNETES_EXEC_INFO must be a JSON object, not null"),
        ("[]", "^decode: KUBERNETES_EXEC_INFO must be a JSON object, not an array"),
        ('{"kind":"ExecCredential","apiVersion":"v1"}', "invalid group/kind"),
        (
            '{"apiVersion":"client.authentication.k8s.io/v1"}',
            "invalid group/kind: wanted ExecCredential",
        ),
        (V1.replace("/v1", "/v9"), "unsupported apiVersion client.authentication.k8s.io/v9"),
        (
            V1.replace('"spec":{"interactive":false}', '"spec":[]'),
            "^decode: spec must be a JSON object",
        ),
        (cluster_info(""), "^decode: spec.cluster.server must be a non-empty string"),
    ],
)
def test_rejections(text: str | None, message: str) -> None:
    with pytest.raises(ExecInfoError, match=message):
        parse_exec_info(text)


def test_render_token_and_expiry_format() -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=timezone(timedelta(hours=2)))
    out = render("client.authentication.k8s.io/v1beta1", token="t", expiration=when)
    assert out.endswith("\n") and out.count("\n") == 1
    doc = json.loads(out)
    assert doc == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "t", "expirationTimestamp": "2030-01-02T01:04:05Z"},
    }


def test_render_needs_a_pair_or_a_token() -> None:
    with pytest.raises(ValueError, match="token or a certificate and key"):
        render("client.authentication.k8s.io/v1", client_certificate_data="c")
    doc = json.loads(
        render(
            "client.authentication.k8s.io/v1",
            client_certificate_data="c",
            client_key_data="k",
            expiration=datetime(2030, 1, 1, tzinfo=UTC),
        )
    )
    assert set(doc["status"]) == {"clientCertificateData", "clientKeyData", "expirationTimestamp"}
