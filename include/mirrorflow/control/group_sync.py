"""MM2's `sync.group.offsets` job: commit translated offsets on the target for idle groups.

MM2's rules (MirrorCheckpointTask.syncGroupOffset), with exact offsets instead of MM2's:
- a group with active members on the target is left alone (MM2 tries and the broker refuses
  it; here it is skipped up front, with the reason logged);
- a group the target does not know (dead, never seen) gets every translated offset;
- an empty group gets a partition's offset only where it has none, or has a lower one: the
  target's offsets are never rewound (its consumers may have read further there);
- offsets go to the remote topic names (`A.orders`) with the source commit's metadata.

Translations are made fresh in each pass (not read back from the checkpoints), so a group is
never synced to an older position than the one its last checkpoint pass already saw.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.clients import FlowClients, check_reachable
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.flows import load, replication_flow, require_group_sync, reverse_flow
from mirrorflow.control.groups import Committed, commit_offsets, committed_offsets, describe_groups
from mirrorflow.control.translation.group_pass import by_group, relevant_group_offsets, translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.kafka import admin_client
from mirrorflow.ops.acl_check import require_job_acls

log = logging.getLogger(__name__)


@dataclass
class GroupSyncReport:
    flow: str
    groups_synced: list[str] = field(default_factory=list)
    partitions_committed: int = 0
    not_rewound: int = 0
    skipped_groups: dict[str, str] = field(default_factory=dict)
    untranslated: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "groups_synced": list(self.groups_synced),
            "partitions_committed": self.partitions_committed,
            "not_rewound": self.not_rewound,
            "skipped_groups": dict(self.skipped_groups),
            "untranslated": self.untranslated,
            "seconds": self.seconds,
        }


def group_sync_pass(
    flow: FlowConfig, clients: FlowClients, *, reverse: FlowConfig | None = None
) -> GroupSyncReport:
    started = time.monotonic()
    report = GroupSyncReport(flow.name)
    groups = relevant_group_offsets(flow, clients)
    with Translator(flow, clients, reverse=reverse) as translator:
        rows = translate_offsets(translator, groups.offsets)
    wanted: dict[str, dict[tuple[str, int], Committed]] = {}
    for group, group_rows in by_group(rows).items():
        for row in group_rows:
            if row.translation is None or row.target_topic is None:
                report.untranslated += 1
                continue
            wanted.setdefault(group, {})[(row.target_topic, row.partition)] = Committed(
                row.translation.downstream_offset, row.committed.metadata
            )
    target = admin_client(clients.target_admin)
    names = sorted(wanted)
    # A few groups at a time: state, offsets and commit of one window follow each other within
    # moments, so a consumer that joins, commits and leaves between our read and our commit has
    # as little time to do so as Kafka's API allows (AlterConsumerGroupOffsets has no
    # compare-and-set; it only refuses groups that have members when it runs).
    for i in range(0, len(names), SYNC_WINDOW):
        window = {g: wanted[g] for g in names[i : i + SYNC_WINDOW]}
        _sync_window(flow, target, window, report)
    report.groups_synced.sort()
    report.seconds = round(time.monotonic() - started, 3)
    log.info(
        "%s: synced %d partitions of %d groups (%d kept because the target was further, %d groups skipped)",
        flow.name,
        report.partitions_committed,
        len(report.groups_synced),
        report.not_rewound,
        len(report.skipped_groups),
    )
    return report


SYNC_WINDOW = 50


def _sync_window(
    flow: FlowConfig,
    target: Any,
    wanted: dict[str, dict[tuple[str, int], Committed]],
    report: GroupSyncReport,
) -> None:
    states = describe_groups(target, wanted)
    # Every idle group's offsets, DEAD ones too: one may have come to life since it was described.
    current = committed_offsets(target, [g for g, s in states.items() if not s.active])
    to_commit: dict[str, dict[tuple[str, int], Committed]] = {}
    for group, offsets in wanted.items():
        state = states[group]
        if state.active:
            reason = (
                f"{state.members} active member(s) on {flow.target} (state {state.state}); "
                "MM2 never moves the offsets of a group in use"
            )
            report.skipped_groups[group] = reason
            log.info("%s: not syncing group %s: %s", flow.name, group, reason)
            continue
        existing = current.get(group, {})
        chosen = {}
        for tp, committed in offsets.items():
            there = existing.get(tp)
            if there is not None and there.offset >= committed.offset:
                report.not_rewound += 1
                continue
            chosen[tp] = committed
        if chosen:
            to_commit[group] = chosen
    for group, outcome in commit_offsets(target, to_commit).items():
        if outcome.error is not None:
            report.skipped_groups[group] = outcome.error
            log.warning("%s: offsets of group %s not synced: %s", flow.name, group, outcome.error)
            continue
        report.groups_synced.append(group)
        report.partitions_committed += outcome.committed


def sync_group_offsets(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    connection_extra: ConnectionExtra | None = None,
) -> dict[str, Any]:
    """The group-sync job of flow source->target, once: what its DAG task and the CLI run."""
    loaded = load(config)
    flow = replication_flow(loaded, source, target)
    require_group_sync(flow)
    clients = FlowClients.resolve(flow, connection_extra)
    check_reachable(flow, clients)
    require_job_acls(flow, "group_sync", clients)
    return group_sync_pass(flow, clients, reverse=reverse_flow(loaded, flow)).summary()
