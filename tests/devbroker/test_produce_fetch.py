"""Produce and fetch with real clients: byte-exact records, every codec, Kafka's produce errors."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from dbhelpers import consume_all, create_topic, running_broker
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from raw_protocol import RawClient, fetch, produce, record_batch
from raw_protocol import create_topic as raw_create_topic

from devbroker import batches
from devbroker.launcher import DevBroker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

RECORDS = [
    # key, value, headers, timestamp (ms)
    (b"k1", b"plain value", [("h1", b"v1")], 1_600_000_000_001),
    (None, b"no key", [], 1_600_000_000_002),
    (b"tombstone", None, [("only-header", b"h")], 1_600_000_000_003),
    (b"", b"", [("empty", b"")], 1_600_000_000_004),
    (
        b"\x00\xff binary",
        bytes(range(256)) * 8,
        [("a", b"1"), ("a", b"2"), ("b", b"\x00")],
        1_600_000_000_005,
    ),
]


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker() as b:
        yield b


def produce_confluent(bootstrap: str, topic: str, codec: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50})
    for key, value, headers, ts in RECORDS:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts, partition=0)
    assert producer.flush(15) == 0


def produce_kafka_python(bootstrap: str, topic: str, codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, linger_ms=50
    )
    for key, value, headers, ts in RECORDS:
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
    producer.flush(15)
    producer.close()


def read_confluent(bootstrap: str, topic: str) -> list[tuple]:
    return [
        (m.key(), m.value(), [(k, v) for k, v in (m.headers() or [])], m.timestamp()[1])
        for m in consume_all(bootstrap, topic)
    ]


def read_kafka_python(bootstrap: str, topic: str) -> list[tuple]:
    """Everything up to the partition's end offset, read with kafka-python."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    end = consumer.end_offsets([tp])[tp]
    out = []
    deadline = time.monotonic() + 15
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend((m.key, m.value, list(m.headers), m.timestamp) for m in records)
    consumer.close()
    return out


def expected() -> list[tuple]:
    return [(k, v, h, ts) for k, v, h, ts in RECORDS]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer", ["confluent", "kafka-python"])
def test_records_round_trip_byte_exact(broker: DevBroker, unique, codec: str, writer: str) -> None:
    topic = unique(f"exact-{writer}-{codec}")
    create_topic(broker.bootstrap, topic)
    (produce_confluent if writer == "confluent" else produce_kafka_python)(broker.bootstrap, topic, codec)
    assert read_confluent(broker.bootstrap, topic) == expected()
    assert read_kafka_python(broker.bootstrap, topic) == expected()


def test_null_header_values_survive(broker: DevBroker, unique) -> None:
    topic = unique("null-header")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(
        topic, key=b"k", value=b"v", headers=[("nothing", None), ("something", b"1")], partition=0
    )
    assert producer.flush(10) == 0
    assert read_confluent(broker.bootstrap, topic)[0][2] == [("nothing", None), ("something", b"1")]
    assert read_kafka_python(broker.bootstrap, topic)[0][2] == [("nothing", None), ("something", b"1")]


@pytest.mark.parametrize("codec", CODECS)
def test_stored_batches_keep_the_producers_codec(broker: DevBroker, unique, codec: str) -> None:
    topic = unique("codec")
    create_topic(broker.bootstrap, topic)
    produce_confluent(broker.bootstrap, topic, codec)
    with RawClient(broker.bootstrap) as client:
        data = fetch_bytes(client, topic)
    attributes = struct.unpack_from(">h", data, 21)[0]
    assert attributes & batches.COMPRESSION_MASK == CODECS.index(codec)


def fetch_bytes(
    client: RawClient,
    topic: str,
    offset: int = 0,
    *,
    max_bytes: int = 1 << 20,
    partition_max: int = 1 << 20,
    isolation: int = 0,
    partitions: tuple[int, ...] = (0,),
) -> bytes:
    response = fetch(
        client,
        topic,
        offset,
        max_bytes=max_bytes,
        partition_max=partition_max,
        isolation=isolation,
        partitions=partitions,
    )
    return b"".join(p.records or b"" for p in response.responses[0].partitions)


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_topic_compression_type_recompresses(broker: DevBroker, unique, target: str) -> None:
    topic = unique(f"to-{target}")
    create_topic(broker.bootstrap, topic, **{"compression.type": target})
    produce_confluent(broker.bootstrap, topic, "gzip" if target != "gzip" else "lz4")
    with RawClient(broker.bootstrap) as client:
        data = fetch_bytes(client, topic)
    codec = struct.unpack_from(">h", data, 21)[0] & batches.COMPRESSION_MASK
    assert codec == batches.CODEC_BY_TOPIC_CONFIG[target]
    assert read_confluent(broker.bootstrap, topic) == expected()
    assert read_kafka_python(broker.bootstrap, topic) == expected()


