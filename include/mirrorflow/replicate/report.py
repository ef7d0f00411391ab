"""A run's figures: what the copy did per partition and in total, and what failed.

The Spark driver (or the CLI) builds the report from the units' results and stores it with the
run records; the report task reads it back, adds the lag left at that moment, returns it to
XCom and fails the run if any unit failed.

The report keeps every partition (it goes to Kafka in chunks, see runs); what goes to XCom, the
UI and the status page is the summary, which stays small however many partitions a run has:
totals, at most TOPIC_ROWS per-topic rows and PARTITION_ROWS partitions per list, the worst
first, each list with the count of everything it stands for.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mirrorflow.replicate.copy import UnitResult, merge_ranges
from mirrorflow.replicate.plan import Plan

RESTARTED_LIMIT = 100
TOPIC_ROWS = 50  # per-topic rows in a summary: failed, then lost, then most lag first
PARTITION_ROWS = 50  # partitions named in each of a summary's lists (failed, lost, retimed)
ERROR_CHARS = 300  # of one partition's error in a summary; the report keeps all of it
TOTAL_FIELDS = (
    "records",
    "bytes",
    "transactions",
    "offset_syncs",
    "offset_sync_errors",
    "skipped_loops",
    "interleaved_chunks",
    "retimed",
)


def _lost(unit: Mapping[str, Any]) -> int:
    return sum(end - start for start, end in unit.get("lost", ()))


def _left(unit: Mapping[str, Any]) -> int:
    """Offsets of the partition's plan not copied."""
    return max(0, unit["planned_end"] - 1 - unit["progress"])


