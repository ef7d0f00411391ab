"""What one partition's verification compares and what it found: the span fixed by the plan,
the job settings every comparison shares, and the check with its verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

DETAIL_LIMIT = 20  # mismatches described in full per partition; all are counted

WRONG_KINDS = ("missing", "different", "unexpected", "repeated")
EXPLAINED_KINDS = (
    "removed_from_source",
    "compacted_on_source",
    "removed_from_target",
    "compacted_on_target",
    "loops",
    "retimed",
    "log_append_time",
    "repeated_at_least_once",
)


@dataclass(frozen=True, slots=True)
class VerifySpan:
    """One source partition to verify.

    Source offsets [start, compare_end) are compared: `start` is the source's log start at plan
    time and `compare_end` the end of what the flow has copied (its progress), at most `end`,
    the verification's end (the source's last stable offset, or the offset of `--until`).
    Offsets [compare_end, end) are not copied yet. On the target, [target_start, target_end)
    is read: from where this source incarnation's copy begins (or the log start, if later) to
    the last stable offset at plan time. `stretches` are the sampled source ranges; empty means
    the whole range.

    `needed_from` is the lowest source offset whose copy the target must still hold, and
    `needed_by` who needs it (`group <name>`, or `migration` for what a migration copied): a
    group moved to the target resumes at the first copy of its committed offset or later, so a
    copy removed from the target at or above it would be skipped. None: nothing needs them."""

    topic: str
    partition: int
    remote_topic: str
    start: int
    compare_end: int
    end: int
    target_start: int
    target_end: int
    target_log_start: int
    floor: int
    source_compacted: bool = False
    target_compacted: bool = False
    needed_from: int | None = None
    needed_by: str = ""
    stretches: tuple[tuple[int, int], ...] = ()

    @property
    def pending(self) -> int:
        return max(0, self.end - max(self.start, self.compare_end))

    @property
    def offsets(self) -> int:
        """Source offsets to compare (all of them, or those of the sampled stretches)."""
        if self.stretches:
            return sum(hi - lo for lo, hi in self.stretches)
        return max(0, self.compare_end - self.start)


@dataclass(frozen=True, slots=True)
class CompareJob:
    """What every partition's comparison shares: the flow and its read-only client configs."""

    source: str
    target: str
    at_least_once: bool
    source_consumer: dict[str, Any] = field(repr=False)
    target_consumer: dict[str, Any] = field(repr=False)


@dataclass
class PartitionCheck:
    topic: str
    partition: int
    remote_topic: str
    start: int
    compare_end: int
    end: int
    sampled: bool = False
    stretches: int = 0
    source_records: int = 0
    target_records: int = 0
    matched: int = 0
    gaps: int = 0
    pending: int = 0
    foreign: int = 0
    unattributed: int = 0
    beyond: int = 0
    wrong: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WRONG_KINDS, 0))
    explained: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EXPLAINED_KINDS, 0))
    source_digest: str = ""
    target_digest: str = ""
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    # Copies removed from the target (its retention, DeleteRecords) that a group to move or a
    # migration still needs (VerifySpan.needed_from): how many, the source offsets of the first
    # and past the last, and who needs them. Not wrong, never explained: the copy is incomplete.
    removed_needed: int = 0
    removed_range: list[int] = field(default_factory=list)
    needed_from: int | None = None
    needed_by: str = ""

    @property
    def wrong_total(self) -> int:
        return sum(self.wrong.values())

    @property
    def verdict(self) -> str:
        if self.error:
            return "error"
        if self.wrong_total:
            # Records without provenance (copied by MM2, or written to an identity-named remote
            # topic by local clients) may be the copies of the "missing" ones: not provably wrong.
            if self.unattributed and self.wrong_total == self.wrong["missing"]:
                return "unverifiable"
            return "mismatch"
        if self.removed_needed:
            return "removed"
        if self.pending:
            return "pending"
        return "match"

    def removed(self, offset: int) -> None:
        """A source record whose copy the target removed though it is still needed."""
        self.removed_needed += 1
        if self.removed_range:
            self.removed_range[1] = offset + 1
        else:
            self.removed_range = [offset, offset + 1]

    def note(self, kind: str, source_offset: int | None, target_offset: int | None, detail: str = "") -> None:
        self.wrong[kind] += 1
        if len(self.mismatches) < DETAIL_LIMIT:
            row: dict[str, Any] = {
                "kind": kind,
                "source_offset": source_offset,
                "target_offset": target_offset,
            }
            if detail:
                row["detail"] = detail
            self.mismatches.append(row)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionCheck:
        data = dict(data)
        data.pop("verdict", None)
        return cls(**data)
