"""What a verification compares, fixed once and stored: per source partition the range to verify
(log start to the last stable offset, or to the offset of `until`, or to the end a migration
fixed), how much of it the flow has copied (its progress, in the current source and remote topic
incarnations) and the target range holding the copies. Read-only on both clusters.

`sample` verifies random contiguous stretches of STRETCH offsets covering that fraction of each
partition instead of all of it (report.confidence says what that proves).

Per partition the plan also fixes from which source offset the target must still hold the copies
(`needed_from`): the lowest committed offset of the groups to move (by default those the flow
checkpoints; a migration names its own), or where a migration's own copy began. A copy the target
removed (its retention, DeleteRecords) below it is explained; at or above it, the copy is not
complete for whoever needs it (see compare).
"""

from __future__ import annotations

import heapq
import json
import math
import random
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.translation.group_pass import relevant_group_offsets
from mirrorflow.kafka import admin_client, topic_ids
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.ops.verification.checks import VerifySpan
from mirrorflow.policy import should_replicate_topic
from mirrorflow.replicate import run_reading, runs
from mirrorflow.replicate.progress import read_progress_entries, split_incarnation
from mirrorflow.replicate.topics import describe_topic_configs

PLAN_KIND = "verify-plan"
STRETCH = 1000  # offsets per sampled stretch
TOPIC_ROWS = 50
TIMEOUT_S = 60.0


class VerifyError(RuntimeError):
    """The verification cannot be planned as asked (the message says what to change)."""


@dataclass(frozen=True)
class VerifyPlan:
    run_id: str
    source: str
    target: str
    created_ms: int
    until_ms: int | None
    sample: float | None
    seed: int
    delivery: str
    tasks_max: int
    spans: tuple[VerifySpan, ...] = ()
    missing_remote: tuple[str, ...] = ()

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    def slices(self) -> list[list[VerifySpan]]:
        """Partitions dealt round-robin over min(tasks.max, partitions) workers, the largest
        first so that no worker ends up with all the big ones."""
        spans = sorted(self.spans, key=lambda s: (-s.offsets, s.topic, s.partition))
        workers = max(1, min(self.tasks_max, len(spans)))
        dealt: list[list[VerifySpan]] = [[] for _ in range(workers)]
        for i, span in enumerate(spans):
            dealt[i % workers].append(span)
        return [d for d in dealt if d]

    def json_pieces(self, rows_per_piece: int = 1000) -> Iterator[str]:
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "spans"}
        head["missing_remote"] = list(self.missing_remote)
        yield json.dumps(head, separators=(",", ":"))[:-1] + ',"spans":['
        for first in range(0, len(self.spans), rows_per_piece):
            rows = [_span_row(s) for s in self.spans[first : first + rows_per_piece]]
            yield ("," if first else "") + json.dumps(rows, separators=(",", ":"))[1:-1]
        yield "]}"

    @classmethod
    def from_json(cls, text: str | bytes) -> VerifyPlan:
        data = json.loads(text)
        data["spans"] = tuple(
            VerifySpan(*row[:-1], stretches=tuple(tuple(s) for s in row[-1])) for row in data["spans"]
        )
        data["missing_remote"] = tuple(data.get("missing_remote", ()))
        return cls(**data)


def _span_row(span: VerifySpan) -> list[Any]:
    return [getattr(span, f.name) for f in fields(span) if f.name != "stretches"] + [
        [list(s) for s in span.stretches]
    ]


def _compacted(entries: Iterable[Any]) -> bool:
    return any(e.name == "cleanup.policy" and "compact" in (e.value or "") for e in entries)


def stretches(start: int, end: int, fraction: float, rng: random.Random) -> tuple[tuple[int, int], ...]:
    """Random, non-overlapping stretches of STRETCH offsets (the last may be shorter) covering
    at least `fraction` of [start, end), in offset order; at least one when the range is not empty."""
    if end <= start:
        return ()
    blocks = math.ceil((end - start) / STRETCH)
    wanted = min(blocks, max(1, math.ceil(fraction * blocks)))
    chosen = sorted(rng.sample(range(blocks), wanted))
    return tuple((start + b * STRETCH, min(end, start + (b + 1) * STRETCH)) for b in chosen)


