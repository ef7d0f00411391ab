"""Micro-batch windows on real Kafka: two windows overlapping at a handover copy every record
once, a window waits for a successor that has planned past its own wait, topics created, grown and recreated while a window runs are copied and reported, and a
task that starts after its window's end (Spark's new attempt of a task whose executor was lost)
copies until the next window takes over, or fails the window once nothing would.

Windows run as `mirrorflow replicate` runs them (the driver in the test, tasks in local worker
processes), a few seconds each, on the worker's shared clusters with topics of their own."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewPartitions

from mirrorflow.control.window_status import window_lag
from mirrorflow.replicate.window.channel import StatusWriter
from mirrorflow.replicate.window.figures import TaskFigures

from .kafkatools import create_topics, produce, read_topic
from .mirror_setup import mm2_config
from .window_tools import SteadyProducer, WindowRun, assert_copied_exactly, wait_for

SEED = 2_411
MICRO_BATCH = (
    "tasks.max = 2\nmirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = 200\n"
)


def test_two_windows_overlapping_at_a_handover_copy_every_record_once(shared_clusters, unique) -> None:
    """The next window starts while this one runs and takes its slots over by fencing: the first
    lets each go once fenced (or idle) and ends when all are gone; nothing is copied twice or
    missed, and neither window had to take a slot back."""
    a, b = shared_clusters[:2]
    topic = unique("mb-handover")
    create_topics(a.bootstrap, (topic, 4))
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n" + MICRO_BATCH)
    producer = SteadyProducer(a.bootstrap, topic, 4, rate=400, seed=SEED)
    producer.start()
    first = WindowRun(config, unique("first"), length_s=8, handover=True, handover_s=120)
    first.start()
    wait_for(
        lambda: sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 4).values())) > 0,
        "the first window copies",
    )
    second = WindowRun(config, unique("second"), length_s=90, handover=False)
    second.start()
    # Records keep coming until the first window has let every slot go, and a while after: on a
    # loaded machine the handover took longer than the producer ran, and the second window
    # rightly copied nothing (so its status records had nothing to show). The second window
    # then copies until it holds every record sent and is stopped: ending by its clock, a
    # window on a loaded machine can end before its last batch saw the last records.
    wait_for(lambda: not first.is_alive(), "the first window hands every slot over")
    time.sleep(2)
    sent = producer.stop()
    wait_for(
        lambda: sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 4).values())) == sent,
        "the second window copies every record sent",
    )
    second.stop()
    before, after = first.result(), second.result()

    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 4) == sent
    assert before.ok and after.ok, (before.error, after.error)
    assert before.report.window["stopped"] == {"handed over": first.count}, before.report.window
    assert before.report.window["handed_over_slots"] == 2  # tasks.max 2: the flow's two writer slots
    assert after.report.window["stopped"] == {"stopped": second.count}
    assert before.report.window["retakes"] == after.report.window["retakes"] == 0
    assert before.report.totals()["records"] + after.report.totals()["records"] == sent
    assert after.report.window["lag_s"]["max"] is not None
    # The status page and the metrics read the newest window's status records from the target.
    lag = window_lag(b.client_config(), "A->B", timeout_s=30)
    assert lag is not None and lag["run_id"] == second.driver.plan.run_id, lag
    assert lag["tasks"] == second.count and lag["records"] > 0
    assert lag["lag_recent_s"]["p99"] is not None and topic in lag["topics"]


def test_a_window_whose_successor_has_planned_waits_past_its_own_wait_for_the_takeover(
    shared_clusters, unique
) -> None:
    """A window shorter than HANDOVER_MAX_S waits its own length at most for the next window. On a
    loaded machine the next window's Spark application took longer than that to start (a 60 s
    window gave up 13 s before its successor's tasks came, and the flow was copied by no one
    meanwhile). Once the next window has planned, the window waits for its takeover up to
    HANDOVER_MAX_S: here the next window plans at once and starts its tasks only well after the
    first window's own wait ran out, and the first copies on until they take its slots."""
    a, b = shared_clusters[:2]
    topic = unique("mb-successor")
    create_topics(a.bootstrap, (topic, 2))
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n" + MICRO_BATCH)
    producer = SteadyProducer(a.bootstrap, topic, 2, rate=200, seed=SEED + 1)
    producer.start()
    first = WindowRun(config, unique("first"), length_s=3, handover=True, handover_s=3)
    first.start()
    second = WindowRun(config, unique("second"), length_s=60, handover=False)  # planned now
    own_wait_over = first.driver.settings.ends_ms / 1000 + 3

    def copied() -> int:
        return sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 2).values()))

    time.sleep(max(0.0, own_wait_over + 1 - time.time()))
    past_its_wait = copied()
    time.sleep(4)
    assert first.is_alive(), "the first window ended before its planned successor took over"
    assert copied() > past_its_wait, "the first window stopped copying when its own wait ran out"
    second.start()
    wait_for(lambda: not first.is_alive(), "the second window takes every slot over")
    time.sleep(2)
    sent = producer.stop()
    wait_for(lambda: copied() == sent, "the second window copies every record sent")
    second.stop()
    before, after = first.result(), second.result()
    assert before.ok and after.ok, (before.error, after.error)
    assert before.report.window["stopped"] == {"handed over": first.count}, before.report.window
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 2) == sent


