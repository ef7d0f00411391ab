"""What a migration copied and verified, and which of the groups to move that covers.

The approval asks a person to move production consumers. What it shows must be about exactly
what was asked and done: the partitions the migration's plan fixed ends for (what "Copy up to"
resolved to), how far each is on the target now (the run report's progress, or the plan's
start for a partition with nothing left to copy), how far the verification compared it and what
it found, and for every group to move, each partition it reads: its committed offset against
those figures. A group is movable only when every partition it reads belongs to the migration
and was copied, and verified when verification is on, up to the group's committed offset, its
offset translates, and the target still holds the copies of every record it has not read (the
target's retention or a DeleteRecords may have removed some since the copy: ops.removed_copies);
otherwise it is blocked, each reason named, and the cut-over leaves it where it is.

Everything is read from what the steps stored in the run-records topic (the plan, the run's
reports, the verification's reports); the figures handed on (XCom, the approval's text) are
bounded: totals, and at most SHOWN_ROWS partitions and groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.report import RunReport

MIGRATION_SUMMARY_KIND = "migration-summary"  # the final report's record in the run-records topic
SHOWN_ROWS = 50  # partitions (ends) and groups carried in full; the rest are counted
GROUP_ROWS = 20  # partitions of one group carried in full
UNTRANSLATED = "untranslated"

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class CopiedPartition:
    """One partition of the migration: its end (what "Copy up to" resolved to) and where the
    copy on the target reaches (an exclusive source offset), and how far it was verified."""

    topic: str
    partition: int
    end: int
    copied_to: int
    verified_to: int | None = None
    verification: str | None = None  # the partition's check verdict (match, pending, mismatch, ...)


def copied_partitions(
    plan: Plan, report: RunReport | None, checks: Iterable[Mapping[str, Any]] | None
) -> dict[TopicPartition, CopiedPartition]:
    """Every partition of the plan; `report` is the copy's (None: it wrote none), `checks` the
    verification's per-partition checks (None: not verified)."""
    progress = {(u["topic"], u["partition"]): u["progress"] for u in (report.units if report else ())}
    verified = {(c["topic"], c["partition"]): c for c in checks or ()}
    out = {}
    for span in plan.spans:
        key = (span.topic, span.partition)
        copied_to = progress[key] + 1 if key in progress else span.start
        check = verified.get(key)
        verified_to = None
        if check is not None and check["verdict"] in ("match", "pending"):
            verified_to = check["compare_end"]
        out[key] = CopiedPartition(
            span.topic,
            span.partition,
            span.end,
            copied_to,
            verified_to,
            None if check is None else check["verdict"],
        )
    return out


@dataclass
class GroupEvidence:
    group: str
    topics: list[str]
    partitions: int
    rows: list[dict[str, Any]] = field(default_factory=list)  # the first GROUP_ROWS
    blocked: list[str] = field(default_factory=list)  # why not, each a sentence fragment

    @property
    def movable(self) -> bool:
        return not self.blocked


