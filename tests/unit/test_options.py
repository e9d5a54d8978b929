"""kubetray-exec's flags: kubelogin compatibility, last-wins, per-cluster config first."""

import pytest

from exec_helper import options
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


ISSUER = ["--oidc-issuer-url=https://idp.example", "--oidc-client-id=kubectl"]

# Every get-token flag of int128/kubelogin, current and past (pkg/cmd/get_token.go,
# authentication.go, tls.go, tokencache.go, pkce.go; klog's flags through
# pkg/infrastructure/logger), with a value as a kubeconfig would give it (None: a bool).
KUBELOGIN_FLAGS: dict[str, list[str] | None] = {
    "oidc-issuer-url": ["https://other.example"],
    "oidc-client-id": ["other"],
    "oidc-client-secret": ["s3cret"],
    "oidc-redirect-url": ["http://localhost:8000"],
    "oidc-extra-scope": ["email,groups"],
    "oidc-use-access-token": None,
    "oidc-use-pkce": None,
    "oidc-pkce-method": ["S256"],
    "oidc-request-header": ["Origin=https://portal.example"],
    "oidc-access-type": ["offline"],
    "force-refresh": None,
    "force-keyring": None,
    "no-keyring": None,
    "token-cache-dir": ["~/.kube/cache/oidc-login"],
    "token-cache-storage": ["keyring"],
    "certificate-authority": ["/etc/ssl/ca.pem"],
    "certificate-authority-data": ["LS0t"],
    "insecure-skip-tls-verify": None,
    "tls-renegotiation-once": None,
    "tls-renegotiation-freely": None,
    "grant-type": ["auto"],
    "listen-address": ["127.0.0.1:8000"],
    "listen-port": ["8000"],
    "skip-open-browser": None,
    "browser-command": ["firefox"],
    "authentication-timeout-sec": ["60"],
    "local-server-cert": ["/tmp/c.pem", "--local-server-key=/tmp/k.pem"],
    "local-server-key": ["/tmp/k.pem", "--local-server-cert=/tmp/c.pem"],
    "open-url-after-authentication": ["https://example.com/done"],
    "oidc-redirect-url-hostname": ["127.0.0.1"],
    "oidc-redirect-url-authcode-keyboard": ["urn:ietf:wg:oauth:2.0:oob"],
    "oidc-auth-request-extra-params": ["ttl=86400"],
    "username": ["alice"],
    "password": ["pw"],
    "token-exchange-resource": ["https://api.example"],
    "token-exchange-audience": ["api"],
    "token-exchange-requested-token-type": ["id-token"],
    "token-exchange-subject-token": ["eyJ"],
    "token-exchange-subject-token-type": ["id-token"],
    "token-exchange-actor-token": ["eyJ"],
    "token-exchange-actor-token-type": ["access-token"],
    "v": ["1"],
    "add_dir_header": None,
    "alsologtostderr": None,
    "legacy_stderr_threshold_behavior": None,
    "log_backtrace_at": [":0"],
    "log_dir": ["/tmp"],
    "log_file": ["/tmp/kubelogin.log"],
    "log_file_max_size": ["1800"],
    "logtostderr": None,
    "one_output": None,
    "skip_headers": None,
    "skip_log_headers": None,
    "stderrthreshold": ["2"],
    "vmodule": ["x=2"],
}
REFUSED = {f for f in KUBELOGIN_FLAGS if f.startswith("token-exchange-")}


@pytest.mark.parametrize("flag", sorted(KUBELOGIN_FLAGS))
def test_every_kubelogin_flag_is_accepted_or_refused_in_one_line(flag: str) -> None:
    from app.oidc.settings import OIDCSettings

    value = KUBELOGIN_FLAGS[flag]
    given = [f"--{flag}"] if value is None else [f"--{flag}={value[0]}", *value[1:]]
    if flag in REFUSED:
        with pytest.raises(OptionsError) as refused:
            resolve(["get-token", *ISSUER, *given])
        message = str(refused.value)
        assert "\n" not in message and f"--{flag}" in message and "--grant-type" in message
        return
    OIDCSettings.from_options(resolve(["get-token", *ISSUER, *given]))


