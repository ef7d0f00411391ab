"""Which of a window's figures become a log line (figures.StatusLines): a line whenever something
moved, one a minute while nothing does. An idle window printed a line every 5 s, 720 an hour."""

from __future__ import annotations

from mirrorflow.replicate.window.figures import IDLE_LINE_S, StatusLines
from mirrorflow.replicate.window.settings import STATUS_S


def _merged(records: int, lag_now_s: float = 0.0, partitions: int = 4) -> dict:
    return {
        "records": records,
        "lag_now_s": lag_now_s,
        "lag_recent_s": {"p50": 0.2, "p99": 0.4, "max": 0.5},
        "partitions": partitions,
        "tasks": 2,
        "batches": 100,
    }


def _said(figures, *, seconds: float = 3600) -> list[str]:
    """The lines of a window whose tasks report `figures(t)` every STATUS_S for `seconds`."""
    lines = StatusLines("A->B", now=0.0, every_s=STATUS_S * 0.8)
    said = []
    for step in range(1, int(seconds / STATUS_S) + 1):
        now = step * STATUS_S
        line = lines.line(figures(now), now)
        if line is not None:
            said.append(line)
    return said


def test_an_idle_hour_is_a_line_a_minute_not_one_per_status_round() -> None:
    said = _said(lambda _now: _merged(1_000))
    # The first round says what the window holds (4 partitions where it knew none), then one a minute.
    assert 60 <= len(said) <= 3600 / IDLE_LINE_S + 1, len(said)
    assert said[0].startswith("window A->B: 1,000 records (200/s), lag now 0.00s")
    assert said[1] == (
        "window A->B: 1,000 records (0/s), lag now 0.00s, p50 0.20s, p99 0.40s (last minutes); "
        "4 partitions, 2 task(s), 100 batches; nothing to copy in the last 60s"
    )


def test_records_moving_get_a_line_every_status_round() -> None:
    said = _said(lambda now: _merged(int(now) * 100), seconds=60)
    assert len(said) == 12
    assert said[1].startswith("window A->B: 1,000 records (100/s)") and "nothing to copy" not in said[1]


def test_records_waiting_while_none_are_copied_are_no_idle_window() -> None:
    """A stuck copy (lag now growing, no record copied) is something to see at every round."""
    said = _said(lambda now: _merged(500, lag_now_s=now), seconds=60)
    assert len(said) == 12 and not any("nothing to copy" in line for line in said)


def test_a_partition_handed_over_or_joining_is_said_at_once() -> None:
    said = _said(lambda now: _merged(500, partitions=4 if now < 30 else 3), seconds=60)
    assert len(said) == 2 and "3 partitions" in said[1]
