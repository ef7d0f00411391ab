"""What a pass knows of a remote partition's records: whose records count, which offset
intervals have been read, the flow records found in them, and whether those are in order.

Every flow record kept is compared with its neighbours in target order: a source offset that
does not rise (a re-copy, a mixed incarnation) is remembered, so the translation can tell that
the order it searches by does not hold there (see rule.py).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from confluent_kafka import Message

from mirrorflow.control.translation.rule import FlowRecord
from mirrorflow.policy.provenance import ProvenanceError, read_provenance


@dataclass(frozen=True, slots=True)
class Origin:
    """Whose records count: those a flow from `alias` copied from `topic`-`partition`."""

    alias: str
    topic: str
    partition: int

    def owns(self, message: Message) -> int | None:
        """The record's source offset if this origin's flow copied it, else None."""
        try:
            provenance = read_provenance(message.headers())
        except ProvenanceError:
            return None
        if provenance is None or not provenance.path or provenance.path[-1] != self.alias:
            return None
        if (provenance.source_topic, provenance.source_partition) != (self.topic, self.partition):
            return None
        return provenance.source_offset


@dataclass
class Covered:
    """Intervals [a, b) of one partition already read, and the flow records found in them.

    `inverted_at`: the highest target offset of a flow record known to be followed, later in
    the partition, by one whose source offset is not higher (-1: none seen).
    """

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    offsets: array = field(default_factory=lambda: array("q"))
    source_offsets: array = field(default_factory=lambda: array("q"))
    inverted_at: int = -1

    def interval_at(self, offset: int) -> int | None:
        i = bisect_right(self.starts, offset) - 1
        return i if i >= 0 and offset < self.ends[i] else None

    def end_before(self, offset: int) -> int:
        """End of the last interval that ends at or before `offset` (0 if none)."""
        i = bisect_right(self.starts, offset) - 1
        return self.ends[i] if i >= 0 and self.ends[i] <= offset else 0

    def next_start(self, offset: int) -> int | None:
        i = bisect_right(self.starts, offset)
        return self.starts[i] if i < len(self.starts) else None

    def first_record(self, offset: int, before: int) -> FlowRecord | None:
        i = bisect_left(self.offsets, offset)
        if i < len(self.offsets) and self.offsets[i] < before:
            return FlowRecord(self.offsets[i], self.source_offsets[i])
        return None

    def add(self, start: int, end: int, records: list[FlowRecord]) -> None:
        """Record that [start, end) was read; it never overlaps a known interval."""
        i = bisect_left(self.offsets, start)
        self.offsets[i:i] = array("q", (r.offset for r in records))
        self.source_offsets[i:i] = array("q", (r.source_offset for r in records))
        self._check_order(max(0, i - 1), min(len(self.offsets), i + len(records) + 1))
        j = bisect_left(self.starts, start)
        self.starts.insert(j, start)
        self.ends.insert(j, end)
        self._merge_around(j)

    def _check_order(self, first: int, stop: int) -> None:
        """Note any adjacent pair among the kept records [first, stop) whose source offsets do not rise."""
        sources = self.source_offsets
        for k in range(first + 1, stop):
            if sources[k] <= sources[k - 1]:
                self.inverted_at = max(self.inverted_at, self.offsets[k - 1])

    def _merge_around(self, j: int) -> None:
        if j + 1 < len(self.starts) and self.ends[j] == self.starts[j + 1]:
            self.ends[j] = self.ends.pop(j + 1)
            self.starts.pop(j + 1)
        if j > 0 and self.ends[j - 1] == self.starts[j]:
            self.ends[j - 1] = self.ends.pop(j)
            self.starts.pop(j)
