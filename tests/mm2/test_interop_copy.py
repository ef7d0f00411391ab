"""A flow moves between real MirrorMaker 2 and mirrorflow without losing or (MM2 willing) repeating
a record: both keep progress in MirrorSourceConnector's Connect offsets in
`mm2-offsets.A.internal` on the target, so each continues where the other stopped.

Every test compares the remote topic with the source record by record (key, value, headers,
timestamp, in partition order; mirrorflow's provenance header aside), so a duplicate or a gap
anywhere fails it.
"""

from __future__ import annotations

from mirrorflow.config import load_config

from ..integration.kafkatools import create_topics, read_all
from ..integration.mirror_setup import replicate_once
from .interop import copied_by_mirrorflow, partition_contents, produce_shaped, write_properties
from .mm2_process import end_offsets, reached, source_offsets

PARTITIONS = 3
HALF = 300  # records per half, over all partitions
MM2_WAIT_S = 90.0
# A JVM that ran its shutdown hooks on SIGTERM exits with 128 + 15 (SIGKILL would show as -9).
CLEAN_EXIT = 143


def test_mm2_continues_a_flow_mirrorflow_copied_half_of(kafka_clusters, mirror_maker, tmp_path) -> None:
    a, b = kafka_clusters(2)
    # Offsets MM2 copied are stored within a second, so the wait below ends soon after the copy.
    properties = write_properties(
        tmp_path, [a, b], "mirrorflow.range.max.records = 70\nB.offset.flush.interval.ms = 1000\n"
    )
    config = load_config(str(properties))
    create_topics(a.bootstrap, ("orders", PARTITIONS))
    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF)
    replicate_once(config, "A", "B", "run-1")
    per_partition = HALF // PARTITIONS
    assert source_offsets(b.bootstrap, "A") == {("orders", p): per_partition - 1 for p in range(PARTITIONS)}
    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF, start=HALF)

    mm2 = mirror_maker(properties, clusters=("B",))
    ends = end_offsets(a.bootstrap, "orders")
    mm2.wait_for(
        lambda: reached(
            source_offsets(b.bootstrap, "A"), {("orders", p): end - 1 for p, end in ends.items()}
        ),
        "store offsets of the second half",
        MM2_WAIT_S,
    )

    assert partition_contents(b.bootstrap, "A.orders", PARTITIONS) == partition_contents(
        a.bootstrap, "orders", PARTITIONS
    )
    for p in range(PARTITIONS):
        by_mirrorflow = [copied_by_mirrorflow(r) for r in read_all(b.bootstrap, "A.orders", p)]
        assert by_mirrorflow == [True] * per_partition + [False] * per_partition, "MM2 started at N+1"


def test_mirrorflow_continues_after_mm2_stopped_cleanly(kafka_clusters, mirror_maker, tmp_path) -> None:
    """A clean stop commits MM2's source offsets (Connect's final offset commit), even with the
    periodic flush ten minutes away: mirrorflow re-copies nothing."""
    a, b = kafka_clusters(2)
    properties = write_properties(tmp_path, [a, b], "B.offset.flush.interval.ms = 600000\n")
    create_topics(a.bootstrap, ("orders", PARTITIONS))
    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF)
    first_ends = end_offsets(a.bootstrap, "orders")

    mm2 = mirror_maker(properties, clusters=("B",))
    mm2.wait_for(
        lambda: reached(end_offsets(b.bootstrap, "A.orders"), first_ends), "copy the first half", MM2_WAIT_S
    )
    assert source_offsets(b.bootstrap, "A") == {}, "no periodic flush yet"
    assert mm2.stop() == CLEAN_EXIT
    stored = source_offsets(b.bootstrap, "A")
    assert stored == {("orders", p): end - 1 for p, end in first_ends.items()}

    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF, start=HALF)
    run = replicate_once(load_config(str(properties)), "A", "B", "run-after-mm2")

    assert run["topics"]["orders"]["records"] == HALF, "exactly the second half, nothing again"
    assert partition_contents(b.bootstrap, "A.orders", PARTITIONS) == partition_contents(
        a.bootstrap, "orders", PARTITIONS
    )


def test_mirrorflow_continues_after_mm2_was_killed(kafka_clusters, mirror_maker, tmp_path) -> None:
    """After SIGKILL, MM2's stored offsets are those of its last periodic flush: mirrorflow
    continues right after them and so copies again exactly what MM2 wrote after that flush
    (MM2's own restart would do the same). Nothing is missing; the duplicates are that window."""
    a, b = kafka_clusters(2)
    properties = write_properties(tmp_path, [a, b], "B.offset.flush.interval.ms = 10000\n")
    create_topics(a.bootstrap, ("orders", PARTITIONS))
    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF)
    first_ends = end_offsets(a.bootstrap, "orders")

    mm2 = mirror_maker(properties, clusters=("B",))
    flushed = {("orders", p): end - 1 for p, end in first_ends.items()}
    mm2.wait_for(
        lambda: reached(source_offsets(b.bootstrap, "A"), flushed), "flush the first half", MM2_WAIT_S
    )
    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF, start=HALF)
    second_ends = end_offsets(a.bootstrap, "orders")
    mm2.wait_for(
        lambda: reached(end_offsets(b.bootstrap, "A.orders"), second_ends), "copy the second half", MM2_WAIT_S
    )
    mm2.kill()
    stored = source_offsets(b.bootstrap, "A")
    written_by_mm2 = end_offsets(b.bootstrap, "A.orders")

    produce_shaped(a.bootstrap, "orders", PARTITIONS, HALF, start=2 * HALF)
    run = replicate_once(load_config(str(properties)), "A", "B", "run-after-kill")

    source = partition_contents(a.bootstrap, "orders", PARTITIONS)
    remote = partition_contents(b.bootstrap, "A.orders", PARTITIONS)
    recopied = 0
    for p in range(PARTITIONS):
        resume = stored[("orders", p)] + 1
        # MM2 wrote a prefix of the source (one request in flight, in order); mirrorflow then
        # copied everything from right after MM2's last stored offset.
        assert remote[p] == source[p][: written_by_mm2[p]] + source[p][resume:], p
        recopied += written_by_mm2[p] - resume
    assert run["topics"]["orders"]["records"] == sum(len(s) for s in source.values()) - sum(
        stored[("orders", p)] + 1 for p in range(PARTITIONS)
    )
    # The flush before the second half was seen and the next one (10 s later) had not come:
    # the unflushed window is the whole second half.
    assert stored == flushed
    assert recopied == HALF