TopicPartition = tuple[str, int]


def needed_offsets(
    flow: FlowConfig,
    clients: FlowClients,
    groups: Callable[[str], object] | None,
    promised: Mapping[TopicPartition, int] | None,
) -> dict[TopicPartition, tuple[int, str]]:
    """Per source partition the lowest offset whose copy the target must still hold, and who
    needs it: the committed offsets of the source groups `groups` picks (None: those the flow
    checkpoints), and `promised`, where a migration's own copy of a partition began."""
    needed = {tp: (start, "migration") for tp, start in (promised or {}).items()}
    found = relevant_group_offsets(flow, clients, wanted=groups)
    for group, offsets in sorted(found.offsets.items()):
        for tp, committed in offsets.items():
            if tp not in needed or committed.offset < needed[tp][0]:
                needed[tp] = (committed.offset, f"group {group}")
    return needed


def plan_verify(
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    until_ms: int | None = None,
    sample: float | None = None,
    seed: int | None = None,
    delivery: str | None = None,
    ends: Mapping[TopicPartition, int] | None = None,
    groups: Callable[[str], object] | None = None,
    promised: Mapping[TopicPartition, int] | None = None,
) -> VerifyPlan:
    """Fix what to verify, reading both clusters and changing nothing on either. `ends` fixes
    the end of named partitions (a migration's planned ends: exactly what it copied), at most
    their last stable offset; partitions not named are verified as `until_ms` says. `groups`
    picks the groups to move by name (None: the groups the flow checkpoints) and `promised`
    names where a migration's copy began per partition (needed_offsets)."""
    if not flow.provenance_headers_enabled:
        raise VerifyError(
            f"{flow.name} copies without provenance headers (mirrorflow.provenance.headers.enabled = false), "
            "so a copied record does not say which source record it is; verification needs them: enable "
            "the setting, and records copied from then on can be verified"
        )
    if sample is not None and not 0 < sample <= 1:
        raise VerifyError(f"--sample must be a fraction in (0, 1], not {sample}")
    source_admin = admin_client(clients.source_admin)
    target_admin = admin_client(clients.target_admin)
    listed = source_admin.list_topics(timeout=TIMEOUT_S).topics
    remote = {
        name: flow.policy.format_remote_topic(flow.source, name)
        for name, meta in sorted(listed.items())
        if meta.error is None and should_replicate_topic(flow, name)
    }
    if not remote:
        raise VerifyError(
            f"the topics to verify ({', '.join(flow.topics)}, full match) match no topic of {flow.source} that "
            f"{flow.name} copies: nothing would be compared, and nothing proven; name topics {flow.source} holds"
        )
    target_listed = target_admin.list_topics(timeout=TIMEOUT_S).topics
    missing_remote = tuple(sorted(t for t, r in remote.items() if r not in target_listed))
    parts = [(t, p) for t in remote for p in range(len(listed[t].partitions))]
    remote_parts = [
        (remote[t], p)
        for t, p in parts
        if remote[t] in target_listed and p < len(target_listed[remote[t]].partitions)
    ]
    earliest = list_offsets(source_admin, parts, OffsetSpec.earliest())
    stable = list_offsets(source_admin, parts, OffsetSpec.latest(), read_committed=True)
    fixed_ends = ends
    ends = dict(stable)
    if until_ms is not None:
        at_time = list_offsets(source_admin, parts, OffsetSpec.for_timestamp(until_ms))
        ends = {tp: stable[tp] if at_time[tp] < 0 else min(at_time[tp], stable[tp]) for tp in parts}
    if fixed_ends:
        ends.update({tp: min(fixed_ends[tp], stable[tp]) for tp in parts if tp in fixed_ends})
    # Progress first, target ends after: every copy the progress counts is then below the ends.
    progress = read_progress_entries(clients.target_consumer, flow.offset_storage_topic, flow.source)
    target_low = list_offsets(target_admin, remote_parts, OffsetSpec.earliest())
    target_high = list_offsets(target_admin, remote_parts, OffsetSpec.latest(), read_committed=True)
    source_ids = topic_ids(source_admin, remote)
    remote_ids = topic_ids(target_admin, [r for r in remote.values() if r in target_listed])
    source_configs = describe_topic_configs(source_admin, remote)
    remote_configs = describe_topic_configs(target_admin, [r for r in remote.values() if r in target_listed])
    needed = needed_offsets(flow, clients, groups, promised)

    seed = zlib.crc32(run_id.encode()) if seed is None else seed
    spans = []
    for topic, partition in parts:
        remote_topic = remote[topic]
        start, end = earliest[(topic, partition)], ends[(topic, partition)]
        stored = progress.get((topic, partition))
        copied_end, floor = start, 0
        if stored is not None:
            stored_source, stored_remote, floor = split_incarnation(stored.incarnation)
            same_source = not stored_source or stored_source == source_ids.get(topic, stored_source)
            same_remote = not stored_remote or stored_remote == remote_ids.get(remote_topic, stored_remote)
            if same_source and same_remote:
                copied_end = stored.offset + 1
        compare_end = max(start, min(end, copied_end))
        low = target_low.get((remote_topic, partition), 0)
        chosen: tuple[tuple[int, int], ...] = ()
        if sample is not None:
            rng = random.Random(f"{seed}:{topic}:{partition}")
            chosen = stretches(start, compare_end, sample, rng)
        spans.append(
            VerifySpan(
                topic,
                partition,
                remote_topic,
                start,
                compare_end,
                max(start, end),
                target_start=max(floor, low),
                target_end=target_high.get((remote_topic, partition), 0),
                target_log_start=low,
                floor=floor,
                source_compacted=_compacted(source_configs.get(topic, ())),
                target_compacted=_compacted(remote_configs.get(remote_topic, ())),
                needed_from=needed.get((topic, partition), (None, ""))[0],
                needed_by=needed.get((topic, partition), (None, ""))[1],
                stretches=chosen,
            )
        )
    return VerifyPlan(
        run_id=run_id,
        source=flow.source,
        target=flow.target,
        created_ms=int(time.time() * 1000),
        until_ms=until_ms,
        sample=sample,
        seed=seed,
        delivery=delivery or flow.delivery,
        tasks_max=flow.tasks_max,
        spans=tuple(spans),
        missing_remote=missing_remote,
    )