def test_topics_created_grown_and_recreated_mid_window_are_copied_and_reported(
    shared_clusters, unique
) -> None:
    """Within refresh.topics.interval.seconds (1 s here) a running window copies a new topic, a
    new partition, and a topic deleted and created again (its new records after the old ones on
    the remote topic, as MM2 does), and its report names each."""
    a, b = shared_clusters[:2]
    prefix = unique("mb-topics")
    grown, again, new = f"{prefix}-grown", f"{prefix}-again", f"{prefix}-new"
    create_topics(a.bootstrap, (grown, 2), (again, 1))
    produce(a.bootstrap, grown, [{"key": b"%d" % i, "value": b"g", "partition": i % 2} for i in range(100)])
    produce(a.bootstrap, again, [{"key": b"old%d" % i, "value": b"o"} for i in range(60)])
    config = mm2_config(
        [a, b], ["A->B"], f"A->B.topics = {prefix}-.*\nrefresh.topics.interval.seconds = 1\n" + MICRO_BATCH
    )
    window = WindowRun(config, unique("topics"), length_s=90, handover=False)
    window.start()
    wait_for(
        lambda: len(read_topic(b.bootstrap, f"A.{again}", 1)[0]) == 60, "the window copies what is there"
    )
    old = read_topic(a.bootstrap, again, 1)[0]

    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    admin.create_partitions([NewPartitions(grown, 3)])[grown].result(30)
    admin.delete_topics([again])[again].result(30)
    create_topics(a.bootstrap, (new, 2))
    wait_for(lambda: again not in admin.list_topics(timeout=10).topics, f"{again} is deleted")
    wait_for(lambda: _created(a.bootstrap, again), f"{again} is created again")
    produce(a.bootstrap, grown, [{"key": b"%d" % i, "value": b"h", "partition": i % 3} for i in range(90)])
    produce(a.bootstrap, new, [{"key": b"%d" % i, "value": b"n", "partition": i % 2} for i in range(50)])
    produce(a.bootstrap, again, [{"key": b"new%d" % i, "value": b"n"} for i in range(40)])
    fresh = read_topic(a.bootstrap, again, 1)[0]

    def copied() -> bool:
        counts = [read_topic(b.bootstrap, f"A.{t}", n) for t, n in ((grown, 3), (new, 2), (again, 1))]
        return [sum(map(len, c.values())) for c in counts] == [190, 50, 100]

    wait_for(copied, "the window copies the new topic, the new partition and the recreated topic")
    window.stop()
    result = window.result()

    assert result.ok, (result.error, result.report.failure_message())
    assert_copied_exactly(a.bootstrap, b.bootstrap, grown, f"A.{grown}", 3)
    assert_copied_exactly(a.bootstrap, b.bootstrap, new, f"A.{new}", 2)
    remote = read_topic(b.bootstrap, f"A.{again}", 1)[0]
    assert [r.content() for r in remote] == [r.content() for r in old + fresh]
    report = result.report.window
    assert report["stopped"] == {"stopped": window.count}
    assert f"A.{new}" in report["created_topics"]
    assert report["grown_topics"][f"A.{grown}"] == [2, 3]
    assert "deleted and created again" in report["restarted"][f"{again}-0"], report["restarted"]
    assert report["joined_partitions"] >= 3  # the new topic's two partitions and the grown one


