"""Verify an id_token's signature with the provider's JWKS, through joserfc.

The JOSE work (JWK import, JWS compact parsing, picking the key by kid, the signature) is
joserfc's. What is ours is the policy, as strict as an OpenID provider's id_tokens allow:
RS/PS/ES 256-512, EdDSA and its fully specified names Ed25519 and Ed448 (RFC 9864), public
keys from the jwks_uri. Never "none" nor HMAC (a JWKS holds public keys; accepting HS* would
let anyone sign with one), never JWE, no critical header extensions. Where joserfc is more
lenient than that policy, the check sits around its call:

- JSON: joserfc reads headers and claims with plain ``json.loads`` (a repeated name: the last
  wins; NaN; UTF-16). Both are read again here, strictly.
- ``crit``: joserfc honours the names it knows (RFC 7797 unencoded payloads); any is refused.
- keys: joserfc imports an RSA key of any size (it warns); smaller than 2048 bits are skipped.
  A key it cannot import is skipped and logged instead of failing the whole set.
- EdDSA: joserfc warns on every use of the name RFC 9864 deprecates, and treats a key's "alg"
  "EdDSA" and "Ed25519" as different algorithms; to us they are one, as they are to RFC 9864.
"""

import binascii
import json
import logging
from collections.abc import Iterable
from typing import Any

from joserfc import jws
from joserfc.errors import (
    InvalidKeyCurveError,
    InvalidKeyIdError,
    JoseError,
    KeyParameterError,
)
from joserfc.jwa import EdDSAAlgorithm
from joserfc.jwk import JWKRegistry, Key, KeySet, OctKey
from joserfc.util import urlsafe_b64decode

SUPPORTED = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
    "EdDSA", "Ed25519", "Ed448",
)  # fmt: skip
MAX_TOKEN = 256 * 1024
"""Longer tokens are refused before parsing (id_tokens with many groups are tens of KB)."""
MIN_RSA_BITS = 2048
"""RFC 7518 §3.3: smaller RSA keys are skipped as unusable."""
_KEY_TYPES = ("RSA", "EC", "OKP")
_EDDSA_CURVES = ("Ed25519", "Ed448")

log = logging.getLogger(__name__)


class IdTokenError(ValueError):
    """The token is malformed, unsigned by any acceptable key, or uses a refused algorithm."""


class _EdDSA(EdDSAAlgorithm):
    # joserfc warns at each use of "EdDSA" (RFC 9864 deprecates the name for Ed25519/Ed448);
    # providers still sign with it (oidc-provider does), so it is accepted on purpose and its
    # warning would only be noise in the agent's log (and an error in tests).
    # Empty, not None: joserfc tests it for truth, and types it str.
    security_warning = ""


_ALGORITHMS = {name: jws.JWSRegistry.algorithms[name] for name in SUPPORTED} | {"EdDSA": _EdDSA()}


def _registry(allowed: list[str]) -> jws.JWSRegistry:
    registry = jws.JWSRegistry(algorithms=allowed, strict_check_header=False)
    # Only our algorithms exist for it: none and HS* are unknown, whatever discovery announces.
    registry.algorithms = _ALGORITHMS
    # joserfc's caps (a 512-byte header, 128 KB payload, 1 KB signature) would refuse id_tokens
    # kubetray has accepted: an x5c chain in the header, many groups, an RSA-8192 signature.
    # The whole token stays under MAX_TOKEN.
    registry.max_header_length = registry.max_payload_length = MAX_TOKEN
    registry.max_signature_length = 4096
    return registry


def _strict_object(data: bytes) -> dict[str, Any]:
    """A JSON object, strictly: UTF-8, no repeated names, no NaN or Infinity."""

    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise IdTokenError("its header or claims repeat a name")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise IdTokenError(f"its header or claims hold {name}")

    try:
        value = json.loads(
            data.decode("utf-8"), object_pairs_hook=no_repeats, parse_constant=no_constant
        )
    except (UnicodeDecodeError, RecursionError, ValueError) as e:  # JSONDecodeError, big ints
        if isinstance(e, IdTokenError):
            raise
        raise IdTokenError("its header or claims are not JSON") from None
    if not isinstance(value, dict):
        raise IdTokenError("its header or claims are not JSON objects")
    return value


