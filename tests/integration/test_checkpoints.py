"""The checkpoint job on real Kafka clusters: MM2's bytes, exact offsets, MM2's emission rule and MirrorClient."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from mirrorflow.control.checkpoints import emit_checkpoints, remote_consumer_offsets, write_checkpoints
from mirrorflow.control.flows import JobDisabled
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.policy.provenance import read_provenance

from .kafkatools import create_topics, read_all
from .mirror_setup import mm2_config, replicate_once
from .test_failover_helpers import commit_at, consume, produce_numbered

CHECKPOINTS = "A.checkpoints.internal"


def exact(bootstrap: str, topic: str, partition: int, upstream: int) -> int:
    """The definition: target offset of the first copied record whose source offset is >= upstream."""
    records = read_all(bootstrap, topic, partition)
    for record in records:
        if read_provenance(record.headers).source_offset >= upstream:
            return record.offset
    return records[-1].offset + 1


def raw_checkpoints(bootstrap: str) -> list:
    return read_all(bootstrap, CHECKPOINTS, 0)


@pytest.fixture
def mirrored(kafka_clusters):
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], "mirrorflow.range.max.records = 30\n")
    create_topics(a.bootstrap, ("orders", 2))
    produce_numbered(a.bootstrap, "orders", 2, 160)
    return a, b, config


def test_checkpoints_are_mm2_bytes_carrying_exact_offsets_and_metadata(mirrored) -> None:
    a, b, config = mirrored
    commit_at(a.bootstrap, "billing", {("orders", 0): 47, ("orders", 1): 80}, metadata="billing-v7")
    consume(a.bootstrap, "audit", ["orders"], 5)
    replicate_once(config, "A", "B", "run-1")

    summary = emit_checkpoints(config, "A", "B")

    assert summary["groups_checkpointed"] == 2 and summary["emitted"] == summary["partitions"]
    assert summary["translations"] == {"exact": summary["partitions"]}
    records = raw_checkpoints(b.bootstrap)
    assert len(records) == summary["emitted"]
    decoded = {}
    for record in records:
        checkpoint = Checkpoint.decode(record.key, record.value)
        assert record.key == checkpoint.key_bytes() and record.value == checkpoint.value_bytes()
        assert record.value[:2] == b"\x00\x00"  # version 0
        decoded[(checkpoint.group, checkpoint.partition)] = checkpoint
    billing = decoded[("billing", 0)]
    assert (billing.topic, billing.upstream_offset, billing.metadata) == ("A.orders", 47, "billing-v7")
    assert billing.downstream_offset == exact(b.bootstrap, "A.orders", 0, 47)
    assert decoded[("billing", 1)].downstream_offset == exact(b.bootstrap, "A.orders", 1, 80)

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = admin.list_topics(CHECKPOINTS, timeout=10).topics[CHECKPOINTS]
    assert len(topic.partitions) == 1
    resource = ConfigResource(ResourceType.TOPIC, CHECKPOINTS)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


def test_remote_consumer_offsets_reads_them_as_mirror_client_does(mirrored) -> None:
    a, b, config = mirrored
    commit_at(a.bootstrap, "billing", {("orders", 0): 47, ("orders", 1): 80}, metadata="m")
    replicate_once(config, "A", "B", "run-1")
    emit_checkpoints(config, "A", "B")
    Producer({"bootstrap.servers": b.bootstrap}).produce(CHECKPOINTS, key=b"\x00", value=b"junk", partition=0)
    Producer({"bootstrap.servers": b.bootstrap}).flush(10)
    commit_at(a.bootstrap, "billing", {("orders", 0): 90}, metadata="m2")
    emit_checkpoints(config, "A", "B")

    offsets = remote_consumer_offsets({"bootstrap.servers": b.bootstrap}, "A", "billing")

    assert offsets == {
        ("A.orders", 0): (exact(b.bootstrap, "A.orders", 0, 90), "m2"),
        ("A.orders", 1): (exact(b.bootstrap, "A.orders", 1, 80), "m"),
    }
    assert remote_consumer_offsets({"bootstrap.servers": b.bootstrap}, "A", "nobody") == {}
    assert remote_consumer_offsets({"bootstrap.servers": b.bootstrap}, "C", "billing") == {}


def test_no_repeats_no_downstream_rewinds_but_upstream_rewinds_are_emitted(mirrored) -> None:
    a, b, config = mirrored
    commit_at(a.bootstrap, "g", {("orders", 0): 40, ("orders", 1): 40})
    replicate_once(config, "A", "B", "run-1")
    assert emit_checkpoints(config, "A", "B")["emitted"] == 2

    again = emit_checkpoints(config, "A", "B")
    assert (again["emitted"], again["repeats_skipped"]) == (0, 2)

    # MM2 (or a checkpoint from an older translation) already claimed a later downstream offset.
    down = exact(b.bootstrap, "A.orders", 0, 40)
    write_checkpoints(
        {"bootstrap.servers": b.bootstrap}, CHECKPOINTS, [Checkpoint("g", "A.orders", 0, 40, down + 3)]
    )
    commit_at(a.bootstrap, "g", {("orders", 1): 60})
    advanced = emit_checkpoints(config, "A", "B")
    assert (advanced["emitted"], advanced["downstream_rewinds_skipped"]) == (1, 1)

    commit_at(a.bootstrap, "g", {("orders", 0): 10})  # the group rewound on A
    rewound = emit_checkpoints(config, "A", "B")
    assert rewound["emitted"] == 1
    last = Checkpoint.decode(raw_checkpoints(b.bootstrap)[-1].key, raw_checkpoints(b.bootstrap)[-1].value)
    assert (last.partition, last.upstream_offset) == (0, 10)
    assert last.downstream_offset == exact(b.bootstrap, "A.orders", 0, 10)


def test_only_relevant_groups_are_checkpointed(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], "A->B.topics.exclude = secret\nA->B.groups.exclude = batch-.*\n")
    create_topics(a.bootstrap, ("orders", 1), ("secret", 1))
    produce_numbered(a.bootstrap, "orders", 1, 20)
    produce_numbered(a.bootstrap, "secret", 1, 20)
    commit_at(a.bootstrap, "shop", {("orders", 0): 5, ("secret", 0): 5})
    commit_at(a.bootstrap, "spy", {("secret", 0): 7})
    commit_at(a.bootstrap, "batch-nightly", {("orders", 0): 9})
    replicate_once(config, "A", "B", "run-1")

    summary = emit_checkpoints(config, "A", "B")

    groups = {Checkpoint.decode(r.key, r.value).group for r in raw_checkpoints(b.bootstrap)}
    topics = {Checkpoint.decode(r.key, r.value).topic for r in raw_checkpoints(b.bootstrap)}
    assert groups == {"shop"} and topics == {"A.orders"}
    assert summary["groups_checkpointed"] == 1 and summary["partitions"] == 1


def test_disabled_checkpoints_refuse_with_the_key_to_set(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    off = mm2_config([a, b], ["A->B"], "A->B.emit.checkpoints.enabled = false\n")
    with pytest.raises(JobDisabled, match=r"A->B.emit.checkpoints.enabled = true"):
        emit_checkpoints(off, "A", "B")
    with pytest.raises(JobDisabled, match=r"B->A.enabled = true"):
        emit_checkpoints(off, "B", "A")


def test_offset_syncs_on_the_target_are_read_there(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config(
        [a, b], ["A->B"], "offset-syncs.topic.location = target\nmirrorflow.range.max.records = 9\n"
    )
    create_topics(a.bootstrap, ("orders", 1))
    produce_numbered(a.bootstrap, "orders", 1, 50)
    commit_at(a.bootstrap, "g", {("orders", 0): 31})
    replicate_once(config, "A", "B", "run-1")
    assert read_all(b.bootstrap, "mm2-offset-syncs.A.internal"), "syncs live on the target"

    summary = emit_checkpoints(config, "A", "B")

    assert summary["translations"] == {"exact": 1}
    (record,) = raw_checkpoints(b.bootstrap)
    assert Checkpoint.decode(record.key, record.value).downstream_offset == exact(
        b.bootstrap, "A.orders", 0, 31
    )
