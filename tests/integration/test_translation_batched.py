"""A translation pass over many partitions reads the target once, or not at all (issue 12).

Each partition's first probe (the record its nearest offset-sync points to, which says who copied
the partition) used to be one fetch round trip of its own, about 100 ms: a checkpoint pass over
2,000 partitions spent most of its 206 s there. Translator.warm reads all of them at once.

Where the copy stated its runs with its syncs (offset_syncs.RUN_HEADER), groups inside them need
no read at all: at 20,000 partitions reading each one once cost about 60 s. The read-ahead is
tested on syncs without those statements, as MM2 and earlier mirrorflow versions wrote them."""

from __future__ import annotations

from mirrorflow.clients import FlowClients
from mirrorflow.control.translation.group_pass import relevant_group_offsets, translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.control.translation.rule import Status
from mirrorflow.control.translation.sync_index import SyncIndex
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy.provenance import read_provenance

from .kafkatools import create_topics, read_topic
from .mirror_setup import mm2_config, replicate_once
from .test_failover_helpers import commit_at, produce_numbered

PARTITIONS = 40


def assert_first_copies_at_or_after(
    bootstrap: str, remote: str, rows: list, partitions: int = PARTITIONS
) -> None:
    """Each row's translation is the first record on the target copied from its group's offset or
    later, or one past the last copy for a group that read everything."""
    copied = read_topic(bootstrap, remote, partitions)
    for row in rows:
        expected = next(
            (
                c.offset
                for c in copied[row.partition]
                if read_provenance(c.headers).source_offset >= row.committed.offset
            ),
            copied[row.partition][-1].offset + 1,  # the group read everything: one past the last copy
        )
        assert row.translation.downstream_offset == expected


def copied(a, b, topic: str, run_id: str):
    """`topic` on A, PARTITIONS partitions of 30 records, copied to B by one run in transactions
    of 7 records; returns the flow's config."""
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\nmirrorflow.range.max.records = 7\n")
    create_topics(a.bootstrap, (topic, PARTITIONS))
    produce_numbered(a.bootstrap, topic, PARTITIONS, PARTITIONS * 30)
    replicate_once(config, "A", "B", run_id)
    return config


def without_stated_runs(index: SyncIndex) -> SyncIndex:
    """The same syncs as MM2's format alone holds them."""
    return SyncIndex.of(
        OffsetSync(topic, partition, up, down)
        for topic, partition in index.partitions()
        for up, down in zip(index.run(topic, partition).ups, index.run(topic, partition).downs, strict=True)
    )


def test_a_pass_over_runs_the_copy_stated_reads_nothing_on_the_target(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic, group = unique("stated"), unique("g")
    config = copied(a, b, topic, unique("run"))
    commit_at(a.bootstrap, group, {(topic, p): p % 31 for p in range(PARTITIONS)})
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    groups = relevant_group_offsets(flow, clients, wanted=lambda g: g == group, any_topic=True)

    with Translator(flow, clients) as translator:
        assert all(translator.syncs.run(topic, p).runs for p in range(PARTITIONS))
        rows = translate_offsets(translator, groups.offsets)
        probes = translator.probes

    assert probes == 0, f"{probes} probe fetches where the syncs' stated runs hold every group"
    assert len(rows) == PARTITIONS and {r.translation.status for r in rows} == {Status.EXACT}
    assert_first_copies_at_or_after(b.bootstrap, f"A.{topic}", rows)


def test_a_pass_over_many_partitions_probes_them_in_one_read(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic, group = unique("wide"), unique("g")
    config = copied(a, b, topic, unique("run"))
    committed = {(topic, p): 3 + p % 20 for p in range(PARTITIONS)}
    commit_at(a.bootstrap, group, committed)
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    groups = relevant_group_offsets(flow, clients, wanted=lambda g: g == group, any_topic=True)

    with Translator(flow, clients) as translator:
        translator.syncs = without_stated_runs(translator.syncs)
        rows = translate_offsets(translator, groups.offsets)
        probes = translator.probes

    assert probes == 1, f"{probes} probe fetches for {PARTITIONS} partitions"
    assert len(rows) == PARTITIONS and {r.translation.status for r in rows} == {Status.EXACT}
    assert_first_copies_at_or_after(b.bootstrap, f"A.{topic}", rows)


def test_groups_at_different_offsets_of_a_partition_share_the_read_ahead(shared_clusters, unique) -> None:
    """Every group's probe point is read ahead, not only the first group's: a group whose point
    lies below the first one's used to cost a fetch round trip of its own per partition."""
    a, b, _ = shared_clusters
    topic, prefix = unique("spread"), unique("g")
    high, low = f"{prefix}-a-high", f"{prefix}-b-low"  # the higher group comes first
    config = copied(a, b, topic, unique("run"))
    commit_at(a.bootstrap, high, {(topic, p): 27 for p in range(PARTITIONS)})
    commit_at(a.bootstrap, low, {(topic, p): 1 + p % 5 for p in range(PARTITIONS)})
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    groups = relevant_group_offsets(flow, clients, wanted=lambda g: g in (high, low), any_topic=True)
    assert list(groups.offsets)[0] == high

    with Translator(flow, clients) as translator:
        translator.syncs = without_stated_runs(translator.syncs)
        rows = translate_offsets(translator, groups.offsets)
        probes = translator.probes

    assert probes == 1, f"{probes} probe fetches for {PARTITIONS} partitions and two groups"
    assert len(rows) == 2 * PARTITIONS and {r.translation.status for r in rows} == {Status.EXACT}
    assert_first_copies_at_or_after(b.bootstrap, f"A.{topic}", rows)
