"""Translation checks that a flow's records in a target partition are in source-offset order
instead of assuming it, and where they are not (an at-least-once re-copy, runs written out of
order) places groups by reading the partition, skipping nothing, and says so (status scanned).

The target partitions are written here record by record, stamped as the flow stamps its copies,
so each test holds exactly the disorder it is about."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirrorflow.clients import FlowClients
from mirrorflow.control.groups import Committed
from mirrorflow.control.translation.group_pass import translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.control.translation.rule import Status, Translation
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.ops.failover import failover
from mirrorflow.policy.provenance import stamp_provenance
from mirrorflow.replicate.offset_syncs import SyncPoint

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config
from .test_failover_helpers import commit_at, consume_rest

SYNCS = "mm2-offset-syncs.B.internal"


def copies_in_order(bootstrap: str, topic: str, remote: str, sources: list[int]) -> None:
    """Write `remote` partition 0 as if the flow copied these source offsets of `topic`, in this order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for source in sources:
        headers = stamp_provenance(None, source_alias="A", topic=topic, partition=0, offset=source)
        producer.produce(remote, value=f"v{source}".encode(), partition=0, headers=headers)
        producer.poll(0)
    assert producer.flush(60) == 0


def flow_with(a, b, topic: str, records: int, target_order: list[int]):
    create_topics(a.bootstrap, (topic, 1))
    create_topics(b.bootstrap, (f"A.{topic}", 1))
    produce(a.bootstrap, topic, [{"value": f"v{i}".encode()} for i in range(records)])
    copies_in_order(b.bootstrap, topic, f"A.{topic}", target_order)
    return mm2_config([a, b], ["A->B"])


def test_runs_out_of_order_are_found_by_the_probes_and_a_failover_skips_nothing(
    shared_clusters, unique
) -> None:
    a, b = shared_clusters[:2]
    topic, group = unique("swapped"), unique("reader")
    config = flow_with(a, b, topic, 100, [*range(50, 100), *range(50)])
    commit_at(a.bootstrap, group, {(topic, 0): 30})

    result = failover(config, "A", "B", group)

    [row] = result.rows
    # The binary search alone lands on source offset 30 at target offset 80 and skips 50..99.
    assert (row.status, row.target_offset) == ("scanned", 0)
    assert any("out of source order" in w for w in result.warnings)
    read = {g.source_offset for g in consume_rest(b.bootstrap, group, [f"A.{topic}"])}
    assert set(range(30, 100)) <= read


@pytest.mark.parametrize("stated", [False, True], ids=["mm2-format", "stated-runs"])
def test_a_recopy_in_the_offset_syncs_sends_translation_to_the_scan(shared_clusters, unique, stated) -> None:
    a, b = shared_clusters[:2]
    topic = unique("recopied")
    # An at-least-once run wrote 0..59, died before recording progress past 29, and the next
    # run copied 30..99 again: the syncs go 0->0, 59->59, then back to 30->60, 99->129. Their
    # stated runs are true too, but arithmetic inside the re-copy would place a group at 45 on
    # its second copy; the partition is out of order, so the scan answers instead.
    config = flow_with(a, b, topic, 100, [*range(60), *range(30, 100)])
    points = [SyncPoint(0, 0, 0), SyncPoint(59, 59, 59), SyncPoint(30, 60, 0), SyncPoint(99, 129, 69)]
    produce(
        a.bootstrap,
        SYNCS,
        [
            {
                "key": OffsetSync(topic, 0, p.upstream, p.downstream).key_bytes(),
                "value": OffsetSync(topic, 0, p.upstream, p.downstream).value_bytes(),
                "headers": p.headers() if stated else None,
            }
            for p in points
        ],
    )
    flow = config.flow("A", "B")

    with Translator(flow, FlowClients.resolve(flow)) as translator:
        got = {u: translator.translate(topic, 0, u) for u in (10, 45, 70, 100)}

    assert got == {
        10: Translation(10, 10, Status.SCANNED),
        45: Translation(45, 45, Status.SCANNED),  # its first copy: the group reads both copies
        70: Translation(70, 100, Status.SCANNED),  # only copied once, after the re-copy began
        100: Translation(100, 130, Status.SCANNED),  # read everything: the end of the copies
    }


def test_a_partition_found_out_of_order_by_a_later_group_is_translated_again_for_the_earlier(
    shared_clusters, unique
) -> None:
    a, b = shared_clusters[:2]
    topic = unique("stale")
    # 100,000 records; 1,000 copied far from their place: a group at 50,000 searched alone
    # never reads near them and lands at target offset 51,000, skipping 90,000..90,999.
    order = [*range(10_000), *range(90_000, 91_000), *range(10_000, 90_000), *range(91_000, 100_000)]
    config = flow_with(a, b, topic, 100_000, order)
    flow = config.flow("A", "B")
    offsets = {
        "a-far": {(topic, 0): Committed(50_000, "")},  # translated first: its search sees order
        "b-near": {(topic, 0): Committed(5_000, "")},  # its search reads across the misplaced run
    }

    with Translator(flow, FlowClients.resolve(flow)) as translator:
        rows = {row.group: row.translation for row in translate_offsets(translator, offsets)}

    assert rows == {
        "a-far": Translation(50_000, 10_000, Status.SCANNED),
        "b-near": Translation(5_000, 5_000, Status.SCANNED),
    }
