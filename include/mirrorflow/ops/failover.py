"""Failover and failback: move consumer groups from one cluster to the other, exactly.

`failover(config, A, B, groups_regex)` translates the chosen groups' committed offsets on A
*now* (offset-syncs, then provenance headers: control/translation) and commits them on B, so each
group continues on B with the first record it had not consumed on A. Failback is the same call
in the other direction: it needs the flow B->A (which copied B's new data to A), and offsets on
topics that came from A (`A.orders` on B) translate back to the original topic through their
provenance.

Rules:
- a group with active members on B is refused, with the reason, and nothing is changed for it;
  other groups still move;
- a dry run changes nothing and returns the same table;
- if A cannot be reached (a real disaster), the offsets come from what B holds: the latest
  checkpoint per partition in `A.checkpoints.internal` (RemoteClusterUtils.translateOffsets
  semantics), as of the last checkpoint pass. A group re-reads what it consumed on A after that
  pass; nothing is skipped.

Every row says how its offset was found (exact, ahead of replication, MM2-precise, mm2 for
partitions MirrorMaker 2 copied, checkpoint), and the lag each group will find on B.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.checkpoints import read_checkpoints
from mirrorflow.control.flows import load, reverse_flow
from mirrorflow.control.groups import Committed, commit_offsets, committed_offsets, describe_groups
from mirrorflow.control.translation.bounds import partition_bounds, records_left
from mirrorflow.control.translation.group_pass import relevant_group_offsets, translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.control.translation.rule import Status
from mirrorflow.kafka import KafkaCallError, admin_client
from mirrorflow.kafka_diagnosis import no_answer
from mirrorflow.ops.acls import require_job_acls
from mirrorflow.ops.divergent_tail import (
    ASIDE,
    CHOICES,
    REPLAY,
    Tail,
    aside_topic,
    divergent_tails,
    keep_aside,
)

log = logging.getLogger(__name__)

LIVE = "live"
CHECKPOINTS = "checkpoints"
CHECKPOINT_STATUS = "checkpoint"
UNTRANSLATED = "untranslated"

COMMITTED, WOULD_COMMIT, REFUSED, NOT_MOVED = "committed", "would commit", "refused", "not moved"
DIVERGENT_ROWS = 100


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
    status: str  # exact | ahead | mm2-precise | mm2 | checkpoint | untranslated
    action: str  # committed | would commit | refused | not moved
    note: str = ""


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


def _missing_flow(config: MirrorConfig, source: str, target: str) -> str:
    back = config.replication_enabled(target, source)
    what = "Failback" if back else "Failover"
    message = (
        f"{what} from {source} to {target} needs the flow {source}->{target}, which copies {source}'s data "
        f"to {target}, but it is not enabled in {config.source}: add `{source}->{target}.enabled = true`, "
        f"let mirrorflow__{source}__{target}__replicate catch up"
    )
    if back:
        message += f" with what was written to {source} since the failover from {target}"
    return message + ", then run this again"


def _groups_pattern(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise FailoverError(
            f"--groups {regex!r} is not a valid regular expression ({exc}); it must match whole group "
            "names, e.g. 'orders-.*'"
        ) from exc


def _live_rows(
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


def _checkpoint_rows(
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
                source_topic=_upstream_name(flow, topic),
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


def _upstream_name(flow: FlowConfig, downstream: str) -> str:
    """The source-side name of a checkpointed topic (display only)."""
    policy = flow.policy
    if policy.topic_source(downstream) == flow.source:
        return policy.upstream_topic(downstream) or downstream
    return policy.format_remote_topic(flow.target, downstream)


def failover(
    config: MirrorConfig | str,
    source: str,
    target: str,
    groups: str,
    *,
    dry_run: bool = False,
    from_checkpoints: bool | None = None,
    source_timeout_s: float = 15.0,
    connection_extra: ConnectionExtra | None = None,
    divergent: str | None = None,
    require_enabled: bool = True,
) -> FailoverResult:
    """Move the groups matching `groups` from `source` to `target`; see the module docstring.

    `from_checkpoints`: None = use the checkpoints on the target only if the source does not
    answer within `source_timeout_s`; True = always; False = never (fail if unreachable).
    `require_enabled`: False for a migration's cut-over, whose copy ran between two clusters
    with no enabled flow (it wrote the same offset-syncs and provenance).
    `divergent`: what to do with records on the target the flow back never copied
    (divergent_tail.REPLAY or ASIDE); required when there are any, unless `dry_run`.
    """
    if divergent is not None and divergent not in CHOICES:
        raise FailoverError(f"divergent tail choice {divergent!r}: choose one of {', '.join(CHOICES)}")
    loaded = load(config)
    for alias in (source, target):
        if alias not in loaded.clusters:
            raise FailoverError(
                f"{alias!r} is not a cluster of {loaded.source} ({', '.join(loaded.clusters)})"
            )
    if source == target:
        raise FailoverError(f"--from and --to are both {source}: name two different clusters")
    if require_enabled and not loaded.replication_enabled(source, target):
        raise FailoverError(_missing_flow(loaded, source, target))
    pattern = _groups_pattern(groups)
    flow = loaded.flow(source, target)
    clients = FlowClients.resolve(flow, connection_extra)
    result = FailoverResult(source, target, groups, dry_run, LIVE)

    use_checkpoints = bool(from_checkpoints)
    if from_checkpoints is None:
        why = no_answer(clients.source_admin, source_timeout_s)
        if why is not None:
            use_checkpoints = True
            result.warnings.append(
                f"{source} did not answer within {source_timeout_s:.0f}s ({why}): offsets come from the "
                f"latest checkpoints on {target}"
            )
    require_job_acls(
        flow,
        "failover",
        clients,
        sides=("target",) if use_checkpoints else ("source", "target"),
        group_filter=pattern.fullmatch,
    )
    if use_checkpoints:
        result.mode = CHECKPOINTS
        rows, commits = _checkpoint_rows(flow, clients, pattern, groups)
    else:
        rows, commits = _live_rows(loaded, flow, clients, pattern, groups)

    tails = _tails_read(loaded, result, rows, commits, use_checkpoints, connection_extra)
    if tails and divergent is None and not dry_run:
        raise FailoverError(_divergent_message(result, tails))
    result.divergent_choice = divergent if tails else None

    target_admin = admin_client(clients.target_admin)
    states = describe_groups(target_admin, {r.group for r in rows})
    for group, state in states.items():
        if state.active:
            result.refused[group] = (
                f"group {group} has {state.members} active member(s) on {target} (state {state.state}): "
                f"stop its consumers on {target} and run failover again; nothing was changed for it"
            )
    # A group that has already read further on the target than failover would place it (its
    # consumers ran there, or failed over before) would be rewound: refused as well.
    on_target = committed_offsets(target_admin, [g for g in commits if g not in result.refused])
    placed = _place_around_tails(commits, on_target, tails, divergent, target)
    for group, offsets in commits.items():
        there = on_target.get(group, {})
        ahead = [
            f"{topic}-{partition} at {there[(topic, partition)].offset} (failover would set {wanted.offset})"
            for (topic, partition), wanted in sorted(offsets.items())
            if (topic, partition) in there and there[(topic, partition)].offset > wanted.offset
        ]
        if ahead:
            result.refused[group] = (
                f"group {group} has already read further on {target}: {', '.join(ahead[:5])}"
                + (f" and {len(ahead) - 5} more" if len(ahead) > 5 else "")
                + f"; failover never rewinds a group: it is consuming on {target} already, or reset its "
                f"offsets there yourself; nothing was changed for it"
            )
    bounds = partition_bounds(
        clients.target_admin, [(r.topic, r.partition) for r in rows if r.target_offset is not None]
    )
    movable = {g: offsets for g, offsets in commits.items() if g not in result.refused}
    if not dry_run and divergent == ASIDE and tails and movable:
        result.aside_copied = keep_aside(
            tails.values(),
            cluster=target,
            leaving=source,
            producer_config=clients.target_producer,
            consumer_config=clients.target_consumer,
            admin_config=clients.target_admin,
            replication_factor=flow.replication_factor,
        )
    if not dry_run:
        for group, outcome in commit_offsets(target_admin, movable).items():
            if outcome.error is not None:
                result.refused[group] = f"group {group}: {outcome.error}; nothing was changed for it"
            else:
                result.committed.append(group)
        result.committed.sort()

    finals = []
    for row in rows:
        target_offset, note = row.target_offset, row.note
        moved = placed.get((row.group, row.topic, row.partition))
        if moved is not None:
            target_offset, tail_note = moved
            note = f"{note}; {tail_note}" if note else tail_note
        finals.append((row, target_offset, note))
    # Records, not offsets: a group that read all of an exactly-once copy has 0 left, though a
    # transaction marker follows its last record.
    exact_left = records_left(
        clients.target_consumer,
        [
            (r.topic, r.partition, t)
            for r, t, _ in finals
            if t is not None and (r.topic, r.partition) in bounds
        ],
        bounds,
    )
    for row, target_offset, note in finals:
        action = row.action
        if row.group in result.refused:
            action = REFUSED
        elif action == WOULD_COMMIT and not dry_run:
            action = COMMITTED
        lag = None
        if target_offset is not None and (row.topic, row.partition) in bounds:
            lag = exact_left.get(
                (row.topic, row.partition, target_offset),
                max(0, bounds[(row.topic, row.partition)][1] - target_offset),
            )
        result.rows.append(
            dataclasses.replace(row, target_offset=target_offset, lag=lag, action=action, note=note)
        )
    ahead = sum(1 for r in result.rows if r.status == Status.AHEAD.value)
    if ahead:
        result.warnings.append(
            f"{ahead} partition(s) were read on {source} further than {flow.name} has copied (status ahead)"
        )
    scanned = sum(1 for r in result.rows if r.status == Status.SCANNED.value)
    if scanned:
        result.warnings.append(
            f"{scanned} partition(s) hold {flow.name}'s records out of source order (an at-least-once re-copy): "
            "placed by reading them through, so nothing is skipped but records held twice may be read twice "
            "(status scanned)"
        )
    by_mm2 = sum(1 for r in result.rows if r.status == Status.MM2.value)
    if by_mm2:
        result.warnings.append(
            f"{by_mm2} partition(s) were replicated by MirrorMaker 2, whose copies carry no provenance headers: "
            f"placed with MM2's own translation (one record past its nearest offset-sync), so a group re-reads up "
            f"to about offset.lag.max ({flow.offset_lag_max}) records there and skips none (status mm2)"
        )
    log.info(
        "%s %s -> %s (%s): %d groups committed, %d refused",
        "dry run of failover" if dry_run else "failover",
        source,
        target,
        result.mode,
        len(result.committed),
        len(result.refused),
    )
    return result


def _tails_read(
    config: MirrorConfig,
    result: FailoverResult,
    rows: list[FailoverRow],
    commits: dict[str, dict[tuple[str, int], Committed]],
    use_checkpoints: bool,
    connection_extra: ConnectionExtra | None,
) -> dict[tuple[str, int], Tail]:
    """The divergent tails of the partitions the moving groups will read on the target."""
    wanted = {where for offsets in commits.values() for where in offsets}
    if not wanted:
        return {}
    if use_checkpoints:
        if config.replication_enabled(result.target, result.source):
            result.warnings.append(
                f"records on {result.target} that {result.target}->{result.source} never copied are not looked "
                f"for: {result.source} is down and holds that flow's progress"
            )
        return {}
    tails = divergent_tails(
        config,
        result.source,
        result.target,
        {topic for topic, _ in wanted},
        connection_extra=connection_extra,
    )
    tails = {where: tail for where, tail in tails.items() if where in wanted}
    ordered = sorted(tails.values(), key=lambda t: (-t.offsets, t.topic, t.partition))
    result.divergent = [t.to_dict() for t in ordered[:DIVERGENT_ROWS]]
    result.divergent_count = len(ordered)
    if tails:
        result.warnings.append(
            f"{len(tails)} partition(s) the groups will read on {result.target} hold "
            f"{sum(t.offsets for t in tails.values()):,} offsets that {result.target}->{result.source} never "
            f"copied to {result.source} (the divergent tail)"
        )
    return tails


def _divergent_message(result: FailoverResult, tails: dict[tuple[str, int], Tail]) -> str:
    lines = [
        f"the groups would read records on {result.target} that {result.target}->{result.source} never copied "
        f"to {result.source} (produced there after its last copy); nothing was changed. Choose what happens "
        "to them: `replay` (the groups read them in place, in order) or `aside` (they are copied to "
        f"<topic>{aside_topic('')} on {result.target} and the groups start after them):"
    ]
    for row in result.divergent[:20]:
        lines.append(
            f"  {row['topic']}-{row['partition']}: offsets {row['start']}..{row['end'] - 1} ({row['offsets']:,})"
        )
    if len(tails) > 20:
        lines.append(f"  ... and {len(tails) - 20} more partitions")
    return "\n".join(lines)


def _place_around_tails(
    commits: dict[str, dict[tuple[str, int], Committed]],
    on_target: dict[str, dict[tuple[str, int], Committed]],
    tails: dict[tuple[str, int], Tail],
    choice: str | None,
    target: str,
) -> dict[tuple[str, str, int], tuple[int, str]]:
    """Move each group's offset in a partition with a divergent tail as the choice says (in
    place, in `commits`), and return the rows' new offsets with a note saying what the group
    will read. replay: the group reads the tail after what it read elsewhere; if it already read
    part of it on the target before it left (its offset there lies inside the tail), it keeps
    that offset. aside: the group starts after the tail. A dry run without a choice shows replay."""
    placed: dict[tuple[str, str, int], tuple[int, str]] = {}
    for group, offsets in commits.items():
        there = on_target.get(group, {})
        for where, wanted in list(offsets.items()):
            tail = tails.get(where)
            if tail is None:
                continue
            before = there.get(where)
            if choice == ASIDE:
                if before is not None and before.offset > tail.end:
                    continue  # read past the tail on the target: the ahead check refuses it
                offsets[where] = Committed(tail.end, wanted.metadata)
                placed[(group, *where)] = (
                    tail.end,
                    f"{tail.offsets:,} divergent offsets {tail.start}..{tail.end - 1} kept aside in "
                    f"{aside_topic(tail.topic)}, not read",
                )
                continue
            start = wanted.offset
            if before is not None and start < before.offset <= tail.end:
                offsets[where] = Committed(before.offset, before.metadata)
                start = before.offset
                already = f"keeps its offset {start} on {target} (read there before it left); "
            else:
                already = ""
            unread = max(0, tail.end - max(start, tail.start))
            placed[(group, *where)] = (
                start,
                f"{already}reads {unread:,} divergent offsets {max(start, tail.start)}..{tail.end - 1} "
                f"({REPLAY})",
            )
    return placed