def _short(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def worst_rows(
    rows: Mapping[str, Mapping[str, Any]], order: tuple[str, ...], limit: int
) -> dict[str, dict[str, Any]]:
    """At most `limit` rows, the largest by the `order` figures first (a missing figure counts
    as 0), ties by name: what a reader of a 10,000-topic run needs to see first."""
    chosen = heapq.nsmallest(
        limit, rows.items(), key=lambda item: (*(-item[1].get(name, 0) for name in order), item[0])
    )
    return {name: dict(row) for name, row in chosen}


@dataclass
class RunReport:
    run_id: str
    flow: str
    mode: str
    delivery: str
    started_ms: int
    finished_ms: int
    units: list[dict[str, Any]] = field(default_factory=list)
    planned_ranges: int = 0
    planned_offsets: int = 0
    # Per topic, offsets the plan found deleted on partitions that have no unit in the report;
    # the units carry their own lost ranges (the plan's included), so the totals add both.
    lost_unreported: dict[str, int] = field(default_factory=dict)
    lag_left: dict[str, int] = field(default_factory=dict)
    # "topic-partition" -> why the plan copied it again from the source's earliest offset (a
    # topic deleted and created again on either side); at most RESTARTED_LIMIT of them.
    restarted: dict[str, str] = field(default_factory=dict)
    restarted_count: int = 0
    # A micro-batch window's own figures (replicate/window/driver.py): its batches, how its tasks
    # ended, its lag in seconds, what joined it; empty for a batch run.
    window: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_results(
        cls,
        plan: Plan,
        results: Iterable[UnitResult | Mapping[str, Any]],
        started_ms: int,
        finished_ms: int,
        *,
        window: Mapping[str, Any] | None = None,
    ) -> RunReport:
        units = [asdict(r) if isinstance(r, UnitResult) else dict(r) for r in results]
        reported = {(u["topic"], u["partition"]) for u in units}
        # What the plan found deleted on partitions whose copy reported nothing still counts.
        unreported: dict[str, int] = {}
        for span in plan.spans:
            if span.lost and (span.topic, span.partition) not in reported:
                unreported[span.topic] = unreported.get(span.topic, 0) + span.lost
        return cls(
            run_id=plan.run_id,
            flow=plan.flow,
            mode=plan.mode,
            delivery=plan.delivery,
            started_ms=started_ms,
            finished_ms=finished_ms,
            units=sorted(units, key=lambda u: (u["topic"], u["partition"])),
            planned_ranges=len(plan.ranges()),
            planned_offsets=sum(s.pending for s in plan.spans),
            lost_unreported=unreported,
            restarted=dict(list(plan.restarted().items())[:RESTARTED_LIMIT]),
            restarted_count=len(plan.restarted()),
            window=dict(window or {}),
        )

    @classmethod
    def merge(cls, attempts: list[RunReport]) -> RunReport:
        """One report for a run whose copy step ran several times: work adds up, and each
        partition's state (progress, error) is the one its last attempt left."""
        last = attempts[-1]
        units: dict[tuple[str, int], dict[str, Any]] = {}
        for attempt in attempts:
            for unit in attempt.units:
                key = (unit["topic"], unit["partition"])
                if key in units:
                    merged = units[key]
                    for name in (*TOTAL_FIELDS, "attempts", "seconds"):
                        unit = {**unit, name: merged.get(name, 0) + unit.get(name, 0)}
                    unit["lost"] = merge_ranges([*merged.get("lost", []), *unit.get("lost", [])])
                    unit["last_target_offset"] = max(
                        merged.get("last_target_offset", -1), unit.get("last_target_offset", -1)
                    )
                units[key] = unit
        return cls(
            run_id=last.run_id,
            flow=last.flow,
            mode=last.mode,
            delivery=last.delivery,
            started_ms=attempts[0].started_ms,
            finished_ms=last.finished_ms,
            units=sorted(units.values(), key=lambda u: (u["topic"], u["partition"])),
            planned_ranges=last.planned_ranges,
            planned_offsets=last.planned_offsets,
            lost_unreported=last.lost_unreported,
            restarted=last.restarted,
            restarted_count=last.restarted_count,
            window=last.window,
        )

    @property
    def failed(self) -> list[dict[str, Any]]:
        """Units with an error, or that stopped short of their planned end."""
        out = []
        for unit in self.units:
            if not unit.get("error") and unit["progress"] < unit["planned_end"] - 1:
                unit = {
                    **unit,
                    "error": f"stopped at offset {unit['progress']} before the planned end {unit['planned_end']}",
                }
            if unit.get("error"):
                out.append(unit)
        return out

    @property
    def ok(self) -> bool:
        return not self.failed

    def totals(self, failed: list[dict[str, Any]] | None = None) -> dict[str, int]:
        """Sums over every partition; `failed` is self.failed when the caller has it already."""
        totals = {name: sum(int(u.get(name, 0)) for u in self.units) for name in TOTAL_FIELDS}
        totals["lost_to_retention"] = sum(self.lost_unreported.values()) + sum(_lost(u) for u in self.units)
        totals["partitions"] = len(self.units)
        totals["failed_partitions"] = len(self.failed if failed is None else failed)
        return totals

    def per_topic(self) -> dict[str, dict[str, Any]]:
        """Every topic of the run: those it copied, and those with only offsets lost or lag left.
        `lag_left` is in a row only once it was measured; `remote_topic` is None for a topic no
        partition of which was copied in this run."""
        failed = {(u["topic"], u["partition"]) for u in self.failed}
        out: dict[str, dict[str, Any]] = {}

        def row(topic: str, remote_topic: str | None = None) -> dict[str, Any]:
            found = out.setdefault(
                topic,
                {
                    "remote_topic": remote_topic,
                    "partitions": 0,
                    "records": 0,
                    "bytes": 0,
                    "lost_to_retention": 0,
                    "failed": 0,
                },
            )
            if found["remote_topic"] is None:
                found["remote_topic"] = remote_topic
            return found

        for unit in self.units:
            found = row(unit["topic"], unit["remote_topic"])
            found["partitions"] += 1
            found["records"] += unit["records"]
            found["bytes"] += unit["bytes"]
            found["lost_to_retention"] += _lost(unit)
            found["failed"] += (unit["topic"], unit["partition"]) in failed
        for topic, lost in self.lost_unreported.items():
            row(topic)["lost_to_retention"] += lost
        for topic, lag in self.lag_left.items():
            row(topic)["lag_left"] = lag
        return out

    def copied_topics(self) -> dict[str, dict[str, Any]]:
        """Per remote topic that received records in this run: its source topic, the records and
        bytes it got and, per partition that got any, the last source offset copied and the
        offset of its copy on the target. A topic of the run that received nothing is not in it."""
        out: dict[str, dict[str, Any]] = {}
        for unit in self.units:
            if not unit["records"]:
                continue
            row = out.setdefault(
                unit["remote_topic"], {"topic": unit["topic"], "records": 0, "bytes": 0, "partitions": {}}
            )
            row["records"] += unit["records"]
            row["bytes"] += unit["bytes"]
            row["partitions"][unit["partition"]] = {
                "source": unit["progress"],
                "target": unit.get("last_target_offset", -1),
            }
        return out

    def summary(self) -> dict[str, Any]:
        """Small enough for XCom and the UI at any partition count: totals over everything; the
        TOPIC_ROWS worst topics (failed partitions, then offsets lost, then lag left) with
        `topics_count`; the PARTITION_ROWS worst failed, lossy and retimed partitions with their
        counts (totals.failed_partitions, lost_partitions, retimed_partitions). `lag_left`
        holds the shown topics' lag, totals.lag_left all of it. Every partition is in the report."""
        rows = self.per_topic()
        shown = worst_rows(rows, ("failed", "lost_to_retention", "lag_left"), TOPIC_ROWS)
        failed = self.failed
        lossy = [u for u in self.units if u.get("lost")]
        retimed = [u for u in self.units if u.get("retimed")]
        totals = self.totals(failed)
        totals["lag_left"] = sum(self.lag_left.values())
        return {
            "run_id": self.run_id,
            "flow": self.flow,
            "mode": self.mode,
            "delivery": self.delivery,
            "seconds": round((self.finished_ms - self.started_ms) / 1000, 3),
            "planned_ranges": self.planned_ranges,
            "planned_offsets": self.planned_offsets,
            "lost_to_retention": totals["lost_to_retention"],
            "lost": [
                {"topic": u["topic"], "partition": u["partition"], "offsets": [list(r) for r in u["lost"]]}
                for u in heapq.nsmallest(
                    PARTITION_ROWS, lossy, key=lambda u: (-_lost(u), u["topic"], u["partition"])
                )
            ],
            "lost_partitions": len(lossy),
            "retimed": [
                {"topic": u["topic"], "partition": u["partition"], "records": u["retimed"]}
                for u in heapq.nsmallest(
                    PARTITION_ROWS, retimed, key=lambda u: (-u["retimed"], u["topic"], u["partition"])
                )
            ],
            "retimed_partitions": len(retimed),
            "totals": totals,
            "topics": shown,
            "topics_count": len(rows),
            "failed": [
                {"topic": u["topic"], "partition": u["partition"], "error": _short(u["error"])}
                for u in heapq.nsmallest(
                    PARTITION_ROWS, failed, key=lambda u: (-_left(u), u["topic"], u["partition"])
                )
            ],
            "lag_left": {t: self.lag_left[t] for t in shown if t in self.lag_left},
            "restarted": self.restarted,
            "restarted_count": self.restarted_count,
            **({"window": self.window} if self.window else {}),
        }

    def json_pieces(self, units_per_piece: int = 1000) -> Iterator[str]:
        """The report's JSON in pieces of at most `units_per_piece` partitions, for the
        run-records writer to chunk as they come (20,000 partitions are ~8 MB of JSON)."""
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "units"}
        yield json.dumps(head, separators=(",", ":"))[:-1] + ',"units":['
        for first in range(0, len(self.units), units_per_piece):
            piece = json.dumps(self.units[first : first + units_per_piece], separators=(",", ":"))
            yield ("," if first else "") + piece[1:-1]
        yield "]}"

    def to_json(self) -> str:
        return "".join(self.json_pieces())

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> RunReport:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        return cls(**data)

    def failure_message(self) -> str:
        """The failed partitions, at most PARTITION_ROWS of them named (the exception text of a
        20,000-partition run that lost its target must stay readable); the report has them all."""
        failed = self.failed
        lines = [f"{len(failed)} of {len(self.units)} partitions of {self.flow} run {self.run_id} failed:"]
        lines += [f"  {u['topic']}-{u['partition']}: {u['error']}" for u in failed[:PARTITION_ROWS]]
        if len(failed) > PARTITION_ROWS:
            lines.append(
                f"  ... and {len(failed) - PARTITION_ROWS} more (every partition is in the run's report "
                "in mirrorflow-runs.internal)"
            )
        return "\n".join(lines)


