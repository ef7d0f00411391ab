"""Throwaway TLS material for local clusters: one CA, a broker certificate, client certificates.

Everything is PEM, the format both sides read: the broker gets its key, certificate chain and
the CA inline in server.properties (Kafka's `ssl.keystore.key` / `ssl.keystore.certificate.chain`
/ `ssl.truststore.certificates`; Java 17 cannot decrypt the PBES2-encrypted keys a file-based
PEM key store would need), librdkafka the CA file and a client's certificate and key.
Certificates name 127.0.0.1 and localhost, so hostname verification stays on.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = dt.timedelta(days=30)


@dataclasses.dataclass(frozen=True)
class ClientCert:
    certificate: Path
    key: Path


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """Paths of one CA's material: the CA, the broker's key and chain, client certificates."""

    directory: Path
    ca: Path
    broker_key: Path
    broker_chain: Path
    clients: dict[str, ClientCert]

    def client(self, name: str) -> ClientCert:
        try:
            return self.clients[name]
        except KeyError:
            raise KeyError(
                f"no client certificate for {name!r}; make_tls(clients=...) names {sorted(self.clients)}"
            ) from None


def make_tls(
    directory: str | Path,
    *,
    clients: tuple[str, ...] = ("client",),
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
) -> TlsFiles:
    """Write a CA, a broker key store and one certificate per client (CN = the client's name)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localkafka test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(common_name: str, usage: x509.ObjectIdentifier, names: list[x509.GeneralName]):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + VALID_FOR)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    broker_key, broker_cert = issue("localkafka broker", ExtendedKeyUsageOID.SERVER_AUTH, alt_names)
    key_path = directory / "broker.key"
    key_path.write_bytes(_unencrypted(broker_key))
    key_path.chmod(0o600)
    chain_path = directory / "broker-chain.pem"
    chain_path.write_bytes(
        broker_cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM)
    )

    issued: dict[str, ClientCert] = {}
    for name in clients:
        key, cert = issue(name, ExtendedKeyUsageOID.CLIENT_AUTH, [])
        cert_path = directory / f"{name}.pem"
        key_path = directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_unencrypted(key))
        key_path.chmod(0o600)
        issued[name] = ClientCert(cert_path, key_path)
    return TlsFiles(directory, ca_path, directory / "broker.key", chain_path, issued)


def _unencrypted(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
