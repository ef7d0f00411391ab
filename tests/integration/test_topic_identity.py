"""Topics deleted and created again, on either side, never leave records uncopied or a hole.

Progress records the topic incarnations it was copied between (Kafka's topic IDs). A recreated
source topic is copied from its earliest offset even when it already holds more records than
the old progress (offsets alone cannot tell); a deleted or recreated remote topic is rebuilt
from the source's earliest offset instead of continued after the old progress. Each is said in
the plan, the run's summary and on the status page's data.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from localkafka.compaction import compact
from mirrorflow.clients import FlowClients
from mirrorflow.control.checkpoints import emit_checkpoints, read_checkpoints, write_checkpoints
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.kafka import ClusterWatch, KafkaCallError, admin_client, await_topics
from mirrorflow.mm2.formats import Checkpoint, OffsetSync
from mirrorflow.ops.failover import failover
from mirrorflow.replicate import planner
from mirrorflow.replicate.copy.calls import producer_config
from mirrorflow.replicate.progress import read_progress_entries

from .kafkatools import create_topics, produce, read_all
from .test_copy import make_job
from .test_failover_helpers import commit_at
from .test_replicate_scenarios import mirror_config, run_once

ROLL_SYNC = OffsetSync("roll", 0, 0, 0)  # the record that closes the segment to compact


def recreate(bootstrap: str, topic: str, partitions: int = 1, *, create: bool = True) -> None:
    """Delete `topic` and (unless `create` is false) create it again, empty, with a new ID."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} was not deleted"
        time.sleep(0.2)
    if not create:
        return
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(30)
            break
        except KafkaException as exc:
            # Kafka may still be removing the old one.
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    await_topics(admin, {topic: partitions})


def values(bootstrap: str, topic: str) -> list[bytes]:
    return [r.value for r in read_all(bootstrap, topic)]


def batch(prefix: str, count: int) -> list[dict]:
    return [{"value": f"{prefix}-{i}".encode()} for i in range(count)]


def test_a_recreated_source_topic_with_more_records_than_the_old_progress_is_copied_whole(
    shared_clusters, unique
) -> None:
    a, b, _ = shared_clusters
    topic = unique("reborn")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("old", 5))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    assert run_once(config, "A", "B").records == 5

    recreate(a.bootstrap, topic)
    produce(a.bootstrap, topic, batch("new", 8))  # past the old progress (4): offsets cannot tell
    run = run_once(config, "A", "B", report=True)

    assert run.records == 8
    assert values(b.bootstrap, f"A.{topic}") == [
        *(v["value"] for v in batch("old", 5)),
        *(v["value"] for v in batch("new", 8)),
    ]
    why = run.planned["restarted_partitions"][f"{topic}-0"]
    assert "source topic was deleted and created again" in why
    assert run.summary["restarted"] == {f"{topic}-0": why} and run.summary["restarted_count"] == 1
    stored = read_progress_entries({"bootstrap.servers": b.bootstrap}, "mm2-offsets.A.internal", "A")
    assert stored[(topic, 0)].offset == 7 and stored[(topic, 0)].incarnation == run.plan.spans[0].incarnation

    again = run_once(config, "A", "B", report=True)
    assert again.records == 0 and again.planned["restarted_partitions"] == {}

    # Offset u of the new topic translates to the new topic's record (offsets 0-4 hold the old
    # records, 5 the old copy's commit marker); 8, the end, to the end of what was copied.
    flow = config.flow("A", "B")
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert [translator.translate(topic, 0, u).downstream_offset for u in (0, 3, 8)] == [6, 9, 14]


@pytest.mark.local_kafka  # compacts the offset-syncs topic: clusters of its own
def test_translation_never_takes_an_old_incarnations_record_once_syncs_are_compacted(kafka_clusters) -> None:
    """With only the newest sync left (the offset-syncs topic is compacted by partition), a
    search of the target could land on a record of the old source topic that carries the same
    source offset; the floor that progress records (where the new topic's copy began) keeps
    translation within the new topic's records."""
    a, b = kafka_clusters(2)
    topic = "reused"
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("old", 20))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    run_once(config, "A", "B")
    recreate(a.bootstrap, topic)
    produce(a.bootstrap, topic, batch("new", 8))
    run_once(config, "A", "B")
    compact(a.kafka, "mm2-offset-syncs.B.internal", {0: (ROLL_SYNC.key_bytes(), ROLL_SYNC.value_bytes())})

    where = {r.value: r.offset for r in read_all(b.bootstrap, f"A.{topic}")}
    flow = config.flow("A", "B")
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert len(translator.syncs.run(topic, 0)) == 1, "only the newest sync is left"
        for u in (0, 3, 6):
            assert translator.translate(topic, 0, u).downstream_offset == where[f"new-{u}".encode()]


