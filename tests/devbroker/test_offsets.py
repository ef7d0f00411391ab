"""ListOffsets, DeleteRecords and time/size retention: how offsets move at both ends of a log."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from dbhelpers import admin, consume_all, create_topic, running_broker
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from raw_protocol import RawClient, fetch, produce, record_batch
from raw_protocol import create_topic as raw_create_topic

from devbroker.launcher import DevBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker(**{"log.retention.check.interval.ms": 100}) as b:
        yield b


def list_offsets(
    client: RawClient, topic: str, timestamp: int, isolation: int = 0, version: int = 8
) -> tuple[int, int, int]:
    response = client.request(
        2,
        version,
        {
            "replica_id": -1,
            "isolation_level": isolation,
            "timeout": 5000,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
        },
    )
    p = response.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


# fill() writes 1970 timestamps, which the fast retention check of this module would delete
KEEP_FOREVER = {"retention.ms": "-1"}


def fill(client: RawClient, topic: str) -> None:
    """Offsets 0-5 with timestamps 1000, 1001, 5000, 5001, 3000, 3001 in three batches."""
    for base in (1000, 5000, 3000):
        assert produce(client, topic, 0, record_batch([b"a", b"b"], timestamp=base)).error_code == 0


def test_earliest_latest_and_timestamps(broker: DevBroker, unique) -> None:
    topic = unique("times")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic, configs=KEEP_FOREVER)
        assert list_offsets(client, topic, -2) == (0, 0, -1)
        assert list_offsets(client, topic, -1) == (0, 0, -1)
        fill(client, topic)
        assert list_offsets(client, topic, -2) == (0, 0, -1)
        assert list_offsets(client, topic, -1) == (0, 6, -1)
        assert list_offsets(client, topic, 0)[1:] == (0, 1000)
        assert list_offsets(client, topic, 1001)[1:] == (1, 1001)
        assert list_offsets(client, topic, 1002)[1:] == (2, 5000)  # first record at or after the time
        assert list_offsets(client, topic, 5001)[1:] == (3, 5001)
        assert list_offsets(client, topic, 9999)[1:] == (-1, -1)
        assert list_offsets(client, topic, -3)[1:] == (3, 5001)  # max timestamp (KIP-734)
        assert list_offsets(client, topic, -4, version=8)[1:] == (0, -1)  # earliest local
        missing = client.request(
            2,
            8,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": 3, "timestamp": -1}]}],
            },
        )
        assert missing.topics[0].partitions[0].error_code == 3


def test_client_offset_lookups(broker: DevBroker, unique) -> None:
    topic = unique("client-times")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic, configs=KEEP_FOREVER)
        fill(client, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lookups"})
    [found] = consumer.offsets_for_times([TopicPartition(topic, 0, 4000)], timeout=10)
    assert found.offset == 2
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 6)
    consumer.close()
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KpTopicPartition(topic, 0)
    assert kp.offsets_for_times({tp: 4000})[tp].offset == 2
    assert (kp.beginning_offsets([tp])[tp], kp.end_offsets([tp])[tp]) == (0, 6)
    kp.close()


def test_delete_records(broker: DevBroker, unique) -> None:
    topic = unique("delete-records")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=0)
        producer.flush(10)
    client = admin(broker.bootstrap)
    [result] = client.delete_records([TopicPartition(topic, 0, 4)]).values()
    assert result.result(10).low_watermark == 4
    assert [m.offset() for m in consume_all(broker.bootstrap, topic, **{"auto.offset.reset": "earliest"})][
        :1
    ] == [4]
    with RawClient(broker.bootstrap) as raw:
        assert list_offsets(raw, topic, -2)[1] == 4
        assert list_offsets(raw, topic, 1)[1] == 4  # timestamp lookups never return deleted offsets
        response = fetch(raw, topic, 2, partition_max=1000)
        part = response.responses[0].partitions[0]
        assert (part.error_code, part.log_start_offset) == (1, 4)
        beyond = raw.request(
            21,
            2,
            {
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 11}]}],
                "timeout": 5000,
            },
        )
        assert beyond.topics[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
        to_end = raw.request(
            21,
            2,
            {
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": -1}]}],
                "timeout": 5000,
            },
        )
        assert (to_end.topics[0].partitions[0].error_code, to_end.topics[0].partitions[0].low_watermark) == (
            0,
            10,
        )
        assert list_offsets(raw, topic, -2)[1] == 10


def test_delete_records_is_refused_on_compacted_topics(broker: DevBroker, unique) -> None:
    topic = unique("compacted")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    client = admin(broker.bootstrap)
    [future] = client.delete_records([TopicPartition(topic, 0, 0)]).values()
    with pytest.raises(KafkaException) as info:
        future.result(10)
    assert info.value.args[0].code() == KafkaError.POLICY_VIOLATION


def wait_for_log_start(client: RawClient, topic: str, expected: int, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    start = list_offsets(client, topic, -2)[1]
    while start != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        start = list_offsets(client, topic, -2)[1]
    return start


def test_time_retention_drops_old_segments(broker: DevBroker, unique) -> None:
    topic = unique("retention-ms")
    now = int(time.time() * 1000)
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic, configs={"retention.ms": "60000", "segment.bytes": "1000"})
        for i in range(5):  # old records, each batch in its own segment (segment.bytes is tiny)
            produce(client, topic, 0, record_batch([b"x" * 600], timestamp=now - 3_600_000 + i))
        produce(client, topic, 0, record_batch([b"fresh" * 120], timestamp=now))
        assert wait_for_log_start(client, topic, 5) == 5
        assert list_offsets(client, topic, -1)[1] == 6


def test_size_retention(broker: DevBroker, unique) -> None:
    topic = unique("retention-bytes")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic, configs={"retention.bytes": "2000", "segment.bytes": "1000"})
        now = int(time.time() * 1000)
        for _ in range(8):
            produce(client, topic, 0, record_batch([b"y" * 600], timestamp=now))
        # Kafka deletes the oldest segments only while the rest still holds retention.bytes
        assert wait_for_log_start(client, topic, 5) == 5


def test_isolation_aware_latest(broker: DevBroker, unique) -> None:
    topic = unique("iso")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tid")})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, value=b"pending", partition=0)
    producer.flush(10)
    with RawClient(broker.bootstrap) as client:
        assert list_offsets(client, topic, -1, isolation=1)[1] == 0
        assert list_offsets(client, topic, -1, isolation=0)[1] == 1
        assert list_offsets(client, topic, -3, isolation=1)[1] == -1  # max timestamp is past the LSO
        producer.commit_transaction(10)
        assert list_offsets(client, topic, -1, isolation=1)[1] == 2
