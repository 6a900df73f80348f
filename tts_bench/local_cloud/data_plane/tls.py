"""A local certificate authority and a loopback server certificate for the HTTP/2 listener.

The AWS SDK's HTTP/2 client speaks HTTP/2 only over TLS (with `http://` it falls back to
HTTP/1.1 and sends nothing, SPEC §11), and trusts what `SSL_CERT_FILE` names. So the local cloud
makes a throwaway CA, signs a certificate for 127.0.0.1/localhost with it, and writes a bundle of
the system's CAs plus ours: clients that read `SSL_CERT_FILE` still reach real hosts as before.
Made with the `cryptography` package; keys never leave the directory given.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tts_bench.errors import TtsBenchError

VALID_FOR = datetime.timedelta(days=2)  # the life of one local cloud, with room to spare
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_ADDRESSES = ("127.0.0.1", "::1")


class LocalTlsError(TtsBenchError):
    """The local CA or its bundle could not be made."""


@dataclass(frozen=True)
class LocalTls:
    """Paths of the local CA, the server's certificate and key, and the bundle for SSL_CERT_FILE."""

    ca_path: Path
    cert_path: Path
    key_path: Path
    bundle_path: Path  # system CAs + our CA: the value of SSL_CERT_FILE for clients

    def server_context(self, alpn: tuple[str, ...] = ("h2",)) -> ssl.SSLContext:
        """A server-side TLS context with our certificate, offering `alpn`."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_path, self.key_path)
        context.set_alpn_protocols(list(alpn))
        return context


def system_ca_bundle() -> Path | None:
    """The system's CA bundle file, as OpenSSL's defaults (or SSL_CERT_FILE already set) name it."""
    paths = ssl.get_default_verify_paths()
    for candidate in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tts-bench local cloud"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_local_tls(directory: Path) -> LocalTls:
    """Make a CA, a loopback server certificate signed by it, and the SSL_CERT_FILE bundle."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(minutes=5), now + VALID_FOR

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("tts-bench local cloud CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = [x509.DNSName(name) for name in LOOPBACK_NAMES]
    alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in LOOPBACK_ADDRESSES]
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )

    tls = LocalTls(
        ca_path=directory / "local-ca.pem",
        cert_path=directory / "server-cert.pem",
        key_path=directory / "server-key.pem",
        bundle_path=directory / "ca-bundle.pem",
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    tls.ca_path.write_bytes(ca_pem)
    tls.cert_path.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    tls.key_path.write_bytes(_pem_key(server_key))
    tls.key_path.chmod(0o600)
    system = system_ca_bundle()
    if system is not None and system.resolve() == tls.bundle_path.resolve():
        raise LocalTlsError(
            f"SSL_CERT_FILE already names {system}, the bundle this call would rewrite; "
            "unset it or pick another directory"
        )
    system_pem = system.read_bytes() if system is not None else b""
    if system_pem and not system_pem.endswith(b"\n"):
        system_pem += b"\n"
    tls.bundle_path.write_bytes(system_pem + ca_pem)
    return tls