def test_log_append_time_replaces_timestamps(broker: DevBroker, unique) -> None:
    topic = unique("append-time")
    create_topic(broker.bootstrap, topic, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_confluent(broker.bootstrap, topic, "lz4")
    messages = consume_all(broker.bootstrap, topic)
    assert len(messages) == len(RECORDS)
    for message in messages:
        kind, ts = message.timestamp()
        assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert before <= ts <= int(time.time() * 1000)
    assert [m.value() for m in messages] == [r[1] for r in RECORDS]


def test_message_too_large(broker: DevBroker, unique) -> None:
    topic = unique("small-max")
    create_topic(broker.bootstrap, topic, **{"max.message.bytes": "2000"})
    with RawClient(broker.bootstrap) as client:
        result = produce(client, topic, 0, record_batch([b"x" * 3000]))
        assert result.error_code == 10  # MESSAGE_TOO_LARGE
        assert produce(client, topic, 0, record_batch([b"x" * 100])).error_code == 0


def test_acks_all_needs_min_insync_replicas(broker: DevBroker, unique) -> None:
    topic = unique("min-isr")
    create_topic(broker.bootstrap, topic, **{"min.insync.replicas": "2"})
    with RawClient(broker.bootstrap) as client:
        assert (
            produce(client, topic, 0, record_batch([b"a"]), acks=-1).error_code == 19
        )  # NOT_ENOUGH_REPLICAS
        assert produce(client, topic, 0, record_batch([b"a"]), acks=1).error_code == 0


def test_invalid_required_acks(broker: DevBroker, unique) -> None:
    topic = unique("acks")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        assert (
            produce(client, topic, 0, record_batch([b"a"]), acks=2).error_code == 21
        )  # INVALID_REQUIRED_ACKS


def test_corrupt_batch_is_rejected(broker: DevBroker, unique) -> None:
    topic = unique("corrupt")
    batch = bytearray(record_batch([b"payload"]))
    batch[-1] ^= 0xFF
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        assert produce(client, topic, 0, bytes(batch)).error_code == 2  # CORRUPT_MESSAGE
        wrong_magic = bytearray(record_batch([b"payload"]))
        wrong_magic[16] = 1
        assert produce(client, topic, 0, bytes(wrong_magic)).error_code == 2
        assert produce(client, topic, 0, record_batch([b"payload"])[:-3]).error_code == 2
        assert produce(client, topic, 0, record_batch([b"ok"])).base_offset == 0


def test_unknown_partition(broker: DevBroker, unique) -> None:
    with RawClient(broker.bootstrap) as client:
        assert produce(client, unique("missing"), 0, record_batch([b"a"])).error_code == 3


def test_compacted_topic_requires_keys(broker: DevBroker, unique) -> None:
    topic = unique("compact-keys")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    with RawClient(broker.bootstrap) as client:
        result = produce(client, topic, 0, record_batch([b"no key"]))
        assert result.error_code == 87  # INVALID_RECORD
        assert "without key" in result.error_message
        assert produce(client, topic, 0, record_batch([b"v"], keys=[b"k"])).error_code == 0


def test_clients_cannot_write_control_batches(broker: DevBroker, unique) -> None:
    topic = unique("control")
    marker = batches.control_batch(offset=0, producer_id=1, producer_epoch=0, commit=True, timestamp=1)
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        assert produce(client, topic, 0, marker).error_code == 87


def test_timestamp_bounds(broker: DevBroker, unique) -> None:
    topic = unique("ts-bounds")
    create_topic(broker.bootstrap, topic, **{"message.timestamp.before.max.ms": "60000"})
    with RawClient(broker.bootstrap) as client:
        old = produce(client, topic, 0, record_batch([b"old"], timestamp=1_000))
        assert old.error_code == 32  # INVALID_TIMESTAMP
        now = int(time.time() * 1000)
        assert produce(client, topic, 0, record_batch([b"new"], timestamp=now)).error_code == 0


def test_fetch_limits_return_the_first_batch_even_if_larger(broker: DevBroker, unique) -> None:
    topic = unique("limits")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic, partitions=2)
        for p in (0, 1):
            for _ in range(3):
                assert produce(client, topic, p, record_batch([b"x" * 1000])).error_code == 0
        one = len(record_batch([b"x" * 1000]))
        # partition_max_bytes smaller than one batch: the first partition still gets one batch,
        # the second (response already holds data) gets none.
        response = fetch(client, topic, partition_max=10, partitions=(0, 1))
        sizes = [len(p.records or b"") for p in response.responses[0].partitions]
        assert sizes == [one, 0]
        # max_bytes caps the whole response at whole batches
        assert len(fetch_bytes(client, topic, max_bytes=2 * one + 5, partitions=(0, 1))) == 2 * one
        assert len(fetch_bytes(client, topic, partition_max=2 * one + 5)) == 2 * one


def test_fetch_out_of_range(broker: DevBroker, unique) -> None:
    topic = unique("oor")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        produce(client, topic, 0, record_batch([b"a", b"b"]))
        response = fetch(client, topic, 5, partition_max=1000)
        part = response.responses[0].partitions[0]
        assert part.error_code == 1  # OFFSET_OUT_OF_RANGE
        assert part.high_watermark == 2
        assert fetch_bytes(client, topic, offset=2) == b""  # at the end: empty, no error


def test_fetch_in_the_middle_of_a_batch_returns_that_batch(broker: DevBroker, unique) -> None:
    topic = unique("mid-batch")
    create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=100)
    for i in range(10):
        producer.send(topic, value=b"%d" % i, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 7)
    offsets: list[int] = []
    deadline = time.monotonic() + 15
    while len(offsets) < 3 and time.monotonic() < deadline:
        offsets += [m.offset for records in consumer.poll(timeout_ms=500).values() for m in records]
    consumer.close()
    assert offsets == [7, 8, 9]


def test_long_poll_is_woken_by_produce(broker: DevBroker, unique) -> None:
    topic = unique("wake")
    create_topic(broker.bootstrap, topic)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=20000, consumer_timeout_ms=15000
    )
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"hello", partition=0)
    producer.flush(10)
    message = next(iter(consumer))
    assert message.value == b"hello"
    consumer.close()
