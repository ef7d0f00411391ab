"""librdkafka's lines of a fenced writer (copy/fencing_log.py), as confluent-kafka hands them to a
producer's `logger`: held while the writer's slot is watched, at DEBUG once the window says the
fencing was a handover, at their own levels when it says it was not, when nobody decides in time,
and at once for a producer nobody watches. The real handover is in
tests/integration/test_window_logs.py."""

from __future__ import annotations

import logging
import uuid

import pytest

from mirrorflow.kafka import LIBRDKAFKA_LOG
from mirrorflow.replicate.copy import fencing_log
from mirrorflow.replicate.copy.calls import new_client_config
from mirrorflow.replicate.copy.fencing_log import FENCINGS, ProducerLog, is_fencing_line

FORMAT = "%s [%s] %s"  # what confluent-kafka's log callback passes: facility, client name, text
FATAL = (
    "FATAL",
    "A->B|target-producer#producer-9",
    "Fatal error: Local: This instance has been fenced by a newer instance",
)
TXNERR = ("TXNERR", "A->B|target-producer#producer-9", "Fatal transaction error: ... (_FENCED)")
ADDPARTS = (
    "ADDPARTS",
    "A->B|target-producer#producer-9",
    "Producer attempted an operation with an old epoch",
)
PURGE = ("PURGE", "A->B|target-producer#producer-9", "Purged 3 messages")


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="test.fencing")
    return caplog


def _producer(tid: str) -> ProducerLog:
    return ProducerLog(logging.getLogger("test.fencing"), tid)


def _fenced(producer: ProducerLog) -> None:
    producer.log(logging.WARNING, FORMAT, *ADDPARTS)
    producer.log(logging.ERROR, FORMAT, *TXNERR)
    producer.log(logging.CRITICAL, FORMAT, *FATAL)


def _levels(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.args[0]) for r in caplog.records]  # type: ignore[index]


def test_a_handover_puts_the_held_fencing_lines_and_later_ones_at_debug(logged) -> None:
    tid = f"handover-{uuid.uuid4().hex}"
    FENCINGS.watch([tid])
    producer = _producer(tid)
    producer.log(logging.INFO, FORMAT, "INIT", "x", "starting")  # not a fencing: at once
    _fenced(producer)
    assert _levels(logged) == [("INFO", "INIT")]

    assert FENCINGS.expected([tid]) == 3
    producer.log(logging.ERROR, FORMAT, *PURGE)  # after the fencing, on the same producer
    assert _levels(logged) == [
        ("INFO", "INIT"),
        ("DEBUG", "ADDPARTS"),
        ("DEBUG", "TXNERR"),
        ("DEBUG", "FATAL"),
        ("DEBUG", "PURGE"),
    ]
    assert all("(a handover" in r.getMessage() for r in logged.records[1:])
    FENCINGS.forget([tid])


def test_a_fencing_that_is_no_handover_is_logged_at_its_own_levels(logged) -> None:
    tid = f"retaken-{uuid.uuid4().hex}"
    FENCINGS.watch([tid])
    _fenced(_producer(tid))
    assert FENCINGS.unexpected([tid]) == 3
    assert _levels(logged) == [("WARNING", "ADDPARTS"), ("ERROR", "TXNERR"), ("CRITICAL", "FATAL")]
    # The slot is taken back with a new writer: still watched.
    _fenced(_producer(tid))
    assert len(logged.records) == 3
    FENCINGS.forget([tid])
    assert _levels(logged)[3:] == [("WARNING", "ADDPARTS"), ("ERROR", "TXNERR"), ("CRITICAL", "FATAL")]


def test_a_producer_nobody_watches_logs_as_it_comes(logged) -> None:
    _fenced(_producer(f"batch-{uuid.uuid4().hex}"))
    assert _levels(logged) == [("WARNING", "ADDPARTS"), ("ERROR", "TXNERR"), ("CRITICAL", "FATAL")]


def test_lines_nobody_decides_on_are_logged_at_their_levels_in_time(logged) -> None:
    tid = f"undecided-{uuid.uuid4().hex}"
    FENCINGS.watch([tid])
    _fenced(_producer(tid))
    assert FENCINGS.overdue(max_age_s=60) == 0 and not logged.records
    assert FENCINGS.overdue(max_age_s=0) == 3
    assert _levels(logged) == [("WARNING", "ADDPARTS"), ("ERROR", "TXNERR"), ("CRITICAL", "FATAL")]
    FENCINGS.forget([tid])


def test_an_ending_task_logs_what_is_still_held_by_what_it_knows(logged) -> None:
    leaving, other = f"leaving-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"
    FENCINGS.watch([leaving, other])
    _fenced(_producer(leaving))
    _fenced(_producer(other))
    FENCINGS.forget([leaving, other], expected=[leaving])
    levels = [(r.levelname, r.getMessage().startswith("FATAL")) for r in logged.records]
    assert levels.count(("DEBUG", True)) == 1 and levels.count(("CRITICAL", True)) == 1


def test_copy_producers_log_through_python_logging_with_their_transactional_id() -> None:
    plain = new_client_config({"bootstrap.servers": "x"})
    assert plain["logger"] is LIBRDKAFKA_LOG
    slot = new_client_config({"bootstrap.servers": "x", "transactional.id": "t-1"})
    assert isinstance(slot["logger"], ProducerLog) and slot["logger"].transactional_id == "t-1"
    assert slot["logger"].base is LIBRDKAFKA_LOG
    # A config built from one that had a ProducerLog gets its own, around the same base.
    again = new_client_config({**slot, "transactional.id": "t-2"})
    assert again["logger"].transactional_id == "t-2" and again["logger"].base is LIBRDKAFKA_LOG


@pytest.mark.parametrize(
    ("text", "fencing"),
    [
        ("Fatal error: Local: This instance has been fenced by a newer instance", True),
        (
            "Failed to add partitions to transaction: Broker: Producer attempted an operation with an old epoch",
            True,
        ),
        ("ProduceRequest failed: Broker: INVALID_PRODUCER_EPOCH", True),
        ("Connect to ipv4#127.0.0.1:9092 failed: Connection refused", False),
    ],
)
def test_fencing_lines_are_told_by_their_words(text, fencing) -> None:
    assert is_fencing_line(text) is fencing
    assert fencing_log.HOLD_S >= 30