def test_a_source_topic_recreated_since_the_last_copy_is_not_translated(shared_clusters, unique) -> None:
    """Group offsets of the new topic cannot be placed on the old topic's copy: the translator
    says why instead of answering with the old incarnation's records."""
    a, b, _ = shared_clusters
    topic = unique("untranslated")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("old", 5))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    run_once(config, "A", "B")
    recreate(a.bootstrap, topic)
    produce(a.bootstrap, topic, batch("new", 8))

    flow = config.flow("A", "B")
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert translator.translate(topic, 0, 3) is None
        assert "was deleted and created again" in translator.reasons[(topic, 0)]


def test_a_recreated_empty_source_topic_starts_over_once(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("emptied")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("old", 3))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    run_once(config, "A", "B")

    recreate(a.bootstrap, topic)
    emptied = run_once(config, "A", "B")
    assert emptied.records == 0 and f"{topic}-0" in emptied.planned["restarted_partitions"]
    assert run_once(config, "A", "B").planned["restarted_partitions"] == {}, "said once, not every run"
    produce(a.bootstrap, topic, batch("new", 2))
    assert run_once(config, "A", "B").records == 2
    assert values(b.bootstrap, f"A.{topic}") == [b"old-0", b"old-1", b"old-2", b"new-0", b"new-1"]


@pytest.mark.parametrize("how", ["deleted", "recreated"])
def test_a_remote_topic_deleted_or_recreated_is_rebuilt_from_the_source(shared_clusters, unique, how) -> None:
    """Deleted: the plan creates it again; recreated: someone else did (a new topic ID). Either
    way it is empty, and continuing after the old progress would leave offsets 0-4 missing."""
    a, b, _ = shared_clusters
    topic = unique(f"remote-{how}")
    remote = f"A.{topic}"
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("r", 5))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    run_once(config, "A", "B")
    assert values(b.bootstrap, remote) == [v["value"] for v in batch("r", 5)]

    recreate(b.bootstrap, remote, create=how == "recreated")
    produce(a.bootstrap, topic, [{"value": b"r-5"}])
    run = run_once(config, "A", "B", report=True)

    assert values(b.bootstrap, remote) == [v["value"] for v in batch("r", 6)]
    why = run.summary["restarted"][f"{topic}-0"]
    expected = (
        "was missing and has been created again"
        if how == "deleted"
        else "deleted and created again (new topic ID)"
    )
    assert expected in why and "rebuilding it from the source's earliest offset" in why


def test_a_remote_topic_another_run_copied_into_after_this_plan_created_it_is_not_rebuilt(
    shared_clusters, unique, monkeypatch
) -> None:
    """Two runs of a flow plan at once (seen in CI): this plan creates the remote topic, the
    other finds it created and copies into it, and only then does this plan read progress. That
    progress names the topic this plan created; starting over would copy every record twice."""
    a, b, _ = shared_clusters
    topic = unique("raced")
    remote = f"A.{topic}"
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("r", 5))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})

    read_progress = planner._settled_read  # the plan's read of progress
    raced: list[int] = []

    def other_run_copies_first(*args, **kwargs):
        if not raced:
            raced.append(-1)  # the other run's own plan reads progress as usual
            raced[0] = run_once(config, "A", "B").records
        return read_progress(*args, **kwargs)

    monkeypatch.setattr(planner, "_settled_read", other_run_copies_first)
    run = run_once(config, "A", "B", report=True)

    assert raced == [5]
    assert run.planned["restarted_partitions"] == {}
    assert run.records == 0
    assert values(b.bootstrap, remote) == [v["value"] for v in batch("r", 5)]


