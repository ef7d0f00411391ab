"""Lag in seconds on the status page, for micro-batch flows (FlowStatus.window): how long the
oldest record not yet on the target has waited now, and p50 / p99 over the last minutes, under
the lag in records of the flow's row and of each topic's row.

Records say how much is left; seconds say how far behind a recovery would start, which is what
a disaster-recovery user compares with a recovery point objective. A batch flow has no window
and shows nothing here: its lag in time is the schedule's.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from mirrorflow.replicate.window.lag import LAG_MINUTES


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} s" if value < 60 else f"{value / 60:.1f} min"


def flow_seconds(window: Mapping[str, Any] | None) -> str:
    """The sub-line of a flow's lag cell: lag in seconds now, p50 and p99 of the last minutes."""
    if window is None:
        return ""
    recent = window["lag_recent_s"]
    return _sub(
        window["lag_now_s"],
        recent,
        f"window {window['run_id']}: {window['records']:,} records copied, {window['tasks']} task(s)",
    )


def topic_seconds(window: Mapping[str, Any] | None, topic: str) -> str:
    """The same sub-line for one topic, when the window names it (its most lagging ones)."""
    row = None if window is None else window["topics"].get(topic)
    if row is None:
        return ""
    return _sub(row["lag_now_s"], row, f"{row['records']:,} records copied by window {window['run_id']}")


def _sub(now: float, recent: Mapping[str, float | None], title: str) -> str:
    text = (
        f"{seconds(now)} behind; p50 {seconds(recent.get('p50'))}, p99 {seconds(recent.get('p99'))} "
        f"(last {LAG_MINUTES} min)"
    )
    return f'<div class="sub" title="{html.escape(title)}">{html.escape(text)}</div>'
