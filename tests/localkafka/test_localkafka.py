"""localkafka starts real Apache Kafka: a node that keeps what it acknowledged across restarts, the
command-line launcher, secured listeners with an authorizer, and a three-node cluster that
survives losing a broker."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from localkafka import (
    LocalKafka,
    LocalKafkaError,
    RuntimeMissing,
    Security,
    SettingsError,
    formats,
    kafka_version,
    make_tls,
    runtime,
)
from localkafka.compaction import compact
from mirrorflow.kafka import await_topics
from mirrorflow.ops.broker_features import probe

pytestmark = pytest.mark.local_kafka


def produce_values(config: dict, topic: str, values: list[bytes], **extra: object) -> None:
    producer = Producer({**config, "acks": "all", "enable.idempotence": True, **extra})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def read_values(config: dict, topic: str, partition: int = 0) -> list[bytes]:
    consumer = Consumer(
        {**config, "group.id": "reader", "enable.partition.eof": True, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # end of partition
                    return values
                raise KafkaException(message.error())
            values.append(message.value())
    finally:
        consumer.close()
    raise AssertionError(f"{topic} did not reach its end")


def create(config: dict, topic: str, partitions: int = 1, replication: int = 1, **configs: str) -> None:
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic(topic, partitions, replication, config=configs)]).values():
        future.result(30)
    await_topics(admin, {topic: partitions})  # every broker learns of it a moment later


def test_a_restarted_node_keeps_what_it_acknowledged_on_the_same_port(local_kafka, tmp_path) -> None:
    # Random cluster ids are base64url and may start with '-', which the storage tool must not
    # take for an option.
    kafka = local_kafka(data_dir=tmp_path / "kafka", cluster_id="-" + "A" * 21)
    config = kafka.client_config()
    create(config, "kept", 1)
    produce_values(config, "kept", [b"%d" % i for i in range(100)])
    port = kafka.bootstrap
    kafka.stop()
    assert all(not node.running for node in kafka.nodes)

    again = LocalKafka(tmp_path / "kafka").start()
    try:
        assert again.bootstrap == port and again.cluster_id == kafka.cluster_id
        assert read_values(again.client_config(), "kept") == [b"%d" % i for i in range(100)]
    finally:
        again.stop()


def test_the_command_line_prints_one_ready_line_and_stops_cleanly_on_sigterm(tmp_path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "localkafka", "--data-dir", str(tmp_path / "cli")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        match = re.match(r"localkafka ready bootstrap=(127\.0\.0\.1:\d+) cluster_id=(\S+) kafka=(\S+) ", line)
        assert match, line + process.stderr.read()
        create({"bootstrap.servers": match[1]}, "from-cli")
        produce_values({"bootstrap.servers": match[1]}, "from-cli", [b"x"])
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        node = tmp_path / "cli" / "node-1"
        assert "Kafka Server started" in (node / "server.log").read_text()
        # A clean shutdown leaves Kafka's marker in the log dir (Kafka 4.4 no longer logs the
        # broker's own "shut down completed" line, which the test read before).
        assert (node / "data" / ".kafka_cleanshutdown").exists()
    finally:
        if process.poll() is None:
            process.kill()


def test_compaction_on_demand_leaves_the_last_value_of_each_key(local_kafka) -> None:
    kafka = local_kafka()
    config = kafka.client_config()
    create(config, "latest", 1, **{"cleanup.policy": "compact"})
    producer = Producer(config)
    for round_ in range(5):
        for key in range(10):
            producer.produce("latest", key=b"k%d" % key, value=b"%d" % round_)
    producer.flush(10)
    rolled = compact(kafka, "latest", {0: (b"after", b"roll")})
    assert rolled == {0: 50}
    assert read_values(config, "latest") == [b"4"] * 10 + [b"roll"]


def test_secured_listeners_authenticate_and_the_authorizer_enforces_acls(local_kafka, tmp_path) -> None:
    tls = make_tls(tmp_path / "tls", clients=("alice", "mallory"))
    security = Security(
        listeners=("SASL_PLAINTEXT", "SASL_SSL", "MTLS"),
        scram_users={"admin": "admin-secret", "alice": "alice-secret"},
        tls=tls,
        authorizer=True,
        super_users=("User:admin",),
    )
    kafka = local_kafka(security=security)
    create(kafka.client_config("SASL_SSL", user="admin"), "guarded")
    admin = AdminClient(kafka.client_config("SASL_PLAINTEXT", user="admin"))
    grant = [
        AclBinding(
            ResourceType.TOPIC,
            "guarded",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            op,
            AclPermissionType.ALLOW,
        )
        for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
    ] + [
        AclBinding(
            ResourceType.GROUP,
            "reader",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    ]
    for future in admin.create_acls(grant).values():
        future.result(30)

    # alice may write and read over SCRAM on TLS, and with her certificate (principal = CN).
    produce_values(
        kafka.client_config("SASL_SSL", user="alice"),
        "guarded",
        [b"over scram"],
        **{"enable.idempotence": False},
    )
    produce_values(
        kafka.client_config("MTLS", user="alice"), "guarded", [b"over mtls"], **{"enable.idempotence": False}
    )
    assert read_values(kafka.client_config("MTLS", user="alice"), "guarded") == [b"over scram", b"over mtls"]

    # mallory's certificate is valid but she holds no ACL; a wrong SCRAM password is refused.
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        create(kafka.client_config("MTLS", user="mallory"), "not-hers")
    errors: list[KafkaError] = []
    wrong = {
        **kafka.client_config("SASL_SSL", user="alice"),
        "sasl.password": "nope",
        "error_cb": errors.append,
    }
    refused = Producer(wrong)
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        refused.poll(0.5)  # serves error_cb
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    with pytest.raises(SettingsError, match="MTLS"):
        Security(listeners=("SSL",), tls=tls, authorizer=True)


def test_a_node_formatted_from_a_kept_format_joins_its_cluster_with_its_own_ids(
    tmp_path, monkeypatch
) -> None:
    """The storage tool formats the first node of a kind; the second node is a copy of that
    with its own node and directory ids (localkafka.formats), joins the cluster, and the SCRAM
    user created at format time logs in."""
    monkeypatch.setattr(formats, "cache_root", lambda: tmp_path / "kept")
    security = Security(listeners=("SASL_PLAINTEXT",), scram_users={"admin": "admin-secret"})
    kafka = LocalKafka(tmp_path / "cluster", brokers=2, security=security)
    kafka.nodes[0].format()
    assert [p.name for p in (tmp_path / "kept").iterdir()] == [
        formats.kind(kafka.line.version, kafka.overrides, security.format_arguments(), 2)
    ]
    kafka.nodes[1].format()
    meta = [
        dict(
            line.split("=", 1)
            for line in (n.directory / "data" / "meta.properties").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        for n in kafka.nodes
    ]
    assert [m["node.id"] for m in meta] == ["1", "2"]
    assert {m["cluster.id"] for m in meta} == {kafka.cluster_id}
    assert meta[0]["directory.id"] != meta[1]["directory.id"]
    with kafka.start():
        admin = AdminClient(kafka.client_config("SASL_PLAINTEXT", user="admin"))
        described = admin.describe_cluster().result(30)
        assert described.cluster_id == kafka.cluster_id
        assert sorted(node.id for node in described.nodes) == [1, 2]
        create(kafka.client_config("SASL_PLAINTEXT", user="admin"), "formatted", replication=2)

    assert formats.kind(kafka.line.version, {"log.dirs": "/elsewhere"}, [], 1) is None
    monkeypatch.setenv(formats.CACHE_ENV, "off")
    assert formats.kind(kafka.line.version, {}, [], 1) is None


def test_three_brokers_keep_serving_acks_all_writes_when_a_leader_dies(local_kafka) -> None:
    kafka = local_kafka(brokers=3)
    config = kafka.client_config()
    create(config, "replicated", 1, 3, **{"min.insync.replicas": "2"})
    admin = AdminClient(config)
    partition = admin.list_topics("replicated", timeout=10).topics["replicated"].partitions[0]
    assert sorted(partition.replicas) == [1, 2, 3]
    produce_values(config, "replicated", [b"before"])

    leader = next(node for node in kafka.nodes if node.node_id == partition.leader)
    leader.kill()
    produce_values(config, "replicated", [b"after"], **{"message.timeout.ms": 60000})
    survivors = ",".join(n.bootstrap_for() for n in kafka.nodes if n is not leader)
    assert read_values({"bootstrap.servers": survivors}, "replicated") == [b"before", b"after"]
    new_leader = AdminClient({"bootstrap.servers": survivors}).list_topics("replicated", timeout=10)
    assert new_leader.topics["replicated"].partitions[0].leader != leader.node_id


def test_a_missing_runtime_says_to_run_make_setup(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(runtime.LIBS_ENV, str(tmp_path / "empty"))
    with pytest.raises(RuntimeMissing, match="make setup"):
        LocalKafka(tmp_path / "k").start()


def test_data_dir_state_names_the_kafka_version(local_kafka, tmp_path) -> None:
    kafka = local_kafka(data_dir=tmp_path / "versioned")
    state = json.loads((Path(kafka.data_dir) / "localkafka.json").read_text())
    assert state["kafka_version"] == kafka_version()
    assert state["nodes"][0]["ports"]["PLAINTEXT"] == int(kafka.bootstrap.rsplit(":", 1)[1])
    # Kafka 4.4's storage tool formats data dirs that older brokers must not open.
    older = runtime.test_lines()[0]
    with pytest.raises(
        LocalKafkaError, match=f"formatted by Kafka {kafka_version()}, newer than {older.version}"
    ):
        LocalKafka(kafka.data_dir, line=older.name)


def test_a_line_kafka_pom_does_not_pin_says_which_it_does() -> None:
    with pytest.raises(
        RuntimeMissing, match=rf"'2\.8' is not pinned; kafka/pom.xml pins {re.escape(kafka_version())}"
    ):
        LocalKafka("/nonexistent", line="2.8")
    for older in runtime.test_lines():
        assert runtime.line(older.name) == runtime.line(older.version) == older


def test_a_slow_link_holds_every_byte_each_way_and_carries_clients_through(tmp_path) -> None:
    kafka = LocalKafka(tmp_path / "far", link_delay_ms=25).start()
    try:
        slow = {"bootstrap.servers": kafka.bootstrap_for("SLOW")}
        assert probe(slow, 10).round_trip_ms >= 50  # a request and its answer each cross once
        brokers = AdminClient(slow).list_topics(timeout=10).brokers
        assert {f"{b.host}:{b.port}" for b in brokers.values()} == {kafka.bootstrap_for("SLOW")}
        create(slow, "far-topic", 1)
        produce_values(slow, "far-topic", [b"over", b"the link"])
        kafka.set_link_delay(0)
        assert read_values(slow, "far-topic") == [b"over", b"the link"]
    finally:
        kafka.stop()
    assert kafka.proxy is None


def test_jmx_counts_the_requests_a_broker_served_by_type(local_kafka) -> None:
    from localkafka.jmx import request_counts

    assert all(node.jmx_port is None for node in local_kafka().nodes)  # off by default
    kafka = local_kafka(jmx=True)
    config = kafka.client_config()
    create(config, "counted", 1)
    before = request_counts(kafka)
    produce_values(config, "counted", [b"one"], **{"linger.ms": 0})
    produce_values(config, "counted", [b"two"], **{"linger.ms": 0})
    assert read_values(config, "counted") == [b"one", b"two"]
    after = request_counts(kafka)
    assert after["Produce"] - before["Produce"] == 2
    assert after["InitProducerId"] - before["InitProducerId"] >= 2  # retried while the coordinator loads
    assert after["Fetch"] > before["Fetch"] and "FetchConsumer" not in after  # counted once
    assert "BrokerHeartbeat" not in after  # the nodes' own traffic, only when asked for
    assert request_counts(kafka, include_node_to_node=True)["BrokerHeartbeat"] > 0
