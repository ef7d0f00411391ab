"""Java key and trust stores (JKS, PKCS12) read into the PEM that librdkafka takes in memory.

MM2 files name Java stores (`ssl.truststore.location=/etc/kafka/truststore.jks`). librdkafka
reads PEM only, plus PKCS12 key stores through its OpenSSL, which cannot open the legacy
PKCS12 files older keytools write. Reading the stores here lets such a file work unchanged:
a wrong password or a damaged store is reported with the key to fix before anything
connects, and the material rides inside the client config (`ssl.ca.pem`,
`ssl.certificate.pem`, `ssl.key.pem`) to Airflow tasks, CLI workers and Spark executors, so
they need neither the store file nor a temporary PEM file on disk.

JKS is Sun's small format, read here: magic 0xFEEDFEED, version 1 or 2, entries (trusted
certificates; private keys encrypted with Sun's KeyProtector, followed by their certificate
chains) and a SHA-1 integrity digest over the password (UTF-16BE), "Mighty Aphrodite" and the
data. PKCS12 is read with `cryptography`. Like Java, a trust store opened without a password
is read without checking its integrity, and a store's format is taken from its content, not
its declared type (Java 9+ reads JKS and PKCS12 under either name).
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

STORE_TYPES = ("JKS", "PKCS12")

_JKS_MAGIC = 0xFEEDFEED
_JCEKS_MAGIC = 0xCECECECE
_JKS_PRIVATE_KEY, _JKS_TRUSTED_CERT = 1, 2
_JKS_SALT = b"Mighty Aphrodite"
_SHA1_SIZE = 20
# DER of OID 1.3.6.1.4.1.42.2.17.1.1, Sun's KeyProtector algorithm.
_KEY_PROTECTOR_OID = bytes.fromhex("060a2b060104012a02110101")


class StoreError(Exception):
    """A store that cannot be used. `kind` says which setting is at fault:

    - "unreadable": the file cannot be opened (location);
    - "corrupt": neither JKS nor PKCS12, or cut short or damaged (location);
    - "unsupported": a store format or entry mirrorflow does not read (location / type);
    - "pem": the file is PEM, declared as JKS or PKCS12 (type);
    - "password": the store password is wrong, or the file changed after it was written;
    - "no-password": the store cannot be opened without its password;
    - "key-password": the private key's password is wrong.

    Messages name the file, never a password.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class KeyEntry:
    """A private-key entry: the key (PKCS#8 DER, None when not decrypted) and its chain, leaf first."""

    alias: str
    chain: tuple[bytes, ...]
    private_key: bytes | None = field(default=None, repr=False)

    def chain_pem(self) -> str:
        return _pem_certificates(self.chain)

    def key_pem(self) -> str:
        if self.private_key is None:
            raise ValueError(f"the key of entry {self.alias!r} was not decrypted")
        key = serialization.load_der_private_key(self.private_key, password=None)
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode("ascii")


@dataclass(frozen=True)
class Store:
    """What a store holds: trusted certificates (DER, in file order) and private-key entries."""

    format: str
    trusted: tuple[bytes, ...]
    keys: tuple[KeyEntry, ...]

    def trust_pem(self) -> str:
        """The certificates a Java trust manager built from this store trusts: every trusted
        certificate entry and the first certificate of every key entry."""
        certificates = list(self.trusted) + [entry.chain[0] for entry in self.keys if entry.chain]
        return _pem_certificates(tuple(dict.fromkeys(certificates)))


def read_store(
    path: str,
    *,
    password: str | None,
    key_password: str | None = None,
    decrypt_keys: bool,
) -> Store:
    """The store at `path`, JKS or PKCS12 whatever its name says.

    `password` checks the store's integrity (and decrypts PKCS12); None reads a JKS store
    unchecked, as Java does for trust stores. With `decrypt_keys`, private keys are decrypted
    with `key_password`, or `password` when that is None (Kafka's rule for ssl.key.password).
    Results are cached per file version, because every client config of every flow reads the
    same stores (the decrypted key lives in this process's memory anyway, in those configs).
    """
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise StoreError("unreadable", f"cannot read {path}: {exc.strerror or exc}") from None
    version = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    return _read_cached(path, version, password, key_password, decrypt_keys)