def group_evidence(
    rows: Iterable[Mapping[str, Any]],
    copied: Mapping[TopicPartition, CopiedPartition],
    *,
    topics_regex: str,
    verified: bool,
    skipped: Mapping[tuple[str, str, int], tuple[int, int]] | None = None,
) -> list[GroupEvidence]:
    """Per group (in name order) its partitions held against `copied`; `rows` are a failover dry
    run's (FailoverRow as dicts); `verified`: whether the migration verified its copy; `skipped`:
    per (group, source topic, partition) the source offsets [first, end) the group has not read
    whose copies the target no longer holds (removed_copies.skipped_records)."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row)
    out = []
    for group, group_rows in sorted(by_group.items()):
        ordered = sorted(group_rows, key=lambda r: (r["source_topic"], r["partition"]))
        evidence = GroupEvidence(group, sorted({r["source_topic"] for r in ordered}), len(ordered))
        outside: list[str] = []
        for row in ordered:
            key = (row["source_topic"], row["partition"])
            part = copied.get(key)
            read_to = row["source_offset"]
            problem = None
            if part is None:
                if row["source_topic"] not in outside:
                    outside.append(row["source_topic"])
            elif part.copied_to < read_to:
                problem = (
                    f"{key[0]}-{key[1]}: the group has read up to offset {read_to:,}, the copy reaches "
                    f"{part.copied_to:,}"
                )
            elif verified and (part.verified_to is None or part.verified_to < read_to):
                found = part.verification or "no check"
                problem = f"{key[0]}-{key[1]}: not verified up to offset {read_to:,} ({found})"
            elif row["status"] == UNTRANSLATED or row["target_offset"] is None:
                problem = f"{key[0]}-{key[1]}: its offset does not translate ({row.get('note') or 'no sync'})"
            elif (group, *key) in (skipped or {}):
                first, end = (skipped or {})[(group, *key)]
                problem = (
                    f"{key[0]}-{key[1]}: the target no longer holds the copies of source offsets {first:,} to "
                    f"{end - 1:,}, which the group has not read (its retention or a DeleteRecords removed them); "
                    f"moved now, it would skip them"
                )
            if problem:
                evidence.blocked.append(problem)
            if len(evidence.rows) < GROUP_ROWS:
                evidence.rows.append(
                    {
                        "topic": key[0],
                        "partition": key[1],
                        "remote_topic": row["topic"],
                        "committed": read_to,
                        "copied_to": None if part is None else part.copied_to,
                        "verified_to": None if part is None else part.verified_to,
                        "target_offset": row["target_offset"],
                        "how": row["status"],
                        "ok": part is not None and problem is None,
                    }
                )
        if outside:
            named = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
            evidence.blocked.insert(
                0, f"reads {named}, not among this migration's topics ({topics_regex}): not copied by it"
            )
        out.append(evidence)
    return out


def copy_figures(
    copied: Mapping[TopicPartition, CopiedPartition], report: RunReport | None, lag_left: int | None
) -> dict[str, Any]:
    """The migration's totals: partitions and topics, records this run copied, offsets below the
    ends still missing on the target, and offsets the source holds past the ends (not asked for)."""
    missing = sum(max(0, p.end - p.copied_to) for p in copied.values())
    totals = report.totals() if report else {}
    return {
        "topics": len({t for t, _ in copied}),
        "partitions": len(copied),
        "records": totals.get("records", 0),
        "planned_offsets": report.planned_offsets if report else 0,
        "missing": missing,
        "beyond_ends": None if lag_left is None else max(0, lag_left - missing),
        "failed_partitions": totals.get("failed_partitions", 0),
    }


def shown_ends(copied: Mapping[TopicPartition, CopiedPartition]) -> list[dict[str, Any]]:
    """The first SHOWN_ROWS partitions, those not copied to their end first, then by name."""
    ordered = sorted(copied.values(), key=lambda p: (p.copied_to >= p.end, p.topic, p.partition))
    return [asdict(p) for p in ordered[:SHOWN_ROWS]]


def evidence_document(
    *,
    plan: Plan,
    report: RunReport | None,
    lag_left: int | None,
    verification: Mapping[str, Any] | None,
    checks: Iterable[Mapping[str, Any]] | None,
    rows: Iterable[Mapping[str, Any]] | None,
    asked: Mapping[str, Any],
    warnings: Iterable[str] = (),
    skipped: Mapping[tuple[str, str, int], tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """The whole evidence, bounded, as the preview hands it on (XCom) and the approval shows it.
    `asked` holds the form's topics, until (as written) and until_ms (None for now); `lag_left`
    is what the run's summary measured after the copy (offsets left up to the source's end);
    `skipped` is group_evidence's."""
    copied = copied_partitions(plan, report, checks)
    groups = (
        group_evidence(
            rows, copied, topics_regex=asked["topics"], verified=verification is not None, skipped=skipped
        )
        if rows is not None
        else []
    )
    return {
        "asked": dict(asked),
        "resolved_ms": plan.created_ms,
        "copy": copy_figures(copied, report, lag_left),
        "ends": shown_ends(copied),
        "verification": None if verification is None else dict(verification),
        "groups": [asdict(g) | {"movable": g.movable} for g in groups[:SHOWN_ROWS]],
        "groups_count": len(groups),
        "movable": [g.group for g in groups if g.movable],
        "blocked": {g.group: "; ".join(g.blocked) for g in groups if not g.movable},
        "warnings": list(warnings),
    }
