"""The failover table, row per group and partition, and the divergent-tail table, built once
for `mirrorflow failover` (a terminal) and the Airflow tasks that move groups (a log, through
replicate.tables.plain_lines)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from mirrorflow.ops.failover import REFUSED, FailoverResult


def failover_table(result: FailoverResult) -> Table:
    title = (
        f"{'dry run: ' if result.dry_run else ''}failover {result.source} -> {result.target} ({result.mode})"
    )
    table = Table(title=title)
    columns = (
        "group",
        f"topic on {result.target}",
        "partition",
        f"{result.source} offset",
        f"{result.target} offset",
    )
    for column in (*columns, "lag", "how", "action", "note"):
        table.add_column(column, overflow="fold")
    for row in result.rows:
        action = f"[red]{row.action}[/red]" if row.action == REFUSED else row.action
        table.add_row(
            escape(row.group),
            escape(row.topic),
            str(row.partition),
            str(row.source_offset),
            "-" if row.target_offset is None else str(row.target_offset),
            "-" if row.lag is None else str(row.lag),
            row.status,
            action,
            escape(row.note),
        )
    return table


def divergent_table(result: FailoverResult) -> Table:
    """The divergent tail per partition (the largest first, at most DIVERGENT_ROWS)."""
    what = {None: "not chosen", "replay": "read by the groups", "aside": "kept aside"}[
        result.divergent_choice
    ]
    table = Table(
        title=f"divergent tail on {result.target}: never copied to {result.source} ({what}); "
        f"{result.divergent_count} partition(s)"
    )
    for column in (f"topic on {result.target}", "partition", "offsets", "records at most"):
        table.add_column(column)
    for row in result.divergent:
        table.add_row(
            escape(row["topic"]),
            str(row["partition"]),
            f"{row['start']}..{row['end'] - 1}",
            f"{row['offsets']:,}",
        )
    return table
