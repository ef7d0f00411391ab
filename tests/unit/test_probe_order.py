"""The prober checks the order of every flow record it reads against its neighbours in the
partition, whichever order the reads came in."""

from __future__ import annotations

from mirrorflow.control.translation.coverage import Covered
from mirrorflow.control.translation.rule import FlowRecord


def records(*pairs: tuple[int, int]) -> list[FlowRecord]:
    return [FlowRecord(offset, source) for offset, source in pairs]


def test_records_in_source_order_are_never_flagged() -> None:
    covered = Covered()
    covered.add(10, 20, records((12, 102), (15, 105)))
    covered.add(0, 10, records((3, 93), (9, 99)))
    covered.add(30, 40, records((31, 200)))
    assert covered.inverted_at == -1


def test_a_repeat_inside_one_read_is_flagged_at_the_earlier_record() -> None:
    covered = Covered()
    covered.add(0, 10, records((1, 5), (2, 6), (3, 5), (4, 6)))
    assert covered.inverted_at == 2


def test_an_inversion_across_two_reads_is_flagged_whichever_came_first() -> None:
    later_first = Covered()
    later_first.add(100, 110, records((101, 40)))
    later_first.add(0, 10, records((5, 70)))
    assert later_first.inverted_at == 5
    earlier_first = Covered()
    earlier_first.add(0, 10, records((5, 70)))
    earlier_first.add(100, 110, records((101, 40)))
    assert earlier_first.inverted_at == 5
    earlier_first.add(50, 60, records((55, 71)))  # between them: 70 < 71 but 71 > 40
    assert earlier_first.inverted_at == 55
