"""What a micro-batch window logs, on real Kafka: status lines only when something moved (an idle
window printed one every 5 s, 720 an hour), and a handover that reads as one (one INFO line per
set of slots handed over; librdkafka's FATAL / TXNERR lines of the writers the next window fenced
at DEBUG), while a fencing by anything but a newer window stays a warning and its errors.

The window whose logs are checked runs its tasks in threads of the test (window_tools.ThreadTasks),
so that caplog sees them; a next window runs as `mirrorflow replicate` runs it, in processes."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from mirrorflow.kafka import LIBRDKAFKA_LOG, RepeatFilter
from mirrorflow.replicate.copy.fencing_log import is_fencing_line
from mirrorflow.replicate.copy.ids import slot_transactional_id
from mirrorflow.replicate.plan import writer_slot

from .kafkatools import create_topics, produce, read_topic
from .mirror_setup import mm2_config
from .window_tools import SteadyProducer, WindowRun, assert_copied_exactly, wait_for

SEED = 3_607
MICRO_BATCH = "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = 200\n"


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every mirrorflow record, DEBUG included; librdkafka's held-back repeats forgotten, so a
    line another test logged within 30 s still shows."""
    caplog.set_level(logging.DEBUG, logger="mirrorflow")
    for found in LIBRDKAFKA_LOG.filters:
        if isinstance(found, RepeatFilter):
            found.seen.clear()
    return caplog


def _fencing(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LIBRDKAFKA_LOG.name and is_fencing_line(r.getMessage())]


def _said(records: list[logging.LogRecord]) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in records]


def test_an_idle_window_logs_what_it_holds_once_and_then_nothing_for_a_minute(
    shared_clusters, unique
) -> None:
    a, b = shared_clusters[:2]
    topic = unique("mb-idle")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, [{"key": b"k", "value": b"v", "partition": 0}])
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 1\n" + MICRO_BATCH)
    window = WindowRun(config, unique("idle"), length_s=20, handover=False)
    window.start()
    result = window.result()

    assert result.ok, (result.error, result.report.failure_message())
    assert result.report.totals()["records"] == 1
    # Its first status (the record copied, two partitions held); then 15 s of nothing: no line.
    assert len(window.lines) == 1, window.lines
    assert window.lines[0].startswith(f"window {window.flow.name}: 1 records"), window.lines


def test_a_handover_reads_as_one_at_info_and_not_as_fatal_errors(shared_clusters, unique, logged) -> None:
    a, b = shared_clusters[:2]
    topic = unique("mb-handlog")
    create_topics(a.bootstrap, (topic, 4))
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 2\n" + MICRO_BATCH)
    producer = SteadyProducer(a.bootstrap, topic, 4, rate=400, seed=SEED)
    producer.start()
    first = WindowRun(config, unique("first"), length_s=6, handover=True, handover_s=120, in_process=True)
    first.start()
    wait_for(
        lambda: sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 4).values())) > 0,
        "the first window copies",
    )
    # The second window copies until it holds every record sent, then is stopped: ending by its
    # clock, it ended on a loaded machine before its last batch saw the producer's last records.
    second = WindowRun(config, unique("second"), length_s=90, handover=False)
    second.start()
    # Every partition gets records each batch: the first window lets its four busy slots go only
    # once the second window's writers fenced them.
    wait_for(lambda: not first.is_alive(), "the first window hands every slot over")
    sent = producer.stop()
    wait_for(
        lambda: sum(map(len, read_topic(b.bootstrap, f"A.{topic}", 4).values())) == sent,
        "the second window copies every record sent",
    )
    second.stop()
    before, after = first.result(), second.result()

    assert before.ok and after.ok, (before.error, after.error)
    assert before.report.window["stopped"] == {"handed over": first.count}
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 4) == sent
    fenced = _fencing(logged)
    assert fenced, "the second window fenced the first window's busy writers, and librdkafka said so"
    assert all(r.levelno == logging.DEBUG for r in fenced), _said(fenced)
    assert all("(a handover: the next window's writer fenced this one" in r.getMessage() for r in fenced)
    window_lines = [r for r in logged.records if r.name == "mirrorflow.window"]
    assert not [r for r in window_lines if r.levelno >= logging.WARNING], _said(window_lines)
    handed = [r.getMessage() for r in window_lines if " handed writer slot" in r.getMessage()]
    second_id = second.driver.plan.run_id
    assert handed and all(f"over to window {second_id}" in line for line in handed), handed
    assert any("its writers fenced this task's writers of" in line for line in handed), handed


def test_a_fencing_by_anything_but_a_newer_window_stays_a_warning_with_its_errors(
    shared_clusters, unique, logged
) -> None:
    a, b = shared_clusters[:2]
    topic = unique("mb-fenced")
    create_topics(a.bootstrap, (topic, 1))
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 1\n" + MICRO_BATCH)
    producer = SteadyProducer(a.bootstrap, topic, 1, rate=200, seed=SEED)
    producer.start()
    window = WindowRun(config, unique("fenced"), length_s=90, handover=False, in_process=True)
    window.start()
    try:
        wait_for(
            lambda: len(read_topic(b.bootstrap, f"A.{topic}", 1)[0]) > 0, "the window copies", timeout_s=60
        )
        # Another writer of the slot, as a second copy of the flow would open it (a micro-batch
        # flow of tasks.max 1 has one writer slot).
        other = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "transactional.id": slot_transactional_id("A", "B", writer_slot(topic, 0, 1), 1),
            }
        )
        other.init_transactions(30)
        wait_for(
            lambda: any("not a newer window" in r.getMessage() for r in logged.records),
            "the window takes its slot back",
            timeout_s=60,
        )
    finally:
        sent = producer.stop()
    try:
        wait_for(
            lambda: len(read_topic(b.bootstrap, f"A.{topic}", 1)[0]) >= sent,
            "the copy goes on with a new writer",
            timeout_s=60,
        )
    finally:
        window.stop()
    result = window.result()

    assert result.ok, (result.error, result.report.failure_message())
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, topic, f"A.{topic}", 1) == sent
    warnings = [r for r in logged.records if "not a newer window" in r.getMessage()]
    assert warnings and all(r.levelno == logging.WARNING and r.name == "mirrorflow.window" for r in warnings)
    # One retake per fencing. The other writer's init_transactions can fence twice: its first
    # InitProducerId aborts the window's open transaction and is answered CONCURRENT_TRANSACTIONS,
    # the window's new writer opens meanwhile, and librdkafka's retry of the InitProducerId
    # fences that one too (seen on a loaded machine).
    assert result.report.window["retakes"] == len(warnings) <= 2, (
        result.report.window["retakes"],
        _said(warnings),
    )
    fenced = _fencing(logged)
    assert any(r.levelno >= logging.ERROR for r in fenced), _said(fenced)
    assert not any(r.levelno == logging.DEBUG or "a handover" in r.getMessage() for r in fenced), _said(
        fenced
    )
    assert not any(" handed writer slot" in r.getMessage() for r in logged.records)
