"""Where a failover's offsets come from, one row per group partition: translated now from the
source's committed offsets (the source is reachable), or the last checkpoints on the target (it
is not); each row says how its offset was found and whether the group can move."""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.control.checkpoints import read_checkpoints
from mirrorflow.control.flows import reverse_flow
from mirrorflow.control.groups import Committed
from mirrorflow.control.translation.bounds import partition_bounds
from mirrorflow.control.translation.group_pass import relevant_group_offsets, translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.control.translation.rule import Status
from mirrorflow.kafka import KafkaCallError

LIVE = "live"
CHECKPOINTS = "checkpoints"
CHECKPOINT_STATUS = "checkpoint"
UNTRANSLATED = "untranslated"
REMOVED_STATUS = "removed"
"""The target removed copies (its retention, DeleteRecords) the group had not read: it lands on
the first copy still there and skips them (ops.failover.removed_ahead)."""
COMMITTED, WOULD_COMMIT, REFUSED, NOT_MOVED = "committed", "would commit", "refused", "not moved"


class FailoverError(RuntimeError):
    """Failover cannot start; nothing was changed. The message says what to fix."""


@dataclass(frozen=True, slots=True)
class FailoverRow:
    group: str
    topic: str  # the topic the group consumes on the target cluster
    partition: int
    source_topic: str
    source_offset: int
    target_offset: int | None
    lag: int | None  # records left on the target for this group
    status: str  # exact | ahead | mm2-precise | mm2 | scanned | checkpoint | untranslated | removed
    action: str  # committed | would commit | refused | not moved
    note: str = ""


def live_rows(
    config: MirrorConfig, flow: FlowConfig, clients: FlowClients, pattern: re.Pattern[str], regex: str
) -> tuple[list[FailoverRow], dict[str, dict[tuple[str, int], Committed]]]:
    groups = relevant_group_offsets(flow, clients, wanted=pattern.fullmatch, any_topic=True)
    if not groups.offsets:
        raise FailoverError(
            f"no group on {flow.source} matches {regex!r} (whole name) and has committed offsets; "
            f"{groups.listed} groups exist there"
        )
    with Translator(flow, clients, reverse=reverse_flow(config, flow)) as translator:
        translated = translate_offsets(translator, groups.offsets)
    rows, commits = [], {}
    for t in translated:
        if t.translation is None or t.target_topic is None:
            rows.append(
                FailoverRow(
                    group=t.group,
                    topic=t.target_topic or "-",
                    partition=t.partition,
                    source_topic=t.topic,
                    source_offset=t.committed.offset,
                    target_offset=None,
                    lag=None,
                    status=UNTRANSLATED,
                    action=NOT_MOVED,
                    note=t.reason or "",
                )
            )
            continue
        note = ""
        if t.translation.status == Status.AHEAD:
            note = (
                f"read {t.translation.unreplicated} offsets {flow.name} has not copied yet; they will be read "
                "again once copied: let the flow catch up and fail over again to avoid that"
            )
        elif t.translation.status == Status.MM2_PRECISE:
            note = "provenance headers are off for this flow: MM2's rule, may re-deliver a few records"
        elif t.translation.status == Status.SCANNED:
            note = (
                f"{flow.name}'s records in this partition are out of source order (an at-least-once re-copy "
                "wrote some twice): placed at the first one at or after the group's position, found by reading "
                "the partition; nothing skipped, records held twice may be read twice"
            )
        elif t.translation.status == Status.MM2:
            note = (
                f"copied by MirrorMaker 2 (no provenance headers): MM2's translation on its offset-syncs, "
                f"re-reads up to about offset.lag.max ({flow.offset_lag_max}) records"
            )
        rows.append(
            FailoverRow(
                group=t.group,
                topic=t.target_topic,
                partition=t.partition,
                source_topic=t.topic,
                source_offset=t.committed.offset,
                target_offset=t.translation.downstream_offset,
                lag=None,
                status=t.translation.status.value,
                action=WOULD_COMMIT,
                note=note,
            )
        )
        commits.setdefault(t.group, {})[(t.target_topic, t.partition)] = Committed(
            t.translation.downstream_offset, t.committed.metadata
        )
    return rows, commits


