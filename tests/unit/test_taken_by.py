"""handovers.taken_by: whether a slot's writer, its producer just initialised, may still write,
from the run records read up to then."""

from __future__ import annotations

import json

from mirrorflow.replicate.runs import RunRecord
from mirrorflow.replicate.window.channel import STATUS, TAKEOVER
from mirrorflow.replicate.window.handovers import taken_by
from mirrorflow.replicate.window.share import Assignment

MINE = Assignment(flow="A->B", run_id="w1", plan_offset=100, index=0, tasks=2, spans=(), writer_slots=2)


def _takeover(
    offset: int, *, plan_offset: int, slots: list[int], writer_slots: int, attempt: str = "x"
) -> RunRecord:
    body = {"plan_offset": plan_offset, "attempt": attempt, "slots": slots, "writer_slots": writer_slots}
    return RunRecord(offset, "A->B", "w2", TAKEOVER, json.dumps(body), 0)


def test_a_newer_window_of_another_slot_count_takes_every_slot() -> None:
    records = [_takeover(130, plan_offset=120, slots=[2], writer_slots=3)]
    why = taken_by(records, 0, assignment=MINE, attempt="a", own_offset=110)
    assert "window w2 announced that it takes writer slot 0 of A->B over" in why
    assert taken_by(records, 1, assignment=MINE, attempt="a", own_offset=None)


def test_a_newer_window_of_the_same_count_takes_only_the_slots_it_names() -> None:
    records = [_takeover(130, plan_offset=120, slots=[1], writer_slots=2)]
    assert taken_by(records, 0, assignment=MINE, attempt="a", own_offset=110) == ""
    assert taken_by(records, 1, assignment=MINE, attempt="a", own_offset=110)


def test_older_windows_own_records_and_other_kinds_take_nothing() -> None:
    records = [
        _takeover(90, plan_offset=80, slots=[0, 1], writer_slots=3),  # an older window's
        _takeover(111, plan_offset=100, slots=[0, 1], writer_slots=2, attempt="a"),  # this attempt's own
        RunRecord(140, "A->B", "w2", STATUS, "{}", 0),
    ]
    assert taken_by(records, 0, assignment=MINE, attempt="a", own_offset=111) == ""


def test_a_later_attempt_of_the_same_window_takes_the_slot() -> None:
    records = [_takeover(150, plan_offset=100, slots=[0], writer_slots=2, attempt="b")]
    assert taken_by(records, 0, assignment=MINE, attempt="a", own_offset=111)
    # Stored before this attempt's own takeover: an earlier attempt's, which takes nothing.
    assert taken_by(records, 0, assignment=MINE, attempt="a", own_offset=160) == ""
