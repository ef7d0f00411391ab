"""The sync.group.offsets job on real Kafka clusters: MM2's rules with exact offsets."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from mirrorflow.control.flows import JobDisabled
from mirrorflow.control.group_sync import sync_group_offsets
from mirrorflow.ops.failover import failover
from mirrorflow.policy.provenance import read_provenance

from .kafkatools import create_topics, read_all
from .mirror_setup import mm2_config, replicate_once
from .test_failover_helpers import commit_at, committed, group_consumer, produce_numbered

SYNC_ON = "A->B.sync.group.offsets.enabled = true\nmirrorflow.range.max.records = 25\n"


def exact(bootstrap: str, partition: int, upstream: int) -> int:
    for record in read_all(bootstrap, "A.orders", partition):
        if read_provenance(record.headers).source_offset >= upstream:
            return record.offset
    raise AssertionError(f"no copy of offset {upstream} or later")


def metadata_on(bootstrap: str, group: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {tp.metadata for tp in result.topic_partitions}


def test_idle_and_unknown_groups_are_synced_never_rewound_and_active_ones_left_alone(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], SYNC_ON)
    create_topics(a.bootstrap, ("orders", 2))
    produce_numbered(a.bootstrap, "orders", 2, 120)
    both = [("A.orders", 0), ("A.orders", 1)]
    commit_at(a.bootstrap, "new", {("orders", 0): 30, ("orders", 1): 41}, metadata="from-a")
    commit_at(a.bootstrap, "further-on-b", {("orders", 0): 30, ("orders", 1): 30})
    commit_at(a.bootstrap, "behind-on-b", {("orders", 0): 50})
    commit_at(a.bootstrap, "busy", {("orders", 0): 50})
    replicate_once(config, "A", "B", "run-1")
    commit_at(b.bootstrap, "further-on-b", {("A.orders", 0): 55})
    commit_at(b.bootstrap, "behind-on-b", {("A.orders", 0): 2})
    commit_at(b.bootstrap, "busy", {("A.orders", 0): 4})
    member = group_consumer(b.bootstrap, "busy")
    member.subscribe(["A.orders"])
    try:
        while not member.assignment():
            member.poll(0.2)

        summary = sync_group_offsets(config, "A", "B")

        assert set(summary["groups_synced"]) == {"new", "further-on-b", "behind-on-b"}
        assert "active member" in summary["skipped_groups"]["busy"]
        assert summary["not_rewound"] == 1
    finally:
        member.close()
    assert committed(b.bootstrap, "new", both) == {
        ("A.orders", 0): exact(b.bootstrap, 0, 30),
        ("A.orders", 1): exact(b.bootstrap, 1, 41),
    }
    assert metadata_on(b.bootstrap, "new") == {"from-a"}
    assert committed(b.bootstrap, "further-on-b", both) == {
        ("A.orders", 0): 55,
        ("A.orders", 1): exact(b.bootstrap, 1, 30),
    }
    assert committed(b.bootstrap, "behind-on-b", both) == {("A.orders", 0): exact(b.bootstrap, 0, 50)}
    assert committed(b.bootstrap, "busy", both) == {("A.orders", 0): 4}


def test_group_sync_is_off_unless_enabled(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    with pytest.raises(JobDisabled, match=r"A->B.sync.group.offsets.enabled = true"):
        sync_group_offsets(mm2_config([a, b], ["A->B"]), "A", "B")


def test_a_consumer_protocol_group_is_never_rewound_by_group_sync_or_failover(kafka_clusters) -> None:
    """A KIP-848 group (group.protocol=consumer) on the target: while it has a member, group
    sync leaves it alone and failover refuses it; once it has read further there and left,
    neither moves it back, and failover says the group already consumes on the target."""
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], SYNC_ON)
    create_topics(a.bootstrap, ("orders", 1))
    produce_numbered(a.bootstrap, "orders", 1, 60)
    commit_at(a.bootstrap, "kip848", {("orders", 0): 10})
    replicate_once(config, "A", "B", "run-1")

    member = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    member.subscribe(["A.orders"])
    try:
        read = 0
        while read < 40:  # reads from the start (no offset yet), as far as offset 39
            message = member.poll(0.2)
            if message is not None and message.error() is None:
                read += 1
        member.commit(asynchronous=False)
        summary = sync_group_offsets(config, "A", "B")
        assert "active member" in summary["skipped_groups"]["kip848"], summary
        busy = failover(config, "A", "B", "kip848", dry_run=True)
        assert "active member" in busy.refused["kip848"]
    finally:
        member.close()
    further = committed(b.bootstrap, "kip848", [("A.orders", 0)])
    assert further[("A.orders", 0)] > exact(b.bootstrap, 0, 10)

    summary = sync_group_offsets(config, "A", "B")
    assert summary["not_rewound"] == 1 and "kip848" not in summary["groups_synced"]
    moved = failover(config, "A", "B", "kip848")
    assert "already read further on B" in moved.refused["kip848"] and moved.committed == []
    assert committed(b.bootstrap, "kip848", [("A.orders", 0)]) == further
