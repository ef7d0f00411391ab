"""The flow's progress topic deleted while the target keeps the copies (an operator resetting the
mirror, a changed offset.storage.topic): an exactly-once run used to copy every record again and
report success. Now a remote partition that holds this flow's copies of the very source records
(provenance, then the source record compared) goes on after them, and one whose records cannot be
told stops the plan, naming the partition and what to do, with nothing written."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.replicate.found_copies import CopiesWithoutProgress, copies_without_progress
from mirrorflow.replicate.planner import read_settled_progress

from .kafkatools import create_topics, produce_keyed, read_topic
from .mirror_setup import mm2_text, replicate_once

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")
PROGRESS = "mm2-offsets.A.internal"


def _delete(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed 30 s after its deletion"
        time.sleep(0.2)


def _exact(a: str, b: str, topic: str, partitions: int) -> int:
    source, target = read_topic(a, topic, partitions), read_topic(b, f"A.{topic}", partitions)
    for partition in range(partitions):
        copied = [r.content() for r in target[partition]]
        assert copied == [r.content() for r in source[partition]], f"{topic}-{partition}"
    return sum(len(records) for records in target.values())


def test_a_run_after_the_progress_topic_was_deleted_goes_on_after_the_copies_on_the_target(
    kafka_clusters, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 3))
    produce_keyed(a.bootstrap, "orders", 90, 3, b"v" * 10)
    config = load_config(mm2_text([a, b], ["A->B"], "A->B.topics = orders\n"))
    assert replicate_once(config, "A", "B", "first")["totals"]["records"] == 90
    _delete(b.bootstrap, PROGRESS)
    produce_keyed(a.bootstrap, "orders", 30, 3, b"w" * 10)
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], "A->B.topics = orders\n"))

    after = subprocess.run(
        [MIRRORFLOW, "replicate", str(path), "--flow", "A->B", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert after.returncode == 0, after.stdout[-3000:] + after.stderr[-3000:]
    assert _exact(a.bootstrap, b.bootstrap, "orders", 3) == 120
    warned = [line for line in after.stderr.splitlines() if f"no progress in {PROGRESS}" in line]
    assert len(warned) == 1 and " WARNING " in warned[0], after.stderr[-3000:]
    assert all(f"orders-{p} after offset 29" in warned[0] for p in range(3)), warned
    # The progress is written again: the next run has nothing to copy and warns of nothing.
    again = replicate_once(config, "A", "B", "third")
    assert again["totals"]["records"] == 0
    assert _exact(a.bootstrap, b.bootstrap, "orders", 3) == 120


def test_copies_that_cannot_be_told_stop_the_plan_until_their_remote_partition_is_emptied(
    kafka_clusters, tmp_path
) -> None:
    """Without provenance the records on the target cannot be told from another writer's: the
    plan refuses, names each remote partition and says what to do; done, the next run is exact."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 2))
    produce_keyed(a.bootstrap, "orders", 40, 2, b"v" * 10)
    text = mm2_text([a, b], ["A->B"], "A->B.topics = orders\nmirrorflow.provenance.headers.enabled = false\n")
    config = load_config(text)
    replicate_once(config, "A", "B", "first")
    _delete(b.bootstrap, PROGRESS)
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    command = [MIRRORFLOW, "replicate", str(path), "--flow", "A->B"]

    refused = subprocess.run(command, capture_output=True, text=True, timeout=300)

    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 1, said[-3000:]
    assert "2 remote partition(s) already hold records" in said, said[-3000:]
    assert "A.orders-0 (offsets 0 to 20)" in said and "A.orders-1 (offsets 0 to 20)" in said, said[-3000:]
    assert "is not a copy of orders-0 from A" in said, said[-3000:]
    assert "empty its remote partition first" in said, said[-3000:]
    assert "Traceback" not in said
    assert _exact(a.bootstrap, b.bootstrap, "orders", 2) == 40  # nothing written twice

    _delete(b.bootstrap, "A.orders")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _exact(a.bootstrap, b.bootstrap, "orders", 2) == 40


def test_copies_of_a_source_topic_since_created_again_are_not_taken_for_the_new_ones(kafka_clusters) -> None:
    """Progress lost and the source topic created again with as many records: the copies on the
    target name the same offsets, but the source records there now differ, so nothing is
    adopted and nothing copied on top."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1))
    produce_keyed(a.bootstrap, "orders", 20, 1, b"old")
    config = load_config(mm2_text([a, b], ["A->B"], "A->B.topics = orders\n"))
    replicate_once(config, "A", "B", "first")
    _delete(b.bootstrap, PROGRESS)
    _delete(a.bootstrap, "orders")
    create_topics(a.bootstrap, ("orders", 1))
    produce_keyed(a.bootstrap, "orders", 20, 1, b"new")

    with pytest.raises(CopiesWithoutProgress) as refused:
        replicate_once(config, "A", "B", "second")

    assert "A.orders-0 (offsets 0 to 20): its last copy does not equal the source record at offset 19" in str(
        refused.value
    )
    assert [r.value for r in read_topic(b.bootstrap, "A.orders", 1)[0]] == [b"old"] * 20


def test_a_plan_that_read_progress_before_a_copy_beside_it_committed_asks_again_before_refusing(
    kafka_clusters,
) -> None:
    """A copy running beside the plan (a window's tasks, another run) commits a partition's first
    copies and their progress after the plan read progress: the plan then sees records on the
    target and no progress. Without provenance it cannot tell them, so it reads progress again
    before refusing, and plans with what it finds."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 2))
    produce_keyed(a.bootstrap, "orders", 40, 2, b"v" * 10)
    config = load_config(
        mm2_text([a, b], ["A->B"], "A->B.topics = orders\nmirrorflow.provenance.headers.enabled = false\n")
    )
    replicate_once(config, "A", "B", "first")
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    target_admin = AdminClient({"bootstrap.servers": b.bootstrap})
    parts = [("orders", p, "A.orders") for p in range(2)]
    earliest = {("orders", p): 0 for p in range(2)}
    stable = {("orders", p): 20 for p in range(2)}
    reads = []

    def reread():
        reads.append(1)
        return read_settled_progress(flow, clients, target_admin)

    adopted, progress = copies_without_progress(
        flow, clients, target_admin, parts, {}, earliest, stable, reread=reread
    )

    assert reads == [1] and adopted == {}
    assert {where: stored.offset for where, stored in progress.items()} == {
        ("orders", 0): 19,
        ("orders", 1): 19,
    }
