"""A window's batches ask the end offsets of quiet partitions in turns (window/partitions.py):
while one partition takes a steady load, the others, quiet, are asked one batch in
`quiet_turns` each, and a record that reaches a quiet partition is copied once all the same."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from mirrorflow.replicate.window import partitions, task

from .kafkatools import create_topics, read_all
from .mirror_setup import mm2_config
from .window_tools import SteadyProducer, WindowRun, assert_copied_exactly, wait_for

PARTITIONS = 8
QUIET_AFTER_S = 2.0  # instead of 10 s, so that the test is short
INTERVAL = "mirrorflow.microbatch.interval.ms = 200\n"  # five batches a second: 5 quiet turns


def test_quiet_partitions_are_asked_in_turns_and_their_records_still_copied_once(
    shared_clusters, unique, monkeypatch
) -> None:
    a, b, _ = shared_clusters
    topic = unique("quiet")
    create_topics(a.bootstrap, (topic, PARTITIONS))
    config = mm2_config(
        [a, b],
        ["A->B"],
        f"topics = {topic}\ntasks.max = 1\nmirrorflow.replicate.mode = micro-batch\n{INTERVAL}",
    )
    monkeypatch.setattr(partitions, "QUIET_AFTER_S", QUIET_AFTER_S)
    asked: list[set[int]] = []
    lock = threading.Lock()
    real = task.list_offsets

    def counting(admin, wanted, *args, **kwargs):
        wanted = list(wanted)
        with lock:
            asked.append({p for t, p in wanted if t == topic})
        return real(admin, wanted, *args, **kwargs)

    monkeypatch.setattr(task, "list_offsets", counting)
    producer = SteadyProducer(a.bootstrap, topic, PARTITIONS, rate=50, seed=5, only=[0])
    producer.start()
    # Stopped once it holds every record (below): a window that ends by its clock can end, on a
    # loaded machine, before its last batch saw the producer's last records.
    window = WindowRun(config, unique("quiet-window"), length_s=90, handover=False, in_process=True)
    window.start()
    time.sleep(QUIET_AFTER_S + 4)
    # Partitions 1-7 have been quiet for a while: a record reaches one of them.
    late = Producer({"bootstrap.servers": a.bootstrap})
    late.produce(topic, b"late", key=b"late", partition=5)
    assert late.flush(10) == 0
    wait_for(
        lambda: any(r.value == b"late" for r in read_all(b.bootstrap, f"A.{topic}", 5)),
        "the record that reached a quiet partition is copied",
        30,
    )
    with lock:
        loaded = len(asked)  # batches while partition 0 took records
    sent = producer.stop()  # the window's last batches copy what it wrote
    wait_for(
        lambda: sum(len(read_all(b.bootstrap, f"A.{topic}", p)) for p in range(PARTITIONS)) == sent + 1,
        "the window copies every record sent",
    )
    window.stop()
    result = window.result(120)
    assert result.ok, result.error

    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", PARTITIONS) == sent + 1
    # The first batch asked every partition; the busy one was asked every batch while it took
    # records; once quiet, a batch asked a share of the others, each at least once in five batches.
    assert asked[0] == set(range(PARTITIONS))
    assert all(0 in batch for batch in asked[:loaded]), asked
    shares = [batch - {0} for batch in asked]
    assert any(0 < len(share) < PARTITIONS - 1 for share in shares), shares
    for start in range(len(shares) - 5):
        assert set().union(*shares[start : start + 5]) == set(range(1, PARTITIONS)), (start, shares)