def test_syncs_and_checkpoints_past_a_rebuilt_remote_topics_end_are_never_used(
    shared_clusters, unique
) -> None:
    """The remote topic was deleted and created again (empty) after a copy and a checkpoint pass,
    before the next replicate run: the old syncs and checkpoints point past its end, at records
    that are gone. Translation does not answer with them, and a failover from checkpoints does
    not move the group there; both say why."""
    a, b, _ = shared_clusters
    topic = unique("rebuilt")
    remote = f"A.{topic}"
    group = unique("g")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("r", 10))
    config = mirror_config(
        [a, b], ["A->B"], {"topics": topic, "groups": group, "emit.checkpoints.interval.seconds": "1"}
    )
    run_once(config, "A", "B")
    commit_at(a.bootstrap, group, {(topic, 0): 6})
    assert emit_checkpoints(config, "A", "B")["emitted"] == 1

    recreate(b.bootstrap, remote)
    flow = config.flow("A", "B")
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert translator.translate(topic, 0, 6) is None, "not the old sync's downstream offset 6"
        assert f"{remote} on B was deleted and created again" in translator.reasons[(topic, 0)]
    result = failover(config, "A", "B", group, dry_run=True, from_checkpoints=True)
    (row,) = result.rows
    assert row.action == "not moved" and row.target_offset is None
    assert f"past the end of {remote}-0 on B (0)" in row.note


def test_a_checkpoint_read_returns_everything_or_fails_never_a_part(shared_clusters, unique) -> None:
    """MirrorClient stops reading checkpoints at its deadline and returns what it has; a failover
    from that part would move groups to older checkpoints than the topic holds. The read here
    returns every checkpoint or raises; even with a deadline far too short for the topic."""
    _, b, _ = shared_clusters
    topic = unique("checkpoints")
    create_topics(b.bootstrap, (topic, 1, {"cleanup.policy": "compact"}))
    written = [Checkpoint(f"g{i}", "A.orders", 0, i, i, "") for i in range(5000)]
    write_checkpoints({"bootstrap.servers": b.bootstrap}, topic, written)
    for timeout_s in (0.0, 0.05, 30.0):
        try:
            found = read_checkpoints({"bootstrap.servers": b.bootstrap}, topic, timeout_s=timeout_s)
        except KafkaCallError:
            continue  # said so: never a silent part
        assert len(found) == len(written), f"timeout {timeout_s}: {len(found)} of {len(written)}"


def test_a_late_writer_never_brings_a_deleted_topic_back_with_the_brokers_defaults(
    shared_clusters, unique
) -> None:
    """Brokers auto-create topics by default. A producer of the flow that asks for a deleted
    topic's metadata (a zombie copy writing progress, a late heartbeat) must not recreate it:
    the progress topic would come back with one partition and cleanup.policy=delete, and the
    next run would take it as its own. Found by the suite: a producer left behind by one test
    brought back, after the next test emptied the cluster, the progress topic a later test
    checked. The control producer (librdkafka's default) shows the broker does auto-create."""
    a, b = shared_clusters[:2]
    flow = mirror_config([a, b], ["A->B"], {"topics": unique("unused")}).flow("A", "B")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    ours, control = unique("never-created"), unique("auto-created")
    for topic, config in (
        (ours, flow.target_producer_config()),
        (control, {"bootstrap.servers": b.bootstrap}),
    ):
        producer = Producer({**config, "message.timeout.ms": 3000})
        producer.produce(topic, b"late")
        producer.flush(5)
    topics = admin.list_topics(timeout=10).topics
    assert control in topics, "the broker did not auto-create: the test proves nothing"
    assert ours not in topics


def test_the_copy_engines_clients_never_bring_a_topic_back_whatever_config_they_were_given(
    shared_clusters, unique
) -> None:
    """A CopyJob carries whatever client settings its maker gave (the suite builds some from a
    bare bootstrap address): its producers and mirrorflow's admin clients still never have a
    topic auto-created. The suite's progress topic came back with one partition after another
    test emptied the cluster, and the next test's run took it as its own (twice in CI)."""
    a, b = shared_clusters[:2]
    bare = {"bootstrap.servers": b.bootstrap}
    job = make_job(a, b, target_producer=dict(bare))
    watch = ClusterWatch("B", b.bootstrap, 15)
    by_producer, by_admin = unique("never-produced"), unique("never-described")
    producer = Producer({**producer_config(job, watch, None), "message.timeout.ms": 3000})
    producer.produce(by_producer, b"late")
    producer.flush(5)
    admin_client(bare).list_topics(by_admin, timeout=10)
    topics = AdminClient(bare).list_topics(timeout=10).topics
    assert by_producer not in topics and by_admin not in topics
