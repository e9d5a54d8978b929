"""app.oidc.jws against tokens signed by a second implementation (joserfc): every algorithm an
OpenID provider signs id_tokens with verifies, and every way a token can lie is refused."""

import base64
import json
import warnings
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from joserfc import jws as joserfc_jws
from joserfc import jwt
from joserfc.errors import SecurityWarning
from joserfc.jwk import ECKey, KeySet, OctKey, OKPKey, RSAKey

from app.oidc import jws

CLAIMS = {"iss": "https://idp.example", "aud": "kubectl", "sub": "alice", "exp": 2000000000}
ALGORITHMS = list(jws.SUPPORTED)


def new_key(alg: str, kid: str = "k1") -> Any:
    if alg.startswith(("RS", "PS")):
        return RSAKey.generate_key(2048, parameters={"kid": kid})
    if alg.startswith("ES"):
        return ECKey.generate_key(jws._ES_CURVE[alg], parameters={"kid": kid})
    return OKPKey.generate_key("Ed448" if alg == "Ed448" else "Ed25519", parameters={"kid": kid})


def public_jwks(*keys: Any) -> dict[str, Any]:
    return KeySet(list(keys)).as_dict(private=False)


def sign(key: Any, alg: str, claims: dict[str, Any] | None = None, **header: Any) -> str:
    with warnings.catch_warnings():  # joserfc warns that RFC 9864 deprecates "EdDSA"
        warnings.simplefilter("ignore", SecurityWarning)
        return jwt.encode({"alg": alg, "kid": key.kid, **header}, claims or CLAIMS, key, [alg])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_every_provider_algorithm_verifies(alg: str) -> None:
    key = new_key(alg)
    keys = jws.import_key_set(public_jwks(key))
    assert jws.verify(sign(key, alg), keys, ALGORITHMS) == CLAIMS


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_a_changed_claim_or_signature_is_refused(alg: str) -> None:
    key = new_key(alg)
    keys = jws.import_key_set(public_jwks(key))
    header, payload, signature = sign(key, alg).split(".")
    forged = b64(json.dumps({**CLAIMS, "sub": "root"}).encode())
    with pytest.raises(jws.JWSError, match="signature does not match"):
        jws.verify(f"{header}.{forged}.{signature}", keys, ALGORITHMS)
    flipped = b64(bytes([jws.b64url_decode(signature)[0] ^ 1]) + jws.b64url_decode(signature)[1:])
    with pytest.raises(jws.JWSError, match="signature does not match"):
        jws.verify(f"{header}.{payload}.{flipped}", keys, ALGORITHMS)


def test_a_token_signed_by_another_key_is_refused() -> None:
    mine, theirs = new_key("RS256"), new_key("RS256")  # same kid, different key
    with pytest.raises(jws.JWSError, match="signature does not match"):
        jws.verify(sign(theirs, "RS256"), jws.import_key_set(public_jwks(mine)), ALGORITHMS)


def test_unsigned_and_hmac_tokens_are_refused_whatever_discovery_says() -> None:
    key = new_key("RS256")
    keys = jws.import_key_set(public_jwks(key))
    header = b64(json.dumps({"alg": "none"}).encode())
    unsigned = f"{header}.{b64(json.dumps(CLAIMS).encode())}."
    with pytest.raises(jws.JWSError, match="'none' is not accepted"):
        jws.verify(unsigned, keys, [*ALGORITHMS, "none"])
    # The classic confusion: HS256 keyed with the provider's public key, which anyone has.
    secret = OctKey.import_key(json.dumps(public_jwks(key)["keys"][0]).encode())
    confused = jwt.encode({"alg": "HS256", "kid": "k1"}, CLAIMS, secret, ["HS256"])
    with pytest.raises(jws.JWSError, match="'HS256' is not accepted"):
        jws.verify(confused, keys, [*ALGORITHMS, "HS256"])


def test_only_the_algorithms_the_provider_announces_are_accepted() -> None:
    key = new_key("PS256")
    keys = jws.import_key_set(public_jwks(key))
    with pytest.raises(jws.JWSError, match="'PS256' is not accepted"):
        jws.verify(sign(key, "PS256"), keys, ["RS256"])


def test_a_key_is_only_used_for_its_own_algorithm_and_curve() -> None:
    rsa_key = new_key("RS256")
    pinned = {**public_jwks(rsa_key)["keys"][0], "alg": "RS256"}
    with pytest.raises(jws.JWSError, match="no PS256 key"):
        jws.verify(sign(rsa_key, "PS256"), jws.import_key_set({"keys": [pinned]}), ALGORITHMS)
    p384 = ECKey.generate_key("P-384", parameters={"kid": "k1"})
    token = joserfc_jws.serialize_compact({"alg": "ES384", "kid": "k1"}, b"{}", p384, ["ES384"])
    _header, payload, signature = token.split(".")
    relabelled = b64(json.dumps({"alg": "ES256", "kid": "k1"}).encode())
    with pytest.raises(jws.JWSError, match="no ES256 key"):
        jws.verify(
            f"{relabelled}.{payload}.{signature}", jws.import_key_set(public_jwks(p384)), ALGORITHMS
        )


