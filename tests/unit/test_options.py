"""kubetray-exec's flags: kubelogin compatibility, last-wins, per-cluster config first."""

import pytest

from exec_helper.options import HelperOptions, OptionsError, resolve


def test_kubelogin_arguments_as_written_in_kubeconfigs() -> None:
    opts = resolve(
        [
            "oidc-login",
            "get-token",
            "--oidc-issuer-url=https://idp.example/realms/k8s",
            "--oidc-client-id",
            "kubectl",
            "--oidc-extra-scope=email,groups",
            "--oidc-extra-scope",
            "profile",
            "--oidc-auth-request-extra-params=ttl=86400,prompt=consent",
            "--listen-address=127.0.0.1:8000",
            "--listen-address=127.0.0.1:18000",
            "--grant-type=device-code",
            "--insecure-skip-tls-verify",
            "--oidc-use-access-token=false",
            "--token-cache-storage=keyring",
            "-v",
            "2",
        ]
    )
    assert opts.oidc_issuer_url == "https://idp.example/realms/k8s"
    assert opts.oidc_client_id == "kubectl"
    assert opts.oidc_extra_scope == ("email", "groups", "profile")
    assert opts.oidc_auth_request_extra_params == (("ttl", "86400"), ("prompt", "consent"))
    assert opts.listen_address == ("127.0.0.1:8000", "127.0.0.1:18000")
    assert opts.grant_type == "device-code"
    assert opts.insecure_skip_tls_verify is True and opts.oidc_use_access_token is False
    assert opts.v == 2


def test_scalar_flags_last_one_wins() -> None:
    assert resolve(["--audience", "a", "--audience", "b"]).audience == "b"
    assert resolve(["--stored", "a", "--stored=b"]).stored == "b"


def test_per_cluster_config_wins_and_ignores_foreign_keys() -> None:
    opts = resolve(
        ["--stored", "from-args", "--audience", "x"],
        {"stored": "from-config", "oidc-extra-scope": ["a", "b"], "someone-elses": 1},
    )
    assert (
        opts.stored == "from-config"
        and opts.audience == "x"
        and opts.oidc_extra_scope == ("a", "b")
    )
    assert resolve(["--stored", "a"], None).stored == "a"


@pytest.mark.parametrize(
    ("args", "config", "message"),
    [
        (["--no-such-flag"], None, "unknown argument '--no-such-flag'"),
        (["--oidc-issuer"], None, "unknown argument '--oidc-issuer'"),  # no abbreviations
        (["--authentication-timeout-sec", "soon"], None, "invalid int value"),
        (["--oidc-auth-request-extra-params", "novalue"], None, "expected KEY=VALUE"),
        (["--skip-open-browser=maybe"], None, "expected true or false"),
        ([], {"stored": 3}, "extension sets stored to 3"),
        ([], {"insecure-skip-tls-verify": "yes"}, "not a bool"),
    ],
)
def test_bad_arguments_say_what_is_wrong(
    args: list[str], config: dict | None, message: str
) -> None:
    with pytest.raises(OptionsError, match=message):
        resolve(args, config)


def test_defaults() -> None:
    assert resolve([]) == HelperOptions()
    assert resolve([]).flags_given == {}
