"""The data plane's scenarios end to end on real Kafka clusters: plan_run -> run_locally -> store_report
(-> report_run), exactly what a DAG run or `mirrorflow replicate` does, with real clients.

Tests share the session's clusters; each one works on topics with a unique name and a flow
whose topic filter selects only those, so nothing of another test is ever copied.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    OffsetSpec,
)

from mirrorflow.clients import FlowClients
from mirrorflow.config import MirrorConfig, load_config
from mirrorflow.policy import BaseReplicationPolicy, checkpoint_topic, read_provenance, should_replicate_topic
from mirrorflow.replicate import run_reading, runner, service
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.progress import read_progress

from .kafkatools import create_topics, produce, read_all

# test clusters have one broker each; tasks.max lets a run copy its partitions side by side.
TEST_SETTINGS = {
    "tasks.max": "4",
    "replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset.storage.replication.factor": "1",
}


def mirror_config(clusters: Sequence[Any], flows: Sequence[str], settings: Mapping[str, str]) -> MirrorConfig:
    """An mm2.properties for test clusters (their aliases) with `flows` enabled."""
    lines = [f"clusters = {', '.join(c.alias for c in clusters)}"]
    lines += [f"{c.alias}.bootstrap.servers = {c.bootstrap}" for c in clusters]
    lines += [f"{flow}.enabled = true" for flow in flows]
    lines += [f"{key} = {value}" for key, value in {**TEST_SETTINGS, **settings}.items()]
    return load_config("\n".join(lines) + "\n")


@dataclass
class Run:
    planned: dict[str, Any]
    plan: Plan
    results: list[UnitResult]
    summary: dict[str, Any] | None

    @property
    def records(self) -> int:
        return sum(r.records for r in self.results)

    def spans(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {(s.topic, s.partition): (s.start, s.end) for s in self.plan.spans}


def run_once(
    config: MirrorConfig,
    source: str,
    target: str,
    *,
    mode: str = "replicate",
    until: str | int | None = None,
    topics: str | None = None,
    report: bool = False,
    between_plan_and_copy: Callable[[], None] | None = None,
) -> Run:
    """One run as the DAG does it; `report` adds the report step (lag left, stored summary)."""
    run_id = f"test__{uuid.uuid4().hex[:12]}"
    planned = service.plan_run(config, source, target, run_id=run_id, mode=mode, until=until, topics=topics)
    flow = config.flow(source, target)
    clients = FlowClients.resolve(flow)
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])
    if between_plan_and_copy is not None:
        between_plan_and_copy()
    started = int(time.time() * 1000)
    results = runner.run_locally(runner.copy_job_for(flow, clients, plan), plan)
    runner.store_report(clients, plan, results, started)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    summary = None
    if report:
        summary = service.report_run(
            config,
            source,
            target,
            run_id=run_id,
            plan_offset=planned["plan_offset"],
            topic_errors=planned["topic_errors"],
        )
    return Run(planned, plan, results, summary)


def values(cluster: Any, topic: str, partitions: int) -> list[bytes]:
    return [r.value for p in range(partitions) for r in read_all(cluster.bootstrap, topic, p)]


def topic_names(cluster: Any) -> set[str]:
    return set(AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).topics)


def same_content(src: Any, topic: str, dst: Any, remote: str, partitions: int) -> bool:
    return all(
        [r.content() for r in read_all(dst.bootstrap, remote, p)]
        == [r.content() for r in read_all(src.bootstrap, topic, p)]
        for p in range(partitions)
    )


def records(prefix: str, count: int, partitions: int) -> list[dict]:
    return [{"value": f"{prefix}-{i}".encode(), "partition": i % partitions} for i in range(count)]


# -- naming -----------------------------------------------------------------------------------


class SuffixPolicy(BaseReplicationPolicy):
    """A user's own policy (loaded by its dotted path): `orders` from A is `orders__from__A`."""

    MARK = "__from__"

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{topic}{self.MARK}{source_alias}"

    def topic_source(self, topic: str) -> str | None:
        head, mark, alias = topic.rpartition(self.MARK)
        return alias if mark and head else None

    def upstream_topic(self, topic: str) -> str | None:
        head, mark, _ = topic.rpartition(self.MARK)
        return head if mark and head else None


