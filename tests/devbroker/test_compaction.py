"""Log compaction: latest record per key, offset gaps, tombstones, aborted data, codecs, the timer."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from crc32c import crc32c
from dbhelpers import consume_all, create_topic, running_broker
from kafka import KafkaConsumer, TopicPartition
from raw_protocol import RawClient, fetch

from devbroker import batches
from devbroker.launcher import DevBroker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker(**{"log.cleaner.backoff.ms": 100}) as b:
        yield b


def write(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]], codec: str = "none") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(15) == 0


def snapshot(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(m.offset(), m.key(), m.value()) for m in consume_all(bootstrap, topic)]


HISTORY = [
    (b"a", b"a1"),
    (b"b", b"b1"),
    (b"a", b"a2"),
    (b"c", b"c1"),
    (b"b", None),
    (b"a", b"a3"),
    (b"d", b"d1"),
]


def test_latest_record_per_key_with_gaps(broker: DevBroker, unique) -> None:
    topic = unique("compact")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    write(broker.bootstrap, topic, HISTORY)
    assert len(snapshot(broker.bootstrap, topic)) == 7
    broker.compact_now(topic)
    assert snapshot(broker.bootstrap, topic) == [
        (3, b"c", b"c1"),
        (4, b"b", None),
        (5, b"a", b"a3"),
        (6, b"d", b"d1"),
    ]
    # kafka-python sees the same records and offsets, and the end offset is unchanged
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    seen = []
    deadline = time.monotonic() + 15
    while consumer.position(tp) < 7 and time.monotonic() < deadline:
        seen += [
            (m.offset, m.key, m.value) for records in consumer.poll(timeout_ms=300).values() for m in records
        ]
    assert consumer.end_offsets([tp])[tp] == 7
    consumer.close()
    assert seen == [(3, b"c", b"c1"), (4, b"b", None), (5, b"a", b"a3"), (6, b"d", b"d1")]
    # new writes continue at the old end and compact against the old records
    write(broker.bootstrap, topic, [(b"c", b"c2")])
    broker.compact_now(topic)
    assert [r[0] for r in snapshot(broker.bootstrap, topic)] == [4, 5, 6, 7]


def test_tombstones_go_after_delete_retention(broker: DevBroker, unique) -> None:
    topic = unique("tombstones")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact", "delete.retention.ms": "0"})
    write(broker.bootstrap, topic, HISTORY)
    broker.compact_now(topic)  # stamps the delete horizon (now + 0 ms) on the tombstone's batch
    assert (4, b"b", None) in snapshot(broker.bootstrap, topic)
    broker.compact_now(topic)  # past the horizon: the tombstone is dropped
    assert snapshot(broker.bootstrap, topic) == [(3, b"c", b"c1"), (5, b"a", b"a3"), (6, b"d", b"d1")]


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_keep_their_codec(broker: DevBroker, unique, codec: str) -> None:
    topic = unique(f"codec-{codec}")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    write(broker.bootstrap, topic, [(b"k%d" % (i % 5), b"v%d" % i) for i in range(40)], codec)
    broker.compact_now(topic)
    assert [(k, v) for _o, k, v in snapshot(broker.bootstrap, topic)] == [
        (b"k%d" % i, b"v%d" % (35 + i)) for i in range(5)
    ]
    with RawClient(broker.bootstrap) as client:
        response = fetch(client, topic)
    data = response.responses[0].partitions[0].records
    batch = data[: struct.unpack_from(">i", data, 8)[0] + 12]
    info = batches.parse_header(batch)
    assert info.codec == CODECS.index(codec)
    assert (info.record_count, info.last_offset) == (5, 39)  # rewritten batch keeps its last offset
    assert crc32c(batch[batches.CRC_START :]) == struct.unpack_from(">I", batch, 17)[0]


def test_aborted_transactions_are_removed(broker: DevBroker, unique) -> None:
    topic = unique("aborted")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    write(broker.bootstrap, topic, [(b"x", b"kept")])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tid")})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, key=b"x", value=b"aborted", partition=0)
    producer.produce(topic, key=b"y", value=b"aborted", partition=0)
    producer.flush(10)
    producer.abort_transaction(10)
    assert [v for _o, _k, v in snapshot(broker.bootstrap, topic)] == [b"kept", b"aborted", b"aborted"]
    broker.compact_now(topic)
    assert snapshot(broker.bootstrap, topic) == [(0, b"x", b"kept")]
    assert [
        (k, v)
        for _o, k, v in (
            (m.offset(), m.key(), m.value())
            for m in consume_all(broker.bootstrap, topic, isolation="read_committed")
        )
    ] == [(b"x", b"kept")]


def test_min_compaction_lag_protects_young_records(broker: DevBroker, unique) -> None:
    topic = unique("lag")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"})
    write(broker.bootstrap, topic, HISTORY)
    broker.compact_now(topic)
    assert len(snapshot(broker.bootstrap, topic)) == 7


def test_cleaner_timer_compacts_closed_segments_only(broker: DevBroker, unique) -> None:
    topic = unique("timer")
    create_topic(
        broker.bootstrap,
        topic,
        **{"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"},
    )
    # One record per produce call: each batch is ~90 bytes, so segments roll every ~20 records.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(60):
        producer.produce(topic, key=b"same", value=b"%03d" % i, partition=0)
        producer.flush(10)
    deadline = time.monotonic() + 15
    records = snapshot(broker.bootstrap, topic)
    while len(records) == 60 and time.monotonic() < deadline:
        time.sleep(0.1)
        records = snapshot(broker.bootstrap, topic)
    offsets = [r[0] for r in records]
    assert len(records) < 60
    assert records[-1] == (59, b"same", b"059")
    # the active segment is never cleaned on the timer, so its records are all still there
    assert offsets[-3:] == [57, 58, 59]


def test_compact_now_on_all_topics_skips_delete_topics(broker: DevBroker, unique) -> None:
    compacted = unique("all-compact")
    plain = unique("all-delete")
    create_topic(broker.bootstrap, compacted, **{"cleanup.policy": "compact,delete"})
    create_topic(broker.bootstrap, plain)
    write(broker.bootstrap, compacted, HISTORY)
    write(broker.bootstrap, plain, HISTORY)
    broker.compact_now()
    assert len(snapshot(broker.bootstrap, compacted)) == 4
    assert len(snapshot(broker.bootstrap, plain)) == 7


def test_compact_now_through_legacy_alter_configs(broker: DevBroker, unique) -> None:
    topic = unique("legacy")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    write(broker.bootstrap, topic, HISTORY)
    with RawClient(broker.bootstrap) as client:

        def alter(value: str) -> tuple[int, str | None]:
            response = client.request(
                33,
                2,
                {
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": "1",
                            "configs": [{"name": "devbroker.compact.now", "value": value}],
                        }
                    ],
                    "validate_only": False,
                },
            )
            return response.responses[0].error_code, response.responses[0].error_message

        code, message = alter("no-such-topic")
        assert code == 40 and "no-such-topic" in message  # INVALID_CONFIG
        assert len(snapshot(broker.bootstrap, topic)) == 7
        assert alter(topic) == (0, None)
        described = client.request(
            32,
            4,
            {
                "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
    assert len(snapshot(broker.bootstrap, topic)) == 4
    names = {c.name for c in described.results[0].configs}
    assert "devbroker.compact.now" not in names and "log.cleaner.backoff.ms" in names
