"""What a terminal run shows: progress bars while it copies, the plan before, the outcome after
(every list at most LOST_LINES long, with its count)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from mirrorflow.commands.outcome import RunOutcome
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.report import worst_rows
from mirrorflow.replicate.tables import summary_table
from mirrorflow.replicate.watch import Figures, RunProgress, UnitKey
from mirrorflow.replicate.window.summary import window_sentences

TOPIC_ROWS = 20  # topics with their own progress row; the total row always shows


class CopyProgress:
    """The run's progress (watch.RunProgress) shown as a bar per topic and one in total."""

    def __init__(self, progress: Progress, plan: Plan) -> None:
        self._progress = progress
        self._run = RunProgress(plan)
        self._total = progress.add_task("all topics", total=self._run.total().planned, partitions="")
        self._rows: dict[str, TaskID] = {}
        for topic in sorted(self._run.by_topic)[:TOPIC_ROWS]:
            figures = self._run.figures(self._run.by_topic[topic])
            remote = self._run.units[self._run.by_topic[topic][0]].remote_topic
            self._rows[topic] = progress.add_task(f"{topic} → {remote}", total=figures.planned, partitions="")
        self._render()

    @property
    def keys(self) -> list[UnitKey]:
        return self._run.keys

    def observed(self, stored: dict[UnitKey, int]) -> None:
        self._run.observed(stored)
        self._render()

    def finished(self, result: UnitResult) -> None:
        self._run.finished(result)
        self._render()

    @staticmethod
    def _partitions(figures: Figures) -> str:
        text = f"{figures.partitions_done}/{figures.partitions} partitions"
        return text + (f", [red]{figures.failed} failed[/red]" if figures.failed else "")

    def _render(self) -> None:
        total = self._run.total()
        self._progress.update(self._total, completed=total.done, partitions=self._partitions(total))
        for topic, task in self._rows.items():
            figures = self._run.figures(self._run.by_topic[topic])
            self._progress.update(task, completed=figures.done, partitions=self._partitions(figures))


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} offsets"),
        TextColumn("{task.fields[partitions]}"),
        TimeElapsedColumn(),
        console=console,
    )


def _print_lines(console: Console, lines: list[str], total: int, what: str) -> None:
    """The first LOST_LINES of `lines`, then how many of `total` were left out."""
    for line in lines[:LOST_LINES]:
        console.print(line, highlight=False)
    shown = min(len(lines), LOST_LINES)
    if total > shown:
        console.print(f"  ... and {total - shown:,} more {what}", highlight=False)


def print_plan(console: Console, planned: dict[str, Any], plan: Plan) -> None:
    """What the plan does and cannot do; every list at most LOST_LINES long, with its count."""
    per_topic = plan.summary()
    pending = sum(s.pending for s in plan.spans)
    console.print(
        f"[bold]{plan.mode}[/bold] {escape(plan.flow)} run [bold]{escape(plan.run_id)}[/bold] "
        f"({plan.delivery}): {len(per_topic)} topic(s), {len(plan.units())} partition(s) to copy, "
        f"{pending:,} offset(s) planned",
        highlight=False,
    )
    created = [f"  created {escape(remote)} on {escape(plan.target)}" for remote in planned["created_topics"]]
    _print_lines(console, created, planned.get("created_topics_count", len(created)), "created")
    grown = [
        f"  grew {escape(remote)} from {before} to {after} partitions"
        for remote, (before, after) in planned["grown_topics"].items()
    ]
    _print_lines(console, grown, planned.get("grown_topics_count", len(grown)), "grown")
    lossy = {topic: row for topic, row in per_topic.items() if row["lost"]}
    deleted = [
        f"  [yellow]{escape(topic)}: {row['lost']:,} offset(s) were deleted from the source "
        "(retention or DeleteRecords) before they were copied; copying from the earliest offset[/yellow]"
        for topic, row in worst_rows(lossy, ("lost",), LOST_LINES).items()
    ]
    _print_lines(console, deleted, len(lossy), "topics with deleted offsets")
    errors = [
        f"  [red]{escape(topic)} is not copied: {escape(why)}[/red]"
        for topic, why in sorted(planned["topic_errors"].items())
    ]
    _print_lines(console, errors, planned.get("topic_errors_count", len(errors)), "topics not copied")
    restarted = [
        f"  [yellow]{escape(partition)}: {escape(why)}[/yellow]"
        for partition, why in planned["restarted_partitions"].items()
    ]
    _print_lines(
        console,
        restarted,
        planned.get("restarted_count", len(restarted)),
        "partitions copied again from the start",
    )
    if not plan.spans:
        console.print(
            f"  nothing to copy: no topic of {escape(plan.source)} passes the flow's topic filter and cycle check",
            highlight=False,
        )
    elif not plan.units():
        console.print("  nothing to copy: every partition is caught up", highlight=False)


LOST_LINES = 20


def print_outcome(console: Console, err: Console, outcome: RunOutcome) -> None:
    summary = outcome.summary
    if outcome.plan.spans:
        console.print(summary_table(outcome.plan, summary))
    totals = summary["totals"]
    passes = f" in {outcome.passes} passes" if outcome.passes > 1 else ""
    console.print(
        f"{totals['records']:,} record(s), {totals['bytes']:,} bytes, {totals['transactions']:,} transaction(s), "
        f"{totals['offset_syncs']:,} offset-sync(s){passes}; {summary['seconds']:.1f}s",
        highlight=False,
    )
    if "window" in summary:
        for line in window_sentences(summary, records=False):
            console.print(escape(line), highlight=False)
    for gone in summary.get("lost", [])[:LOST_LINES]:
        ranges = ", ".join(f"{start}-{end - 1}" for start, end in gone["offsets"])
        console.print(
            f"[yellow]{escape(gone['topic'])}-{gone['partition']}: offsets {ranges} were deleted from the source "
            "(retention or DeleteRecords) before they could be copied[/yellow]",
            highlight=False,
        )
    lossy = summary.get("lost_partitions", len(summary.get("lost", [])))
    if lossy > LOST_LINES:
        console.print(f"[yellow]... and {lossy - LOST_LINES:,} more partitions with losses[/yellow]")
    if totals.get("retimed"):
        where = ", ".join(f"{r['topic']}-{r['partition']}" for r in summary.get("retimed", [])[:LOST_LINES])
        console.print(
            f"[yellow]{totals['retimed']:,} record(s) with timestamp 0 were written with the copy's time "
            f"instead (librdkafka cannot write a timestamp of 0): {escape(where)}[/yellow]",
            highlight=False,
        )
    if outcome.failure:
        err.print("[bold red]FAILED[/bold red]", highlight=False)
        err.print(escape(outcome.failure), highlight=False)
    else:
        console.print(f"[bold green]OK[/bold green] {escape(outcome.plan.flow)} {outcome.plan.mode} run done")
