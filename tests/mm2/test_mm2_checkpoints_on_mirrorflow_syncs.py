"""MM2's MirrorCheckpointConnector, running on offset-syncs that mirrorflow wrote, emits checkpoints
that never skip a record.

They may re-deliver. MM2 (mm2-semantics.md §6b) keeps at most 64 syncs per partition, spaced
exponentially back from the newest one, picks the newest kept sync at or below the group's
offset and claims one record past it. mirrorflow writes a sync at both ends of every run it
copied, so at least one every CHUNK source offsets. Hence, for a group d offsets behind the
newest sync:
- the checkpoint is `sync.downstream + 1` (or `sync.downstream` when the group is exactly at the
  sync) for one of mirrorflow's syncs at or below the group's offset: nothing is skipped;
- the kept syncs are within 2^i of the newest at slot i (invariant B) and 2^(i-2) apart
  (invariant C), so the sync MM2 picks lies less than about 8d behind the newest one, or one
  sync spacing when the group is near the end: fewer than CHUNK + 8d records are re-delivered;
- a caught-up group (at the end) and a group at the newest sync are translated exactly: mirrorflow
  syncs the last record of every run, as MM2 3.7+ does for idle topics (KAFKA-15906).
"""

from __future__ import annotations

from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import read_checkpoints
from mirrorflow.mm2.formats import OffsetSync

from ..integration.kafkatools import create_topics, read_all
from ..integration.mirror_setup import replicate_once
from ..integration.test_failover_gaps import write_ledger
from ..integration.test_failover_helpers import produce_numbered
from .interop import commit_groups, exact_offset, write_properties
from .mm2_process import end_offsets

SYNCS = "mm2-offset-syncs.B.internal"
PER_PARTITION = 600
CHUNK = 50  # mirrorflow.range.max.records: one transaction, and a sync at both ends, per chunk
POSITIONS = (0, 1, 25, 49, 50, 51, 99, 137, 250, 333, 420, 498, 549, 550, 575, 590, 598, 599, 600)


def test_mm2_checkpoints_on_mirrorflow_syncs_never_skip(kafka_clusters, mirror_maker, tmp_path) -> None:
    a, b = kafka_clusters(2)
    properties = write_properties(
        tmp_path, [a, b], f"mirrorflow.range.max.records = {CHUNK}\nemit.checkpoints.interval.seconds = 1\n"
    )
    create_topics(a.bootstrap, ("orders", 2), ("ledger", 1))
    produce_numbered(a.bootstrap, "orders", 2, 2 * PER_PARTITION)
    # Aborted transactions and commit markers: gaps on both sides, so mirrorflow's runs are short.
    write_ledger(a.bootstrap, range(0, 9))
    ledger = [r.offset for r in read_all(a.bootstrap, "ledger")]
    ledger_gaps = [o for o in range(ledger[0], ledger[-1]) if o not in set(ledger)]
    groups = {f"g-{u}": {("orders", 0): u, ("orders", 1): u} for u in POSITIONS}
    ledger_positions = [*ledger[::9], *ledger_gaps[::5], ledger[-1] + 1]
    groups.update({f"ledger-{i}": {("ledger", 0): u} for i, u in enumerate(ledger_positions)})
    commit_groups(a.bootstrap, groups)
    wanted = {(g, f"A.{t}", p): u for g, parts in groups.items() for (t, p), u in parts.items()}
    replicate_once(load_config(str(properties)), "A", "B", "run-1")
    syncs_before = read_all(a.bootstrap, SYNCS)
    remote_ends = end_offsets(b.bootstrap, "A.orders")

    mm2 = mirror_maker(properties, clusters=("B",))
    checkpoints = mm2.wait_for(
        lambda: (
            (found := read_checkpoints({"bootstrap.servers": b.bootstrap}, "A.checkpoints.internal"))
            and set(found) >= set(wanted)
            and found
        ),
        "checkpoint every group",
        90,
    )

    assert read_all(a.bootstrap, SYNCS) == syncs_before, "MM2 had nothing to copy, so it wrote no syncs"
    assert end_offsets(b.bootstrap, "A.orders") == remote_ends
    syncs: dict[tuple[str, int], list[OffsetSync]] = {}
    for record in syncs_before:
        sync = OffsetSync.decode(record.key, record.value)
        syncs.setdefault((sync.topic, sync.partition), []).append(sync)
    remote = {(t, p): read_all(b.bootstrap, f"A.{t}", p) for t, p in syncs}
    redelivered = {}
    for key, upstream in wanted.items():
        group, remote_topic, partition = key
        source = (remote_topic.removeprefix("A."), partition)
        checkpoint = checkpoints[key].checkpoint
        assert checkpoint.upstream_offset == upstream
        mm2_rule = {
            s.downstream_offset + (s.upstream_offset != upstream)
            for s in syncs[source]
            if s.upstream_offset <= upstream
        }
        assert checkpoint.downstream_offset in mm2_rule, f"{key}: not MM2's rule on mirrorflow's syncs"
        right = exact_offset(remote[source], upstream)
        assert checkpoint.downstream_offset <= right, f"MM2's checkpoint of {key} skips records"
        redelivered[key] = sum(1 for r in remote[source] if checkpoint.downstream_offset <= r.offset < right)
        behind = max(0, syncs[source][-1].upstream_offset - upstream)
        assert redelivered[key] < CHUNK + 8 * behind, (key, redelivered[key], behind)

    at_the_end = [("g-600", "A.orders", 0), ("g-600", "A.orders", 1), ("g-599", "A.orders", 0)]
    at_the_end.append((f"ledger-{len(ledger_positions) - 1}", "A.ledger", 0))
    assert [redelivered[key] for key in at_the_end] == [0, 0, 0, 0]
    assert any(redelivered.values()), "MM2's translation is not exact between its kept syncs"
