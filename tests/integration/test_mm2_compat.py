"""What mirrorflow leaves in Kafka, read the way MirrorMaker 2 (Java) reads it, and the other way.

Everything Java-side is written out here from MM2's formats (Connect's JSON source offsets,
the OffsetSync struct) rather than taken from mirrorflow's encoders, and the partition Java's
producer picks comes from librdkafka's murmur2_random partitioner, which is Java's.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy import read_provenance

from ..conftest import Cluster
from .kafkatools import create_topics, produce, read_all
from .test_replicate_scenarios import mirror_config, records, run_once, topic_names

# librdkafka's partitioner that hashes keys like the Java producer (murmur2, toPositive, modulo).
JAVA_PARTITIONER = {"partitioner": "murmur2_random"}
Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


def connect_key(cluster: str, topic: str, partition: int) -> bytes:
    """MirrorSourceConnector's source partition as Connect's JsonConverter serializes it:
    no spaces, fields in Java HashMap order (cluster, partition, topic)."""
    return f'["MirrorSourceConnector",{{"cluster":"{cluster}","partition":{partition},"topic":"{topic}"}}]'.encode()


def mm2_offset_sync(key: bytes, value: bytes) -> tuple[str, int, int, int]:
    """OffsetSync as MM2's Struct reader sees it: key = STRING topic, INT32 partition;
    value = INT64 upstream offset, INT64 downstream offset (no version header)."""
    (length,) = struct.unpack_from(">h", key, 0)
    topic = key[2 : 2 + length].decode("utf-8")
    (partition,) = struct.unpack_from(">i", key, 2 + length)
    upstream, downstream = struct.unpack_from(">qq", value, 0)
    return topic, partition, upstream, downstream


def java_partitions(bootstrap: str, keys: list[bytes], partitions: int, probe_topic: str) -> list[int]:
    """Where a Java producer puts each key in a topic of `partitions` partitions."""
    create_topics(bootstrap, (probe_topic, partitions))
    landed: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, **JAVA_PARTITIONER})
    for key in keys:
        producer.produce(
            probe_topic, key=key, value=b"", on_delivery=lambda _e, m: landed.append(m.partition())
        )
        producer.flush(10)
    return landed


def read_committed(
    bootstrap: str, partitions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], list[Record]]:
    """Every committed record of many partitions with one consumer (the offsets topic has 25)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mm2-compat-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    out: dict[tuple[str, int], list[Record]] = {}
    try:
        assigned = []
        for topic, partition in partitions:
            out[(topic, partition)] = []
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high > low:
                assigned.append(TopicPartition(topic, partition, low))
        consumer.assign(assigned)
        open_partitions = {(tp.topic, tp.partition) for tp in assigned}
        deadline = time.monotonic() + 30
        while open_partitions:
            assert time.monotonic() < deadline, f"no end of {sorted(open_partitions)}"
            for message in consumer.consume(500, timeout=0.2):
                where = (message.topic(), message.partition())
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(where)
                elif error is not None:
                    raise KafkaException(error)
                else:
                    out[where].append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return out


