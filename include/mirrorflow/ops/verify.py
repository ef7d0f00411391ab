"""Verify a flow's copy by content: plan, compare every partition, report, store the evidence.

The plan is read-only on both clusters: it fixes, per source partition, the source range to
verify (log start to the last stable offset, or to the offset of `until`), how much of it the
flow has copied (its progress, in the current source and remote topic incarnations), and the
target range holding the copies. Partitions are then compared one by one (verify_compare), in
Spark tasks or local worker processes, each reading both sides once. The report keeps every
partition's check (stored in chunks, like a copy report); the summary that goes to XCom, the
terminal and the status page is bounded: totals, the worst topics, the first mismatches.

`sample` verifies random contiguous stretches of STRETCH offsets covering that fraction of each
partition instead of all of it, and states what that proves: every record of a sampled stretch
is compared exactly, and a defect present in a fraction q of all stretches would have been
missed by K sampled stretches with probability (1 - q)^K.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
import random
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from multiprocessing import get_context
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka import admin_client, list_offsets, topic_ids
from mirrorflow.ops.verify_compare import (
    EXPLAINED_KINDS,
    WRONG_KINDS,
    CompareJob,
    PartitionReader,
    VerifySpan,
    compare_partition,
)
from mirrorflow.policy import should_replicate_topic
from mirrorflow.replicate import runs
from mirrorflow.replicate.progress import read_progress_entries, split_incarnation
from mirrorflow.replicate.topics import describe_topic_configs

PLAN_KIND = "verify-plan"
REPORT_KIND = "verify-report"
SUMMARY_KIND = "verify-summary"
STRETCH = 1000  # offsets per sampled stretch
CONFIDENCE = 0.95
TOPIC_ROWS = 50
MISMATCH_ROWS = 200
ERROR_ROWS = 50
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


def plan_verify(
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    until_ms: int | None = None,
    sample: float | None = None,
    seed: int | None = None,
    delivery: str | None = None,
    ends: Mapping[tuple[str, int], int] | None = None,
) -> VerifyPlan:
    """Fix what to verify, reading both clusters and changing nothing on either. `ends` fixes
    the end of named partitions (a migration's planned ends: exactly what it copied), at most
    their last stable offset; partitions not named are verified as `until_ms` says."""
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


def compare_job_for(flow: FlowConfig, clients: FlowClients, plan: VerifyPlan) -> CompareJob:
    return CompareJob(
        source=flow.source,
        target=flow.target,
        at_least_once=plan.delivery == "at-least-once",
        source_consumer=clients.source_consumer,
        target_consumer=clients.target_consumer,
    )


def verify_slice(job: CompareJob, spans: Iterable[VerifySpan]) -> list[dict[str, Any]]:
    """One worker's share: every partition compared with one reusable reader per side."""
    source = PartitionReader(
        job.source_consumer, f"source {job.source}", f"mirrorflow-{job.source}->{job.target}"
    )
    target = PartitionReader(job.target_consumer, f"target {job.target}", "mirrorflow-reader")
    try:
        return [compare_partition(job, span, source, target).to_dict() for span in spans]
    finally:
        source.close()
        target.close()


def verify_locally(job: CompareJob, plan: VerifyPlan) -> list[dict[str, Any]]:
    """Every partition of the plan in up to tasks.max local worker processes (spawned, as the
    copy's are: a fork would copy the locks of the parent's librdkafka threads)."""
    slices = plan.slices()
    if not slices:
        return []
    if len(slices) == 1:
        return verify_slice(job, slices[0])
    checks: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=len(slices), mp_context=get_context("spawn")) as pool:
        for future in as_completed([pool.submit(verify_slice, job, s) for s in slices]):
            checks.extend(future.result())
    return checks