def checkpoint_rows(
    flow: FlowConfig, clients: FlowClients, pattern: re.Pattern[str], regex: str
) -> tuple[list[FailoverRow], dict[str, dict[tuple[str, int], Committed]]]:
    try:
        stored = read_checkpoints(clients.target_consumer, flow.checkpoints_topic)
    except KafkaCallError as exc:
        raise FailoverError(
            f"could not read {flow.checkpoints_topic} on {flow.target} to its end ({exc}); a failover from "
            "part of it could move groups to older checkpoints than the ones it holds, so nothing was "
            "changed: check the target cluster and run the failover again"
        ) from exc
    chosen = {key: entry for key, entry in stored.items() if pattern.fullmatch(key[0])}
    # A checkpoint past the end of its partition on the target (the remote topic was deleted
    # and created again, or truncated, after it was written) names a position that holds
    # nothing the group read: never commit it.
    ends = partition_bounds(clients.target_admin, {(topic, p) for _, topic, p in chosen})
    now_ms = int(time.time() * 1000)
    rows, commits = [], {}
    for (group, topic, partition), entry in sorted(chosen.items()):
        checkpoint = entry.checkpoint
        age_s = max(0, (now_ms - entry.timestamp_ms) // 1000)
        bounds = ends.get((topic, partition))
        usable = bounds is not None and checkpoint.downstream_offset <= bounds[1]
        if usable:
            note = (
                f"last checkpoint, {age_s}s old: what the group read on {flow.source} after it is read again"
            )
        elif bounds is not None:
            note = (
                f"the last checkpoint ({age_s}s old) points at offset {checkpoint.downstream_offset}, past the "
                f"end of {topic}-{partition} on {flow.target} ({bounds[1]}): the remote topic was deleted or "
                "truncated since; not moved"
            )
        else:
            note = (
                f"the last checkpoint ({age_s}s old) points at offset {checkpoint.downstream_offset}, but "
                f"{topic}-{partition} does not exist on {flow.target}: the remote topic was deleted since; not moved"
            )
        rows.append(
            FailoverRow(
                group=group,
                topic=topic,
                partition=partition,
                source_topic=upstream_name(flow, topic),
                source_offset=checkpoint.upstream_offset,
                target_offset=checkpoint.downstream_offset if usable else None,
                lag=None,
                status=CHECKPOINT_STATUS if usable else UNTRANSLATED,
                action=WOULD_COMMIT if usable else NOT_MOVED,
                note=note,
            )
        )
        if not usable:
            continue
        commits.setdefault(group, {})[(topic, partition)] = Committed(
            checkpoint.downstream_offset, checkpoint.metadata
        )
    if not rows:
        raise FailoverError(
            f"{flow.source} is unreachable and {flow.checkpoints_topic} on {flow.target} holds no checkpoint "
            f"of a group matching {regex!r}: there is nothing to fail over from. Was the "
            f"mirrorflow__{flow.source}__{flow.target}__checkpoints DAG running?"
        )
    return rows, commits


def upstream_name(flow: FlowConfig, downstream: str) -> str:
    """The source-side name of a checkpointed topic (display only)."""
    policy = flow.policy
    if policy.topic_source(downstream) == flow.source:
        return policy.upstream_topic(downstream) or downstream
    return policy.format_remote_topic(flow.target, downstream)


@dataclass
class FailoverResult:
    source: str
    target: str
    groups_regex: str
    dry_run: bool
    mode: str
    rows: list[FailoverRow] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Partitions the moving groups will read on the target that hold records the flow back to
    # the source never copied (divergent_tail), the first DIVERGENT_ROWS of them, and the choice.
    divergent: list[dict[str, Any]] = field(default_factory=list)
    divergent_count: int = 0
    divergent_choice: str | None = None
    aside_copied: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
