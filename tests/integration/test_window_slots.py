"""A micro-batch flow's writer slots (plan.flow_writer_slots): one per task, so a window's task
commits one transaction a batch however many partitions it holds; a change of tasks.max between
windows, or a flow that ran in batch mode before, moves partitions to other transactional ids,
and the first writer under the new count fences the old ones before it writes."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaException, Producer

from mirrorflow.mm2.connect_offsets import SourceOffsetKey, decode_offset_entry
from mirrorflow.replicate.copy.ids import transactional_id
from mirrorflow.replicate.plan import COPY_SLOTS
from mirrorflow.replicate.window.channel import new_attempt, write_takeover
from mirrorflow.replicate.window.task import WindowTask

from .kafkatools import create_topics, read_topic
from .mirror_setup import mm2_config, replicate_once
from .window_tools import SteadyProducer, WindowRun, assert_copied_exactly, wait_for, window_story

SEED = 8_117
MICRO_BATCH = "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = 200\n"
PROGRESS_PARTITIONS = 25  # MM2's offset.storage.partitions


def _progress(bootstrap: str, topic_prefix: str, progress_topic: str) -> list[tuple[str, int, int, str]]:
    """(topic, partition, slots, commit token) of every committed progress record of the topics
    starting with `topic_prefix`."""
    found = []
    for records in read_topic(bootstrap, progress_topic, PROGRESS_PARTITIONS).values():
        for record in records:
            try:
                key = SourceOffsetKey.decode(record.key)
            except Exception:  # noqa: BLE001 - other connectors' keys
                continue
            if not key.topic.startswith(topic_prefix) or record.value is None:
                continue
            entry = decode_offset_entry(record.value)
            found.append((key.topic, key.partition, entry.slots, entry.commit))
    return found


def _produce(bootstrap: str, topic: str, numbers: range) -> None:
    """Records keyed and valued by their number, into partition 0 of `topic`."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in numbers:
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=0)
    producer.flush(30)


def _window(clusters, flows: str, tasks_max: int, run_id: str, **options) -> WindowRun:
    """A window of the A->B flow `flows` describes, under `tasks_max` writer slots."""
    return WindowRun(mm2_config(clusters, ["A->B"], flows + f"tasks.max = {tasks_max}\n"), run_id, **options)


def test_a_windows_task_commits_one_transaction_a_batch_over_many_partitions(shared_clusters, unique) -> None:
    """40 partitions in 4 topics, two tasks: each batch of a task is one transaction holding the
    progress of every partition it copied (with 256 slots it was one per slot with records,
    about 40 a batch)."""
    a, b = shared_clusters[:2]
    prefix = unique("mb-slots")
    topics = [f"{prefix}-{i}" for i in range(4)]
    create_topics(a.bootstrap, *((t, 10) for t in topics))
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {prefix}-.*\ntasks.max = 2\n" + MICRO_BATCH)
    producers = [SteadyProducer(a.bootstrap, t, 10, rate=200, seed=SEED + i) for i, t in enumerate(topics)]
    for producer in producers:
        producer.start()
    # A window ends at its end whatever was produced just before it (the next window copies
    # that): a 6 s window on a loaded machine ended before its last batch saw the producers' last
    # records. This one runs until it has copied them all, then is stopped after its batch.
    window = WindowRun(config, unique("window"), length_s=90, handover=False)
    window.start()
    time.sleep(4)
    sent = [p.stop() for p in producers]
    wait_for(
        lambda: [sum(map(len, read_topic(b.bootstrap, f"A.{t}", 10).values())) for t in topics] == sent,
        "the window copies every record sent",
    )
    window.stop()
    result = window.result()

    assert result.ok, (result.error, result.report.failure_message())
    assert result.report.window["stopped"] == {"stopped": window.count}, result.report.window
    for topic, count in zip(topics, sent, strict=True):
        assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 10) == count
    progress = _progress(b.bootstrap, prefix, config.flow("A", "B").offset_storage_topic)
    assert {slots for _, _, slots, _ in progress} == {2}, "progress names the flow's two writer slots"
    per_transaction = Counter(commit for *_, commit in progress)
    batches = result.report.window["batches"]
    assert len(per_transaction) <= batches, (len(per_transaction), batches)
    assert max(per_transaction.values()) >= 10, per_transaction.most_common(3)