@pytest.mark.parametrize(
    ("grant", "accepted"),
    [
        ("auto", True),
        ("authcode", True),
        ("authcode-keyboard", True),
        ("password", True),
        ("device-code", True),
        ("client-credentials", True),
        ("token-exchange", False),
        ("implicit", False),
    ],
)
def test_kubelogin_grant_types(grant: str, accepted: bool) -> None:
    from app.oidc.settings import OIDCSettings

    opts = resolve([*ISSUER, f"--grant-type={grant}", "--oidc-client-secret=s"])
    if accepted:
        assert OIDCSettings.from_options(opts).grant_type == grant
    else:
        with pytest.raises(OptionsError, match="grant") as refused:
            OIDCSettings.from_options(opts)
        assert "\n" not in str(refused.value)


def test_token_exchange_in_the_cluster_extension_is_refused() -> None:
    with pytest.raises(OptionsError, match="--token-exchange-subject-token"):
        resolve(ISSUER, {"token-exchange-subject-token": "eyJ"})


def test_request_headers_read_as_kubelogin_reads_them() -> None:
    opts = resolve(
        [
            "--oidc-request-header=Origin=https://portal.example",
            "--oidc-request-header",
            "X-A=1,X-B=2",
            "--oidc-request-header=Accept=application/json, text/plain",  # one '=': one pair
        ]
    )
    assert opts.oidc_request_header == (
        ("Origin", "https://portal.example"),
        ("X-A", "1"),
        ("X-B", "2"),
        ("Accept", "application/json, text/plain"),
    )
    env = resolve([], env={"KUBETRAY_OIDC_REQUEST_HEADER": "X-Api-Key=k1"})
    assert env.oidc_request_header == (("X-Api-Key", "k1"),)
    config = resolve([], {"oidc-request-header": {"Origin": "https://o"}})
    assert config.oidc_request_header == (("Origin", "https://o"),)
    assert "k1" not in repr(env)  # values may be keys: never in a repr, so never in a log


@pytest.mark.parametrize(
    "value",
    ["X-Api-Key: topsecret", "topsecret", "=topsecret"],
)
def test_a_malformed_request_header_is_refused_without_repeating_it(value: str) -> None:
    with pytest.raises(OptionsError, match="expected KEY=VALUE") as refused:
        resolve([f"--oidc-request-header={value}"])
    assert "topsecret" not in str(refused.value)
    with pytest.raises(OptionsError) as from_env:
        resolve([], env={"KUBETRAY_OIDC_REQUEST_HEADER": value})
    assert "topsecret" not in str(from_env.value)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Bad Name=topsecret", "'Bad Name' is not an HTTP header name"),
        ("X-Key=top\r\nsecret", "X-Key: the value holds a line break"),
        ("X-Key=top\x00secret", "X-Key: the value holds a line break"),
    ],
)
def test_a_request_header_that_is_not_one_http_header_is_refused(header: str, message: str) -> None:
    from app.oidc.settings import OIDCSettings

    key, _, value = header.partition("=")
    opts = resolve(ISSUER, {"oidc-request-header": {key: value}})
    with pytest.raises(OptionsError, match=message) as refused:
        OIDCSettings.from_options(opts)
    assert "secret" not in str(refused.value) and "\n" not in str(refused.value)


def test_the_flags_of_hundreds_of_contexts_are_parsed_with_one_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent and doctor resolve every kubeconfig context's flags; building argparse's
    parser each time cost ~2 ms a context (issue 33: a second for 500)."""
    built: list[object] = []
    build = options.build_parser
    monkeypatch.setattr(options, "build_parser", lambda: built.append(1) or build())
    options._cached_parser.cache_clear()
    got = [
        resolve(["get-token", f"--oidc-client-id=c{i}", "--oidc-issuer-url=https://i"])
        for i in range(300)
    ]
    assert [o.oidc_client_id for o in got] == [f"c{i}" for i in range(300)]
    with pytest.raises(OptionsError, match="unknown argument"):
        resolve(["--no-such-flag"])
    assert len(built) == 1