@functools.lru_cache(maxsize=32)
def _read_cached(
    path: str,
    version: tuple[int, int, int],
    password: str | None,
    key_password: str | None,
    decrypt_keys: bool,
) -> Store:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise StoreError("unreadable", f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == _JKS_MAGIC:
        return _read_jks(path, data, password, key_password, decrypt_keys)
    if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == _JCEKS_MAGIC:
        raise StoreError("unsupported", f"{path} is a JCEKS store, which mirrorflow does not read")
    if data.lstrip().startswith(b"-----BEGIN"):
        raise StoreError("pem", f"{path} is a PEM file, not a JKS or PKCS12 store")
    if data[:1] == b"\x30":  # a DER (or BER) SEQUENCE: PKCS12 is the only other store read
        return _read_pkcs12(path, data, password)
    raise StoreError("corrupt", f"{path} is neither a JKS nor a PKCS12 store (or it is damaged)")


# -- JKS -------------------------------------------------------------------------------------


class _Reader:
    """Big-endian reads over a JKS body; running past its end means the file is damaged."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        self.offset = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.offset + size > len(self.data):
            raise StoreError("corrupt", f"{self.path} is cut short or damaged (JKS entry past the end)")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def utf(self) -> str:
        # Java's modified UTF-8; aliases only label entries in messages, so near enough.
        return self.take(self.u16()).replace(b"\xc0\x80", b"\x00").decode("utf-8", "replace")

    def certificate(self, version: int) -> bytes:
        if version == 2:
            kind = self.utf()
            if kind != "X.509":
                raise StoreError("unsupported", f"{self.path} holds a {kind} certificate; only X.509 is read")
        return self.take(self.u32())


def _read_jks(
    path: str, data: bytes, password: str | None, key_password: str | None, decrypt_keys: bool
) -> Store:
    if len(data) < 12 + _SHA1_SIZE:
        raise StoreError("corrupt", f"{path} is cut short (too small for a JKS store)")
    body, digest = data[:-_SHA1_SIZE], data[-_SHA1_SIZE:]
    reader = _Reader(path, body)
    reader.u32()  # the magic number, checked by the caller
    version = reader.u32()
    if version not in (1, 2):
        raise StoreError("corrupt", f"{path} has JKS version {version}; only 1 and 2 exist")
    trusted: list[bytes] = []
    protected: list[tuple[str, bytes, tuple[bytes, ...]]] = []
    for _ in range(reader.u32()):
        tag = reader.u32()
        alias = reader.utf()
        reader.take(8)  # creation date
        if tag == _JKS_PRIVATE_KEY:
            key = reader.take(reader.u32())
            chain = tuple(reader.certificate(version) for _ in range(reader.u32()))
            protected.append((alias, key, chain))
        elif tag == _JKS_TRUSTED_CERT:
            trusted.append(reader.certificate(version))
        else:
            raise StoreError("corrupt", f"{path} has a JKS entry of unknown kind {tag}")
    if reader.offset != len(body):
        raise StoreError("corrupt", f"{path} has {len(body) - reader.offset} stray bytes after its entries")
    if password is not None:
        expected = hashlib.sha1(_java_chars(password) + _JKS_SALT + body).digest()
        if expected != digest:
            raise StoreError(
                "password",
                f"the password does not open {path} (wrong password, or the file changed after it was written)",
            )
    for certificate in trusted + [c for _, _, chain in protected for c in chain]:
        _check_certificate(path, certificate)
    keys = []
    for alias, key, chain in protected:
        if not decrypt_keys:
            keys.append(KeyEntry(alias, chain))
            continue
        secret = key_password if key_password is not None else password
        if secret is None:
            raise StoreError("no-password", f"the private key {alias!r} in {path} needs a password")
        keys.append(KeyEntry(alias, chain, _recover_key(path, alias, key, secret)))
    return Store("JKS", tuple(trusted), tuple(keys))


def _java_chars(password: str) -> bytes:
    """A Java char[] as bytes, two per UTF-16 unit: what the JKS digest and KeyProtector hash."""
    return password.encode("utf-16-be", "surrogatepass")


def _recover_key(path: str, alias: str, protected: bytes, password: str) -> bytes:
    """Sun's KeyProtector: salt (20 bytes), key XOR a SHA-1 stream of password + salt, and a
    SHA-1 of password + key that tells a wrong password."""
    algorithm, encrypted = _encrypted_private_key_info(path, protected)
    if algorithm != _KEY_PROTECTOR_OID:
        raise StoreError(
            "unsupported",
            f"the private key {alias!r} in {path} is protected with an algorithm other than JKS's own",
        )
    if len(encrypted) < 2 * _SHA1_SIZE + 1:
        raise StoreError("corrupt", f"the private key {alias!r} in {path} is cut short")
    salt, body, check = encrypted[:_SHA1_SIZE], encrypted[_SHA1_SIZE:-_SHA1_SIZE], encrypted[-_SHA1_SIZE:]
    secret = _java_chars(password)
    stream = bytearray()
    block = salt
    while len(stream) < len(body):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = (int.from_bytes(body, "big") ^ int.from_bytes(stream[: len(body)], "big")).to_bytes(
        len(body), "big"
    )
    if hashlib.sha1(secret + plain).digest() != check:
        raise StoreError("key-password", f"the password does not decrypt the private key {alias!r} in {path}")
    try:
        serialization.load_der_private_key(plain, password=None)
    except (ValueError, TypeError) as exc:
        raise StoreError(
            "unsupported", f"the private key {alias!r} in {path} cannot be used: {exc}"
        ) from None
    return plain


def _der(path: str, data: bytes, offset: int) -> tuple[int, bytes, int]:
    """(tag, contents, offset after) of the DER element at `offset`."""
    try:
        tag = data[offset]
        length = data[offset + 1]
        offset += 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4:
                raise IndexError
            length = int.from_bytes(data[offset : offset + count], "big")
            offset += count
        if offset + length > len(data):
            raise IndexError
    except IndexError:
        raise StoreError("corrupt", f"{path} is damaged (bad DER structure)") from None
    return tag, data[offset : offset + length], offset + length


def _encrypted_private_key_info(path: str, protected: bytes) -> tuple[bytes, bytes]:
    """(algorithm OID as DER, encrypted bytes) of a PKCS#8 EncryptedPrivateKeyInfo."""
    tag, outer, _ = _der(path, protected, 0)
    if tag != 0x30:
        raise StoreError("corrupt", f"{path} has a damaged private key entry")
    tag, algorithm, after = _der(path, outer, 0)
    oid_tag, _, oid_end = _der(path, algorithm, 0)
    octet_tag, encrypted, _ = _der(path, outer, after)
    if tag != 0x30 or oid_tag != 0x06 or octet_tag != 0x04:
        raise StoreError("corrupt", f"{path} has a damaged private key entry")
    return algorithm[:oid_end], encrypted


def _check_certificate(path: str, der: bytes) -> None:
    try:
        x509.load_der_x509_certificate(der)
    except ValueError:
        raise StoreError("corrupt", f"{path} holds a damaged certificate") from None


# -- PKCS12 ----------------------------------------------------------------------------------


def _looks_like_pkcs12(data: bytes) -> bool:
    """A whole PFX: one DER SEQUENCE spanning the file, starting with version 3. When
    cryptography cannot open such a file, the password is what is wrong."""
    try:
        tag, pfx, end = _der("", data, 0)
        version_tag, version, _ = _der("", pfx, 0)
    except StoreError:
        return False
    return tag == 0x30 and end == len(data) and version_tag == 0x02 and version == b"\x03"


def _read_pkcs12(path: str, data: bytes, password: str | None) -> Store:
    try:
        contents = pkcs12.load_pkcs12(data, password.encode("utf-8") if password is not None else None)
    except ValueError:
        if not _looks_like_pkcs12(data):
            raise StoreError(
                "corrupt", f"{path} is neither a JKS nor a PKCS12 store (or it is damaged)"
            ) from None
        if password is None:
            raise StoreError("no-password", f"{path} cannot be read without its password") from None
        raise StoreError(
            "password",
            f"the password does not open {path} (wrong password, or the file changed after it was written)",
        ) from None
    others = [c.certificate for c in contents.additional_certs]
    keys: tuple[KeyEntry, ...] = ()
    if contents.cert is not None:
        leaf = contents.cert.certificate
        chain = _issuer_chain(leaf, others)
        name = contents.cert.friendly_name
        alias = name.decode("utf-8", "replace") if name else "(no alias)"
        private_key = (
            None
            if contents.key is None
            else contents.key.private_bytes(
                serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        if private_key is not None:
            keys = (
                KeyEntry(
                    alias, tuple(c.public_bytes(serialization.Encoding.DER) for c in chain), private_key
                ),
            )
        else:
            others.insert(0, leaf)
    trusted = tuple(c.public_bytes(serialization.Encoding.DER) for c in others)
    return Store("PKCS12", trusted, keys)


def _issuer_chain(leaf: x509.Certificate, pool: list[x509.Certificate]) -> list[x509.Certificate]:
    """`leaf` followed by its issuers found in `pool`, as Java builds a PKCS12 key entry's chain."""
    chain = [leaf]
    while chain[-1].issuer != chain[-1].subject:
        issuer = next((c for c in pool if c.subject == chain[-1].issuer and c not in chain), None)
        if issuer is None:
            break
        chain.append(issuer)
    return chain


def _pem_certificates(certificates: tuple[bytes, ...]) -> str:
    return "".join(
        x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM).decode("ascii")
        for der in certificates
    )