# What the replicate DAG's report task returns to XCom: the run's identity and totals, once. The
# per-topic rows are in the task's log (tables.run_table_lines) and, with the lists of failed,
# lossy and retimed partitions, in the summary stored in the run-records topic, which is what
# the status page and the metrics read.
XCOM_FIELDS = (
    "run_id",
    "flow",
    "mode",
    "delivery",
    "seconds",
    "planned_ranges",
    "planned_offsets",
    "totals",
    "topics_count",
    "lost_partitions",
    "retimed_partitions",
    "restarted_count",
    "topic_errors_count",
    "lag_unknown",
)


def achieved_bytes_per_second(summary: Mapping[str, Any]) -> float | None:
    """The byte rate a run's copy reached: its bytes over the copy's time, the same bytes the
    flow's cap (mirrorflow.replicate.max.bytes.per.second) counts, so the two compare. None for
    a summary without the copy's time (written before it was kept, or a copy of no time)."""
    seconds = summary.get("seconds") or 0
    if seconds <= 0:
        return None
    return summary.get("totals", {}).get("bytes", 0) / seconds


# Of a micro-batch window's figures, what XCom gets (its lists are in the stored summary).
WINDOW_XCOM_FIELDS = (
    "tasks",
    "batches",
    "stopped",
    "handed_over_slots",
    "retakes",
    "lost_attempts",
    "joined_partitions",
    "lag_s",
    "refreshes",
    "created_topics_count",
    "restarted_count",
)


def xcom_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary without its per-topic rows and partition lists, and without the figures it
    holds twice (lag_left per topic beside the rows' own, lost_to_retention beside the totals')."""
    out = {name: summary[name] for name in XCOM_FIELDS if name in summary}
    if "window" in summary:
        out["window"] = {
            name: summary["window"][name] for name in WINDOW_XCOM_FIELDS if name in summary["window"]
        }
    return out
