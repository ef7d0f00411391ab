"""Offset-syncs belong to one incarnation of the source and remote topics (their Kafka topic IDs):
translation uses only those of the topics as they are now, and within one incarnation a sync
that arrives late is a late sync, not a rewind (control/translation/sync_index.py,
incarnations.py)."""

from __future__ import annotations

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.control.checkpoints import emit_checkpoints
from mirrorflow.control.translation.group_pass import relevant_group_offsets, translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.control.translation.rule import Status, Translation
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.ops.failover import failover
from mirrorflow.replicate.offset_syncs import SyncPoint, run_of
from mirrorflow.replicate.progress import read_progress_entries, split_incarnation

from .kafkatools import create_topics, produce, read_all
from .mirror_setup import mm2_config, replicate_once
from .test_failover_helpers import commit_at, committed, produce_numbered
from .test_replicate_scenarios import mirror_config, run_once
from .test_topic_identity import batch, recreate
from .test_translation_batched import assert_first_copies_at_or_after

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
PARTITIONS = 8
SYNCS = "mm2-offset-syncs.B.internal"


def test_a_remote_topic_recreated_and_written_locally_is_not_translated_until_copied_again(
    shared_clusters, unique
) -> None:
    """With identity names, applications on B write to the topic the flow copies into. Recreated
    (a new topic ID) and written locally past every old offset-sync, it holds local records at
    the offsets the old syncs name: a translation by them would place a failed-over group among
    those, skipping what it had not read from A. It is not translated, no checkpoint is written
    for it and failover leaves the group alone, all saying why, until a replicate run has copied
    into the new topic; then translation is exact again."""
    a, b, _ = shared_clusters
    topic, group = unique("identity"), unique("g")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("r", 10))
    config = mirror_config(
        [a, b],
        ["A->B"],
        {
            "topics": topic,
            "groups": group,
            "replication.policy.class": IDENTITY,
            "emit.checkpoints.interval.seconds": "1",
        },
    )
    run_once(config, "A", "B")
    commit_at(a.bootstrap, group, {(topic, 0): 6})

    recreate(b.bootstrap, topic)
    produce(b.bootstrap, topic, batch("local", 20))
    flow = config.flow("A", "B")
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert translator.translate(topic, 0, 6) is None, "the old syncs name offset 6: a local record now"
        why = translator.reasons[(topic, 0)]
    assert f"{topic} on B was deleted and created again (a new topic ID)" in why
    summary = emit_checkpoints(config, "A", "B")
    assert summary["emitted"] == 0 and summary["untranslated"] == {f"{topic}-0": why}
    (row,) = failover(config, "A", "B", group).rows
    assert (row.action, row.target_offset, row.note) == ("not moved", None, why)
    assert committed(b.bootstrap, group, [(topic, 0)]) == {}

    rebuilt = run_once(config, "A", "B", report=True)
    assert f"{topic}-0" in rebuilt.summary["restarted"]
    where = {r.value: r.offset for r in read_all(b.bootstrap, topic)}
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert translator.translate(topic, 0, 6) == Translation(6, where[b"r-6"], Status.EXACT)
        assert translator.translate(topic, 0, 10) == Translation(10, where[b"r-9"] + 1, Status.EXACT)


def synced(bootstrap: str) -> list[tuple[OffsetSync, int | None]]:
    """The flow's offset-syncs as written so far, with the run each states."""
    return [(OffsetSync.decode(r.key, r.value), run_of(r.headers)) for r in read_all(bootstrap, SYNCS)]


def write_syncs(bootstrap: str, syncs: list[tuple[OffsetSync, int | None]], incarnations: dict) -> None:
    """Write `syncs` in this order, each naming its partition's incarnation, as the copy does."""
    produce(
        bootstrap,
        SYNCS,
        [
            {
                "key": sync.key_bytes(),
                "value": sync.value_bytes(),
                "headers": SyncPoint(sync.upstream_offset, sync.downstream_offset, run).headers(
                    incarnations[sync.partition]
                ),
            }
            for sync, run in syncs
        ],
        acks="all",
    )


