"""Lag in seconds: how long records wait between the source and the target, over the last minutes.

A window's tasks measure it at every batch (see task.py): for a partition the batch copied, how
long the oldest record it moved had waited when its transaction committed (UnitResult.waited_ms);
for one it left records in, how long those have been waiting at least. Each batch adds one
sample per topic and one for the task (the worst of its partitions), so an idle topic counts as
0, not as missing.

Samples go into histograms with buckets about 10% wide (a quantile is off by less than a bucket),
one per minute, the last LAG_MINUTES kept: p50 and p99 "over the last minutes" cost a few hundred
integers per topic however many batches ran. A task with no partitions adds no samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

LAG_MINUTES = 5
FACTOR = 1.1
_LOG_FACTOR = math.log(FACTOR)
QUANTILES = (("p50", 0.5), ("p99", 0.99))


def bucket(ms: int) -> int:
    """The bucket of `ms`: 0 holds 0 ms, bucket b > 0 holds (FACTOR**(b-1), FACTOR**b]."""
    if ms <= 0:
        return 0
    return max(1, math.ceil(math.log(ms) / _LOG_FACTOR))


def upper(index: int) -> int:
    """The largest lag (ms) bucket `index` holds: what a quantile landing in it reports."""
    return 0 if index <= 0 else math.ceil(FACTOR**index)


class LagHistogram:
    """Counts per bucket (sparse), and the largest sample exactly."""

    __slots__ = ("counts", "max_ms")

    def __init__(self, counts: Mapping[int, int] | None = None, max_ms: int = 0) -> None:
        self.counts: dict[int, int] = dict(counts or {})
        self.max_ms = max_ms

    def add(self, ms: int) -> None:
        index = bucket(ms)
        self.counts[index] = self.counts.get(index, 0) + 1
        self.max_ms = max(self.max_ms, ms)

    def merge(self, other: LagHistogram) -> None:
        for index, count in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + count
        self.max_ms = max(self.max_ms, other.max_ms)

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def quantile(self, q: float) -> int | None:
        """The smallest bucket bound at or below which a share `q` of the samples lie (None: no
        samples); never above the largest sample."""
        total = self.count
        if not total:
            return None
        wanted = max(1, math.ceil(q * total))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= wanted:
                return min(upper(index), self.max_ms)
        return self.max_ms

    def figures(self) -> dict[str, float | None]:
        """p50, p99 and max in seconds (None without samples)."""
        if not self.count:
            return {"p50": None, "p99": None, "max": None}
        out: dict[str, float | None] = {}
        for name, q in QUANTILES:
            value = self.quantile(q)
            out[name] = None if value is None else round(value / 1000, 3)
        out["max"] = round(self.max_ms / 1000, 3)
        return out

    @classmethod
    def merged(cls, histograms: Iterable[LagHistogram]) -> LagHistogram:
        out = cls()
        for histogram in histograms:
            out.merge(histogram)
        return out


class RecentLag:
    """One histogram per minute for the last `minutes` minutes."""

    __slots__ = ("minutes", "_by_minute")

    def __init__(self, minutes: int = LAG_MINUTES) -> None:
        self.minutes = minutes
        self._by_minute: dict[int, LagHistogram] = {}

    def add(self, ms: int, now_ms: int) -> None:
        minute = now_ms // 60_000
        found = self._by_minute.get(minute)
        if found is None:
            found = self._by_minute[minute] = LagHistogram()
            for old in [m for m in self._by_minute if m <= minute - self.minutes]:
                del self._by_minute[old]
        found.add(ms)

    def histogram(self, now_ms: int) -> LagHistogram:
        first = now_ms // 60_000 - self.minutes + 1
        return LagHistogram.merged(h for m, h in self._by_minute.items() if m >= first)
