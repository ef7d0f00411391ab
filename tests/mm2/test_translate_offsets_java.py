"""Kafka's own RemoteClusterUtils.translateOffsets (MM2's connect-mirror-client jar, called from
tests/mm2/java/TranslateOffsets.java) reads the checkpoints mirrorflow wrote and returns exactly
mirrorflow's translations: per group and remote partition, the offset of the first copied record
the group had not read on the source, with the group's commit metadata."""

from __future__ import annotations

from mirrorflow.control.checkpoints import emit_checkpoints, remote_consumer_offsets

from ..integration.kafkatools import create_topics, read_all
from ..integration.mirror_setup import mm2_config, replicate_once
from ..integration.test_failover_gaps import write_ledger
from ..integration.test_failover_helpers import commit_at, consume, produce_numbered
from .interop import exact_offset, run_java

GROUPS = ("billing", "audit", "gap-reader", "caught-up", "rewound")


def test_translate_offsets_returns_mirrorflows_exact_translations(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], "mirrorflow.range.max.records = 30\n")
    create_topics(a.bootstrap, ("orders", 2), ("ledger", 1))
    produce_numbered(a.bootstrap, "orders", 2, 160)
    # Aborted transactions and commit markers: offsets on A and B differ, unevenly.
    write_ledger(a.bootstrap, range(0, 6))
    ledger = [r.offset for r in read_all(a.bootstrap, "ledger")]
    gap = next(o for o in range(ledger[0], ledger[-1]) if o not in set(ledger))
    consume(a.bootstrap, "billing", ["orders"], 97)
    commit_at(
        a.bootstrap, "audit", {("orders", 0): 13, ("orders", 1): 71, ("ledger", 0): 41}, metadata="v7 ✓"
    )
    commit_at(a.bootstrap, "gap-reader", {("ledger", 0): gap})
    commit_at(a.bootstrap, "caught-up", {("orders", 0): 80, ("orders", 1): 80, ("ledger", 0): ledger[-1] + 1})
    commit_at(a.bootstrap, "rewound", {("orders", 0): 75})
    replicate_once(config, "A", "B", "run-1")
    emit_checkpoints(config, "A", "B")
    # Later passes: the readers keep the latest checkpoint per partition (an upstream rewind too).
    commit_at(a.bootstrap, "rewound", {("orders", 0): 9}, metadata="back")
    commit_at(a.bootstrap, "audit", {("orders", 1): 77}, metadata="v8")
    emit_checkpoints(config, "A", "B")

    java = run_java("TranslateOffsets.java", b.bootstrap, "A", *GROUPS)

    mirrorflow = sorted(
        f"{group} {topic} {partition} {offset} {metadata.encode().hex()}"
        for group in GROUPS
        for (topic, partition), (offset, metadata) in remote_consumer_offsets(
            {"bootstrap.servers": b.bootstrap}, "A", group
        ).items()
    )
    assert java == mirrorflow
    expected = {
        ("audit", "A.orders", 0): (13, "v7 ✓"),
        ("audit", "A.orders", 1): (77, "v8"),
        ("audit", "A.ledger", 0): (41, "v7 ✓"),
        ("gap-reader", "A.ledger", 0): (gap, ""),
        ("caught-up", "A.orders", 0): (80, ""),
        ("caught-up", "A.orders", 1): (80, ""),
        ("caught-up", "A.ledger", 0): (ledger[-1] + 1, ""),
        ("rewound", "A.orders", 0): (9, "back"),
    }
    copied = {
        (t, p): read_all(b.bootstrap, t, p) for t, p in (("A.orders", 0), ("A.orders", 1), ("A.ledger", 0))
    }
    for (group, remote, partition), (upstream, metadata) in expected.items():
        offset = exact_offset(copied[(remote, partition)], upstream)
        line = f"{group} {remote} {partition} {offset} {metadata.encode().hex()}"
        assert line in java, line
    billing = [line for line in java if line.startswith("billing ")]
    assert len(billing) == 2, "the consuming group committed both partitions of orders"
    assert len(java) == len(expected) + len(billing)