@pytest.mark.local_kafka  # rewrites the flow's offset-syncs topic: clusters of its own
def test_a_zombies_late_offset_syncs_still_translate_every_group_with_no_read(kafka_clusters, unique) -> None:
    """A zombie writer's source-side syncs (written after its commit, by a producer outside its
    transaction) land after those of the writer that fenced it and copied on. They are older on
    both sides, which within one incarnation only a late arrival can be: merged in order, every
    group is translated by the runs the syncs state, with no read of the target. Read as a rewind
    (as MM2's format alone must be), the newer writer's syncs were dropped and groups in its
    range, or at the end, cost reads of the target."""
    a, b = kafka_clusters(2)
    # A name of its own: Kafka 4.4 brought back the configs of a deleted "A.ledger" (compacted, from
    # another test on the worker's clusters) after the target restarted, and the remote topic
    # created again under that name was compacted: every record without a key was refused.
    topic, group = unique("ledger"), "g"
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\nmirrorflow.range.max.records = 7\n")
    create_topics(a.bootstrap, (topic, PARTITIONS))
    produce_numbered(a.bootstrap, topic, PARTITIONS, PARTITIONS * 30)
    replicate_once(config, "A", "B", "zombie")
    zombie = synced(a.bootstrap)
    produce_numbered(a.bootstrap, topic, PARTITIONS, PARTITIONS * 30, start=PARTITIONS * 30)
    replicate_once(config, "A", "B", "newer")
    newer = synced(a.bootstrap)[len(zombie) :]
    stored = read_progress_entries({"bootstrap.servers": b.bootstrap}, "mm2-offsets.A.internal", "A")
    incarnations = {
        p: ",".join(split_incarnation(stored[(topic, p)].incarnation)[:2]) for p in range(PARTITIONS)
    }
    assert all(name.count(",") == 1 and len(name) > 1 for name in incarnations.values())

    recreate(a.bootstrap, SYNCS)
    write_syncs(a.bootstrap, [*newer, *zombie], incarnations)
    # In the zombie's range, at the boundary, in the newer writer's range, and past everything.
    positions = (5, 17, 29, 30, 44, 59, 60)
    commit_at(a.bootstrap, group, {(topic, p): positions[p % len(positions)] for p in range(PARTITIONS)})
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    groups = relevant_group_offsets(flow, clients, wanted=lambda g: g == group, any_topic=True)

    with Translator(flow, clients) as translator:
        for p in range(PARTITIONS):
            ups = translator.syncs.run(topic, p).ups
            assert ups[0] == 0 and ups[-1] == 59 and list(ups) == sorted(ups), "both writers' syncs, in order"
        rows = translate_offsets(translator, groups.offsets)
        probes = translator.probes

    assert probes == 0, f"{probes} probe fetches where the syncs' stated runs hold every group"
    assert len(rows) == PARTITIONS and {r.translation.status for r in rows} == {Status.EXACT}
    assert_first_copies_at_or_after(b.bootstrap, f"A.{topic}", rows, PARTITIONS)


def test_a_source_topic_missing_now_is_not_translated_until_its_id_can_be_read(
    shared_clusters, unique
) -> None:
    """The check of topic ids failed open: a topic the source no longer described (deleted, or in
    the middle of being created again) was translated with the syncs of the topic the flow had
    copied, which a new incarnation's offsets do not fit. A partition whose topic id cannot be
    read now is left untranslated, with the reason, and translated again once it can."""
    a, b, _ = shared_clusters
    topic = unique("gone")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("r", 10))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    run_once(config, "A", "B")
    flow = config.flow("A", "B")
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert translator.translate(topic, 0, 6) is not None

    recreate(a.bootstrap, topic, create=False)
    with Translator(flow, FlowClients.resolve(flow)) as translator:
        assert translator.translate(topic, 0, 6) is None, "translated without knowing the topic"
        why = translator.reasons[(topic, 0)]
    assert f"the topic id of {topic} on A could not be read now (the topic is missing" in why, why