def test_windows_of_another_tasks_max_hand_over_and_copy_every_record_once(shared_clusters, unique) -> None:
    """tasks.max 2, then 3: the second window's slots are other transactional ids. It announces
    that it takes the whole flow, fences the first window's ids for each partition (their
    progress says 2 slots) before it writes, and the first window lets go without taking
    anything back."""
    a, b = shared_clusters[:2]
    topic = unique("mb-reslot")
    create_topics(a.bootstrap, (topic, 6))
    flows = f"A->B.topics = {topic}\n" + MICRO_BATCH
    producer = SteadyProducer(a.bootstrap, topic, 6, rate=300, seed=SEED)
    producer.start()
    first = _window(
        [a, b],
        flows,
        2,
        unique("first"),
        length_s=6,
        handover=True,
        handover_s=120,
    )
    first.start()
    wait_for(
        lambda: sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 6).values())) > 0,
        "the first window copies",
    )
    # Stopped once it holds every record sent: ending by its clock, a window on a loaded machine
    # can end before its last batch saw the producer's last records.
    second = _window([a, b], flows, 3, unique("second"), length_s=90, handover=False)
    second.start()
    wait_for(lambda: not first.is_alive(), "the first window hands every slot over")
    time.sleep(2)
    sent = producer.stop()
    wait_for(
        lambda: sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 6).values())) == sent,
        f"the second window copies every record sent ({sent})",
        explain=lambda: window_story(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 6, first, second),
    )
    second.stop()
    before, after = first.result(), second.result()

    assert before.ok and after.ok, (before.error, after.error)
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 6) == sent
    assert before.report.window["stopped"] == {"handed over": first.count}, before.report.window
    assert before.report.window["retakes"] == after.report.window["retakes"] == 0
    assert before.report.totals()["records"] + after.report.totals()["records"] == sent
    progress = _progress(b.bootstrap, topic, second.flow.offset_storage_topic)
    latest = {(t, p): slots for t, p, slots, _ in progress}
    assert set(latest.values()) == {3}, latest


def test_a_late_writer_of_the_last_window_writes_nothing_a_window_of_another_count_took(
    shared_clusters, unique, monkeypatch
) -> None:
    """The gap a clean clone once fell into (266 records copied twice at a tasks.max 2 -> 3
    handover): a task of the last window reads the takeovers (none yet), and before it opens its
    writer a window of 3 slots announces that it takes the flow and fences the old slot's id,
    as its first batch does. Here the gap is forced: the last window's task is held there while
    the new window announces and fences. Opening after that fencing, the old writer fences
    nothing of the new window (its ids are others), so had it written, both would copy the
    partition from the progress each read. It must write nothing: it looks at the takeovers
    again once its producer is initialised, lets the slot go, and the new window copies every
    record once."""
    a, b = shared_clusters[:2]
    topic = unique("mb-late")
    create_topics(a.bootstrap, (topic, 1))
    _produce(a.bootstrap, topic, range(40))
    flows = f"A->B.topics = {topic}\n" + MICRO_BATCH
    newer: list[WindowRun] = []
    gap = threading.Lock()
    held_open = WindowTask._unopened_leaving_dropped

    def announced_in_the_gap(task, worker, tail, spans, states):
        kept = held_open(task, worker, tail, spans, states)
        with gap:
            if task.job.slots == 2 and kept[0] and not newer:
                window = _window(
                    [a, b],
                    flows,
                    3,
                    unique("second"),
                    length_s=90,
                    handover=False,
                    in_process=True,
                )
                write_takeover(
                    window.clients.target_producer,
                    window.flow.name,
                    window.plan.run_id,
                    plan_offset=window.plan_offset,
                    attempt=new_attempt(),
                    slots=range(3),
                    writer_slots=3,
                    timeout_s=30,
                )
                fence = Producer(
                    {
                        "bootstrap.servers": b.bootstrap,
                        "transactional.id": transactional_id("A", "B", topic, 0, 2),
                    }
                )
                fence.init_transactions(30)
                newer.append(window)
        return kept

    monkeypatch.setattr(WindowTask, "_unopened_leaving_dropped", announced_in_the_gap)
    first = _window(
        [a, b],
        flows,
        2,
        unique("first"),
        length_s=60,
        handover=True,
        in_process=True,
    )
    first.start()
    before = first.result()
    (second,) = newer

    assert before.ok, (before.error, before.report.failure_message())
    assert set(before.report.window["stopped"]) == {"handed over"}, before.report.window
    assert before.report.window["retakes"] == 0
    assert before.report.totals()["records"] == 0
    assert read_topic(b.bootstrap, f"A.{topic}", 1) == {0: []}, "the last window wrote after it was fenced"
    second.start()
    wait_for(lambda: len(read_topic(b.bootstrap, f"A.{topic}", 1)[0]) >= 40, "the new window copies")
    second.stop()
    after = second.result()
    assert after.ok, (after.error, after.report.failure_message())
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 1) == 40


