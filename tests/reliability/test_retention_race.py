"""Retention racing the copy: the source's log start jumps forward at seeded moments of runs in
progress, ahead of the copy, behind it and inside the transaction in flight. Whatever the
interleaving, every record is either on the target once, in source order and byte for byte, or
counted in a run's report as lost to retention; never both, never neither.

DeleteRecords moves a partition's log start exactly where the test says, the same event for a
consumer as a retention pass deleting segments, so the offsets lost are known. Moments and
offsets come from a seeded RNG (SEED; the seed and run are in every assertion message): each
run gets a few cuts, each on a chosen partition at a chosen point of its planned span, fired
once the run has written a chosen fraction of its records to the target."""

from __future__ import annotations

import random
import threading

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.policy.provenance import read_provenance

from ..integration.kafkatools import create_topics, produce, read_all
from ..integration.mirror_setup import mm2_config, replicate_once

SEED = 2_411
PARTITIONS = 4
PER_RUN = 3_000  # records added to each partition before each run
RUNS = 3
CUTS_PER_RUN = 4


def ends(admin: AdminClient, topic: str, spec: OffsetSpec) -> dict[int, int]:
    request = {TopicPartition(topic, p): spec for p in range(PARTITIONS)}
    try:
        return {tp.partition: f.result(10).offset for tp, f in admin.list_offsets(request).items()}
    except Exception:  # noqa: BLE001 - the remote topic does not exist before the first plan
        return dict.fromkeys(range(PARTITIONS), 0)


class Cutter(threading.Thread):
    """Moves source log starts at seeded points while a run copies; records what it cut."""

    def __init__(
        self,
        source: AdminClient,
        target: AdminClient,
        topic: str,
        remote: str,
        cuts: list[tuple[float, int, int]],
    ) -> None:
        super().__init__(daemon=True)
        self.admin, self.target, self.topic, self.remote = source, target, topic, remote
        self.cuts = sorted(cuts)  # (fraction of the run's records on the target, partition, offset)
        self.done: list[tuple[int, int]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.base = sum(ends(target, remote, OffsetSpec.latest()).values())

    def run(self) -> None:
        try:
            for fraction, partition, offset in self.cuts:
                goal = self.base + fraction * PER_RUN * PARTITIONS
                while sum(ends(self.target, self.remote, OffsetSpec.latest()).values()) < goal:
                    if self.stop.wait(0.01):
                        return
                tp = TopicPartition(self.topic, partition, offset)
                self.admin.delete_records([tp])[tp].result(10)
                self.done.append((partition, offset))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.mark.parametrize("delivery", ["exactly-once", pytest.param("at-least-once", marks=pytest.mark.chaos)])
def test_every_record_is_copied_once_or_counted_lost_whatever_retention_does(
    shared_clusters, unique, delivery
) -> None:
    a, b = shared_clusters[:2]
    rng = random.Random(f"{SEED}-{delivery}")
    topic = unique("race")
    remote = f"A.{topic}"
    create_topics(a.bootstrap, (topic, PARTITIONS))
    config = mm2_config(
        [a, b],
        ["A->B"],
        f"A->B.topics = {topic}\nmirrorflow.range.max.records = 100\nmirrorflow.delivery = {delivery}\n"
        "emit.heartbeats.enabled = false\n",
    )
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    lost: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    written = dict.fromkeys(range(PARTITIONS), 0)

    for run in range(RUNS):
        where = f"seed {SEED}, {delivery}, run {run}"
        # Idempotent, so that a retried batch never lands after a later one: each value names its
        # offset (a plain producer retrying on a loaded machine once wrote partition 1's records
        # out of order, and the check below then failed on the source's own order).
        produce(
            a.bootstrap,
            topic,
            [
                {"value": f"{p}-{written[p] + i}".encode(), "partition": p}
                for p in range(PARTITIONS)
                for i in range(PER_RUN)
            ],
            **{"enable.idempotence": True},
        )
        starts = ends(admin, topic, OffsetSpec.earliest())
        cuts = []
        for _ in range(CUTS_PER_RUN):
            partition = rng.randrange(PARTITIONS)
            # Anywhere in what this run will copy, plus a little of what an earlier run copied.
            low = max(starts[partition], written[partition] - 200)
            cuts.append((rng.uniform(0.0, 0.9), partition, rng.randrange(low, written[partition] + PER_RUN)))
        written = {p: written[p] + PER_RUN for p in range(PARTITIONS)}
        cutter = Cutter(admin, AdminClient({"bootstrap.servers": b.bootstrap}), topic, remote, cuts)
        cutter.start()
        try:
            summary = replicate_once(config, "A", "B", unique("run"))
        finally:
            cutter.stop.set()
            cutter.join(30)
        assert cutter.error is None, f"{where}: {cutter.error!r}"
        assert summary["failed"] == [], f"{where}: {summary['failed']}"
        for entry in summary.get("lost", []):
            assert entry["topic"] == topic, where
            for begin, end in entry["offsets"]:
                counted = set(range(begin, end))
                assert not counted & lost[entry["partition"]], f"{where}: counted twice {entry}"
                lost[entry["partition"]] |= counted
        assert summary["lost_to_retention"] == sum(
            end - begin for entry in summary.get("lost", []) for begin, end in entry["offsets"]
        ), where

    for partition in range(PARTITIONS):
        where = f"seed {SEED}, {delivery}, partition {partition}"
        copied = [
            (read_provenance(r.headers).source_offset, r.value)
            for r in read_all(b.bootstrap, remote, partition)
        ]
        offsets = [offset for offset, _ in copied]
        assert offsets == sorted(set(offsets)), f"{where}: target not in source order or holds a record twice"
        assert all(value == f"{partition}-{offset}".encode() for offset, value in copied), where
        assert not set(offsets) & lost[partition], f"{where}: copied and counted lost"
        assert set(offsets) | lost[partition] == set(range(written[partition])), (
            f"{where}: missing and not counted: {sorted(set(range(written[partition])) - set(offsets) - lost[partition])[:20]}"
        )
    assert any(lost.values()), "no cut landed ahead of the copy: the test proved nothing"
