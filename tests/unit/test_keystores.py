"""Java key and trust stores, as keytool writes them, read into the PEM librdkafka takes.

The stores are built the way an MM2 user has them: keytool (the JDK localkafka runs) from
localkafka's PEM CA and client certificates. Reading is checked against the PEM they came
from, errors against the key the user has to change, and the translated configs by building
real librdkafka clients from them.
"""

from __future__ import annotations

import logging
import pickle
import shutil
from pathlib import Path

import pytest
from confluent_kafka import Producer
from cryptography.hazmat.primitives import serialization

from localkafka import make_tls
from localkafka.keytool import KeytoolError, key_store, trust_store
from localkafka.tls import TlsFiles
from mirrorflow.config import ConfigError, MirrorConfig, load_config, merge_connection_extra
from mirrorflow.config.keystores import StoreError, read_store
from mirrorflow.config.secrets import REDACTED, redact_client_config

TRUST_PASSWORD = "trust-Secret-1"
STORE_PASSWORD = "store-Secret-2"
KEY_PASSWORD = "key-Secret-3"
SECRETS = (TRUST_PASSWORD, STORE_PASSWORD, KEY_PASSWORD)
TWO = "clusters = A, B\nA.bootstrap.servers = a:9093\nB.bootstrap.servers = b:9093\nA->B.enabled = true\n"
ROLES = (
    "source_consumer",
    "source_producer",
    "source_admin",
    "target_consumer",
    "target_producer",
    "target_admin",
)


