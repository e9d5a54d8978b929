"""A throwaway CA with server and client certificates, made with cryptography."""

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PEM = serialization.Encoding.PEM


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


class CA:
    """A CA that issues server and client certificates."""

    def __init__(self, cn: str = "kubetray test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(PEM)

    def issue(
        self,
        cn: str,
        org: str | None = None,
        server: bool = False,
        lifetime: dt.timedelta = dt.timedelta(days=1),
        not_before: dt.datetime | None = None,
        addresses: tuple[str, ...] = (),
    ) -> Issued:
        """A certificate for ``cn``; a server's names 127.0.0.1, localhost and ``addresses``."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        usage = (
            x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
            if server
            else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + lifetime)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        *(
                            x509.IPAddress(ipaddress.ip_address(a))
                            for a in dict.fromkeys(("127.0.0.1", *addresses))
                        ),
                        x509.DNSName("localhost"),
                    ]
                ),
                critical=False,
            )
        return Issued(builder.sign(self.key, hashes.SHA256()), key)


def server_context(ca: CA, name: str = "127.0.0.1") -> ssl.SSLContext:
    """A TLS server's context with a certificate ``ca`` issued for ``name`` (and 127.0.0.1,
    localhost)."""
    issued = ca.issue(name, server=True)
    with tempfile.TemporaryDirectory() as d:
        cert, key = Path(d) / "c.pem", Path(d) / "k.pem"
        cert.write_bytes(issued.cert_pem)
        key.write_bytes(issued.key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
    return context
