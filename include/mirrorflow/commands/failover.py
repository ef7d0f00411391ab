"""`mirrorflow failover CONFIG --from A --to B --groups REGEX [--dry-run]` (failback: swap A and B)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from mirrorflow.commands.console import fail_json, make_console, output_option, print_json
from mirrorflow.config import ConfigError
from mirrorflow.kafka import KafkaCallError
from mirrorflow.ops.divergent_tail import CHOICES
from mirrorflow.ops.failover import FailoverError, failover
from mirrorflow.ops.failover_tables import divergent_table, failover_table


@click.command(name="failover")
@click.argument("config_file", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "source", required=True, metavar="ALIAS", help="The cluster the groups leave.")
@click.option("--to", "target", required=True, metavar="ALIAS", help="The cluster the groups move to.")
@click.option("--groups", required=True, metavar="REGEX", help="Groups to move (regex matching whole names).")
@click.option("--dry-run", is_flag=True, help="Show what would be committed; change nothing.")
@click.option(
    "--from-checkpoints",
    is_flag=True,
    help="Use the latest checkpoints on --to even if --from answers (otherwise only when it does not).",
)
@click.option(
    "--divergent-tail",
    type=click.Choice(CHOICES),
    default=None,
    help="Records on --to that the flow back to --from never copied: `replay` (the groups read them in "
    "place, in order) or `aside` (copied to <topic>.divergent on --to; the groups start after them). "
    "Required when there are any (a dry run shows them).",
)
@click.option(
    "--source-timeout",
    default=15.0,
    show_default=True,
    metavar="SECONDS",
    help="How long --from may take to answer before it counts as down.",
)
@output_option(
    "json: one JSON object on stdout (keys: command, ok, error, dry_run, source, target, mode, moved, refused, "
    "warnings, rows, divergent, ...; see docs/reference/cli.md)."
)
def failover_command(
    config_file: Path,
    source: str,
    target: str,
    groups: str,
    dry_run: bool,
    from_checkpoints: bool,
    divergent_tail: str | None,
    source_timeout: float,
    output: str,
) -> None:
    """Move consumer groups to another cluster at exactly the records they had not read.

    Translates each group's committed offsets on --from now and commits them on --to, unless the
    group has active members there (refused; nothing changed for it). If --from is down, the
    latest checkpoints on --to are used. Failback is the same command in the other direction.
    Exits 1 if any group was refused.
    """
    console = make_console()
    try:
        result = failover(
            str(config_file),
            source,
            target,
            groups,
            dry_run=dry_run,
            from_checkpoints=True if from_checkpoints else None,
            source_timeout_s=source_timeout,
            divergent=divergent_tail,
        )
    except ConfigError as exc:
        message = f"{exc}\nRun `mirrorflow validate {config_file}` for the fixes."
        if output == "json":
            fail_json("failover", message)
        raise click.ClickException(message) from exc
    except (FailoverError, KafkaCallError) as exc:
        if output == "json":
            fail_json("failover", str(exc))
        raise click.ClickException(str(exc)) from exc
    moved = sorted({r.group for r in result.rows if r.action in ("committed", "would commit")})
    if output == "json":
        body = result.to_dict()
        refused = f"{len(result.refused)} group(s) refused" if result.refused else None
        print_json(
            {"command": "failover", "ok": not result.refused, "error": refused, "moved": moved, **body}
        )
        sys.exit(1 if result.refused else 0)
    console.print(failover_table(result))
    if result.divergent:
        console.print(divergent_table(result))
    for warning in result.warnings:
        console.print(f"[yellow]warning[/yellow]: {escape(warning)}", highlight=False)
    for reason in result.refused.values():
        console.print(f"[red]refused[/red]: {escape(reason)}", highlight=False)
    done = "would move" if dry_run else "moved"
    console.print(f"{done} {len(moved)} group(s), refused {len(result.refused)}")
    sys.exit(1 if result.refused else 0)


COMMANDS = [failover_command]
