"""`mirrorflow replicate` over TLS and mutual TLS with an MM2 file's Java stores, unchanged.

Two clusters serve TLS (SSL) and TLS with required client certificates (MTLS) from one test CA.
The config names only JKS / PKCS12 stores made by keytool, as MM2 deployments have them; the
run must connect with them (no manual keytool step), copy every record, leave no PEM file
anywhere, and keep the passwords and the private key out of everything it prints.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localkafka import LocalKafka, Security, TlsFiles, make_tls
from localkafka.keytool import key_store, trust_store

from ..conftest import Cluster, cluster_pair
from .kafkatools import create_topics, produce, read_topic
from .mirror_setup import mm2_text

pytestmark = pytest.mark.local_kafka

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")
TRUST_PASSWORD = "trust-Pass-81"
STORE_PASSWORD = "store-Pass-82"
KEY_PASSWORD = "key-Pass-83"
PARTITIONS = 3


@dataclasses.dataclass
class SecuredPair:
    tls: TlsFiles
    a: LocalKafka
    b: LocalKafka
    stores: Path

    def clusters(self, listener: str) -> list[Cluster]:
        return [
            Cluster("A", self.a.bootstrap_for(listener), self.a),
            Cluster("B", self.b.bootstrap_for(listener), self.b),
        ]

    def secrets(self) -> list[str]:
        """What must never be printed: the passwords and the body of the client's private key."""
        key_lines = self.tls.client("mirror").key.read_text().splitlines()[1:-1]
        return [TRUST_PASSWORD, STORE_PASSWORD, KEY_PASSWORD, "PRIVATE KEY", *key_lines]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    directory = tmp_path_factory.mktemp("java-stores")
    tls = make_tls(directory / "tls", clients=("mirror",))
    security = Security(listeners=("SSL", "MTLS"), tls=tls)
    with cluster_pair(tmp_path_factory, security) as (a, b):
        pair = SecuredPair(tls, a, b, directory / "stores")
        pair.stores.mkdir()
        yield pair


def replicate(pair: SecuredPair, config_text: str, tmp_path: Path) -> str:
    """Run `mirrorflow replicate` A->B with TMPDIR set to an empty folder; returns its output
    after checking the run succeeded and left nothing in that folder."""
    config = tmp_path / "mm2.properties"
    config.write_text(config_text)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run(
        [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert sorted(p.name for p in scratch.rglob("*")) == [], "the run left files in TMPDIR"
    return output


def source_records(pair: SecuredPair, topic: str) -> list[dict]:
    records = [
        {
            "key": b"k%d" % i,
            "value": b"secured %d" % i,
            "partition": i % PARTITIONS,
            "headers": [("n", b"%d" % i)],
        }
        for i in range(90)
    ]
    create_topics(pair.a.bootstrap, (topic, PARTITIONS))
    produce(pair.a.bootstrap, topic, records)
    return records


def assert_copied(pair: SecuredPair, topic: str, records: list[dict]) -> None:
    target = read_topic(pair.b.bootstrap, f"A.{topic}", PARTITIONS)
    for partition in range(PARTITIONS):
        written = [(r["key"], r["value"]) for r in records if r["partition"] == partition]
        assert [(r.key, r.value) for r in target[partition]] == written, partition


def assert_no_secret(pair: SecuredPair, output: str) -> None:
    leaked = [secret for secret in pair.secrets() if secret in output]
    assert leaked == [], f"printed: {leaked}"


def test_replicate_over_tls_with_only_a_jks_trust_store(secured: SecuredPair, tmp_path: Path, unique) -> None:
    topic = unique("tls-jks")
    records = source_records(secured, topic)
    truststore = trust_store(secured.stores / f"{topic}.jks", [secured.tls.ca], password=TRUST_PASSWORD)
    output = replicate(
        secured,
        mm2_text(
            secured.clusters("SSL"),
            ["A->B"],
            f"A->B.topics = {topic}\n"
            "security.protocol = SSL\n"
            f"ssl.truststore.location = {truststore}\n"
            f"ssl.truststore.password = {TRUST_PASSWORD}\n",
        ),
        tmp_path,
    )
    assert_copied(secured, topic, records)
    assert_no_secret(secured, output)


def test_replicate_over_mutual_tls_with_jks_and_pkcs12_key_stores(
    secured: SecuredPair, tmp_path: Path, unique
) -> None:
    """A presents a JKS key store whose key has its own password; B a PKCS12 key store; both
    trust a PKCS12 trust store written the way Java 8 wrote them (which librdkafka's OpenSSL 3
    would not open itself)."""
    topic = unique("mtls")
    records = source_records(secured, topic)
    stores = secured.stores
    truststore = trust_store(
        stores / f"{topic}-trust.p12",
        [secured.tls.ca],
        password=TRUST_PASSWORD,
        store_type="PKCS12",
        legacy=True,
    )
    jks = key_store(
        stores / f"{topic}.jks", secured.tls, "mirror", password=STORE_PASSWORD, key_password=KEY_PASSWORD
    )
    p12 = key_store(
        stores / f"{topic}.p12", secured.tls, "mirror", password=STORE_PASSWORD, store_type="PKCS12"
    )
    output = replicate(
        secured,
        mm2_text(
            secured.clusters("MTLS"),
            ["A->B"],
            f"A->B.topics = {topic}\n"
            "security.protocol = SSL\n"
            "ssl.truststore.type = PKCS12\n"
            f"ssl.truststore.location = {truststore}\n"
            f"ssl.truststore.password = {TRUST_PASSWORD}\n"
            f"A.ssl.keystore.location = {jks}\n"
            f"A.ssl.keystore.password = {STORE_PASSWORD}\n"
            f"A.ssl.key.password = {KEY_PASSWORD}\n"
            "B.ssl.keystore.type = PKCS12\n"
            f"B.ssl.keystore.location = {p12}\n"
            f"B.ssl.keystore.password = {STORE_PASSWORD}\n",
        ),
        tmp_path,
    )
    assert_copied(secured, topic, records)
    assert_no_secret(secured, output)


def test_a_wrong_store_password_stops_the_run_before_it_connects(
    secured: SecuredPair, tmp_path: Path, unique
) -> None:
    topic = unique("wrong")
    create_topics(secured.a.bootstrap, (topic, 1))
    truststore = trust_store(secured.stores / f"{topic}.jks", [secured.tls.ca], password=TRUST_PASSWORD)
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_text(
            secured.clusters("SSL"),
            ["A->B"],
            f"A->B.topics = {topic}\nsecurity.protocol = SSL\nssl.truststore.location = {truststore}\n"
            "B.ssl.truststore.password = not-the-Password\n",
        )
    )
    done = subprocess.run(
        [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"], capture_output=True, text=True, timeout=120
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "B.ssl.truststore.password" in output and str(truststore) in output
    assert "not-the-Password" not in output
    assert read_topic(secured.b.bootstrap, f"A.{topic}", 1) == {0: []}
