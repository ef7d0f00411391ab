"""A verification's verdict over all its partitions, and the evidence stored for it: every
partition's check (`verify-report`, chunked) and a bounded summary (`verify-summary`: totals,
the worst topics, the first mismatches) that goes to XCom, the terminal and the status page.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.ops.verification.checks import EXPLAINED_KINDS, WRONG_KINDS
from mirrorflow.ops.verification.plan import STRETCH, TOPIC_ROWS, VerifyPlan
from mirrorflow.replicate import runs

REPORT_KIND = "verify-report"
SUMMARY_KIND = "verify-summary"
CONFIDENCE = 0.95
MISMATCH_ROWS = 200
ERROR_ROWS = 50
PASSING = ("verified", "sample passed")


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
            "removed_needed": 0,
            "removed_partitions": 0,
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
            out["removed_needed"] += check.get("removed_needed", 0)
            out["removed_partitions"] += check.get("removed_needed", 0) > 0
            out["stretches"] += check["stretches"]
        out["wrong_total"] = sum(out["wrong"].values())
        out["explained_total"] = sum(out["explained"].values())
        return out

    def verdict(self, totals: Mapping[str, Any] | None = None) -> str:
        """failed: something is wrong or could not be read; incomplete: nothing is wrong, but
        not everything to the end was copied, or some could not be attributed, or the target
        removed copies a group to move or the migration still needs; verified: every record in
        range was compared and is equal (sampled: every sampled record)."""
        totals = self.totals() if totals is None else totals
        if totals["mismatched_partitions"] or totals["failed_partitions"]:
            return "failed"
        if totals["pending"] or totals["unverifiable_partitions"] or totals["removed_partitions"]:
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
        removed: list[dict[str, Any]] = []
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
            if check.get("removed_needed") and len(removed) < ERROR_ROWS:
                first, end = check["removed_range"]
                removed.append(
                    {
                        **where,
                        "from": first,
                        "to": end,
                        "records": check["removed_needed"],
                        "needed_from": check["needed_from"],
                        "needed_by": check["needed_by"],
                    }
                )
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
            "removed": removed,
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


def finish(clients: FlowClients, report: VerifyReport) -> dict[str, Any]:
    """Store the summary; raise VerificationFailed (with it) when the verdict is failed."""
    summary = report.summary()
    store_summary(clients, summary)
    if summary["verdict"] == "failed":
        raise VerificationFailed(failure_message(summary), summary)
    return summary


def verdict_problem(summary: Mapping[str, Any]) -> str | None:
    """Why a verdict is short of passing, in words (None for verified and sample passed): what a
    task that must not end green on it fails with."""
    verdict = summary["verdict"]
    if verdict in PASSING:
        return None
    if verdict == "failed":
        return failure_message(summary)
    totals = summary["totals"]
    parts = []
    if totals["pending"]:
        parts.append(f"{totals['pending']:,} offset(s) in range are not copied yet")
    if totals["unverifiable_partitions"]:
        parts.append(
            f"{totals['unverifiable_partitions']:,} partition(s) hold records without provenance that may be "
            "the missing copies"
        )
    removed = totals.get("removed_partitions", 0)
    if removed:
        parts.append(
            f"the target no longer holds the copies of {totals['removed_needed']:,} record(s) in {removed:,} "
            f"partition(s) that are still needed ({removed_text(summary)})"
        )
    advice = "verify again once the copy has caught up"
    if removed:
        advice = (
            "the target's retention or a DeleteRecords removed those copies, and a group moved there now "
            "would skip them: move a group only once it has read past them on the source"
            + ("; " + advice if totals["pending"] or totals["unverifiable_partitions"] else "")
        )
    return (
        f"The verification {summary['run_id']} of {summary['flow']} is {verdict}: "
        + "; ".join(parts or ["not everything in range could be compared"])
        + f". Nothing compared is wrong ({totals['matched']:,} record(s) equal); {advice}."
    )


def removed_line(row: Mapping[str, Any]) -> str:
    """`orders-0 source offsets 100 to 149 (50 record(s), group shop has read only up to 100)`."""
    who = row["needed_by"]
    why = (
        f"this migration copied them from offset {row['needed_from']:,}"
        if who == "migration"
        else f"{who} has read only up to {row['needed_from']:,}"
    )
    return (
        f"{row['topic']}-{row['partition']} source offsets {row['from']:,} to {row['to'] - 1:,} "
        f"({row['records']:,} record(s), {why})"
    )


def removed_text(summary: Mapping[str, Any], shown: int = 5) -> str:
    """The first partitions whose needed copies the target removed, each with its range."""
    rows = summary.get("removed", [])
    more = summary["totals"].get("removed_partitions", 0) - min(shown, len(rows))
    return ", ".join(removed_line(r) for r in rows[:shown]) + (
        f" and {more:,} more partition(s) in the stored summary" if more > 0 else ""
    )


def removed_from_target_text(totals: Mapping[str, Any]) -> str:
    """What the target no longer holds, for a figures line: ` (10 removed from the target, below every
    position still needed)`, `, 50 removed from the target though still needed`, or nothing."""
    below = totals.get("explained", {}).get("removed_from_target", 0)
    needed = totals.get("removed_needed", 0)
    text = f" ({below:,} removed from the target, below every position still needed)" if below else ""
    return text + (f", {needed:,} removed from the target though still needed" if needed else "")


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary as a task log shows it: a row per topic (the worst first), then the verdict
    and the totals in one line."""
    from mirrorflow.replicate.tables import plain_lines, topic_figures_table

    table = topic_figures_table(
        f"verification {summary['run_id']} of {summary['flow']}",
        ("source topic", "partitions", "compared", "matched", "wrong", "explained", "not copied"),
        (
            (topic, *(row[k] for k in ("partitions", "compared", "matched", "wrong", "explained", "pending")))
            for topic, row in summary["topics"].items()
        ),
    )
    totals = summary["totals"]
    shown = len(summary["topics"])
    more = summary["topic_count"] - shown
    return [
        *(plain_lines(table) if shown else []),
        *([f"... and {more:,} more topic(s); the totals count them"] if more > 0 else []),
        f"verdict {summary['verdict']}: {totals['partitions']:,} partition(s), {totals['source_records']:,} "
        f"source record(s) compared, {totals['matched']:,} equal, {totals['wrong_total']:,} wrong, "
        f"{totals['explained_total']:,} explained{removed_from_target_text(totals)}, {totals['pending']:,} not "
        f"copied, {totals['failed_partitions']:,} partition(s) not read"
        + (f"; {summary['confidence']}" if summary.get("confidence") else ""),
    ]