@dataclass
class VerifyReport:
    """Every partition's check of one verification, and the figures over all of them."""

    run_id: str
    flow: str
    until_ms: int | None
    sample: float | None
    delivery: str
    started_ms: int
    finished_ms: int
    missing_remote: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def build(cls, plan: VerifyPlan, checks: list[dict[str, Any]], started_ms: int) -> VerifyReport:
        ordered = sorted(checks, key=lambda c: (c["topic"], c["partition"]))
        return cls(
            plan.run_id,
            plan.flow,
            plan.until_ms,
            plan.sample,
            plan.delivery,
            started_ms,
            int(time.time() * 1000),
            list(plan.missing_remote),
            ordered,
        )

    def totals(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitions": len(self.checks),
            "source_records": 0,
            "target_records": 0,
            "matched": 0,
            "gaps": 0,
            "pending": 0,
            "foreign": 0,
            "unattributed": 0,
            "beyond": 0,
            "wrong": dict.fromkeys(WRONG_KINDS, 0),
            "explained": dict.fromkeys(EXPLAINED_KINDS, 0),
            "failed_partitions": 0,
            "mismatched_partitions": 0,
            "unverifiable_partitions": 0,
            "stretches": 0,
        }
        for check in self.checks:
            for name in (
                "source_records",
                "target_records",
                "matched",
                "gaps",
                "pending",
                "foreign",
                "unattributed",
                "beyond",
            ):
                out[name] += check[name]
            for kind, count in check["wrong"].items():
                out["wrong"][kind] += count
            for kind, count in check["explained"].items():
                out["explained"][kind] += count
            out["failed_partitions"] += check["verdict"] == "error"
            out["mismatched_partitions"] += check["verdict"] == "mismatch"
            out["unverifiable_partitions"] += check["verdict"] == "unverifiable"
            out["stretches"] += check["stretches"]
        out["wrong_total"] = sum(out["wrong"].values())
        out["explained_total"] = sum(out["explained"].values())
        return out

    def verdict(self, totals: Mapping[str, Any] | None = None) -> str:
        """failed: something is wrong or could not be read; incomplete: nothing is wrong, but
        not everything to the end was copied, or some could not be attributed; verified: every
        record in range was compared and is equal (sampled: every sampled record)."""
        totals = self.totals() if totals is None else totals
        if totals["mismatched_partitions"] or totals["failed_partitions"]:
            return "failed"
        if totals["pending"] or totals["unverifiable_partitions"]:
            return "incomplete"
        return "sample passed" if self.sample is not None else "verified"

    def confidence(self) -> str | None:
        """What a sampled verification proves, in words."""
        if self.sample is None:
            return None
        count = sum(c["stretches"] for c in self.checks)
        if not count:
            return "no stretch was sampled (nothing copied to compare)"
        q = 1 - (1 - CONFIDENCE) ** (1 / count)
        return (
            f"{count} stretches of up to {STRETCH} offsets compared record by record: a defect present in "
            f"{q:.2%} or more of all stretches would have been found with {CONFIDENCE:.0%} confidence"
        )

    def summary(self) -> dict[str, Any]:
        """Bounded: totals, the worst TOPIC_ROWS topics, the first MISMATCH_ROWS mismatches and
        ERROR_ROWS partition errors, each list with its full count."""
        per_topic: dict[str, dict[str, Any]] = {}
        mismatches: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        mismatch_count = error_count = 0
        for check in self.checks:
            row = per_topic.setdefault(
                check["topic"],
                {"partitions": 0, "compared": 0, "matched": 0, "wrong": 0, "explained": 0, "pending": 0},
            )
            row["partitions"] += 1
            row["compared"] += check["source_records"]
            row["matched"] += check["matched"]
            row["wrong"] += sum(check["wrong"].values())
            row["explained"] += sum(check["explained"].values())
            row["pending"] += check["pending"]
            where = {
                "topic": check["topic"],
                "partition": check["partition"],
                "remote_topic": check["remote_topic"],
            }
            for mismatch in check["mismatches"]:
                mismatch_count += 1
                if len(mismatches) < MISMATCH_ROWS:
                    mismatches.append({**where, **mismatch})
            if check["error"]:
                error_count += 1
                if len(errors) < ERROR_ROWS:
                    errors.append({**where, "error": check["error"]})
        topics = dict(
            heapq.nsmallest(
                TOPIC_ROWS, per_topic.items(), key=lambda i: (-i[1]["wrong"], -i[1]["pending"], i[0])
            )
        )
        totals = self.totals()
        return {
            "run_id": self.run_id,
            "flow": self.flow,
            "verdict": self.verdict(totals),
            "until_ms": self.until_ms,
            "sample": self.sample,
            "confidence": self.confidence(),
            "delivery": self.delivery,
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
            "totals": totals,
            "topics": topics,
            "topic_count": len(per_topic),
            "missing_remote": self.missing_remote[:TOPIC_ROWS],
            "missing_remote_count": len(self.missing_remote),
            "mismatches": mismatches,
            "mismatch_count": mismatch_count
            + sum(max(0, sum(c["wrong"].values()) - len(c["mismatches"])) for c in self.checks),
            "errors": errors,
            "error_count": error_count,
        }

    def json_pieces(self, checks_per_piece: int = 500) -> Iterator[str]:
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "checks"}
        yield json.dumps(head, separators=(",", ":"))[:-1] + ',"checks":['
        for first in range(0, len(self.checks), checks_per_piece):
            piece = self.checks[first : first + checks_per_piece]
            yield ("," if first else "") + json.dumps(piece, separators=(",", ":"))[1:-1]
        yield "]}"

    @classmethod
    def from_json(cls, text: str) -> VerifyReport:
        return cls(**json.loads(text))

    @classmethod
    def merge(cls, reports: list[VerifyReport]) -> VerifyReport:
        """Reports of several attempts of one run: the newest check of each partition counts."""
        newest: dict[tuple[str, int], dict[str, Any]] = {}
        for report in reports:
            for check in report.checks:
                newest[(check["topic"], check["partition"])] = check
        last = reports[-1]
        return dataclasses.replace(
            last, started_ms=reports[0].started_ms, checks=[newest[k] for k in sorted(newest)]
        )