POLICIES = {
    # name: (replication.policy.class, remote name of t, topic_source of the remote, cycle detected)
    "default": ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", "A.{t}", "A", True),
    "identity": ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", "{t}", "A", False),
    "legacy": ("org.apache.kafka.connect.mirror.LegacyReplicationPolicy", "{t}", None, False),
    "custom": (f"{__name__}.SuffixPolicy", "{t}__from__A", "A", True),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_policies_name_remote_topics_and_agree_on_checkpoints_and_cycles(
    shared_clusters, unique, name
) -> None:
    a, b, _ = shared_clusters
    policy_class, remote_pattern, source_of_remote, cycle_detected = POLICIES[name]
    topic = unique("naming")
    expected_remote = remote_pattern.format(t=topic)
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, records("n", 20, 2))
    config = mirror_config(
        [a, b],
        ["A->B", "B->A"],
        {"replication.policy.class": policy_class, "topics": f".*{topic}.*"},
    )

    run = run_once(config, "A", "B")

    assert run.planned["created_topics"] == [expected_remote]
    assert {s.remote_topic for s in run.plan.spans} == {expected_remote}
    assert same_content(a, topic, b, expected_remote, 2)
    forward, backward = config.flow("A", "B"), config.flow("B", "A")
    # Checkpoints for a group's offsets on `topic` name the topic that actually holds the data.
    assert checkpoint_topic(forward, topic) == expected_remote
    assert forward.policy.is_checkpoints_topic(forward.checkpoints_topic)
    assert not forward.policy.is_checkpoints_topic(expected_remote)
    # Remote detection on B: MirrorClient.remoteTopics("A") and the reverse flow's cycle check.
    assert forward.policy.topic_source(expected_remote) == source_of_remote
    remote_on_b = {
        t
        for t in topic_names(b)
        if not forward.policy.is_internal_topic(t) and forward.policy.topic_source(t) == "A"
    }
    assert (expected_remote in remote_on_b) is (source_of_remote == "A")
    assert should_replicate_topic(backward, expected_remote) is not cycle_detected
    # A group on B reading the remote topic is checkpointed back to the topic it came from.
    assert checkpoint_topic(backward, expected_remote) == topic


# -- active/active ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy_class",
    [
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    ],
    ids=["default-prefix-and-cycles", "identity-provenance"],
)
def test_active_active_never_loops(shared_clusters, unique, policy_class) -> None:
    a, b, _ = shared_clusters
    topic = unique("aa")
    for cluster in (a, b):
        create_topics(cluster.bootstrap, (topic, 2))
    config = mirror_config(
        [a, b], ["A->B", "B->A"], {"replication.policy.class": policy_class, "topics": f".*{topic}.*"}
    )
    identity = "Identity" in policy_class
    produced: list[bytes] = []
    skipped = 0
    for round_ in range(2):
        for cluster in (a, b):
            batch = records(f"{cluster.alias}{round_}", 6, 2)
            produce(cluster.bootstrap, topic, batch)
            produced += [r["value"] for r in batch]
        for source, target in (("A", "B"), ("B", "A")):
            run = run_once(config, source, target)
            skipped += sum(r.skipped_loops for r in run.results)

    for cluster, other in ((a, "B"), (b, "A")):
        names = [topic] if identity else [topic, f"{other}.{topic}"]
        held = Counter(v for name in names for v in values(cluster, name, 2))
        assert held == Counter(produced), f"cluster {cluster.alias} must hold every record exactly once"
        assert {t for t in topic_names(cluster) if topic in t} == set(names), "no A.B.x or B.A.x"
    if identity:
        # Only provenance headers stopped the loop: records that came from B were seen on A and skipped.
        assert skipped > 0
    else:
        assert skipped == 0, "with prefixed names the cycle check alone keeps remote topics home"


# -- aggregation -------------------------------------------------------------------------------


def test_aggregation_of_two_sources_into_one_identity_topic(shared_clusters, unique) -> None:
    a, b, c = shared_clusters
    topic = unique("agg")
    for cluster in (a, b, c):
        create_topics(cluster.bootstrap, (topic, 2))
    config = mirror_config(
        [a, b, c],
        ["A->C", "B->C"],
        {
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "topics": topic,
        },
    )
    produce(a.bootstrap, topic, records("from-a", 10, 2))
    produce(b.bootstrap, topic, records("from-b", 14, 2))
    assert run_once(config, "A", "C").records == 10
    assert run_once(config, "B", "C").records == 14
    produce(b.bootstrap, topic, records("from-b-later", 6, 2))
    again_b = run_once(config, "B", "C", report=True)

    assert again_b.records == 6 and again_b.summary["lag_left"] == {topic: 0}
    on_c = values(c, topic, 2)
    assert len(on_c) == 30 and Counter(on_c) == Counter(values(a, topic, 2) + values(b, topic, 2))
    # Each source has its own progress on C; B's runs never touch A's.
    for alias, last in (("A", 4), ("B", 9)):
        stored = read_progress({"bootstrap.servers": c.bootstrap}, f"mm2-offsets.{alias}.internal", alias)
        assert (stored[(topic, 0)], stored[(topic, 1)]) == (last, last), alias
    origins = Counter(
        read_provenance(r.headers).origin for p in (0, 1) for r in read_all(c.bootstrap, topic, p)
    )
    assert origins == {"A": 10, "B": 20}


