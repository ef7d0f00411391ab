"""A window's task opens no writer for a slot a newer window has announced (window/task.py).

A task stores its takeover, then opens its writers in its first batch. When a newer window's
takeover of the same slots lands in between (a late task of the older window, a loaded
machine), opening the writer would fence the newer window's writer, which would then take the
slot back. Here the newer window is forged: its takeover is stored and its writer opened with the
slot's transactional.id just before the older task's first batch asks its end offsets."""

from __future__ import annotations

from confluent_kafka import Producer

from mirrorflow.replicate.copy.ids import slot_transactional_id
from mirrorflow.replicate.window import task

from .kafkatools import create_topics, produce, read_all
from .mirror_setup import mm2_config
from .window_tools import WindowRun


def test_a_task_that_reads_a_newer_takeover_before_its_first_batch_opens_nothing_and_hands_over(
    shared_clusters, unique, monkeypatch
) -> None:
    a, b, _ = shared_clusters
    topic, scratch = unique("takeover"), unique("newer-writes")
    create_topics(a.bootstrap, (topic, 2))
    create_topics(b.bootstrap, (scratch, 1))
    produce(a.bootstrap, topic, [{"key": b"%d" % i, "value": b"v", "partition": i % 2} for i in range(40)])
    config = mm2_config(
        [a, b], ["A->B"], f"topics = {topic}\ntasks.max = 1\nmirrorflow.replicate.mode = micro-batch\n"
    )
    window = WindowRun(config, unique("older"), length_s=30, handover=False, in_process=True)
    stored: dict[str, object] = {}
    real_takeover, real_list_offsets = task.write_takeover, task.list_offsets

    def takeover(*args, **kwargs):
        stored.update(kwargs, producer_config=args[0], flow=args[1], slots=sorted(kwargs["slots"]))
        return real_takeover(*args, **kwargs)

    def newer_window_first(admin, wanted, *args, **kwargs):
        if "newer" not in stored:
            # A newer window's task: its takeover stored, then its writer of slot 0 opened.
            real_takeover(
                stored["producer_config"],
                stored["flow"],
                unique("newer"),
                plan_offset=stored["plan_offset"] + 1,
                attempt="newer-attempt",
                slots=stored["slots"],
                writer_slots=stored["writer_slots"],
                timeout_s=30,
            )
            newer = Producer(
                {
                    "bootstrap.servers": b.bootstrap,
                    "transactional.id": slot_transactional_id("A", "B", 0, stored["writer_slots"]),
                }
            )
            newer.init_transactions(30)
            stored["newer"] = newer
        return real_list_offsets(admin, wanted, *args, **kwargs)

    monkeypatch.setattr(task, "write_takeover", takeover)
    monkeypatch.setattr(task, "list_offsets", newer_window_first)
    window.start()
    result = window.result(120)
    assert result.ok, result.error

    # The older task let its slot go without opening a writer: the newer writer still commits.
    assert stored["slots"] == [0]
    newer = stored["newer"]
    newer.begin_transaction()
    newer.produce(scratch, b"still mine", key=b"newer")
    newer.commit_transaction(30)
    assert [r.value for r in read_all(b.bootstrap, scratch, 0)] == [b"still mine"]
    assert result.report.window["stopped"] == {"handed over": 1}, result.report.window
    assert result.report.window["retakes"] == 0
    assert result.report.totals()["records"] == 0
    # What the older window did not copy is the newer window's to copy: none of it reached the target.
    assert [read_all(b.bootstrap, f"A.{topic}", p) for p in (0, 1)] == [[], []]
