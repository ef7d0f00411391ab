"""Java trust and key stores made with the JDK's keytool from make_tls's PEM material.

MM2 deployments keep their TLS material in JKS or PKCS12 stores. Tests build the stores such a
user has, with the tool the user has: `keytool -importcert` for a trust store, and for a key
store the usual two steps, since keytool cannot read a PEM private key: a PKCS12 file holding
the key and its chain (what `openssl pkcs12 -export` makes; written here with cryptography),
then `keytool -importkeystore` into the store type wanted.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from localkafka import runtime
from localkafka.tls import TlsFiles


class KeytoolError(RuntimeError):
    pass


def keytool_binary() -> str:
    """keytool beside the java localkafka runs (JAVA_HOME or PATH), so both are one JDK."""
    return str(Path(os.path.realpath(runtime.java_binary())).parent / "keytool")


def _keytool(*args: str, jvm: tuple[str, ...] = ()) -> None:
    command = [keytool_binary(), *(f"-J{flag}" for flag in jvm), *args, "-noprompt"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise KeytoolError(f"keytool {args[0]} failed ({result.returncode}): {result.stdout}{result.stderr}")


def trust_store(
    path: str | Path, cas: list[Path], *, password: str, store_type: str = "JKS", legacy: bool = False
) -> Path:
    """A trust store at `path` holding each PEM certificate of `cas` as a trusted entry.

    `legacy` writes PKCS12 the way Java 8 did (RC2/3DES, SHA-1 MAC), which OpenSSL 3 reads only
    with its legacy provider."""
    path = Path(path)
    for number, ca in enumerate(cas):
        _keytool(
            "-importcert",
            "-alias",
            f"ca{number}",
            "-file",
            str(ca),
            "-keystore",
            str(path),
            "-storetype",
            store_type,
            "-storepass",
            password,
            jvm=("-Dkeystore.pkcs12.legacy",) if legacy else (),
        )
    return path


def key_store(
    path: str | Path,
    tls: TlsFiles,
    client: str,
    *,
    password: str,
    key_password: str | None = None,
    store_type: str = "JKS",
    legacy: bool = False,
    alias: str = "client",
) -> Path:
    """A key store at `path` with `client`'s private key and its chain (certificate, CA).

    `key_password` protects the key apart from the store (JKS only: PKCS12 has one password)."""
    path = Path(path)
    cert = tls.client(client)
    key = serialization.load_pem_private_key(cert.key.read_bytes(), password=None)
    leaf = x509.load_pem_x509_certificate(cert.certificate.read_bytes())
    ca = x509.load_pem_x509_certificate(tls.ca.read_bytes())
    with tempfile.TemporaryDirectory(prefix="localkafka-keytool-") as scratch:
        exported = Path(scratch) / "export.p12"
        exported.write_bytes(
            pkcs12.serialize_key_and_certificates(
                alias.encode(), key, leaf, [ca], serialization.BestAvailableEncryption(password.encode())
            )
        )
        args = [
            "-importkeystore",
            "-srckeystore",
            str(exported),
            "-srcstoretype",
            "PKCS12",
            "-srcstorepass",
            password,
            "-srcalias",
            alias,
            "-destalias",
            alias,
            "-destkeystore",
            str(path),
            "-deststoretype",
            store_type,
            "-deststorepass",
            password,
        ]
        if key_password is not None:
            args += ["-destkeypass", key_password]
        _keytool(*args, jvm=("-Dkeystore.pkcs12.legacy",) if legacy else ())
    return path
