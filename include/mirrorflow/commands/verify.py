"""`mirrorflow verify`: compare what a flow copied with its source, record by record.

The run takes the verify DAG's steps (plan, compare, report; all three stored in the
run-records topic, so the status page shows a CLI verification like a DAG one), with local
worker processes instead of a Spark job. Exit status: 0 verified (or the sample passed), 1
something is wrong, 3 nothing is wrong but the verification is incomplete (offsets not copied
yet, or records without provenance that may be the copies of missing ones).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mirrorflow.commands.console import make_console
from mirrorflow.commands.flow_args import (
    CONFIG_ARGUMENT,
    FLOW_OPTION,
    PLAN_ERRORS,
    TIMEOUT_OPTION,
    cli_run_id,
    describe_kafka_error,
    load_flow,
    parse_topics,
    parse_until_option,
)
from mirrorflow.ops.acl_check import MissingAcl
from mirrorflow.ops.verification import service as verify_service
from mirrorflow.ops.verification.plan import VerifyError
from mirrorflow.ops.verification.report import VerificationFailed, mismatch_line
from mirrorflow.replicate.tables import topic_figures_table

INCOMPLETE_EXIT = 3
MISMATCH_LINES = 20


def _sample(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise click.BadParameter(
            f"{value} is not a fraction in (0, 1]; e.g. 0.05 compares about 5% of each partition"
        )
    return value


def summary_table(summary: dict[str, Any]) -> Table:
    return topic_figures_table(
        f"verification {summary['run_id']} of {summary['flow']}",
        ("topic", "partitions", "compared", "matched", "wrong", "explained", "not copied yet"),
        (
            (
                topic,
                row["partitions"],
                row["compared"],
                row["matched"],
                f"[red]{row['wrong']:,}[/red]" if row["wrong"] else 0,
                row["explained"],
                row["pending"],
            )
            for topic, row in summary["topics"].items()
        ),
    )


def removed_lines(summary: dict[str, Any]) -> list[str]:
    """One line per partition whose copies the target removed though they are still needed (the
    verdict is incomplete for them): the source range, and who needs it."""
    totals = summary["totals"]
    removed = summary.get("removed") or []
    lines = [
        f"{row['topic']}-{row['partition']}: {row['records']:,} copied record(s) removed on the target, "
        f"source offsets {row['from']:,} to {row['to'] - 1:,}, still needed from offset "
        f"{row['needed_from']:,} by {row['needed_by']}"
        for row in removed
    ]
    more = totals.get("removed_partitions", 0) - len(removed)
    if more > 0:
        lines.append(
            f"... and {more:,} more partitions with copies removed on the target (the stored report has them all)"
        )
    return lines


def print_summary(console: Console, summary: dict[str, Any]) -> None:
    if summary["topics"]:
        console.print(summary_table(summary))
    more = summary["topic_count"] - len(summary["topics"])
    if more > 0:
        console.print(f"... and {more:,} more topics (the stored report has them all)")
    totals = summary["totals"]
    console.print(
        f"{totals['source_records']:,} source record(s) compared with {totals['target_records']:,} copies in "
        f"{totals['partitions']:,} partition(s): {totals['matched']:,} equal, {totals['wrong_total']:,} wrong, "
        f"{totals['explained_total']:,} explained differences, {totals['pending']:,} offsets not copied yet",
        highlight=False,
    )
    explained = {k: v for k, v in totals["explained"].items() if v}
    if explained:
        console.print("explained: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in explained.items()))
    if summary["missing_remote"]:
        console.print(
            f"[yellow]{summary['missing_remote_count']:,} topic(s) have no remote topic on the target: "
            f"{escape(', '.join(summary['missing_remote']))}[/yellow]"
        )
    if totals["unattributed"]:
        console.print(
            f"[yellow]{totals['unattributed']:,} record(s) on the target carry no provenance (copied by MM2, or "
            "written there directly): they cannot be matched to source records[/yellow]"
        )
    if summary["confidence"]:
        console.print(f"sample: {escape(summary['confidence'])}")
    for row in summary["mismatches"][:MISMATCH_LINES]:
        console.print(f"[red]{escape(mismatch_line(row))}[/red]", highlight=False)
    if summary["mismatch_count"] > MISMATCH_LINES:
        console.print(f"[red]... and {summary['mismatch_count'] - MISMATCH_LINES:,} more mismatches[/red]")
    for row in summary["errors"]:
        console.print(f"[red]{escape(row['topic'])}-{row['partition']}: {escape(row['error'])}[/red]")
    for line in removed_lines(summary):
        console.print(f"[yellow]{escape(line)}[/yellow]", highlight=False)
    colour = {"verified": "green", "sample passed": "green", "incomplete": "yellow"}.get(
        summary["verdict"], "red"
    )
    console.print(f"[bold {colour}]{summary['verdict'].upper()}[/bold {colour}]")


@click.command(name="verify")
@CONFIG_ARGUMENT
@FLOW_OPTION
@click.option(
    "--topics",
    default=None,
    metavar="REGEX",
    callback=parse_topics,
    help="Verify only topics whose whole name matches (default: the flow's topics).",
)
@click.option(
    "--until",
    default="now",
    show_default=True,
    callback=parse_until_option,
    help="Verify up to 'now' (the last stable offsets) or a time: epoch milliseconds or ISO-8601 (UTC if no zone).",
)
@click.option(
    "--sample",
    type=float,
    default=None,
    callback=_sample,
    metavar="FRACTION",
    help="Compare random stretches of 1,000 offsets covering this fraction of each partition (default: all).",
)
@click.option(
    "--seed", type=int, default=None, help="Seed of the sampled stretches (default: from the run id)."
)
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@TIMEOUT_OPTION
def verify_command(
    config_file: Path,
    flow_pair: tuple[str, str],
    topics: str | None,
    until: int | None,
    sample: float | None,
    seed: int | None,
    output: str,
    connect_timeout: float | None,
) -> None:
    """Compare every record the flow copied with its source record (key, value, headers,
    timestamp, order), or random stretches of them, and store the report. Exits 0 when
    verified, 1 when a record is wrong, 3 when nothing is wrong but not everything was copied."""
    console = make_console()
    err = make_console(stderr=True)
    source, target = flow_pair
    config, flow = load_flow(err, config_file, source, target, require_enabled=False)
    try:
        summary = verify_service.run_locally(
            config,
            source,
            target,
            run_id=cli_run_id(),
            topics=topics,
            until=until,
            sample=sample,
            seed=seed,
            connect_timeout_s=connect_timeout,
        )
    except VerificationFailed as exc:
        summary = dict(exc.summary)
    except (*PLAN_ERRORS, MissingAcl, VerifyError) as exc:
        message = describe_kafka_error(exc) if isinstance(exc, KafkaException) else str(exc)
        raise click.ClickException(f"{flow.name} verification failed to run: {message}") from exc
    if output == "json":
        console.print_json(json.dumps(summary))
    else:
        print_summary(console, summary)
    if summary["verdict"] == "failed":
        raise SystemExit(1)
    if summary["verdict"] == "incomplete":
        raise SystemExit(INCOMPLETE_EXIT)


COMMANDS = [verify_command]
