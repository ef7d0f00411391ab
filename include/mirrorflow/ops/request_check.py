"""A migration's or verification's request held against the source before anything runs.

The form's fields may each be well formed and still ask for nothing: a topics regex that matches
no topic of the source (a typo, or the remote name `primary.orders` where the source calls it
`orders`), a groups regex that matches no group, a "copy up to" time older than every record.
Such a run would copy nothing, verify nothing and then ask a person to approve a cut-over on
that evidence. Each is said here in one sentence with what the source does hold, at the cost of
one metadata request, one ListConsumerGroups and three batched ListOffsets.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients, check_reachable
from mirrorflow.config import FlowConfig
from mirrorflow.control.groups import list_groups
from mirrorflow.kafka import admin_client
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.policy import is_cycle, should_replicate_topic
from mirrorflow.replicate.until import utc_text

NAMES_SHOWN = 8  # names of what the source holds, in a problem
NAMES_KEPT = 50  # matched topics carried in the check's result (XCom); with their count
TIMEOUT_S = 30.0


@dataclass
class RequestCheck:
    """What the request asks of the source: problems refuse the run, warnings go with it."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)  # the first NAMES_KEPT matched, by name
    topics_count: int = 0
    partitions: int = 0
    groups: list[str] = field(default_factory=list)
    groups_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "warnings": self.warnings,
            "topics": self.topics,
            "topics_count": self.topics_count,
            "partitions": self.partitions,
            "groups": self.groups,
            "groups_count": self.groups_count,
        }


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def check_request(
    flow: FlowConfig,
    clients: FlowClients,
    *,
    topics_title: str,
    groups_regex: str | None = None,
    groups_title: str = "",
    until_ms: int | None = None,
    until_title: str = "",
    copies: bool = True,
    connect_timeout_s: float | None = None,
) -> RequestCheck:
    """`flow` carries the request's topics (planner.with_topics). Both clusters must answer
    within `connect_timeout_s` (ClusterUnreachable otherwise, naming the one that does not)."""
    check_reachable(flow, clients, connect_timeout_s)
    admin = admin_client(clients.source_admin)
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    healthy = {name: meta for name, meta in listed.items() if meta.error is None}
    matched = sorted(name for name in healthy if should_replicate_topic(flow, name))
    result = RequestCheck(topics=matched[:NAMES_KEPT], topics_count=len(matched))
    result.partitions = sum(len(healthy[name].partitions) for name in matched)
    if not matched:
        candidates = sorted(
            name
            for name in healthy
            if not flow.policy.is_internal_topic(name) and not is_cycle(flow.policy, flow.target, name)
        )
        holds = f"it has {len(candidates)}: {_some(candidates)}" if candidates else "it has none"
        done = "copied" if copies else "verified"
        result.problems.append(
            f"{topics_title}: {', '.join(flow.topics)!r} matches no topic of {flow.source} that can be {done} "
            f"({holds}); the expression must match whole names, as {flow.source} calls them."
        )
    if groups_regex is not None:
        pattern = re.compile(groups_regex)
        groups = list_groups(admin)
        chosen = [g for g in groups if pattern.fullmatch(g)]
        result.groups, result.groups_count = chosen[:NAMES_KEPT], len(chosen)
        if not chosen:
            holds = f"it has {len(groups)}: {_some(groups)}" if groups else "it has none"
            result.problems.append(
                f"{groups_title}: {groups_regex!r} matches no consumer group of {flow.source} ({holds}); "
                "the expression must match whole group names, or leave the field empty to copy only."
            )
    if until_ms is not None and matched:
        result.warnings += _until_warnings(admin, healthy, matched, until_ms, until_title, copies)
    return result


def _until_warnings(
    admin: Any, listed: dict[str, Any], topics: list[str], until_ms: int, title: str, copies: bool
) -> list[str]:
    """A time before every record (the run then covers none) or after now (it then stops at
    each partition's end when the run starts)."""
    if until_ms > time.time() * 1000:
        return [
            f"{title} {utc_text(until_ms)} is in the future: each partition stops at its end when the run "
            "starts, as with 'now'."
        ]
    parts = [(t, p) for t in topics for p in listed[t].partitions]
    earliest = list_offsets(admin, parts, OffsetSpec.earliest())
    latest = list_offsets(admin, parts, OffsetSpec.latest(), read_committed=False)
    holding = [tp for tp in parts if latest[tp] > earliest[tp]]
    if not holding:
        return []
    at_time = list_offsets(admin, holding, OffsetSpec.for_timestamp(until_ms))
    if all(0 <= at_time[tp] <= earliest[tp] for tp in holding):
        what = "copies" if copies else "verifies"
        return [
            f"{title} {utc_text(until_ms)} is before the oldest record of the chosen topics: this run "
            f"{what} no record (write 'now', or a later time)."
        ]
    return []
