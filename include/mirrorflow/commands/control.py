"""`mirrorflow checkpoints | sync-group-offsets | translate`: the consumer-offset jobs from a terminal.

`checkpoints` and `sync-group-offsets` run MM2's job once, through the function their DAGs
call, for every flow that has it on (or the flows named with --flow); `translate` shows what a
group's committed offsets (or given offsets) translate to, and how, without writing anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mirrorflow.clients import FlowClients
from mirrorflow.commands.console import make_console
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, load_config
from mirrorflow.control.checkpoints import emit_checkpoints
from mirrorflow.control.flows import JobDisabled, checkpoints_enabled, group_sync_enabled, reverse_flow
from mirrorflow.control.group_sync import sync_group_offsets
from mirrorflow.control.groups import Committed
from mirrorflow.control.translation.group_pass import (
    TranslatedOffset,
    relevant_group_offsets,
    translate_offsets,
)
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.kafka import KafkaCallError

CONFIG = click.argument(
    "config_file", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)


def _flow_names(value: tuple[str, ...] | str) -> list[tuple[str, str]]:
    names = [value] if isinstance(value, str) else list(value)
    out = []
    for name in names:
        source, arrow, target = name.partition("->")
        if not arrow or not source.strip() or not target.strip():
            raise click.BadParameter(f"{name!r} is not a flow; write SOURCE->TARGET, e.g. primary->backup")
        out.append((source.strip(), target.strip()))
    return out


def _load(config_file: Path) -> MirrorConfig:
    try:
        return load_config(str(config_file))
    except ConfigError as exc:
        raise click.ClickException(f"{exc}\nRun `mirrorflow validate {config_file}` for the fixes.") from exc


def _pairs(
    config: MirrorConfig, names: tuple[str, ...], has_job: Callable[[FlowConfig], bool]
) -> list[tuple[str, str]]:
    for source, target in _flow_names(names):
        for alias in (source, target):
            if alias not in config.clusters:
                raise click.BadParameter(
                    f"{alias!r} is not a cluster of {config.source} ({', '.join(config.clusters)})",
                    param_hint="--flow",
                )
    if names:
        return _flow_names(names)
    return [(f.source, f.target) for f in config.replication_flows if has_job(f)]


def _run_job(
    config_file: Path,
    names: tuple[str, ...],
    has_job: Callable[[FlowConfig], bool],
    job: Callable[..., dict[str, Any]],
    show: Callable[[Console, dict[str, Any]], None],
    what: str,
) -> None:
    console = make_console()
    config = _load(config_file)
    pairs = _pairs(config, names, has_job)
    if not pairs:
        console.print(f"no flow in {config_file} has {what} on")
        return
    for source, target in pairs:
        try:
            summary = job(config, source, target)
        except JobDisabled as exc:
            raise click.ClickException(str(exc)) from exc
        except KafkaCallError as exc:
            raise click.ClickException(f"{source}->{target}: {exc}") from exc
        show(console, summary)


FLOWS = click.option(
    "--flow",
    "flow_names",
    multiple=True,
    metavar="SOURCE->TARGET",
    help="Run only this flow (repeatable); default: every enabled flow that has the job on.",
)


def _show_checkpoints(console: Console, summary: dict[str, Any]) -> None:
    table = Table(title=f"checkpoints {summary['flow']}")
    for column in (
        "groups",
        "partitions",
        "translations",
        "written",
        "repeats",
        "downstream rewinds",
        "probes",
        "s",
    ):
        table.add_column(column, justify="right")
    table.add_row(
        f"{summary['groups_checkpointed']}/{summary['groups_listed']}",
        str(summary["partitions"]),
        ", ".join(f"{k} {v}" for k, v in sorted(summary["translations"].items())) or "-",
        str(summary["emitted"]),
        str(summary["repeats_skipped"]),
        str(summary["downstream_rewinds_skipped"]),
        str(summary["probes"]),
        f"{summary['seconds']:.2f}",
    )
    console.print(table)
    for where, reason in sorted(summary["untranslated"].items()):
        console.print(f"  not translated: {escape(where)}: {escape(reason)}", highlight=False)


@click.command(name="checkpoints")
@CONFIG
@FLOWS
def checkpoints_command(config_file: Path, flow_names: tuple[str, ...]) -> None:
    """Run MM2's checkpoint job once: translate group offsets exactly and write checkpoints."""
    _run_job(config_file, flow_names, checkpoints_enabled, emit_checkpoints, _show_checkpoints, "checkpoints")


