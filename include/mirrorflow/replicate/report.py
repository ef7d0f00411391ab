"""A run's figures: what the copy did per partition and in total, and what failed.

The Spark driver (or the CLI) builds the report from the units' results and stores it with the
run records; the report task reads it back, adds the lag left at that moment, returns it to
XCom and fails the run if any unit failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.replicate.copy import UnitResult, merge_ranges
from mirrorflow.replicate.plan import Plan

RESTARTED_LIMIT = 100
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

    @classmethod
    def from_results(
        cls, plan: Plan, results: Iterable[UnitResult | Mapping[str, Any]], started_ms: int, finished_ms: int
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

    def totals(self) -> dict[str, int]:
        totals = {name: sum(int(u.get(name, 0)) for u in self.units) for name in TOTAL_FIELDS}
        totals["lost_to_retention"] = sum(self.lost_unreported.values()) + sum(_lost(u) for u in self.units)
        totals["partitions"] = len(self.units)
        totals["failed_partitions"] = len(self.failed)
        return totals

    def per_topic(self) -> dict[str, dict[str, Any]]:
        failed = {(u["topic"], u["partition"]) for u in self.failed}
        out: dict[str, dict[str, Any]] = {}
        for unit in self.units:
            row = out.setdefault(
                unit["topic"],
                {
                    "remote_topic": unit["remote_topic"],
                    "partitions": 0,
                    "records": 0,
                    "bytes": 0,
                    "lost_to_retention": 0,
                    "failed": 0,
                },
            )
            row["partitions"] += 1
            row["records"] += unit["records"]
            row["bytes"] += unit["bytes"]
            row["lost_to_retention"] += _lost(unit)
            row["failed"] += (unit["topic"], unit["partition"]) in failed
        for topic, lost in self.lost_unreported.items():
            if topic in out:
                out[topic]["lost_to_retention"] += lost
        return out

    def summary(self) -> dict[str, Any]:
        """Small enough for XCom and the UI: totals, per topic, failures, lag left."""
        return {
            "run_id": self.run_id,
            "flow": self.flow,
            "mode": self.mode,
            "delivery": self.delivery,
            "seconds": round((self.finished_ms - self.started_ms) / 1000, 3),
            "planned_ranges": self.planned_ranges,
            "planned_offsets": self.planned_offsets,
            "lost_to_retention": self.totals()["lost_to_retention"],
            "lost": [
                {"topic": u["topic"], "partition": u["partition"], "offsets": [list(r) for r in u["lost"]]}
                for u in self.units
                if u.get("lost")
            ],
            "retimed": [
                {"topic": u["topic"], "partition": u["partition"], "records": u["retimed"]}
                for u in self.units
                if u.get("retimed")
            ][:100],
            "totals": self.totals(),
            "topics": self.per_topic(),
            "failed": [
                {"topic": u["topic"], "partition": u["partition"], "error": u["error"]} for u in self.failed
            ],
            "lag_left": self.lag_left,
            "restarted": self.restarted,
            "restarted_count": self.restarted_count,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> RunReport:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        return cls(**data)

    def failure_message(self) -> str:
        lines = [
            f"{len(self.failed)} of {len(self.units)} partitions of {self.flow} run {self.run_id} failed:"
        ]
        lines += [f"  {u['topic']}-{u['partition']}: {u['error']}" for u in self.failed]
        return "\n".join(lines)