def store_plan(clients: FlowClients, plan: VerifyPlan) -> int:
    return runs.write_run_record(
        clients.target_producer, plan.flow, plan.run_id, PLAN_KIND, plan.json_pieces()
    )


def read_plan(clients: FlowClients, offset: int, flow_name: str) -> VerifyPlan:
    stored_flow, _, kind, body = run_reading.read_run_record(clients.target_consumer, offset)
    if (stored_flow, kind) != (flow_name, PLAN_KIND):
        raise VerifyError(
            f"offset {offset} of {runs.RUNS_TOPIC} holds the {kind} of {stored_flow}, not a verification plan of {flow_name}"
        )
    return VerifyPlan.from_json(body)


def plan_overview(plan: VerifyPlan, plan_offset: int) -> dict[str, Any]:
    """What the plan task returns to XCom: bounded, per topic."""
    per_topic: dict[str, dict[str, int]] = {}
    for span in plan.spans:
        row = per_topic.setdefault(span.topic, {"partitions": 0, "to_compare": 0, "pending": 0})
        row["partitions"] += 1
        row["to_compare"] += span.offsets
        row["pending"] += span.pending
    return {
        "plan_offset": plan_offset,
        "run_id": plan.run_id,
        "flow": plan.flow,
        "partitions": len(plan.spans),
        "to_compare": sum(r["to_compare"] for r in per_topic.values()),
        "pending": sum(r["pending"] for r in per_topic.values()),
        "topics": dict(
            heapq.nsmallest(TOPIC_ROWS, per_topic.items(), key=lambda i: (-i[1]["to_compare"], i[0]))
        ),
        "topic_count": len(per_topic),
        "missing_remote": list(plan.missing_remote[:TOPIC_ROWS]),
        "sample": plan.sample,
        "until_ms": plan.until_ms,
    }
