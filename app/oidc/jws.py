"""Verify an id_token's signature (JWS compact serialization, RFC 7515) with a provider's JWKS.

Only what an OpenID provider signs id_tokens with: RS256/384/512, PS256/384/512,
ES256/384/512, EdDSA and its fully specified names Ed25519 and Ed448 (RFC 9864), with public
keys from its jwks_uri. No "none", no HMAC (a JWKS holds public keys; accepting HS* would let
anyone sign with one), no JWE, no unknown critical headers. The cryptography itself is
`cryptography`'s; this module only picks the key and the algorithm, strictly. It replaces
joserfc on the agent's path: joserfc imports cryptography.x509 and its JWE stack, a few MB the
idle agent kept for nothing.
"""

import base64
import binascii
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

PublicKey = (
    rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
)

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_CURVES: dict[str, tuple[type[ec.EllipticCurve], int]] = {
    # JWK "crv" -> (curve, bytes per coordinate); ES256 uses P-256, ES384 P-384, ES512 P-521.
    "P-256": (ec.SECP256R1, 32),
    "P-384": (ec.SECP384R1, 48),
    "P-521": (ec.SECP521R1, 66),
}
_ES_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
SUPPORTED = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
    "EdDSA", "Ed25519", "Ed448",
)  # fmt: skip
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
MAX_TOKEN = 256 * 1024
"""Longer tokens are refused before parsing (id_tokens with many groups are tens of KB)."""
MIN_RSA_BITS = 2048
"""RFC 7518 §3.3: smaller RSA keys are skipped as unusable."""

log = logging.getLogger("kubetray.oidc")


class JWSError(ValueError):
    """The token is malformed, unsigned by any acceptable key, or uses a refused algorithm."""


def b64url_decode(text: str) -> bytes:
    """Base64url without padding (RFC 7515 §2), strictly: no padding, no other characters."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise JWSError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise JWSError("not base64url") from None


def _object(segment: str) -> dict[str, Any]:
    """A JSON object, strictly: UTF-8, no duplicate names, no NaN or Infinity."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise JWSError("its header or claims repeat a name")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise JWSError(f"its header or claims hold {name}")

    try:
        value = json.loads(
            b64url_decode(segment).decode("utf-8"),
            object_pairs_hook=no_duplicates,
            parse_constant=no_constant,
        )
    except (UnicodeDecodeError, RecursionError, ValueError) as e:  # JSONDecodeError, big ints
        if isinstance(e, JWSError):
            raise
        raise JWSError("its header or claims are not JSON") from None
    if not isinstance(value, dict):
        raise JWSError("its header or claims are not JSON objects")
    return value