def topic_config(bootstrap: str, topic: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(10)[name].value


def partition_count(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return len(metadata.topics[topic].partitions)


# -- progress = Connect source offsets ---------------------------------------------------------


def test_progress_is_stored_as_connect_source_offsets_java_can_read(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("connect")
    create_topics(a.bootstrap, (topic, 3))
    produce(a.bootstrap, topic, records("c", 12, 3))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    run_once(config, "A", "B")

    progress_topic = "mm2-offsets.A.internal"
    assert config.flow("A", "B").offset_storage_topic == progress_topic
    assert partition_count(b.bootstrap, progress_topic) == 25
    assert topic_config(b.bootstrap, progress_topic, "cleanup.policy") == "compact"
    # Small segments: compaction keeps the topic proportional to its keys, not to the runs.
    assert topic_config(b.bootstrap, progress_topic, "segment.bytes") == str(16 << 20)
    keys = [connect_key("A", topic, p) for p in range(3)]
    expected_partitions = java_partitions(b.bootstrap, keys, 25, unique("java-partitioner"))
    stored = read_committed(b.bootstrap, [(progress_topic, p) for p in range(25)])
    for key, java_partition in zip(keys, expected_partitions, strict=True):
        holding = {where[1] for where, recs in stored.items() for _, k, _ in recs if k == key}
        assert holding == {java_partition}, key
        values = [v for _, k, v in stored[(progress_topic, java_partition)] if k == key]
        # Connect's JSON of the last replicated upstream offset, with the topic incarnations and
        # the writer slot count mirrorflow adds (MirrorSourceTask reads only "offset"; tests/mm2
        # runs MM2 on it).
        assert re.fullmatch(
            rb'\{"offset":3,"mirrorflow\.incarnation":"[A-Za-z0-9+/=]+,[A-Za-z0-9+/=]+","mirrorflow\.slots":256,'
            rb'"mirrorflow\.commit":"[0-9a-f]{12}"\}',
            values[-1],
        )


def test_a_flow_resumes_from_progress_written_the_way_mm2_writes_it(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("from-mm2")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, records("m", 20, 1))
    progress_topic = "mm2-offsets.A.internal"
    if progress_topic not in topic_names(b):
        create_topics(b.bootstrap, (progress_topic, 25, {"cleanup.policy": "compact"}))
    # MM2 (Connect's offset writer, a plain Java producer) copied offsets 0..11 of the topic
    # into the remote topic it created.
    create_topics(b.bootstrap, (f"A.{topic}", 1))
    producer = Producer({"bootstrap.servers": b.bootstrap, **JAVA_PARTITIONER})
    producer.produce(progress_topic, key=connect_key("A", topic, 0), value=b'{"offset":11}')
    assert producer.flush(10) == 0
    config = mirror_config([a, b], ["A->B"], {"topics": topic})

    run = run_once(config, "A", "B")
    assert run.spans() == {(topic, 0): (12, 20)}, "mirrorflow continues at N+1"
    copied = [read_provenance(r.headers).source_offset for r in read_all(b.bootstrap, f"A.{topic}")]
    assert copied == list(range(12, 20))


# -- offset-syncs ------------------------------------------------------------------------------


def test_offset_syncs_decode_as_mm2_offset_syncs_and_every_sync_is_true(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("syncs")
    create_topics(a.bootstrap, (topic, 2))
    # Gaps in the source offsets: commit markers and an aborted transaction.
    txn = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": unique("syncs-writer")})
    txn.init_transactions(10)
    for batch in range(4):
        txn.begin_transaction()
        for i in range(6):
            txn.produce(topic, value=f"{batch}-{i}".encode(), partition=i % 2)
        if batch == 1:
            # Aborted records reach the log (flushed first), so readers meet real gaps; an abort
            # of records still queued also trips librdkafka issue #4849 (INVALID_TXN_STATE).
            txn.flush(10)
            txn.abort_transaction(10)
        else:
            txn.commit_transaction(10)
    config = mirror_config([a, b], ["A->B"], {"topics": topic, "mirrorflow.range.max.records": "4"})
    run_once(config, "A", "B")

    syncs_topic = "mm2-offset-syncs.B.internal"
    assert partition_count(a.bootstrap, syncs_topic) == 1
    assert topic_config(a.bootstrap, syncs_topic, "cleanup.policy") == "compact"
    assert topic_config(a.bootstrap, syncs_topic, "segment.ms") == "3600000"
    syncs = []
    for _, key, value in read_committed(a.bootstrap, [(syncs_topic, 0)])[(syncs_topic, 0)]:
        decoded = mm2_offset_sync(key, value)
        if decoded[0] == topic:
            sync = OffsetSync.decode(key, value)
            assert (sync.topic, sync.partition, sync.upstream_offset, sync.downstream_offset) == decoded
            assert len(value) == 16, "MM2's value is exactly two INT64s"
            syncs.append(decoded)
    assert {s[1] for s in syncs} == {0, 1}
    for partition in (0, 1):
        target = {
            r.offset: read_provenance(r.headers) for r in read_all(b.bootstrap, f"A.{topic}", partition)
        }
        source = read_all(a.bootstrap, topic, partition)
        mine = [(up, down) for _, p, up, down in syncs if p == partition]
        for up, down in mine:
            held = target[down]
            assert (held.source_topic, held.source_partition, held.source_offset) == (topic, partition, up)
        assert max(up for up, _ in mine) == source[-1].offset, "the last copied record has a sync"


OFFSET_SYNC_PLACES = {
    # name: (settings, cluster holding the syncs, syncs topic, remote topic of t)
    "source": ({}, "A", "mm2-offset-syncs.B.internal", "A.{t}"),
    "target": ({"offset-syncs.topic.location": "target"}, "B", "mm2-offset-syncs.A.internal", "A.{t}"),
    "separator": ({"replication.policy.separator": "_"}, "A", "mm2-offset-syncs_B_internal", "A_{t}"),
    "separator-not-internal": (
        {"replication.policy.separator": "_", "replication.policy.internal.topic.separator.enabled": "false"},
        "A",
        "mm2-offset-syncs.B.internal",
        "A_{t}",
    ),
}


@pytest.mark.parametrize("place", list(OFFSET_SYNC_PLACES))
def test_offset_syncs_topic_is_where_the_location_and_separator_say(
    request, shared_clusters, unique, place
) -> None:
    settings, holder, syncs_topic, remote_pattern = OFFSET_SYNC_PLACES[place]
    if "_" in syncs_topic:
        # Kafka refuses a topic whose name differs from an existing one only in '.' versus '_'
        # (their metric names collide), so the '_' names get clusters that never held the '.' ones.
        start = request.getfixturevalue("local_kafka")
        a, b = (Cluster(alias, kafka.bootstrap, kafka) for alias, kafka in (("A", start()), ("B", start())))
    else:
        a, b = shared_clusters[:2]
    topic = unique("where")
    remote = remote_pattern.format(t=topic)
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, records("w", 5, 1))
    config = mirror_config([a, b], ["A->B"], {"topics": topic, **settings})
    flow = config.flow("A", "B")
    assert (flow.offset_syncs_cluster, flow.offset_syncs_topic) == (holder, syncs_topic)

    run = run_once(config, "A", "B")
    assert run.planned["created_topics"] == [remote]
    found = {}
    for cluster in (a, b):
        candidates = [(t, 0) for t in topic_names(cluster) if t.startswith("mm2-offset-syncs")]
        for (name, _), held in read_committed(cluster.bootstrap, candidates).items():
            ours = [mm2_offset_sync(k, v) for _, k, v in held if mm2_offset_sync(k, v)[0] == topic]
            if ours:
                found[(cluster.alias, name)] = ours
    assert found == {(holder, syncs_topic): [(topic, 0, 0, 0), (topic, 0, 4, 4)]}