def _show_group_sync(console: Console, summary: dict[str, Any]) -> None:
    table = Table(title=f"sync-group-offsets {summary['flow']}")
    for column in ("groups synced", "partitions committed", "kept (target further)", "groups skipped", "s"):
        table.add_column(column, justify="right")
    table.add_row(
        str(len(summary["groups_synced"])),
        str(summary["partitions_committed"]),
        str(summary["not_rewound"]),
        str(len(summary["skipped_groups"])),
        f"{summary['seconds']:.2f}",
    )
    console.print(table)
    for group, reason in sorted(summary["skipped_groups"].items()):
        console.print(f"  skipped {escape(group)}: {escape(reason)}", highlight=False)


@click.command(name="sync-group-offsets")
@CONFIG
@FLOWS
def sync_group_offsets_command(config_file: Path, flow_names: tuple[str, ...]) -> None:
    """Run MM2's group offset sync once: commit translated offsets for idle groups on the target."""
    _run_job(
        config_file,
        flow_names,
        group_sync_enabled,
        sync_group_offsets,
        _show_group_sync,
        "sync.group.offsets",
    )


def _parse_offset(text: str) -> tuple[str, int, int]:
    match = re.fullmatch(r"(.+):(\d+):(\d+)", text)
    if not match:
        raise click.BadParameter(
            f"{text!r} is not TOPIC:PARTITION:OFFSET, e.g. orders:0:1234", param_hint="--offset"
        )
    return match.group(1), int(match.group(2)), int(match.group(3))


@click.command(name="translate")
@CONFIG
@click.option(
    "--flow", "flow_name", required=True, metavar="SOURCE->TARGET", help="The flow to translate through."
)
@click.option(
    "--group",
    "group_regex",
    metavar="REGEX",
    help="Translate the committed offsets of these groups (whole names).",
)
@click.option(
    "--offset",
    "offsets",
    multiple=True,
    metavar="TOPIC:PARTITION:OFFSET",
    help="Translate this source offset (repeatable).",
)
def translate_command(
    config_file: Path, flow_name: str, group_regex: str | None, offsets: tuple[str, ...]
) -> None:
    """Show the target offsets for source group offsets, and how each was found; writes nothing."""
    if not group_regex and not offsets:
        raise click.UsageError("name --group REGEX or at least one --offset TOPIC:PARTITION:OFFSET")
    config = _load(config_file)
    ((source, target),) = _flow_names(flow_name)
    try:
        flow = config.flow(source, target)
    except KeyError as exc:
        raise click.BadParameter(str(exc), param_hint="--flow") from exc
    clients = FlowClients.resolve(flow)
    wanted: dict[str, dict[tuple[str, int], Committed]] = {}
    try:
        if group_regex:
            try:
                pattern = re.compile(group_regex)
            except re.error as exc:
                raise click.BadParameter(f"{group_regex!r}: {exc}", param_hint="--group") from exc
            wanted.update(
                relevant_group_offsets(flow, clients, wanted=pattern.fullmatch, any_topic=True).offsets
            )
        for text in offsets:
            topic, partition, offset = _parse_offset(text)
            wanted.setdefault("(given)", {})[(topic, partition)] = Committed(offset, "")
        with Translator(flow, clients, reverse=reverse_flow(config, flow)) as translator:
            rows = translate_offsets(translator, wanted)
            probes = translator.probes
    except KafkaCallError as exc:
        raise click.ClickException(f"{flow.name}: {exc}") from exc
    console = make_console()
    console.print(_translation_table(flow, rows))
    console.print(f"{len(rows)} offsets translated with {probes} probes of the clusters")


def _translation_table(flow: FlowConfig, rows: list[TranslatedOffset]) -> Table:
    table = Table(title=f"translation {flow.name}")
    for column in (
        "group",
        f"topic on {flow.source}",
        "partition",
        "offset",
        f"topic on {flow.target}",
        "offset",
        "how",
    ):
        table.add_column(column, overflow="fold")
    for row in rows:
        translation = row.translation
        how = translation.status.value if translation else f"not translated: {row.reason}"
        if translation and translation.unreplicated:
            how += f" ({translation.unreplicated} offsets not copied yet)"
        table.add_row(
            escape(row.group),
            escape(row.topic),
            str(row.partition),
            str(row.committed.offset),
            escape(row.target_topic or "-"),
            str(translation.downstream_offset) if translation else "-",
            escape(how),
        )
    return table


COMMANDS = [checkpoints_command, sync_group_offsets_command, translate_command]