def _created(bootstrap: str, topic: str) -> bool:
    try:
        create_topics(bootstrap, (topic, 1))
    except Exception as exc:  # noqa: BLE001 - still marked for deletion: try again
        if "already exists" in str(exc).lower() or "marked for deletion" in str(exc).lower():
            return False
        raise
    return True


def _lost_attempt_status(config_b: dict, run: WindowRun) -> None:
    """The status an attempt stored before its executor was lost (it never returns an outcome)."""
    body = TaskFigures().status(index=0, tasks=run.count, attempt="lost", batches=3, partitions=1)
    body |= {"records": 7, "bytes": 70}
    writer = StatusWriter(config_b, run.flow.name, run.driver.plan.run_id)
    writer.send(body)
    writer.close(10.0)


def test_a_task_started_after_the_windows_end_copies_until_the_next_window_takes_over(
    shared_clusters, unique
) -> None:
    """Spark runs a window's tasks again when their executor is lost, possibly after the window's
    end: the new attempts take their slots and copy (nobody else holds them until the next window
    takes over), and what the lost attempt had copied is in the window's figures. Before the fix
    such a task ended at once and the window reported nothing copied, in green."""
    a, b = shared_clusters[:2]
    topic = unique("mb-late")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, [{"key": b"%d" % i, "value": b"v", "partition": i % 2} for i in range(200)])
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n" + MICRO_BATCH)
    # Over as soon as planned; the wait for a next window is long, and the test ends it itself.
    late = WindowRun(config, unique("late"), length_s=0.001, handover=True, handover_s=120)
    _lost_attempt_status(b.client_config(), late)
    late.start()
    wait_for(
        lambda: (
            not late.is_alive() or sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 2).values())) == 200
        ),
        "the late task copies",
    )
    assert late.is_alive(), f"the window ended before it copied: {late.result().report.window['stopped']}"
    time.sleep(1.5)  # past the driver's next look at the status records
    late.stop()
    result = late.result()

    assert result.ok, (result.error, result.report.failure_message())
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 2) == 200
    assert result.report.totals()["records"] == 200
    assert result.report.window["stopped"] == {"stopped": late.count}
    assert result.report.window["lost_attempts"] == {"count": 1, "records": 7, "bytes": 70}


def test_a_task_started_after_the_wait_for_the_next_window_fails_the_window_in_one_sentence(
    shared_clusters, unique
) -> None:
    """Once the window and its wait for the next one are over, slots no newer window took are
    copied by nobody: a task that starts then fails the window saying so, instead of ending as if
    it had copied them."""
    a, b = shared_clusters[:2]
    topic = unique("mb-over")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, [{"key": b"k", "value": b"v"}])
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n" + MICRO_BATCH)
    over = WindowRun(config, unique("over"), length_s=0.001, handover=True, handover_s=0.001)
    over.start()
    result = over.result()

    assert not result.ok
    assert "after the window and its wait for the next window were over" in (result.error or ""), result.error
    assert "no newer window has taken its writer slots" in result.error
    assert read_topic(b.bootstrap, f"A.{topic}", 1)[0] == []
