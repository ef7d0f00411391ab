"""A window's summary as `mirrorflow replicate` prints it and the Spark window job logs it: every
line a sentence, never a dict (`tasks ended: {'handed over': 1}`), a label list or `None s`."""

from __future__ import annotations

import io
import re

from rich.console import Console

from mirrorflow.commands.outcome import RunOutcome
from mirrorflow.commands.run_display import print_outcome
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.window.summary import window_sentences

SENTENCE = re.compile(r"^[A-Z0-9][^{}\[\]]*[.]$")


def _summary(**window: object) -> dict:
    return {
        "seconds": 8.04,
        "planned_offsets": 0,
        "totals": {"records": 1234, "bytes": 56789, "transactions": 40, "offset_syncs": 12},
        "window": {
            "tasks": 2,
            "batches": 40,
            "stopped": {"handed over": 1, "window over": 1},
            "handed_over_slots": 128,
            "retakes": 0,
            "lost_attempts": {"count": 0, "records": 0, "bytes": 0},
            "joined_partitions": 0,
            "lag_s": {"p50": 0.21, "p99": 0.45, "max": 0.6},
            "refreshes": 0,
            **window,
        },
    }


def _printed(summary: dict) -> list[str]:
    out = io.StringIO()
    plan = Plan("r", "A", "B", "replicate", 0, 100, 1 << 20, "exactly-once", 2, ())
    console = Console(file=out, width=250)
    print_outcome(console, console, RunOutcome({}, plan, summary, 1))
    return out.getvalue().splitlines()


def test_the_clis_window_summary_is_sentences() -> None:
    lines = _printed(_summary())
    window = lines[1:-1]  # between the totals line and OK
    assert window == [
        "The window copied for 8.0s in 40 batches over 2 tasks.",
        "Its lag over the window was p50 0.21s, p99 0.45s, max 0.60s.",
        "1 task handed its writer slots over to the next window (128 slots) and 1 task ended with the window.",
    ]
    assert all(SENTENCE.match(line) for line in window), window


def test_lost_attempts_refreshes_and_retakes_are_sentences_too() -> None:
    summary = _summary(
        stopped={"handed over": 2},
        handed_over_slots=256,
        lost_attempts={"count": 2, "records": 1500, "bytes": 70000},
        refreshes=12,
        created_topics_count=1,
        grown_topics={"A.orders": [2, 3]},
        restarted_count=0,
        joined_partitions=3,
        retakes=1,
    )
    lines = window_sentences(summary, name="Window r of A->B")
    assert lines == [
        "Window r of A->B copied for 8.0s in 40 batches over 2 tasks: 1,234 records (56,789 bytes).",
        "Its lag over the window was p50 0.21s, p99 0.45s, max 0.60s.",
        "2 tasks handed their writer slots over to the next window (256 slots).",
        "2 task attempts lost mid-window had copied 1,500 records (70,000 bytes) by their last status: "
        "committed, and not in the per-partition figures.",
        "It planned again 12 times: created 1 topic, grew 1 topic and 3 new partitions joined. Its tasks took "
        "writer slots back 1 time after a writer that is not a newer window fenced them (another copy of the "
        "flow was running).",
    ]
    assert all(SENTENCE.match(line) for line in lines), lines


def test_a_window_without_lag_or_endings_says_so_in_words() -> None:
    lines = window_sentences(_summary(lag_s={"p50": None, "p99": None, "max": None}, stopped={}, batches=0))
    assert lines[1:] == ["It measured no lag: no batch ran.", "No task reported how it ended."]
    assert not any("None" in line for line in lines)
