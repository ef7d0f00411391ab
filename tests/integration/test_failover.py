"""Failover and failback on real Kafka clusters: a group read part of a topic on A; after the flow copied
it and failover moved the group, the same group reads exactly the rest on B."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.control.checkpoints import emit_checkpoints
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.ops.failover import COMMITTED, REFUSED, FailoverError, failover

from .kafkatools import create_topics
from .mirror_setup import mm2_config, replicate_once
from .test_failover_helpers import (
    committed,
    consume,
    consume_rest,
    group_consumer,
    produce_numbered,
    target_offset_of,
)


def assert_exactly_once(before: list, after: list, expected: list[str]) -> None:
    seen = Counter([g.payload for g in before] + [g.payload for g in after])
    duplicates = sorted(p for p, n in seen.items() if n > 1)
    missing = sorted(set(expected) - set(seen))
    assert not duplicates, f"read twice: {duplicates[:10]}"
    assert not missing, f"never read: {missing[:10]}"
    assert set(seen) == set(expected)


def test_groups_continue_on_b_exactly_where_they_stopped_on_a(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], "mirrorflow.range.max.records = 40\n")
    create_topics(a.bootstrap, ("orders", 3))
    first = produce_numbered(a.bootstrap, "orders", 3, 300)
    caught_up = consume(a.bootstrap, "billing", ["orders"], 290)
    lagging = consume(a.bootstrap, "audit", ["orders"], 12)
    replicate_once(config, "A", "B", "run-1")
    more = produce_numbered(a.bootstrap, "orders", 3, 90, start=300)
    everything = consume(a.bootstrap, "done", ["orders"], 390)
    replicate_once(config, "A", "B", "run-2")

    result = failover(config, "A", "B", "billing|audit|done")

    assert result.mode == "live" and not result.refused
    assert result.committed == ["audit", "billing", "done"]
    assert {(r.group, r.topic) for r in result.rows} == {
        ("audit", "A.orders"),
        ("billing", "A.orders"),
        ("done", "A.orders"),
    }
    assert all(r.status == "exact" and r.action == COMMITTED for r in result.rows)
    ends = list_offsets(
        AdminClient({"bootstrap.servers": b.bootstrap}),
        [("A.orders", p) for p in range(3)],
        OffsetSpec.latest(),
    )
    # Each partition of the exactly-once copy ends with a transaction marker: the offsets left
    # would say 1 for a group that read everything. The lag shown is the records the group reads.
    assert all(ends[("A.orders", p)] > 0 for p in range(3))
    assert {r.lag for r in result.rows if r.group == "done"} == {0}
    for group, before in (("billing", caught_up), ("audit", lagging), ("done", everything)):
        after = consume_rest(b.bootstrap, group, ["A.orders"])
        assert_exactly_once(before, after, first + more)
        read = Counter(g.partition for g in after)
        lags = {r.partition: r.lag for r in result.rows if r.group == group}
        assert lags == {p: read[p] for p in lags}


def test_dry_run_changes_nothing_and_shows_the_same_table(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    create_topics(a.bootstrap, ("orders", 2))
    produce_numbered(a.bootstrap, "orders", 2, 50)
    consume(a.bootstrap, "g", ["orders"], 20)
    replicate_once(config, "A", "B", "run-1")

    dry = failover(config, "A", "B", "g", dry_run=True)
    assert dry.dry_run and not dry.committed
    assert committed(b.bootstrap, "g", [("A.orders", 0), ("A.orders", 1)]) == {}
    real = failover(config, "A", "B", "g")
    strip = [
        (r.group, r.topic, r.partition, r.source_offset, r.target_offset, r.lag, r.status) for r in dry.rows
    ]
    assert strip == [
        (r.group, r.topic, r.partition, r.source_offset, r.target_offset, r.lag, r.status) for r in real.rows
    ]
    assert {r.action for r in dry.rows} == {"would commit"} and {r.action for r in real.rows} == {COMMITTED}


def test_a_group_with_active_members_on_b_is_refused_and_left_alone(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    create_topics(a.bootstrap, ("orders", 1))
    payloads = produce_numbered(a.bootstrap, "orders", 1, 30)
    consume(a.bootstrap, "busy", ["orders"], 10)
    consume(a.bootstrap, "idle", ["orders"], 15)
    replicate_once(config, "A", "B", "run-1")
    # Offsets on B need not equal A's (a worker's cluster once held an abort marker at the start
    # of A.orders, ending a transaction an earlier test left open on the topic's former self).
    next_for_idle = target_offset_of(b.bootstrap, "A.orders", 0, payloads[15])
    member = group_consumer(b.bootstrap, "busy")
    member.subscribe(["A.orders"])
    try:
        while not member.assignment():
            member.poll(0.2)
        member.commit(offsets=[TopicPartition("A.orders", 0, 3)], asynchronous=False)
        result = failover(config, "A", "B", "busy|idle")
        assert "busy" in result.refused and "active member" in result.refused["busy"]
        assert "nothing was changed" in result.refused["busy"]
        assert result.committed == ["idle"]
        assert {r.group: r.action for r in result.rows} == {"busy": REFUSED, "idle": COMMITTED}
        assert committed(b.bootstrap, "idle", [("A.orders", 0)]) == {("A.orders", 0): next_for_idle}
    finally:
        member.close()
    assert committed(b.bootstrap, "busy", [("A.orders", 0)]) == {("A.orders", 0): 3}


def test_failover_with_a_down_uses_the_latest_checkpoints_on_b(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    create_topics(a.bootstrap, ("orders", 2))
    payloads = produce_numbered(a.bootstrap, "orders", 2, 80)
    before = consume(a.bootstrap, "g", ["orders"], 33)
    replicate_once(config, "A", "B", "run-1")
    emit_checkpoints(config, "A", "B")
    a.kafka.stop()

    result = failover(config, "A", "B", "g", source_timeout_s=2)

    assert result.mode == "checkpoints"
    assert any("did not answer" in w for w in result.warnings)
    assert result.committed == ["g"]
    assert {r.status for r in result.rows} == {"checkpoint"}
    after = consume_rest(b.bootstrap, "g", ["A.orders"])
    assert_exactly_once(before, after, payloads)


def test_failback_needs_the_reverse_flow_and_says_so(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    with pytest.raises(FailoverError, match=r"needs the flow B->A.*B->A.enabled = true"):
        failover(config, "B", "A", "g")
    with pytest.raises(FailoverError, match="not a valid regular expression"):
        failover(config, "A", "B", "g(")


def test_failback_returns_groups_to_a_exactly(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B", "B->A"])
    create_topics(a.bootstrap, ("orders", 2))
    from_a = produce_numbered(a.bootstrap, "orders", 2, 60)
    on_a = consume(a.bootstrap, "g", ["orders"], 25)
    replicate_once(config, "A", "B", "run-1")
    failover(config, "A", "B", "g")

    # During the outage producers write to B's own `orders`; the group reads both topics there.
    create_topics(b.bootstrap, ("orders", 2))
    from_b = produce_numbered(b.bootstrap, "orders", 2, 40, start=1000)
    on_b = consume(b.bootstrap, "g", ["A.orders", "orders"], 35 + 22)
    replicate_once(config, "B", "A", "run-back")

    result = failover(config, "B", "A", "g")

    assert not result.refused and result.committed == ["g"]
    assert {r.topic for r in result.rows} == {"orders", "B.orders"}
    assert all(r.status == "exact" for r in result.rows)
    after = consume_rest(a.bootstrap, "g", ["orders", "B.orders"])
    assert_exactly_once(on_a + on_b, after, from_a + from_b)
