"""A run's per-topic table, the same for `mirrorflow replicate` (a terminal) and the report task
(a log): built once here, printed by the CLI, rendered to plain lines for a log.

A log has no width: rendered lines are as long as their content, never wrapped or cut at 80
columns as rich does for output that is not a terminal.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mirrorflow.replicate.plan import Plan

TABLE_ROWS = 50  # topics in the run table, the worst first; the totals line counts every topic
LOG_WIDTH = 100_000  # wider than any row, so that nothing wraps; rich trims nothing it does not need


def summary_table(plan: Plan, summary: Mapping[str, Any]) -> Table:
    """One row per source topic of the plan, copied or not: the summary's topics first (the
    worst first: failed partitions, offsets lost, lag left), then the rest by name, at most
    TABLE_ROWS of them; the caption says how many are left out."""
    per_topic = plan.summary()
    copied = summary.get("topics", {})
    worst = [t for t in copied if t in per_topic]
    shown = set(worst)
    names = [*worst, *(t for t in sorted(per_topic) if t not in shown)][:TABLE_ROWS]
    left_out = len(per_topic) - len(names)
    table = Table(
        title=f"{plan.flow} {plan.mode} run {plan.run_id}",
        caption=f"the {len(names)} worst topics; {left_out:,} more not shown, the totals count them"
        if left_out
        else None,
    )
    for column in (
        "source topic",
        "remote topic",
        "partitions",
        "planned",
        "records",
        "bytes",
        "lag left",
        "lost to retention",
    ):
        table.add_column(column, justify="left" if "topic" in column else "right", overflow="fold")
    table.add_column("failed", justify="right")
    lag = summary.get("lag_left", {})
    remote = {s.topic: s.remote_topic for s in plan.spans}
    for topic in names:
        row = per_topic[topic]
        done = copied.get(topic, {})
        failed = done.get("failed", 0)
        lost = done.get("lost_to_retention", row["lost"])
        table.add_row(
            escape(topic),
            escape(remote[topic]),
            str(row["partitions"]),
            f"{row['pending']:,}",
            f"{done.get('records', 0):,}",
            f"{done.get('bytes', 0):,}",
            "unknown" if summary.get("lag_unknown") else f"{done.get('lag_left', lag.get(topic, 0)):,}",
            f"[yellow]{lost:,}[/yellow]" if lost else "0",
            f"[red]{failed}[/red]" if failed else "0",
        )
    return table


def totals_line(plan: Plan, summary: Mapping[str, Any]) -> str:
    """Every topic of the run in one line, those the table leaves out included."""
    totals = summary["totals"]
    lag = totals.get("lag_left")
    return (
        f"total: {len(plan.summary()):,} topic(s), {totals['partitions']:,} partition(s) copied, "
        f"{summary['planned_offsets']:,} offset(s) planned, {totals['records']:,} record(s), "
        f"{totals['bytes']:,} bytes, {totals['transactions']:,} transaction(s), "
        f"{totals['offset_syncs']:,} offset-sync(s), lag left "
        + ("unknown" if lag is None or summary.get("lag_unknown") else f"{lag:,}")
        + f", {totals['lost_to_retention']:,} lost to retention, "
        f"{totals['failed_partitions']:,} failed partition(s); {summary['seconds']:.1f}s"
    )


def plain_lines(renderable: Any) -> list[str]:
    """`renderable` as plain text lines for a log: no colours, no markup, no wrapping."""
    out = io.StringIO()
    console = Console(file=out, width=LOG_WIDTH, color_system=None, force_terminal=False, soft_wrap=True)
    console.print(renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def run_table_lines(plan: Plan, summary: Mapping[str, Any]) -> list[str]:
    """The run's table and its totals line, as plain lines for a task log."""
    lines = plain_lines(summary_table(plan, summary)) if plan.spans else []
    return [*lines, totals_line(plan, summary)]


def topic_figures_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A row per topic: the topic's name first, left and taken as text (a topic may be named
    like rich markup), then its figures, right; a number is written with thousands separators,
    a string (already marked up) as it is."""
    table = Table(title=title)
    for index, column in enumerate(columns):
        table.add_column(column, justify="right" if index else "left")
    for topic, *figures in rows:
        table.add_row(escape(topic), *(f"{f:,}" if isinstance(f, int) else f for f in figures))
    return table


def plan_lines(overview: Mapping[str, Any]) -> list[str]:
    """A plan as its task logs it (service.plan_overview): a row per topic, the most lost and
    pending first (at most service.TOPIC_ROWS), and one line of totals."""
    table = topic_figures_table(
        f"{overview['flow']} {overview['mode']} plan {overview['run_id']}",
        ("source topic", "partitions", "pending", "ranges", "lost to retention"),
        (
            (topic, row["partitions"], row["pending"], row["ranges"], row["lost"])
            for topic, row in overview["topics"].items()
        ),
    )
    more = overview["topics_count"] - len(overview["topics"])
    return [
        *(plain_lines(table) if overview["topics"] else []),
        *([f"... and {more:,} more topic(s); the totals count them"] if more > 0 else []),
        f"plan: {overview['topics_count']:,} topic(s), {overview['partitions']:,} partition(s), "
        f"{overview['pending']:,} offset(s) pending in {overview['ranges']:,} range(s) over "
        f"{overview['units']:,} partition(s) to copy",
    ]