def test_the_key_is_chosen_by_kid_and_encryption_keys_are_ignored() -> None:
    old, new = new_key("RS256", kid="old"), new_key("RS256", kid="new")
    keys = jws.import_key_set(public_jwks(old, new))
    assert jws.verify(sign(new, "RS256"), keys, ALGORITHMS)["sub"] == "alice"
    with pytest.raises(jws.JWSError, match="no RS256 key 'gone'"):
        jws.verify(sign(new_key("RS256", kid="gone"), "RS256"), keys, ALGORITHMS)
    enc = {**public_jwks(new)["keys"][0], "use": "enc"}
    assert jws.import_key_set({"keys": [enc]}) == []


def test_a_der_encoded_ecdsa_signature_is_refused() -> None:
    key = new_key("ES256")
    header, payload, signature = sign(key, "ES256").split(".")
    raw = jws.b64url_decode(signature)
    r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
    der = encode_dss_signature(r, s)
    assert decode_dss_signature(der) == (r, s)
    with pytest.raises(jws.JWSError, match="signature does not match"):
        jws.verify(
            f"{header}.{payload}.{b64(der)}", jws.import_key_set(public_jwks(key)), ALGORITHMS
        )


@pytest.mark.parametrize(
    "token",
    [
        "",
        "a.b",
        "a.b.c.d.e",  # JWE
        "e30=.e30.",  # padded base64
        "e30.e30+.",  # standard, not url-safe, alphabet
        f"{b64(b'[]')}.{b64(b'{}')}.",  # header not an object
        f"{b64(b'not json')}.{b64(b'{}')}.",
    ],
)
def test_malformed_tokens_are_one_clear_error(token: str) -> None:
    with pytest.raises(jws.JWSError):
        jws.verify(token, [], ALGORITHMS)


def test_critical_header_extensions_are_refused() -> None:
    key = new_key("RS256")
    header = b64(json.dumps({"alg": "RS256", "kid": "k1", "crit": ["b64"], "b64": False}).encode())
    signed = f"{header}.{b64(json.dumps(CLAIMS).encode())}"
    signature = key.private_key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    token = f"{signed}.{b64(signature)}"
    with pytest.raises(jws.JWSError, match="critical"):
        jws.verify(token, jws.import_key_set(public_jwks(key)), ALGORITHMS)


def test_a_point_off_the_curve_is_a_clear_error() -> None:
    jwk = public_jwks(new_key("ES256"))["keys"][0]
    jwk["y"] = b64(bytes(32))
    with pytest.raises(jws.JWSError, match="not usable"):
        jws.import_key(jwk)


def _signed(key: Any, header: str, claims: str) -> str:
    signing_input = f"{header}.{claims}"
    signature = key.private_key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64(signature)}"


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ("[" * 20_000 + "]" * 20_000, "not JSON"),  # deep nesting: no RecursionError escapes
        ('{"exp": ' + "9" * 5000 + "}", "not JSON"),  # past Python's int-from-text limit
        ('{"exp": NaN}', "NaN"),  # would pass the expiry check, then break the token's time
        ('{"sub": "alice", "sub": "root"}', "repeat a name"),  # which sub would kubectl see?
    ],
)
def test_hostile_json_is_one_clear_error_even_when_signed(claims: str, why: str) -> None:
    key = new_key("RS256")
    header = b64(json.dumps({"alg": "RS256", "kid": "k1"}).encode())
    token = _signed(key, header, b64(claims.encode()))
    with pytest.raises(jws.JWSError, match=why):
        jws.verify(token, jws.import_key_set(public_jwks(key)), ALGORITHMS)


def test_a_bad_key_in_the_set_does_not_take_the_good_ones_with_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = new_key("RS256", kid="good")
    off_curve = {**public_jwks(new_key("ES256", kid="bad"))["keys"][0], "y": b64(bytes(32))}
    with warnings.catch_warnings():  # joserfc warns too
        warnings.simplefilter("ignore", SecurityWarning)
        small = RSAKey.generate_key(1024, parameters={"kid": "small"}, private=True)
    odd = {"kty": "EC", "crv": ["P-256"], "x": "", "y": ""}  # not even a string
    jwks = {"keys": [off_curve, public_jwks(small)["keys"][0], odd, *public_jwks(good)["keys"]]}
    keys = jws.import_key_set(jwks)
    assert [k.kid for k in keys] == ["good"]
    assert "1024-bit RSA" in caplog.text and "not on the curve" in caplog.text
    assert jws.verify(sign(good, "RS256"), keys, ALGORITHMS) == CLAIMS
    with pytest.raises(jws.JWSError, match="no RS256 key 'small'"):
        jws.verify(sign(small, "RS256"), keys, ALGORITHMS)


def test_eddsa_and_ed25519_name_the_same_algorithm_for_a_key() -> None:
    key = new_key("Ed25519")
    pinned = {**public_jwks(key)["keys"][0], "alg": "EdDSA"}
    assert jws.verify(sign(key, "Ed25519"), jws.import_key_set({"keys": [pinned]}), ALGORITHMS)