def store_plan(clients: FlowClients, plan: VerifyPlan) -> int:
    return runs.write_run_record(
        clients.target_producer, plan.flow, plan.run_id, PLAN_KIND, plan.json_pieces()
    )


def read_plan(clients: FlowClients, offset: int, flow_name: str) -> VerifyPlan:
    stored_flow, _, kind, body = runs.read_run_record(clients.target_consumer, offset)
    if (stored_flow, kind) != (flow_name, PLAN_KIND):
        raise VerifyError(
            f"offset {offset} of {runs.RUNS_TOPIC} holds the {kind} of {stored_flow}, not a verification plan of {flow_name}"
        )
    return VerifyPlan.from_json(body)


def store_report(clients: FlowClients, report: VerifyReport) -> None:
    runs.write_run_record(
        clients.target_producer, report.flow, report.run_id, REPORT_KIND, report.json_pieces()
    )


def store_summary(clients: FlowClients, summary: Mapping[str, Any]) -> None:
    runs.write_run_record(
        clients.target_producer, summary["flow"], summary["run_id"], SUMMARY_KIND, json.dumps(summary)
    )


class VerificationFailed(RuntimeError):
    """The verification found records that are wrong, or partitions it could not read; the
    summary is attached."""

    def __init__(self, message: str, summary: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


def mismatch_line(row: Mapping[str, Any]) -> str:
    """`orders-0 source offset 3 -> A.orders offset 3: different (value differ)`."""
    where = f"{row['topic']}-{row['partition']} source offset {row['source_offset']}"
    if row["target_offset"] is not None:
        where += f" -> {row['remote_topic']} offset {row['target_offset']}"
    return f"{where}: {row['kind']}" + (f" ({row['detail']})" if row.get("detail") else "")


def failure_message(summary: Mapping[str, Any]) -> str:
    totals = summary["totals"]
    lines = [
        f"verification {summary['run_id']} of {summary['flow']}: {totals['wrong_total']} wrong record(s) in "
        f"{totals['mismatched_partitions']} partition(s), {totals['failed_partitions']} partition(s) not read"
    ]
    for row in summary["mismatches"][:20]:
        lines.append("  " + mismatch_line(row))
    for row in summary["errors"][:20]:
        lines.append(f"  {row['topic']}-{row['partition']}: {row['error']}")
    more = (
        summary["mismatch_count"]
        + summary["error_count"]
        - min(20, len(summary["mismatches"]))
        - min(20, len(summary["errors"]))
    )
    if more > 0:
        lines.append(f"  ... and {more} more in the stored report ({SUMMARY_KIND} / {REPORT_KIND} records)")
    return "\n".join(lines)


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


def finish(clients: FlowClients, report: VerifyReport) -> dict[str, Any]:
    """Store the summary; raise VerificationFailed (with it) when the verdict is failed."""
    summary = report.summary()
    store_summary(clients, summary)
    if summary["verdict"] == "failed":
        raise VerificationFailed(failure_message(summary), summary)
    return summary