def _import_key(jwk: Any) -> Key | None:
    """A JWK's public signing key; None for a key meant for something else (encryption).

    Raises what joserfc raises (JoseError, ValueError...) or IdTokenError for a key that
    cannot be used.
    """
    if not isinstance(jwk, dict):
        raise IdTokenError("not a JSON object")
    ops = jwk.get("key_ops")
    if jwk.get("use", "sig") != "sig" or (isinstance(ops, list) and "verify" not in ops):
        return None
    kty, crv, alg = jwk.get("kty"), jwk.get("crv"), jwk.get("alg")
    if kty not in _KEY_TYPES or (kty == "OKP" and crv not in _EDDSA_CURVES):
        raise IdTokenError(f"key type {kty!r}" + (f" {crv!r}" if crv else "") + " cannot sign")
    n = jwk.get("n")
    if kty == "RSA" and isinstance(n, str):
        bits = int.from_bytes(urlsafe_b64decode(n.encode("ascii")), "big").bit_length()
        if bits < MIN_RSA_BITS:
            raise IdTokenError(f"{bits}-bit RSA (RFC 7518 asks for {MIN_RSA_BITS})")
    if kty == "OKP" and alg in ("EdDSA", crv):
        jwk = {k: v for k, v in jwk.items() if k != "alg"}  # fits both names, not another curve
    key = JWKRegistry.import_key(jwk)
    return None if isinstance(key, OctKey) else key


def import_key_set(jwks: Any) -> KeySet:
    """The signing keys of a JWKS document ({"keys": [...]}).

    Keys for other uses are left out; unusable ones are skipped and logged, so that one bad
    key does not take the provider's good ones with it.
    """
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise IdTokenError("the provider's jwks_uri did not return a JWK set")
    keys: list[Key] = []
    for jwk in jwks["keys"]:
        try:
            key = _import_key(jwk)
        except (JoseError, ValueError, TypeError, KeyError) as e:
            kid = jwk.get("kid") if isinstance(jwk, dict) else None
            log.warning("the provider's key %r is not usable, skipped: %s", kid, _said(e))
            continue
        if key is not None:
            keys.append(key)
    return KeySet(keys)


def verify(token: str, keys: KeySet, algorithms: Iterable[str]) -> dict[str, Any]:
    """The claims of a JWS ``token`` signed by one of ``keys`` with one of ``algorithms``.

    Raises IdTokenError when the token is malformed, its algorithm is not allowed, or no
    fitting key verifies it. The claims themselves (iss, aud, exp, nonce) are the caller's.
    """
    allowed = [a for a in algorithms if a in SUPPORTED]
    if not allowed:
        raise IdTokenError(
            f"the provider signs id_tokens with no algorithm kubetray accepts "
            f"({', '.join(SUPPORTED)})"
        )
    if not isinstance(token, str) or len(token) > MAX_TOKEN:
        raise IdTokenError("not a signed JWT (not a string, or longer than 256 KB)")
    registry = _registry(allowed)
    try:
        obj = jws.extract_compact(token.encode("utf-8"), registry=registry)
        header = _strict_object(urlsafe_b64decode(obj.segments["header"]))
    except IdTokenError:
        raise
    except (RecursionError, JoseError, ValueError, TypeError) as e:
        raise IdTokenError(f"not a signed JWT in compact serialization ({_said(e)})") from None
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(alg, str) or alg not in allowed:
        raise IdTokenError(f"algorithm {alg!r} is not accepted (allowed: {', '.join(allowed)})")
    if "crit" in header:
        raise IdTokenError(f"critical header extensions are not supported: {header['crit']!r}")
    try:
        valid = jws.validate_compact(obj, keys, registry=registry)
    except (InvalidKeyIdError, KeyParameterError, InvalidKeyCurveError):
        if kid is None and len(keys.keys) > 1:
            raise IdTokenError(
                "its header names no key (kid), and the provider has several"
            ) from None
        what = f"{alg} key" + (f" {kid!r}" if isinstance(kid, str) else "")
        raise IdTokenError(f"the provider's key set has no {what}") from None
    except (JoseError, ValueError, TypeError) as e:
        raise IdTokenError(f"its header is not acceptable ({_said(e)})") from None
    if not valid:
        raise IdTokenError("the signature does not match the provider's key")
    return _strict_object(obj.payload)


def _said(e: Exception) -> str:
    if isinstance(e, JoseError):
        return e.description or e.error
    if isinstance(e, RecursionError):
        return "nested too deeply"
    if isinstance(e, binascii.Error):
        return "not base64url"
    if isinstance(e, KeyError):
        return f"unknown {e}"
    return str(e) or type(e).__name__
