"""The replicate DAG (plan task, spark-submit copy, report task) over mutual TLS with an MM2
file's JKS and PKCS12 stores: Airflow tasks and Spark executors connect with material read from
the stores, and nothing the run prints holds a password or the private key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localkafka import LocalKafka, Security, make_tls
from localkafka.keytool import key_store, trust_store

from ..conftest import TEST_BROKER_OVERRIDES
from ..integration.kafkatools import create_topics, produce, read_topic
from .test_replicate_dag import _summaries

STORE_PASSWORD = "store-Pass-e2e-91"
KEY_PASSWORD = "key-Pass-e2e-92"
TRUST_PASSWORD = "trust-Pass-e2e-93"


@pytest.fixture
def mtls_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    tls = make_tls(tmp_path_factory.mktemp("tls"), clients=("mirror",))
    security = Security(listeners=("MTLS",), tls=tls)
    pair = tuple(
        LocalKafka(
            tmp_path_factory.mktemp(f"kafka-{alias}"), overrides=TEST_BROKER_OVERRIDES, security=security
        )
        for alias in "AB"
    )
    try:
        for kafka in pair:
            kafka.launch()
        for kafka in pair:
            kafka.start()
        yield pair
    finally:
        for kafka in pair:
            kafka.stop()


@pytest.mark.local_kafka
def test_replicate_dag_over_mutual_tls_with_java_stores(airflow_home, mtls_pair, tmp_path) -> None:
    a, b = mtls_pair
    tls = a.security.tls
    assert tls is not None
    records = [{"value": b"%d" % i, "partition": i % 2} for i in range(60)]
    create_topics(a.bootstrap, ("payments", 2))
    produce(a.bootstrap, "payments", records)
    truststore = trust_store(tmp_path / "truststore.jks", [tls.ca], password=TRUST_PASSWORD)
    jks = key_store(tmp_path / "a.jks", tls, "mirror", password=STORE_PASSWORD, key_password=KEY_PASSWORD)
    p12 = key_store(tmp_path / "b.p12", tls, "mirror", password=STORE_PASSWORD, store_type="PKCS12")
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {a.bootstrap_for('MTLS')}\n"
        f"B.bootstrap.servers = {b.bootstrap_for('MTLS')}\n"
        "A->B.enabled = true\nA->B.topics = payments\n"
        "security.protocol = SSL\n"
        f"ssl.truststore.location = {truststore}\nssl.truststore.password = {TRUST_PASSWORD}\n"
        f"A.ssl.keystore.location = {jks}\nA.ssl.keystore.password = {STORE_PASSWORD}\n"
        f"A.ssl.key.password = {KEY_PASSWORD}\n"
        f"B.ssl.keystore.location = {p12}\nB.ssl.keystore.password = {STORE_PASSWORD}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
    )
    result = airflow_home.dags_test("mirrorflow__A__B__replicate", env={"MIRRORFLOW_CONFIG": str(config)})
    assert result.succeeded, result.log[-4000:]
    # The copy ran in Spark, and the Spark driver's own lines are part of the log searched below.
    assert "Spark-Submit cmd" in result.log and "2 partitions over" in result.log
    key_body = tls.client("mirror").key.read_text().splitlines()[1:-1]
    leaked = [
        s for s in (STORE_PASSWORD, KEY_PASSWORD, TRUST_PASSWORD, "PRIVATE KEY", *key_body) if s in result.log
    ]
    assert leaked == []
    target = read_topic(b.bootstrap, "A.payments", 2)
    for partition in range(2):
        assert [r.value for r in target[partition]] == [
            r["value"] for r in records if r["partition"] == partition
        ]
    (summary,) = _summaries(b)
    assert summary["topics"]["payments"]["records"] == 60
