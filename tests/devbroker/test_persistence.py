"""--data-dir: everything acknowledged survives a restart, a SIGKILL, and a torn segment tail."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource
from dbhelpers import admin, consume_all, create_topic
from raw_protocol import (
    RawClient,
    describe_transaction,
    init_producer_id,
    produce,
    record_batch,
)
from raw_protocol import (
    create_topic as raw_create_topic,
)

from devbroker.launcher import DevBroker

pytestmark = pytest.mark.devbroker_only


@pytest.fixture
def broker(tmp_path: Path):
    b = DevBroker(data_dir=tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": 0})
    b.start()
    yield b
    b.stop()


def values(
    bootstrap: str, topic: str, isolation: str = "read_uncommitted", partitions: int = 1
) -> list[bytes | None]:
    return [m.value() for m in consume_all(bootstrap, topic, partitions, isolation=isolation)]


def metadata_topic(client: RawClient, name: str):
    response = client.request(
        3,
        12,
        {
            "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    return response.topics[0]


def test_restart_keeps_topics_records_configs_and_ids(broker: DevBroker) -> None:
    create_topic(broker.bootstrap, "kept", partitions=3, **{"retention.ms": "-1", "segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 10})
    for i in range(300):
        producer.produce("kept", key=b"k%d" % i, value=b"value-%d" % i + b"." * 100, partition=i % 3)
    assert producer.flush(15) == 0
    with RawClient(broker.bootstrap) as client:
        topic_id = metadata_topic(client, "kept").topic_id
        deleted = client.request(
            21,
            2,
            {
                "topics": [{"name": "kept", "partitions": [{"partition_index": 1, "offset": 40}]}],
                "timeout": 5000,
            },
        )
        assert deleted.topics[0].partitions[0].low_watermark == 40
    before = sorted(values(broker.bootstrap, "kept", partitions=3))
    cluster_id = broker.cluster_id
    segments = sorted(p.name for p in (broker.data_dir / "kept-0").iterdir())
    assert len(segments) > 1 and segments[0] == f"{0:020d}.log"  # Kafka's layout, rolled by segment.bytes

    broker.restart()

    assert broker.cluster_id == cluster_id
    with RawClient(broker.bootstrap) as client:
        topic = metadata_topic(client, "kept")
        assert (topic.topic_id, len(topic.partitions)) == (topic_id, 3)
        starts = client.request(
            2,
            8,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "kept",
                        "partitions": [{"partition_index": p, "timestamp": -2} for p in range(3)],
                    }
                ],
            },
        )
        assert [p.offset for p in starts.topics[0].partitions] == [0, 40, 0]
    assert sorted(values(broker.bootstrap, "kept", partitions=3)) == before
    client = admin(broker.bootstrap)
    resource = ConfigResource("topic", "kept")
    configs = client.describe_configs([resource])[resource].result(10)
    assert (configs["retention.ms"].value, configs["segment.bytes"].value) == ("-1", "1024")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("kept", value=b"after restart", partition=0)
    assert producer.flush(10) == 0
    assert values(broker.bootstrap, "kept", partitions=3).count(b"after restart") == 1


def test_deleted_topic_stays_deleted(broker: DevBroker) -> None:
    create_topic(broker.bootstrap, "gone")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("gone", value=b"old", partition=0)
    producer.flush(10)
    client = admin(broker.bootstrap)
    client.delete_topics(["gone"])["gone"].result(10)
    broker.restart()
    assert "gone" not in admin(broker.bootstrap).list_topics(timeout=10).topics
    create_topic(broker.bootstrap, "gone")
    assert values(broker.bootstrap, "gone") == []


def test_producer_state_survives_restart(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "idem")
        pid, epoch = init_producer_id(client)
        first = record_batch([b"once"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce(client, "idem", 0, first).base_offset == 0
    broker.restart()
    with RawClient(broker.bootstrap) as client:
        again = produce(
            client, "idem", 0, record_batch([b"once"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        )
        assert (again.error_code, again.base_offset) == (0, 0)  # still recognised as a duplicate
        gap = produce(
            client, "idem", 0, record_batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
        )
        assert gap.error_code == 45
        assert init_producer_id(client)[0] > pid  # producer ids are never handed out twice
    assert values(broker.bootstrap, "idem") == [b"once"]


def test_transactions_survive_restart(broker: DevBroker) -> None:
    create_topic(broker.bootstrap, "txns")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "durable"})
    producer.init_transactions(10)
    for outcome in ("committed", "aborted"):
        producer.begin_transaction()
        producer.produce("txns", value=outcome.encode(), partition=0)
        producer.flush(10)
        if outcome == "committed":
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce("txns", value=b"open-across-restart", partition=0)
    producer.flush(10)
    with RawClient(broker.bootstrap) as client:
        described = describe_transaction(client, "durable")
    pid, epoch = described["producer_id"], described["producer_epoch"]
    del producer

    broker.restart()

    assert values(broker.bootstrap, "txns", "read_committed") == [b"committed"]
    with RawClient(broker.bootstrap) as client:
        described = describe_transaction(client, "durable")
        assert (described["state"], described["producer_id"]) == ("Ongoing", pid)
        commit = client.request(
            26,
            3,
            {"transactional_id": "durable", "producer_id": pid, "producer_epoch": epoch, "committed": True},
        )
        assert commit.error_code == 0
    assert values(broker.bootstrap, "txns", "read_committed") == [b"committed", b"open-across-restart"]
    fresh = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "durable"})
    fresh.init_transactions(10)  # bumps the epoch of the stored transactional id
    with RawClient(broker.bootstrap) as client:
        described = describe_transaction(client, "durable")
    assert (
        described["state"],
        described["producer_id"],
        described["producer_epoch"],
        described["start_ms"],
    ) == ("Empty", pid, epoch + 1, -1)


def test_sigkill_loses_nothing_acknowledged_and_torn_tails_are_cut(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "crash")
        for i in range(50):
            assert produce(client, "crash", 0, record_batch([b"r%d" % i]), acks=1).error_code == 0
    broker.kill()
    segment = broker.data_dir / "crash-0" / f"{0:020d}.log"
    whole = segment.stat().st_size
    torn = record_batch([b"half-written"])
    with segment.open("ab") as fh:
        fh.write(torn[: len(torn) // 2])
    broker.start()
    assert segment.stat().st_size == whole
    assert values(broker.bootstrap, "crash") == [b"r%d" % i for i in range(50)]
    with RawClient(broker.bootstrap) as client:
        assert produce(client, "crash", 0, record_batch([b"next"])).base_offset == 50


def test_corrupt_batch_in_the_tail_is_cut(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "bitrot")
        for i in range(5):
            produce(client, "bitrot", 0, record_batch([b"r%d" % i]))
    broker.kill()
    segment = broker.data_dir / "bitrot-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[-2] ^= 0xFF  # flip a byte inside the last batch: its CRC no longer matches
    segment.write_bytes(bytes(data))
    broker.start()
    assert values(broker.bootstrap, "bitrot") == [b"r%d" % i for i in range(4)]


def test_compacted_log_survives_restart(broker: DevBroker) -> None:
    create_topic(broker.bootstrap, "compacted", **{"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("compacted", key=b"k%d" % (i % 3), value=b"%d" % i, partition=0)
    producer.flush(10)
    broker.compact_now("compacted")
    after = values(broker.bootstrap, "compacted")
    assert after == [b"27", b"28", b"29"]
    broker.restart()
    assert values(broker.bootstrap, "compacted") == after


def test_data_dir_of_another_cluster_is_refused(broker: DevBroker) -> None:
    broker.stop()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "devbroker",
            "--data-dir",
            str(broker.data_dir),
            "--cluster-id",
            "someone-else",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "someone-else" in result.stderr and broker.cluster_id in result.stderr


def test_segment_ms_rolls_segment_files(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "rolling", configs={"segment.ms": "1"})
        for i in range(3):
            produce(client, "rolling", 0, record_batch([b"r%d" % i]))
            time.sleep(0.01)  # let the active segment grow older than segment.ms
    names = sorted(p.name for p in (broker.data_dir / "rolling-0").iterdir())
    assert names == [f"{n:020d}.log" for n in range(3)]
    broker.restart()
    assert values(broker.bootstrap, "rolling") == [b"r0", b"r1", b"r2"]


def test_dynamic_broker_configs_survive_restart(broker: DevBroker) -> None:
    create_topic(broker.bootstrap, "dyn")
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "",
                        "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "4242"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert response.responses[0].error_code == 0
    broker.restart()
    client = admin(broker.bootstrap)
    resource = ConfigResource("topic", "dyn")
    entry = client.describe_configs([resource])[resource].result(10)["retention.ms"]
    assert (entry.value, entry.source) == ("4242", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