def _uint(jwk: dict[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise JWSError(f"the key has no {name!r}")
    return int.from_bytes(b64url_decode(value), "big")


def _coordinate(jwk: dict[str, Any], name: str, size: int) -> int:
    value = jwk.get(name)
    raw = b64url_decode(value) if isinstance(value, str) else b""
    if len(raw) != size:
        raise JWSError(f"the key's {name!r} is not {size} bytes")
    return int.from_bytes(raw, "big")


@dataclass(frozen=True)
class Key:
    """One signing key of the provider's JWKS."""

    kid: str | None
    kty: str
    alg: str | None
    crv: str | None
    public: PublicKey

    def fits(self, alg: str) -> bool:
        """Whether this key may verify a signature made with ``alg``."""
        eddsa = ("EdDSA", self.crv)  # RFC 9864: the old and the fully specified name of one alg
        if self.alg is not None and self.alg != alg and not (alg in eddsa and self.alg in eddsa):
            return False
        if alg.startswith(("RS", "PS")):
            return self.kty == "RSA"
        if alg.startswith("ES"):
            return self.kty == "EC" and self.crv == _ES_CURVE[alg]
        if alg == "EdDSA":
            return self.kty == "OKP"
        return self.kty == "OKP" and self.crv == alg  # Ed25519, Ed448


def import_key(jwk: dict[str, Any]) -> Key | None:
    """A JWK's public signing key, or None for what cannot sign id_tokens (enc, oct, unknown)."""
    if jwk.get("use") not in (None, "sig"):
        return None
    ops = jwk.get("key_ops")
    if isinstance(ops, list) and "verify" not in ops:
        return None
    kty, crv = jwk.get("kty"), jwk.get("crv")
    if not isinstance(crv, str | None):
        return None
    public: PublicKey
    try:
        if kty == "RSA":
            public = rsa.RSAPublicNumbers(_uint(jwk, "e"), _uint(jwk, "n")).public_key()
            if public.key_size < MIN_RSA_BITS:
                raise JWSError(f"{public.key_size}-bit RSA (RFC 7518 asks for {MIN_RSA_BITS})")
        elif kty == "EC" and crv in _CURVES:
            curve, size = _CURVES[crv]
            x, y = _coordinate(jwk, "x", size), _coordinate(jwk, "y", size)
            public = ec.EllipticCurvePublicNumbers(x, y, curve()).public_key()
        elif kty == "OKP" and crv in ("Ed25519", "Ed448"):
            raw = b64url_decode(jwk["x"]) if isinstance(jwk.get("x"), str) else b""
            cls = ed25519.Ed25519PublicKey if crv == "Ed25519" else ed448.Ed448PublicKey
            public = cls.from_public_bytes(raw)
        else:
            return None
    except ValueError as e:  # JWSError too: a point off the curve, a bad length, a small key
        raise JWSError(f"the provider's key {jwk.get('kid')!r} is not usable: {e}") from None
    kid, alg = jwk.get("kid"), jwk.get("alg")
    return Key(
        kid if isinstance(kid, str) else None,
        str(kty),
        alg if isinstance(alg, str) else None,
        crv if isinstance(crv, str) else None,
        public,
    )


def import_key_set(jwks: Any) -> list[Key]:
    """The signing keys of a JWKS document ({"keys": [...]}).

    Keys for other uses are skipped; so are unusable ones (logged), so that one bad key does not
    take the provider's good ones with it.
    """
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise JWSError("the provider's jwks_uri did not return a JWK set")
    keys = []
    for jwk in jwks["keys"]:
        try:
            key = import_key(jwk) if isinstance(jwk, dict) else None
        except JWSError as e:
            log.warning("%s: skipped", e)
            continue
        if key is not None:
            keys.append(key)
    return keys


def _check(key: Key, alg: str, signature: bytes, signed: bytes) -> bool:
    public = key.public
    try:
        if isinstance(public, rsa.RSAPublicKey):
            digest = _HASHES[alg[2:]]()
            if alg.startswith("RS"):
                public.verify(signature, signed, padding.PKCS1v15(), digest)
            else:  # PS*: MGF1 with the same hash, salt as long as the hash (RFC 7518 §3.5)
                pss = padding.PSS(padding.MGF1(digest), digest.digest_size)
                public.verify(signature, signed, pss, digest)
        elif isinstance(public, ec.EllipticCurvePublicKey):
            size = _CURVES[_ES_CURVE[alg]][1]
            if len(signature) != 2 * size:  # R || S, each fixed size (RFC 7518 §3.4), not DER
                return False
            r = int.from_bytes(signature[:size], "big")
            s = int.from_bytes(signature[size:], "big")
            der = encode_dss_signature(r, s)
            public.verify(der, signed, ec.ECDSA(_HASHES[alg[2:]]()))
        else:
            public.verify(signature, signed)
    except InvalidSignature:
        return False
    return True


def verify(token: str, keys: list[Key], algorithms: list[str]) -> dict[str, Any]:
    """The claims of a JWS ``token`` signed by one of ``keys`` with one of ``algorithms``.

    Raises JWSError when the token is malformed, its algorithm is not allowed, or no fitting
    key verifies it. The claims themselves (iss, aud, exp, nonce) are the caller's to check.
    """
    parts = token.split(".") if isinstance(token, str) and len(token) <= MAX_TOKEN else []
    if len(parts) != 3:
        raise JWSError("not a signed JWT (compact JWS has three parts)")
    header, claims = _object(parts[0]), _object(parts[1])
    allowed = [a for a in algorithms if a in SUPPORTED]
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in allowed:
        raise JWSError(f"algorithm {alg!r} is not accepted (allowed: {', '.join(allowed)})")
    if "crit" in header:
        raise JWSError(f"critical header extensions are not supported: {header['crit']!r}")
    signature = b64url_decode(parts[2])
    kid = header.get("kid")
    candidates = [k for k in keys if k.fits(alg) and (kid is None or k.kid == kid)]
    if not candidates:
        raise JWSError(f"the provider's key set has no {alg} key" + (f" {kid!r}" if kid else ""))
    signed = f"{parts[0]}.{parts[1]}".encode("ascii")
    if not any(_check(k, alg, signature, signed) for k in candidates):
        raise JWSError("the signature does not match the provider's key")
    return claims