# -- topics and partitions appearing between runs --------------------------------------------


def test_new_topics_and_partitions_are_copied_on_the_next_run(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    first, second = unique("grow"), unique("grow")
    create_topics(a.bootstrap, (first, 1))
    produce(a.bootstrap, first, records("one", 5, 1))
    config = mirror_config([a, b], ["A->B"], {"topics": f"{first}|{second}"})
    assert run_once(config, "A", "B").records == 5

    create_topics(a.bootstrap, (second, 2))
    produce(a.bootstrap, second, records("two", 8, 2))
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    admin.create_partitions([NewPartitions(first, 3)])[first].result(10)
    produce(a.bootstrap, first, records("grown", 9, 3))
    run = run_once(config, "A", "B")

    assert run.planned["created_topics"] == [f"A.{second}"]
    assert run.planned["grown_topics"] == {f"A.{first}": [1, 3]}
    assert run.records == 17
    assert same_content(a, first, b, f"A.{first}", 3)
    assert same_content(a, second, b, f"A.{second}", 2)


# -- where a run starts -----------------------------------------------------------------------


class RetentionTopic:
    """A one-partition source topic whose old records retention can cut exactly, on demand.

    Test clusters enforce retention every 500 ms (log.retention.check.interval.ms). Each record
    is its own batch (one flush per record) and segments of 100 bytes (Kafka's
    internal.segment.bytes, below segment.bytes' 1 MiB floor) hold one such batch. The remote
    topic exists already: created by the plan it would get those tiny segments too (topic
    configs are copied), and copied batches (provenance header added) would not fit."""

    def __init__(self, a: Any, b: Any, topic: str) -> None:
        self.a, self.topic = a, topic
        create_topics(a.bootstrap, (topic, 1, {"internal.segment.bytes": "100", "retention.ms": "-1"}))
        create_topics(b.bootstrap, (f"A.{topic}", 1))
        self.old = int(time.time() * 1000) - 24 * 3600 * 1000
        self.producer = Producer({"bootstrap.servers": a.bootstrap, "acks": "all"})
        self.admin = AdminClient({"bootstrap.servers": a.bootstrap})

    def write(self, offsets: range, *, old_below: int) -> None:
        """Records numbered like their offsets; those below `old_below` are a day old."""
        for i in offsets:
            self.producer.produce(
                self.topic, value=f"{i}".encode(), timestamp=self.old + i if i < old_below else 0
            )
            assert self.producer.flush(10) == 0

    def expire_old_records(self, until: int) -> None:
        """Retention of an hour: wait until everything before `until` is gone."""
        resource = ConfigResource(
            "topic",
            self.topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        self.admin.incremental_alter_configs([resource])[resource].result(10)
        deadline = time.monotonic() + 30
        partition = TopicPartition(self.topic, 0)
        earliest = OffsetSpec.earliest()
        while self.admin.list_offsets({partition: earliest})[partition].result(10).offset < until:
            assert time.monotonic() < deadline, "retention did not remove the old segments"
            time.sleep(0.05)


@pytest.mark.local_kafka  # needs the test clusters' quick retention checks
def test_offsets_deleted_on_the_source_before_the_copy_are_reported_and_skipped(
    shared_clusters, unique
) -> None:
    a, b, _ = shared_clusters
    source = RetentionTopic(a, b, unique("retention"))
    topic = source.topic
    source.write(range(10), old_below=30)
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    assert run_once(config, "A", "B").records == 10

    source.write(range(10, 50), old_below=30)
    source.expire_old_records(until=30)

    run = run_once(config, "A", "B", report=True)
    assert run.planned["topics"][topic]["lost"] == 20
    assert run.spans() == {(topic, 0): (30, 50)}
    copied = [read_provenance(r.headers).source_offset for r in read_all(b.bootstrap, f"A.{topic}")]
    assert copied == list(range(10)) + list(range(30, 50))
    assert run.summary["lost_to_retention"] == 20
    assert run.summary["lost"] == [{"topic": topic, "partition": 0, "offsets": [[10, 30]]}]


@pytest.mark.local_kafka  # needs the test clusters' quick retention checks
@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_retention_passing_the_planned_start_before_the_copy_is_counted_and_never_skips_more(
    shared_clusters, unique, reset
) -> None:
    """Retention deletes offsets 10-29 after the plan fixed the span at 10-49: the copy must not
    reset by itself (to the end with `latest`, silently with `earliest`), it copies 30-49 and
    reports 10-29 as lost to retention."""
    a, b, _ = shared_clusters
    source = RetentionTopic(a, b, unique("race"))
    topic = source.topic
    config = mirror_config([a, b], ["A->B"], {"topics": topic, "A.consumer.auto.offset.reset": reset})
    source.write(range(10), old_below=30)
    first = run_once(config, "A", "B")
    assert first.records == (10 if reset == "earliest" else 0)

    source.write(range(10, 50), old_below=30)
    run = run_once(config, "A", "B", report=True, between_plan_and_copy=lambda: source.expire_old_records(30))

    assert run.spans() == {(topic, 0): (10, 50)}, "the plan saw offsets 10-49"
    copied = [read_provenance(r.headers).source_offset for r in read_all(b.bootstrap, f"A.{topic}")]
    assert copied == (list(range(10)) if reset == "earliest" else []) + list(range(30, 50))
    (unit,) = run.results
    assert unit.lost == [(10, 30)] and unit.progress == 49
    assert run.summary["lost_to_retention"] == 20
    assert run.summary["topics"][topic]["lost_to_retention"] == 20


def test_auto_offset_reset_latest_marks_progress_and_copies_only_new_records(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("latest")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, records("old", 12, 2))
    config = mirror_config([a, b], ["A->B"], {"topics": topic, "A.consumer.auto.offset.reset": "latest"})

    first = run_once(config, "A", "B")
    assert first.records == 0
    assert first.spans() == {(topic, 0): (6, 6), (topic, 1): (6, 6)}
    progress_topic = config.flow("A", "B").offset_storage_topic
    stored = read_progress({"bootstrap.servers": b.bootstrap}, progress_topic, "A", only=list(first.spans()))
    assert {k: stored.get(k) for k in first.spans()} == {(topic, 0): 5, (topic, 1): 5}, "marked at the end"

    produce(a.bootstrap, topic, records("new", 4, 2))
    second = run_once(config, "A", "B")
    assert second.records == 4
    assert sorted(values(b, f"A.{topic}", 2)) == sorted(f"new-{i}".encode() for i in range(4))


# -- migrations --------------------------------------------------------------------------------


def test_migration_stops_at_the_end_fixed_when_it_was_planned(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("migrate")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, records("before", 10, 2))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})

    def produce_more() -> None:
        produce(a.bootstrap, topic, records("after", 6, 2))

    run = run_once(config, "A", "B", mode="migrate", report=True, between_plan_and_copy=produce_more)
    assert run.spans() == {(topic, 0): (0, 5), (topic, 1): (0, 5)}
    assert sorted(values(b, f"A.{topic}", 2)) == sorted(f"before-{i}".encode() for i in range(10))
    assert run.summary["mode"] == "migrate" and run.summary["topics"][topic]["records"] == 10
    assert run.summary["lag_left"] == {topic: 6}, "what came after the plan is left for the next run"

    # Progress is the flow's: the next replicate run continues right after the migration.
    assert run_once(config, "A", "B").records == 6
    assert same_content(a, topic, b, f"A.{topic}", 2)


def test_migration_until_a_timestamp_stops_at_that_times_offsets(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    chosen, other = unique("until"), unique("until-other")
    create_topics(a.bootstrap, (chosen, 2), (other, 1))
    cutoff = int(time.time() * 1000) - 60_000
    produce(
        a.bootstrap,
        chosen,
        [
            {"value": f"{i}".encode(), "partition": i % 2, "timestamp": cutoff - 100 + i}
            for i in range(150)  # 100 before the cutoff, 50 at or after it
        ],
    )
    produce(a.bootstrap, other, records("other", 5, 1))
    config = mirror_config([a, b], ["A->B"], {"topics": f"{chosen}|{other}"})

    run = run_once(config, "A", "B", mode="migrate", until=cutoff, topics=chosen)
    assert set(run.planned["topics"]) == {chosen}, "--topics narrows the flow's topics"
    copied = [r for p in (0, 1) for r in read_all(b.bootstrap, f"A.{chosen}", p)]
    assert sorted(int(r.value) for r in copied) == list(range(100))
    assert all(r.timestamp < cutoff for r in copied)
    assert run.records == 100 and run.plan.mode == "migrate"
    assert f"A.{other}" not in topic_names(b)