class Stores:
    """Every store the tests read, built once per module (keytool starts a JVM per call)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.tls: TlsFiles = make_tls(directory / "tls", clients=("alice", "bob"))
        self.other_ca = make_tls(directory / "other").ca
        self.trust_jks = trust_store(directory / "trust.jks", [self.tls.ca], password=TRUST_PASSWORD)
        self.trust_p12 = trust_store(
            directory / "trust.p12", [self.tls.ca], password=TRUST_PASSWORD, store_type="PKCS12"
        )
        self.trust_legacy_p12 = trust_store(
            directory / "trust-legacy.p12",
            [self.tls.ca],
            password=TRUST_PASSWORD,
            store_type="PKCS12",
            legacy=True,
        )
        self.two_cas_jks = trust_store(
            directory / "two-cas.jks", [self.tls.ca, self.other_ca], password=TRUST_PASSWORD
        )
        self.alice_jks = key_store(
            directory / "alice.jks", self.tls, "alice", password=STORE_PASSWORD, key_password=KEY_PASSWORD
        )
        self.alice_p12 = key_store(
            directory / "alice.p12", self.tls, "alice", password=STORE_PASSWORD, store_type="PKCS12"
        )
        self.alice_legacy_p12 = key_store(
            directory / "alice-legacy.p12",
            self.tls,
            "alice",
            password=STORE_PASSWORD,
            store_type="PKCS12",
            legacy=True,
        )
        # A .jks name over PKCS12 content: what Java 9+ keytool writes without -storetype.
        self.alice_p12_named_jks = shutil.copy(self.alice_p12, directory / "alice-really-p12.jks")
        self.two_keys_jks = key_store(directory / "two-keys.jks", self.tls, "alice", password=STORE_PASSWORD)
        key_store(self.two_keys_jks, self.tls, "bob", password=STORE_PASSWORD, alias="bob")

    def pem(self, path: Path) -> str:
        return path.read_text()

    def key_pkcs8(self, client: str) -> bytes:
        key = serialization.load_pem_private_key(self.tls.client(client).key.read_bytes(), password=None)
        return key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return Stores(tmp_path_factory.mktemp("stores"))


def _damaged(stores: Stores, source: Path, name: str, change) -> Path:
    path = stores.dir / name
    path.write_bytes(change(source.read_bytes()))
    return path


# -- reading stores --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["trust_jks", "trust_p12", "trust_legacy_p12"])
def test_trust_stores_hold_the_ca(stores: Stores, name: str) -> None:
    store = read_store(str(getattr(stores, name)), password=TRUST_PASSWORD, decrypt_keys=False)
    assert store.trust_pem() == stores.pem(stores.tls.ca)
    assert store.keys == ()


def test_a_jks_trust_store_without_its_password_is_read_unchecked_as_java_does(stores: Stores) -> None:
    store = read_store(str(stores.trust_jks), password=None, decrypt_keys=False)
    assert store.format == "JKS"
    assert store.trust_pem() == stores.pem(stores.tls.ca)


def test_every_trusted_certificate_is_kept(stores: Stores) -> None:
    store = read_store(str(stores.two_cas_jks), password=TRUST_PASSWORD, decrypt_keys=False)
    assert sorted(store.trust_pem().split("-----END CERTIFICATE-----\n")) == sorted(
        (stores.pem(stores.tls.ca) + stores.pem(stores.other_ca)).split("-----END CERTIFICATE-----\n")
    )


@pytest.mark.parametrize(
    ("name", "key_password", "store_format"),
    [
        ("alice_jks", KEY_PASSWORD, "JKS"),
        ("alice_p12", None, "PKCS12"),
        ("alice_legacy_p12", None, "PKCS12"),
        ("alice_p12_named_jks", None, "PKCS12"),
    ],
)
def test_key_stores_give_the_private_key_and_its_chain(
    stores: Stores, name: str, key_password: str | None, store_format: str
) -> None:
    store = read_store(
        str(getattr(stores, name)), password=STORE_PASSWORD, key_password=key_password, decrypt_keys=True
    )
    assert store.format == store_format
    [entry] = store.keys
    assert entry.alias == "client"
    assert entry.private_key == stores.key_pkcs8("alice")
    assert entry.chain_pem() == stores.pem(stores.tls.client("alice").certificate) + stores.pem(stores.tls.ca)
    assert entry.key_pem().startswith("-----BEGIN PRIVATE KEY-----")
    assert KEY_PASSWORD not in repr(entry) and "private_key" not in repr(entry)


def test_a_trust_store_read_leaves_private_keys_encrypted(stores: Stores) -> None:
    """A key store used as a trust store: Java trusts each key entry's certificate; the key is
    not needed, so no key password is asked for."""
    store = read_store(str(stores.alice_jks), password=STORE_PASSWORD, decrypt_keys=False)
    assert store.keys[0].private_key is None
    assert store.trust_pem() == stores.pem(stores.tls.client("alice").certificate)


@pytest.mark.parametrize(
    ("name", "password", "key_password", "kind"),
    [
        ("trust_jks", "wrong-password", None, "password"),
        ("trust_p12", "wrong-password", None, "password"),
        ("trust_p12", None, None, "no-password"),
        ("alice_jks", "wrong-password", KEY_PASSWORD, "password"),
        ("alice_jks", STORE_PASSWORD, "wrong-password", "key-password"),
        ("alice_jks", STORE_PASSWORD, None, "key-password"),
        ("alice_p12", "wrong-password", None, "password"),
    ],
)
def test_wrong_passwords_are_told_apart_and_never_echoed(
    stores: Stores, name: str, password: str | None, key_password: str | None, kind: str
) -> None:
    with pytest.raises(StoreError) as info:
        read_store(
            str(getattr(stores, name)), password=password, key_password=key_password, decrypt_keys=True
        )
    assert info.value.kind == kind
    assert str(getattr(stores, name)) in info.value.message
    assert not any(secret in str(info.value) for secret in (*SECRETS, "wrong-password"))


def test_corrupt_and_unknown_files_are_named(stores: Stores) -> None:
    cases = {
        _damaged(stores, stores.trust_jks, "cut.jks", lambda b: b[:-30]): "corrupt",
        _damaged(stores, stores.trust_p12, "cut.p12", lambda b: b[: len(b) // 2]): "corrupt",
        _damaged(stores, stores.trust_jks, "noise.jks", lambda b: bytes(range(256)) * 3): "corrupt",
        _damaged(stores, stores.trust_jks, "empty.jks", lambda b: b""): "corrupt",
        _damaged(stores, stores.tls.ca, "ca-as.jks", lambda b: b): "pem",
        stores.dir / "missing.jks": "unreadable",
    }
    for path, kind in cases.items():
        with pytest.raises(StoreError) as info:
            read_store(str(path), password=TRUST_PASSWORD, decrypt_keys=False)
        assert (path.name, info.value.kind) == (path.name, kind)
        assert str(path) in info.value.message


def test_a_changed_jks_fails_its_integrity_check_and_a_damaged_certificate_is_caught(stores: Stores) -> None:
    data = stores.trust_jks.read_bytes()
    flipped = _damaged(
        stores, stores.trust_jks, "flipped.jks", lambda b: b[:-60] + bytes([b[-60] ^ 1]) + b[-59:]
    )
    with pytest.raises(StoreError) as info:
        read_store(str(flipped), password=TRUST_PASSWORD, decrypt_keys=False)
    assert info.value.kind == "password" and "changed after it was written" in info.value.message
    # Unchecked (no password) the flipped byte lands inside the certificate's signature: the
    # certificate still parses, so break its DER header instead.
    start = data.index(b"X.509") + 5 + 4
    broken = _damaged(
        stores, stores.trust_jks, "broken-cert.jks", lambda b: b[:start] + b"\x00" + b[start + 1 :]
    )
    with pytest.raises(StoreError) as info:
        read_store(str(broken), password=None, decrypt_keys=False)
    assert info.value.kind == "corrupt"


def test_a_jceks_store_is_refused(stores: Stores) -> None:
    path = trust_store(
        stores.dir / "trust.jceks", [stores.tls.ca], password=TRUST_PASSWORD, store_type="JCEKS"
    )
    with pytest.raises(StoreError) as info:
        read_store(str(path), password=TRUST_PASSWORD, decrypt_keys=False)
    assert info.value.kind == "unsupported"
    assert "JCEKS" in info.value.message


def test_a_rewritten_store_is_read_again(stores: Stores, tmp_path: Path) -> None:
    """Reads are cached per file version: a store replaced in place (a renewed certificate) is
    read anew, not served from the cache."""
    path = tmp_path / "renewed.jks"
    shutil.copy(stores.trust_jks, path)
    assert read_store(str(path), password=TRUST_PASSWORD, decrypt_keys=False).trust_pem() == stores.pem(
        stores.tls.ca
    )
    path.unlink()
    shutil.copy(stores.two_cas_jks, path)
    assert (
        stores.pem(stores.other_ca)
        in read_store(str(path), password=TRUST_PASSWORD, decrypt_keys=False).trust_pem()
    )


def test_keytool_refuses_what_java_refuses(stores: Stores) -> None:
    """The helper reports keytool's own message: here Java's six-character password minimum."""
    with pytest.raises(KeytoolError, match="at least 6 characters"):
        trust_store(stores.dir / "short.jks", [stores.tls.ca], password="short")


# -- from an MM2 file to librdkafka ----------------------------------------------------------


def _load(text: str) -> MirrorConfig:
    return load_config(TWO + text, env={})


def _clients(config: MirrorConfig) -> dict[str, dict[str, object]]:
    flow = config.flow("A", "B")
    return {role: getattr(flow, f"{role}_config")() for role in ROLES}


def _build(config: dict[str, object]) -> None:
    """librdkafka parses the CA, certificate and key when a client is created (no broker needed)."""
    Producer({k: v for k, v in config.items() if k not in ("enable.auto.commit", "auto.offset.reset")})


def test_mm2_trust_and_key_stores_reach_every_client_as_pem(stores: Stores, tmp_path: Path) -> None:
    copies = {
        name: shutil.copy(getattr(stores, name), tmp_path) for name in ("trust_jks", "alice_jks", "alice_p12")
    }
    config = _load(
        "security.protocol = SSL\n"
        f"ssl.truststore.location = {copies['trust_jks']}\n"
        f"ssl.truststore.password = {TRUST_PASSWORD}\n"
        f"A.ssl.keystore.location = {copies['alice_jks']}\n"
        f"A.ssl.keystore.password = {STORE_PASSWORD}\n"
        f"A.ssl.key.password = {KEY_PASSWORD}\n"
        "B.ssl.keystore.type = PKCS12\n"
        f"B.ssl.keystore.location = {copies['alice_p12']}\n"
        f"B.ssl.keystore.password = {STORE_PASSWORD}\n"
    )
    assert config.warnings == ()
    clients = _clients(config)
    chain = stores.pem(stores.tls.client("alice").certificate) + stores.pem(stores.tls.ca)
    for role, client in clients.items():
        assert client["ssl.ca.pem"] == stores.pem(stores.tls.ca), role
        assert client["ssl.certificate.pem"] == chain, role
        assert client["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----"), role
        assert not [k for k in client if k.startswith(("ssl.truststore", "ssl.keystore", "ssl.key.password"))]
        assert not any(secret in str(value) for value in client.values() for secret in SECRETS)
    # Executors, CLI workers and Airflow tasks get these dicts pickled; the store files are not
    # needed once the config is read.
    for path in copies.values():
        Path(path).unlink()
    for client in clients.values():
        _build(pickle.loads(pickle.dumps(client)))


def test_the_pem_key_is_a_secret_wherever_configs_are_shown(stores: Stores) -> None:
    config = _load(
        f"A.security.protocol = SSL\nA.ssl.keystore.location = {stores.alice_jks}\n"
        f"A.ssl.keystore.password = {STORE_PASSWORD}\nA.ssl.key.password = {KEY_PASSWORD}\n"
        f"A.ssl.truststore.location = {stores.trust_p12}\nA.ssl.truststore.password = {TRUST_PASSWORD}\n"
    )
    client = config.flow("A", "B").source_consumer_config()
    shown = redact_client_config(client)
    assert shown["ssl.key.pem"] == REDACTED
    assert "PRIVATE KEY" not in str(shown)
    view = config.redacted()
    assert {
        view[f"A.{k}"] for k in ("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password")
    } == {REDACTED}
    assert not any(secret in str(view) for secret in SECRETS)


def test_librdkafka_debug_output_never_shows_the_key_or_a_password(stores: Stores) -> None:
    config = _load(
        f"A.security.protocol = SSL\nA.ssl.keystore.location = {stores.alice_jks}\n"
        f"A.ssl.keystore.password = {STORE_PASSWORD}\nA.ssl.key.password = {KEY_PASSWORD}\n"
        f"A.ssl.truststore.location = {stores.trust_jks}\nA.ssl.truststore.password = {TRUST_PASSWORD}\n"
    )
    client = config.flow("A", "B").source_producer_config()
    lines: list[str] = []
    logger = logging.getLogger("test.keystores.librdkafka")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        producer = Producer({**client, "bootstrap.servers": "127.0.0.1:1", "debug": "all", "logger": logger})
        producer.poll(0.5)
    finally:
        logger.removeHandler(handler)
    text = "\n".join(lines)
    assert "Loading private key from string" in text  # debug on, and the key went in memory
    assert "ssl.key.pem = [redacted]" in text
    key_body = stores.tls.client("alice").key.read_text().splitlines()[1:-1]
    assert not [secret for secret in (*SECRETS, *key_body) if secret in text]


@pytest.mark.parametrize(
    ("lines", "key", "fix"),
    [
        (
            "B.ssl.truststore.location = {trust_jks}\nB.ssl.truststore.password = nope-nope\n",
            "B.ssl.truststore.password",
            "set B.ssl.truststore.password to the password the store was written with",
        ),
        (
            # The password set once at the top level is named where it was written.
            "B.ssl.truststore.location = {trust_p12}\nssl.truststore.password = nope-nope\n",
            "ssl.truststore.password",
            "set ssl.truststore.password",
        ),
        (
            "B.ssl.truststore.location = {trust_p12}\n",
            "B.ssl.truststore.password",
            "set B.ssl.truststore.password to the store's password",
        ),
        (
            "B.ssl.keystore.location = {alice_jks}\nB.ssl.keystore.password = nope-nope\n",
            "B.ssl.keystore.password",
            "set B.ssl.keystore.password",
        ),
        (
            "B.ssl.keystore.location = {alice_jks}\nB.ssl.keystore.password = " + STORE_PASSWORD + "\n",
            "B.ssl.keystore.password",
            "set B.ssl.key.password to the private key's password",
        ),
        (
            "B.ssl.keystore.location = {alice_jks}\nB.ssl.keystore.password = " + STORE_PASSWORD + "\n"
            "B.ssl.key.password = nope-nope\n",
            "B.ssl.key.password",
            "set B.ssl.key.password to the private key's password",
        ),
        (
            "B.ssl.keystore.location = {alice_jks}\n",
            "B.ssl.keystore.password",
            "set B.ssl.keystore.password",
        ),
        (
            "B.ssl.truststore.type = BCFKS\nB.ssl.truststore.location = {trust_jks}\n",
            "B.ssl.truststore.type",
            "-deststoretype PKCS12",
        ),
        (
            "B.ssl.truststore.location = {ca}\n",
            "B.ssl.truststore.location",
            "set B.ssl.truststore.type=PEM",
        ),
        (
            "B.ssl.keystore.location = {trust_jks}\nB.ssl.keystore.password = " + TRUST_PASSWORD + "\n",
            "B.ssl.keystore.location",
            "import the client's key",
        ),
        (
            "B.ssl.truststore.location = {missing}\n",
            "B.ssl.truststore.location",
            "check the path",
        ),
    ],
)
def test_store_errors_name_the_key_to_change(stores: Stores, lines: str, key: str, fix: str) -> None:
    text = lines.format(
        trust_jks=stores.trust_jks,
        trust_p12=stores.trust_p12,
        alice_jks=stores.alice_jks,
        ca=stores.tls.ca,
        missing=stores.dir / "missing.jks",
    )
    with pytest.raises(ConfigError) as info:
        _load(text)
    errors = [p for p in info.value.problems if p.is_error]
    assert [p.key for p in errors] == [key], errors
    assert fix in errors[0].fix
    assert not any(secret in str(info.value) for secret in (*SECRETS, "nope-nope"))


def test_a_key_store_with_two_keys_uses_the_first_and_says_so(stores: Stores) -> None:
    config = _load(
        f"A.ssl.keystore.location = {stores.two_keys_jks}\nA.ssl.keystore.password = {STORE_PASSWORD}\n"
    )
    [warning] = config.warnings
    assert warning.key == "A.ssl.keystore.location"
    assert "holds 2 private keys" in warning.message and "keytool -delete" in warning.fix
    client = config.flow("A", "B").source_consumer_config()
    chosen = warning.message.rsplit("'", 2)[1]
    owner = "alice" if chosen == "client" else "bob"
    assert client["ssl.certificate.pem"].startswith(stores.pem(stores.tls.client(owner).certificate))
    _build(client)


def test_an_airflow_connection_replaces_the_stores_whatever_form_it_uses(stores: Stores) -> None:
    """The connection's files win over the file's stores: librdkafka would load both forms and
    use the in-memory one."""
    config = _load(
        f"A.ssl.truststore.location = {stores.trust_jks}\nA.ssl.truststore.password = {TRUST_PASSWORD}\n"
        f"A.ssl.keystore.location = {stores.alice_p12}\nA.ssl.keystore.password = {STORE_PASSWORD}\n"
    )
    client = config.flow("A", "B").source_consumer_config()
    bob = stores.tls.client("bob")
    extra = {
        "ssl.ca.location": str(stores.other_ca),
        "ssl.certificate.location": str(bob.certificate),
        "ssl.key.location": str(bob.key),
    }
    merged = merge_connection_extra(client, extra, "consumer")
    assert {k: merged[k] for k in extra} == extra
    assert not {"ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"} & merged.keys()
    # A connection that only adds a password keeps the file's material.
    kept = merge_connection_extra(client, {"sasl.password": "x"}, "consumer")
    assert kept["ssl.key.pem"] == client["ssl.key.pem"]
