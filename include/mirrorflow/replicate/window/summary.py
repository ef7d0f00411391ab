"""A window's summary in sentences: what `mirrorflow replicate` prints under the run's table and
what the Spark window job logs when the window ends, from the summary's `window` figures
(driver.py): how long the window copied, its lag, how its tasks ended, what the lost attempts and
the refreshes did. No line is a dict or a list of keys: each says what happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENDINGS = {
    # TaskOutcome.stopped -> (one task, several tasks)
    "handed over": (
        "handed its writer slots over to the next window",
        "handed their writer slots over to the next window",
    ),
    "window over": ("ended with the window", "ended with the window"),
    "stopped": ("was stopped after the batch in flight", "were stopped after the batch in flight"),
    "failed": ("failed", "failed"),
}


def counted(count: int, one: str, many: str | None = None) -> str:
    """`count` things in words: "1 task", "2 tasks", "1,024 batches"."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def joined(parts: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def lag_sentence(window: Mapping[str, Any]) -> str:
    lag = window.get("lag_s") or {}
    if all(lag.get(name) is None for name in ("p50", "p99", "max")):
        return "It measured no lag: no batch ran."
    return (
        f"Its lag over the window was p50 {_seconds(lag.get('p50'))}, p99 {_seconds(lag.get('p99'))}, "
        f"max {_seconds(lag.get('max'))}."
    )


def ended_sentence(window: Mapping[str, Any]) -> str:
    """How the window's tasks ended, in one sentence ("2 tasks handed their writer slots over to
    the next window (2 slots).")."""
    stopped: Mapping[str, int] = window.get("stopped") or {}
    if not stopped:
        return "No task reported how it ended."
    parts = []
    for why, count in sorted(stopped.items(), key=lambda item: (-item[1], item[0])):
        one, many = ENDINGS.get(why, (f"ended ({why})", f"ended ({why})"))
        text = f"{counted(count, 'task')} {one if count == 1 else many}"
        slots = window.get("handed_over_slots")
        if why == "handed over" and slots:
            text += f" ({counted(slots, 'slot')})"
        parts.append(text)
    return joined(parts) + "."


def lost_sentence(window: Mapping[str, Any]) -> str | None:
    """What the task attempts lost mid-window had copied: Spark runs a task again when its
    executor is lost, and the lost attempt's records, committed, are known only from its last
    status."""
    lost = window.get("lost_attempts") or {}
    if not lost.get("count"):
        return None
    return (
        f"{counted(lost['count'], 'task attempt')} lost mid-window had copied "
        f"{counted(lost['records'], 'record')} ({lost['bytes']:,} bytes) by their last status: "
        "committed, and not in the per-partition figures."
    )


def changes_sentence(window: Mapping[str, Any]) -> str | None:
    """What planning again found while the window ran, and writer slots taken back."""
    found = []
    if window.get("created_topics_count"):
        found.append(f"created {counted(window['created_topics_count'], 'topic')}")
    if window.get("grown_topics"):
        found.append(f"grew {counted(len(window['grown_topics']), 'topic')}")
    if window.get("restarted_count"):
        found.append(f"copied {counted(window['restarted_count'], 'partition')} again from the start")
    if window.get("joined_partitions"):
        found.append(f"{counted(window['joined_partitions'], 'new partition')} joined")
    text = ""
    if window.get("refreshes"):
        planned = f"It planned again {counted(window['refreshes'], 'time')}"
        text = f"{planned}: {joined(found)}." if found else f"{planned} and found nothing new."
    if window.get("retakes"):
        text += (
            f" Its tasks took writer slots back {counted(window['retakes'], 'time')} after a writer that "
            "is not a newer window fenced them (another copy of the flow was running)."
        )
    return text.strip() or None


def window_sentences(
    summary: Mapping[str, Any], *, name: str = "The window", records: bool = True
) -> list[str]:
    """The window's summary as sentences, one a line; `name` starts the first ("Window R of A->B"),
    which says the records copied unless `records` is False (a line above says them already)."""
    window = summary.get("window") or {}
    totals = summary.get("totals") or {}
    first = (
        f"{name} copied for {summary.get('seconds', 0):.1f}s in {counted(window.get('batches', 0), 'batch', 'batches')} "
        f"over {counted(window.get('tasks', 0), 'task')}"
    )
    if records and "records" in totals:
        first += f": {counted(totals['records'], 'record')} ({totals.get('bytes', 0):,} bytes)"
    lines = [first + ".", lag_sentence(window), ended_sentence(window)]
    return lines + [line for line in (lost_sentence(window), changes_sentence(window)) if line]
