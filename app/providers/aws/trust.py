"""The CAs botocore's clients trust: the system's, with the caller's extra bundle added.

botocore verifies AWS's certificates against certifi's bundle (or its own cacert.pem), and an
extra bundle (``AWS_CA_BUNDLE``, ``--ca-bundle``, a profile's ``ca_bundle``) *replaces* that.
kubetray's rule is the one app.oidc.http keeps: the system's trust store, extra CAs added to
it, never instead. A company CA installed in the system store only (Debian's
update-ca-certificates) must work for IAM Identity Center, GetRoleCredentials and AssumeRole as
it does for an OIDC provider.

botocore's ``verify`` is a file path: its HTTP session makes its own SSL context and hands
urllib3 the path as ``ca_certs`` on every new connection; no documented setting takes an
``SSLContext`` (only a replaced HTTP session class would, which ties kubetray to botocore's
internals). So ``verify_path`` gives botocore a file:

- no extra bundle: the system's CA file itself, the one ``ssl.create_default_context()`` loads
  (``ssl.get_default_verify_paths().cafile``, which honours ``SSL_CERT_FILE``);
- an extra bundle: one PEM file holding the system's CAs then the bundle's, written once per
  distinct content into kubetray's private runtime directory (0600, named by its SHA-256, so
  every process and every restart reuses it and none ever rewrites one in use);
- no system CA *file* (macOS keeps its trust in the keychain, Windows in its certificate store,
  a Linux may have only a hashed directory): botocore's own bundle stands in for the system's
  (the packaged agent's copy pinned at start, providers/aws/data.py), with the extra bundle
  added (docs/aws.md says so).
"""

import functools
import hashlib
import os
import ssl
import tempfile
import urllib.parse

from app.oidc.errors import LoginError

CA_FLAG = "--ca-bundle (or AWS_CA_BUNDLE)"
"""Where an AWS caller gives extra CAs, as the AWS CLI names them."""
PREFIX = "aws-ca-"


class UnusableBundle(LoginError):
    """The extra CA bundle cannot be read as PEM certificates."""


def system_ca_file() -> str | None:
    """The system's CA file, as ``ssl.create_default_context()`` finds it (None: the system's
    trust is not a file here)."""
    return ssl.get_default_verify_paths().cafile


def botocore_bundle() -> str:
    """The bundle botocore verifies with by itself (certifi's, else its own cacert.pem); the
    packaged agent's copy as it was at start (data.ca_bundle: an upgrade may remove the file)."""
    from botocore.httpsession import where

    from app.providers.aws import data

    return data.ca_bundle() or where()


def verify_path(extra: str | None, directory: str | None = None) -> str:
    """botocore's ``verify`` for a caller whose extra bundle is ``extra``. ``directory``: where
    a combined file goes (the runtime directory)."""
    system = system_ca_file()
    if not extra:
        return system or botocore_bundle()
    _check(extra)
    if system is None:
        system = botocore_bundle()
    if directory is None:
        from exec_helper import paths

        directory = paths.runtime_dir()
    try:
        return _combined(system, _stamp(system), extra, _stamp(extra), directory)
    except OSError as e:
        raise UnusableBundle(
            f"cannot add the CA bundle {extra} to the system's CAs in {directory}: "
            f"{e.strerror or e}",
            "check that kubetray's runtime directory is yours and writable",
        ) from None


def _stamp(path: str) -> tuple[int, int, int]:
    """What says a file changed (a new combined file is then made)."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def _check(extra: str) -> None:
    _certificates(extra)


def _certificates(extra: str) -> bytes:
    """The bundle's certificates, and nothing else of the file: a bundle people also keep a
    client key in (or any other PEM block) must not have that copied into kubetray's files."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        with open(extra, "rb") as f:
            data = f.read()
        found = x509.load_pem_x509_certificates(data)
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or "it holds no PEM certificate kubetray can read"
        raise UnusableBundle(
            f"cannot use the CA bundle {extra} (AWS_CA_BUNDLE, --ca-bundle or the profile's "
            f"ca_bundle): {why}",
            "give a file of PEM CA certificates; kubetray adds them to the system's",
        ) from None
    return b"".join(cert.public_bytes(Encoding.PEM) for cert in found)


def _combined(
    system: str,
    system_stamp: tuple[int, int, int],
    extra: str,
    extra_stamp: tuple[int, int, int],
    directory: str,
) -> str:
    path = os.path.join(directory, _name(system, system_stamp, extra, extra_stamp))
    if os.path.exists(path):  # named by its content: another process's, or an earlier one's
        return path
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, part = tempfile.mkstemp(prefix=PREFIX, suffix=".part", dir=directory)  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_text(system, extra))
        os.replace(part, path)  # whole or not at all, for a process reading it meanwhile
    except BaseException:
        os.unlink(part)
        raise
    return path


@functools.lru_cache(maxsize=16)  # the name, not the text: the agent keeps no copies
def _name(
    system: str, _system_stamp: tuple[int, int, int], extra: str, _extra_stamp: tuple[int, int, int]
) -> str:
    return PREFIX + hashlib.sha256(_text(system, extra)).hexdigest()[:32] + ".pem"


def _text(system: str, extra: str) -> bytes:
    with open(system, "rb") as f:
        text = f.read()
    added = _certificates(extra)
    return text.rstrip(b"\n") + b"\n" + added.rstrip(b"\n") + b"\n"


def untrusted(error: BaseException, what: str) -> LoginError | None:
    """The typed error for a botocore failure whose cause is a certificate that did not verify
    (None for any other failure): the person's to fix, not a network hiccup to retry."""
    reason = _cert_error(error)
    if reason is None:
        return None
    parts = urllib.parse.urlsplit(str(getattr(error, "kwargs", {}).get("endpoint_url") or ""))
    host = parts.hostname or "AWS"
    address = f"{host}:{parts.port or 443}"
    said = str(reason.verify_message or reason)
    if reason.verify_code == 62 or "hostname" in said.lower():
        return LoginError(
            f"{what}: the certificate at {address} is not valid for {host}",
            "check the endpoint's host name (endpoint_url, AWS_ENDPOINT_URL_*, the region)",
        )
    if reason.verify_code == 10 or "expired" in said.lower():
        return LoginError(f"{what}: the certificate at {address} has expired", None)
    return LoginError(
        f"{what}: untrusted certificate at {address} ({said})",
        "add the CA that signed it to the system's trust store, or give it with "
        f"{CA_FLAG}: kubetray adds it to the system's CAs",
    )


def _cert_error(error: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error somewhere in ``error``'s causes (botocore wraps
    urllib3's error, which wraps ssl's, in ``kwargs['error']`` and the exception chain)."""
    seen: set[int] = set()
    todo: list[object] = [error]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLCertVerificationError):
            return e
        todo += [e.__cause__, e.__context__, *e.args, getattr(e, "kwargs", {}).get("error")]
        todo += [getattr(e, "reason", None)]
    return None
