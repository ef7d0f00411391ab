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
partitions MirrorMaker 2 copied, checkpoint), and the lag each group will find on B; `removed`
where B removed copies (its retention, DeleteRecords) the group had not read, which it skips:
said in the row and a warning, found where A answers.
"""

from __future__ import annotations

import dataclasses
import logging
import re

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.flows import load
from mirrorflow.control.groups import commit_offsets, committed_offsets, describe_groups
from mirrorflow.control.translation.bounds import partition_bounds, records_left
from mirrorflow.control.translation.rule import Status
from mirrorflow.kafka import admin_client
from mirrorflow.kafka_diagnosis import no_answer
from mirrorflow.ops.acl_check import require_job_acls
from mirrorflow.ops.divergent_tail import (
    ASIDE,
    CHOICES,
    keep_aside,
)
from mirrorflow.ops.failover_rows import (
    CHECKPOINT_STATUS,
    CHECKPOINTS,
    COMMITTED,
    LIVE,
    NOT_MOVED,
    REFUSED,
    REMOVED_STATUS,
    UNTRANSLATED,
    WOULD_COMMIT,
    FailoverError,
    FailoverResult,
    FailoverRow,
    checkpoint_rows,
    live_rows,
)
from mirrorflow.ops.failover_tails import divergent_message, place_around_tails, read_tails
from mirrorflow.ops.removed_copies import skipped_records

log = logging.getLogger(__name__)


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
        rows, commits = checkpoint_rows(flow, clients, pattern, groups)
    else:
        rows, commits = live_rows(loaded, flow, clients, pattern, groups)

    tails = read_tails(loaded, result, rows, commits, use_checkpoints, connection_extra)
    if tails and divergent is None and not dry_run:
        raise FailoverError(divergent_message(result, tails))
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
    placed = place_around_tails(commits, on_target, tails, divergent, target)
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
    skipped = {} if use_checkpoints else removed_ahead(flow, clients, finals)
    for row, target_offset, note in finals:
        action = row.action
        status = row.status
        gone = skipped.get((row.group, row.source_topic, row.partition))
        if gone is not None:
            status = REMOVED_STATUS
            removed_note = (
                f"skips source offsets {gone[0]:,} to {gone[1] - 1:,}: their copies were removed on "
                f"{target} (its retention, or a DeleteRecords) before the group read them"
            )
            note = f"{note}; {removed_note}" if note else removed_note
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
            dataclasses.replace(
                row, target_offset=target_offset, lag=lag, action=action, note=note, status=status
            )
        )
    if skipped:
        groups = sorted({group for group, _, _ in skipped})
        result.warnings.append(
            f"{len(skipped)} partition(s) of {len(groups)} group(s) ({', '.join(groups[:5])}"
            + (f" and {len(groups) - 5} more" if len(groups) > 5 else "")
            + f") land past records whose copies {target} removed before the group read them: "
            "those records are not on the target, and the group skips them (status removed)"
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
    log.info("%s", outcome_line(result))
    return result


def removed_ahead(
    flow: FlowConfig, clients: FlowClients, finals: list[tuple[FailoverRow, int | None, str]]
) -> dict[tuple[str, str, int], tuple[int, int]]:
    """Per (group, source topic, partition) the source offsets [first, end) a group would skip
    because the target removed their copies before it read them (ops.removed_copies), for rows
    placed where the source answers (the source says which records those were)."""
    rows = [
        {
            "group": row.group,
            "topic": row.topic,
            "partition": row.partition,
            "source_topic": row.source_topic,
            "source_offset": row.source_offset,
            "target_offset": target_offset,
        }
        for row, target_offset, _ in finals
        if target_offset is not None
    ]
    return skipped_records(flow, clients, rows, {}) if rows else {}


def outcome_line(result: FailoverResult) -> str:
    """The log's one line on a failover. A migration previews before its cut-over and holds the
    cut-over against a fresh preview, so a preview's line ends up just above the commit's: it must
    not read as a cut-over that committed nothing, nor "live" (the offsets' source) as its kind."""
    offsets = (
        f"offsets from the checkpoints on {result.target}"
        if result.mode == CHECKPOINTS
        else f"offsets translated from {result.source}"
    )
    refused = f", {len(result.refused)} refused"
    if result.dry_run:
        movable = {r.group for r in result.rows if r.action == WOULD_COMMIT}
        return (
            f"preview (dry run) of failover {result.source} -> {result.target}, {offsets}: nothing committed; "
            f"{len(movable)} group(s) would move{refused}"
        )
    return (
        f"failover {result.source} -> {result.target}, {offsets}: {len(result.committed)} group(s) "
        f"committed on {result.target}{refused}"
    )


__all__ = [
    "CHECKPOINT_STATUS",
    "CHECKPOINTS",
    "COMMITTED",
    "LIVE",
    "NOT_MOVED",
    "REFUSED",
    "UNTRANSLATED",
    "WOULD_COMMIT",
    "FailoverError",
    "FailoverResult",
    "FailoverRow",
    "failover",
    "outcome_line",
]