def test_a_window_of_another_count_fences_a_last_window_that_committed_nothing(
    shared_clusters, unique, monkeypatch
) -> None:
    """The last window (2 slots) has copied nothing (its topic idle), so no progress names its
    count; its writer is open. Records come, and its next batch is held while a window of 3
    slots plans, starts and copies them. Its writers must fence the 2-slot id before they read
    progress, though only the last window's takeover says that count may be writing: released,
    the held batch would otherwise commit the same records again (80 for 40), both windows
    reporting success."""
    a, b = shared_clusters[:2]
    topic = unique("mb-idle")
    create_topics(a.bootstrap, (topic, 1))
    flows = f"A->B.topics = {topic}\n" + MICRO_BATCH
    opened, held, go = threading.Event(), threading.Event(), threading.Event()
    batch = WindowTask._batch

    def held_after_its_first(task, worker, admin, tail, *, first):
        if task.job.slots == 2 and not first:
            held.set()
            go.wait(120)
        worker = batch(task, worker, admin, tail, first=first)
        if task.job.slots == 2 and first:
            opened.set()
        return worker

    monkeypatch.setattr(WindowTask, "_batch", held_after_its_first)
    last = _window(
        [a, b],
        flows,
        2,
        unique("last"),
        length_s=60,
        handover=True,
        in_process=True,
    )
    last.start()
    assert opened.wait(60) and held.wait(60), "the last window's first batch opens its writer"
    _produce(a.bootstrap, topic, range(40))
    following = _window(
        [a, b],
        flows,
        3,
        unique("next"),
        length_s=90,
        handover=False,
        in_process=True,
    )
    assert 2 in following.job.older_slots, following.job.older_slots
    following.start()
    wait_for(lambda: len(read_topic(b.bootstrap, f"A.{topic}", 1)[0]) >= 40, "the next window copies")
    go.set()
    before = last.result()
    following.stop()
    after = following.result()

    assert before.ok and after.ok, (before.error, after.error)
    assert set(before.report.window["stopped"]) == {"handed over"}, before.report.window
    assert before.report.totals()["records"] == 0
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 1) == 40


def test_a_window_after_batch_runs_fences_the_batch_writers_before_it_writes(shared_clusters, unique) -> None:
    """A flow copied in batch mode (256 writer slots) turned micro-batch: a writer of the batch
    scheme still holds a transaction open in the remote partition (a zombie). The window fences
    that id before it writes: the zombie's records are aborted, its commit fails, and the copy
    is exact."""
    a, b = shared_clusters[:2]
    topic = unique("mb-frombatch")
    create_topics(a.bootstrap, (topic, 1))
    _produce(a.bootstrap, topic, range(50))
    batch = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 2\n")
    replicate_once(batch, "A", "B", unique("batch"))
    (stored,) = _progress(b.bootstrap, topic, batch.flow("A", "B").offset_storage_topic)
    assert stored[2] == COPY_SLOTS

    zombie = Producer(
        {"bootstrap.servers": b.bootstrap, "transactional.id": transactional_id("A", "B", topic, 0)}
    )
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(f"A.{topic}", key=b"zombie", value=b"never committed", partition=0)
    assert zombie.flush(30) == 0
    _produce(a.bootstrap, topic, range(50, 80))

    micro = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 2\n" + MICRO_BATCH)
    window = WindowRun(micro, unique("window"), length_s=4, handover=False)
    window.start()
    result = window.result()

    assert result.ok, (result.error, result.report.failure_message())
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 1) == 80
    latest = {
        (t, p): slots
        for t, p, slots, _ in _progress(b.bootstrap, topic, micro.flow("A", "B").offset_storage_topic)
    }
    assert latest == {(topic, 0): 2}
