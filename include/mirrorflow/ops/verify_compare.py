"""Compare one source partition with what a flow wrote for it on the target, record by record.

Both sides are read once, in offset order, side by side. Each target record names the source
record it was copied from in its `mirrorflow.provenance` header (source topic, partition, offset
and the clusters it came through), so the two streams merge on the source offset and every
difference lands on an exact pair of offsets:

* wrong: a source record with no copy (`missing`), a copy whose key, value, headers or
  timestamp differ (`different`), a copy of an offset the source never held (`unexpected`), and
  a source offset copied twice or out of order (`repeated`; explained instead in at-least-once
  delivery, where a retried range writes some records twice by design);
* explained: copies whose source record retention or compaction removed after the copy
  (`removed_from_source`, `compacted_on_source`), source records whose copy the target's own
  retention or compaction removed (`removed_from_target`, `compacted_on_target`), records never
  copied because they came from the target (`loops`), timestamps Kafka or librdkafka rewrote
  (`log_append_time`, `retimed`: CreateTime 0, which librdkafka reads as "now").

Aborted source transactions never show: both sides are read read_committed, and an aborted copy
transaction on the target is as invisible as the source's own. Source offsets that hold no record
(transaction markers, aborted or compacted records) are counted as `gaps`.

Each side also gets an order-sensitive digest (BLAKE2b over every compared record's key, value,
headers without the provenance header, timestamp type and timestamp), computed as it is read:
equal digests say the two sides hold the same records in the same order.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.kafka import KafkaCallError
from mirrorflow.policy.provenance import PROVENANCE_HEADER, ProvenanceError, decode
from mirrorflow.replicate.copy import CONSUMER_DEFAULTS

BATCH = 5000
POLL_S = 0.05
IDLE_TIMEOUT_S = 30.0
DETAIL_LIMIT = 20  # mismatches described in full per partition; all are counted
COMPACTED_KEYS_LIMIT = (
    100_000  # missing records of a compacted remote topic awaiting a later copy of their key
)
TIMESTAMP_LOG_APPEND = 2  # confluent_kafka.TIMESTAMP_LOG_APPEND_TIME

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

_INT = struct.Struct(">i").pack
_STAMP = struct.Struct(">bq").pack


@dataclass(frozen=True, slots=True)
class VerifySpan:
    """One source partition to verify.

    Source offsets [start, compare_end) are compared: `start` is the source's log start at plan
    time and `compare_end` the end of what the flow has copied (its progress), at most `end`,
    the verification's end (the source's last stable offset, or the offset of `--until`).
    Offsets [compare_end, end) are not copied yet. On the target, [target_start, target_end)
    is read: from where this source incarnation's copy begins (or the log start, if later) to
    the last stable offset at plan time. `stretches` are the sampled source ranges; empty means
    the whole range."""

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
        if self.pending:
            return "pending"
        return "match"

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


class _Digest:
    """Order-sensitive digest of a stream of records (see the module docstring)."""

    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)

    def add(
        self, key: bytes | None, value: bytes | None, headers: list | None, ts_type: int, ts: int
    ) -> None:
        update = self._hash.update
        for part in (key, value):
            if part is None:
                update(b"\xff\xff\xff\xff")
            else:
                update(_INT(len(part)))
                update(part)
        update(_INT(len(headers) if headers else 0))
        for name, hvalue in headers or ():
            raw_name = name.encode()
            update(_INT(len(raw_name)))
            update(raw_name)
            if hvalue is None:
                update(b"\xff\xff\xff\xff")
            else:
                raw = hvalue.encode() if isinstance(hvalue, str) else hvalue
                update(_INT(len(raw)))
                update(raw)
        update(_STAMP(ts_type, ts))

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _without_provenance(headers: list | None) -> list | None:
    if not headers:
        return None
    kept = [h for h in headers if h[0] != PROVENANCE_HEADER]
    return kept or None


class PartitionReader:
    """One reusable read_committed consumer that reads offset ranges of one partition at a time
    (a worker verifies many partitions; a consumer per partition would cost a connection each)."""

    def __init__(self, config: Mapping[str, Any], what: str, group_id: str) -> None:
        # The copy's fetch settings; the group id is the one the ACL table grants. An offset
        # retention removed after the plan is an error event, never a silent jump.
        self.consumer = Consumer(
            {
                **CONSUMER_DEFAULTS,
                **config,
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "error",
            }
        )
        self.what = what

    def close(self) -> None:
        self.consumer.close()

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[Message]:
        """Records at offsets [start, end) in order; `end` must not be past the last stable
        offset (records there may never become readable)."""
        if start >= end:
            return
        self.consumer.assign([TopicPartition(topic, partition, start)])
        try:
            last_seen = time.monotonic()
            while True:
                batch = self.consumer.consume(BATCH, timeout=POLL_S)
                if not batch:
                    if time.monotonic() - last_seen > IDLE_TIMEOUT_S:
                        raise KafkaCallError(
                            f"reading {topic}-{partition} on the {self.what}: nothing arrived for "
                            f"{IDLE_TIMEOUT_S:.0f}s before offset {end}"
                        )
                    continue
                last_seen = time.monotonic()
                for message in batch:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            if message.offset() >= end:
                                return
                            continue
                        raise KafkaException(error)
                    offset = message.offset()
                    if offset >= end:
                        return
                    yield message
                    if offset + 1 >= end:
                        return
        finally:
            self.consumer.unassign()

    def first(self, topic: str, partition: int, start: int, end: int) -> Message | None:
        """The first record at or after `start` (before `end`), or None."""
        for message in self.read(topic, partition, start, end):
            return message
        return None


class _Provenances:
    """Which target records this flow copied from the span's partition, decoding each distinct
    header tail (source topic and path) once: the copies of one partition all share one."""

    def __init__(self, job: CompareJob, span: VerifySpan) -> None:
        self.source = job.source
        self.topic = span.topic
        self.partition = span.partition
        self.tails: dict[bytes, bool] = {}

    def source_offset(self, headers: list | None) -> int | None:
        """The source offset a target record was copied from, -1 for another flow's or another
        partition's record, None for a record without provenance."""
        value = None
        for name, hvalue in headers or ():
            if name == PROVENANCE_HEADER:
                value = hvalue
        if value is None:
            return None
        raw = value.encode() if isinstance(value, str) else bytes(value)
        tail = raw[9:]  # partition, topic and path: what the copies of one partition share
        ours = self.tails.get(tail)
        if ours is None:
            try:
                provenance = decode(raw)
            except ProvenanceError:
                return -1
            ours = (
                provenance.source_topic == self.topic
                and provenance.source_partition == self.partition
                and provenance.path[-1] == self.source
            )
            self.tails[tail] = ours
        if not ours:
            return -1
        return struct.unpack_from(">q", raw, 1)[0]


def compare_partition(
    job: CompareJob, span: VerifySpan, source: PartitionReader, target: PartitionReader
) -> PartitionCheck:
    """Verify one partition (all of it, or its sampled stretches); a read that fails is the
    partition's `error`, never an exception."""
    started = time.monotonic()
    check = PartitionCheck(
        span.topic,
        span.partition,
        span.remote_topic,
        span.start,
        span.compare_end,
        span.end,
        sampled=bool(span.stretches),
        stretches=len(span.stretches),
        pending=span.pending,
    )
    source_digest, target_digest = _Digest(), _Digest()
    provenances = _Provenances(job, span)
    try:
        if span.stretches:
            for lo, hi in span.stretches:
                at = _target_position(target, span, provenances, lo)
                _merge(
                    job, span, check, source, target, provenances, source_digest, target_digest, lo, hi, at
                )
        else:
            _merge(
                job,
                span,
                check,
                source,
                target,
                provenances,
                source_digest,
                target_digest,
                span.start,
                span.compare_end,
                span.target_start,
            )
    except (KafkaException, KafkaCallError) as exc:
        check.error = f"{span.topic}-{span.partition}: {exc}"
    check.source_digest = source_digest.hexdigest()
    check.target_digest = target_digest.hexdigest()
    check.seconds = round(time.monotonic() - started, 3)
    return check


def _target_position(
    target: PartitionReader, span: VerifySpan, provenances: _Provenances, source_offset: int
) -> int:
    """The first target offset holding this flow's copy of `source_offset` or a later one (a
    binary search over the target range, one record read per step)."""
    lo, hi = span.target_start, span.target_end
    while lo < hi:
        mid = (lo + hi) // 2
        found = None
        for message in target.read(span.remote_topic, span.partition, mid, hi):
            copied_from = provenances.source_offset(message.headers())
            if copied_from is not None and copied_from >= 0:
                found = (message.offset(), copied_from)
                break
        if found is None or found[1] >= source_offset:
            hi = mid
        else:
            lo = found[0] + 1
    return lo


def _merge(
    job: CompareJob,
    span: VerifySpan,
    check: PartitionCheck,
    source: PartitionReader,
    target: PartitionReader,
    provenances: _Provenances,
    source_digest: _Digest,
    target_digest: _Digest,
    lo: int,
    hi: int,
    target_from: int,
) -> None:
    """Merge the source records at [lo, hi) with the target's copies of them, read from
    `target_from` until a copy of `hi` or later (or the target range's end)."""
    if lo >= hi:
        return
    sampled = bool(span.stretches)
    sources = source.read(span.topic, span.partition, lo, hi)
    pending_source: Message | None = next(sources, None)
    expected_next = lo  # source offsets below this were accounted for
    last_copied = -1
    seen_copy = sampled  # a sample starts after the target's head; nothing before it is the head's
    # Keys of source records missing from a compacted remote topic: explained once a later copy
    # of the same key shows up, wrong if none does.
    compacted_missing: dict[bytes | None, list[int]] = {}
    head_trimmed = span.target_log_start > span.floor

    def account_source(message: Message, *, before_any_copy: bool) -> None:
        """A source record that has no copy on the target."""
        nonlocal expected_next
        offset = message.offset()
        check.gaps += offset - expected_next
        expected_next = offset + 1
        check.source_records += 1
        headers = message.headers()
        source_digest.add(message.key(), message.value(), _without_provenance(headers), *message.timestamp())
        if headers and _is_loop(headers, job.target):
            check.explained["loops"] += 1
        elif before_any_copy and head_trimmed:
            check.explained["removed_from_target"] += 1
        elif span.target_compacted and len(compacted_missing) < COMPACTED_KEYS_LIMIT:
            compacted_missing.setdefault(message.key(), []).append(offset)
        else:
            check.note("missing", offset, None, "no copy of this source record on the target")

    for copy in target.read(span.remote_topic, span.partition, target_from, span.target_end):
        headers = copy.headers()
        copied_from = provenances.source_offset(headers)
        if copied_from is None:
            check.unattributed += 1
            continue
        if copied_from < 0:
            check.foreign += 1
            continue
        if copied_from >= hi:
            if sampled:
                break
            check.beyond += 1
            continue
        if copied_from < lo:
            if copied_from <= last_copied:
                _repeated(job, check, copied_from, copy.offset())
            elif not sampled and copied_from < span.start:
                check.explained["removed_from_source"] += 1
            last_copied = max(last_copied, copied_from)
            continue
        copy_headers = _without_provenance(headers)
        target_digest.add(copy.key(), copy.value(), copy_headers, *copy.timestamp())
        check.target_records += 1
        if copied_from <= last_copied:
            _repeated(job, check, copied_from, copy.offset())
            continue
        last_copied = copied_from
        if span.target_compacted and compacted_missing and copy.key() in compacted_missing:
            check.explained["compacted_on_target"] += len(compacted_missing.pop(copy.key()))
        while pending_source is not None and pending_source.offset() < copied_from:
            account_source(pending_source, before_any_copy=not seen_copy)
            pending_source = next(sources, None)
        seen_copy = True
        if pending_source is None or pending_source.offset() > copied_from:
            if span.source_compacted:
                check.explained["compacted_on_source"] += 1
            else:
                check.note(
                    "unexpected", copied_from, copy.offset(), "the source holds no record at this offset"
                )
            continue
        original = pending_source
        pending_source = next(sources, None)
        check.gaps += original.offset() - expected_next
        expected_next = original.offset() + 1
        check.source_records += 1
        original_headers = original.headers()
        source_headers = _without_provenance(original_headers)
        source_ts = original.timestamp()
        source_digest.add(original.key(), original.value(), source_headers, *source_ts)
        differ = []
        if original.key() != copy.key():
            differ.append("key")
        if original.value() != copy.value():
            differ.append("value")
        if source_headers != copy_headers:
            differ.append("headers")
        copy_ts = copy.timestamp()
        timestamp_explained = None
        if source_ts[1] != copy_ts[1]:
            if copy_ts[0] == TIMESTAMP_LOG_APPEND and source_ts[0] != TIMESTAMP_LOG_APPEND:
                timestamp_explained = "log_append_time"
            elif source_ts[1] == 0:
                timestamp_explained = "retimed"
            else:
                differ.append("timestamp")
        if differ:
            check.note("different", original.offset(), copy.offset(), ", ".join(differ) + " differ")
        else:
            check.matched += 1
            if timestamp_explained:
                check.explained[timestamp_explained] += 1
    while pending_source is not None:
        account_source(pending_source, before_any_copy=not seen_copy)
        pending_source = next(sources, None)
    check.gaps += max(0, hi - expected_next)
    for key_offsets in compacted_missing.values():
        for offset in key_offsets:
            check.note(
                "missing", offset, None, "no copy on the compacted target, and no later copy of its key"
            )


def _repeated(job: CompareJob, check: PartitionCheck, source_offset: int, target_offset: int) -> None:
    if job.at_least_once:
        check.explained["repeated_at_least_once"] += 1
    else:
        check.note("repeated", source_offset, target_offset, "this source offset was already copied")


def _is_loop(headers: list, target: str) -> bool:
    for name, value in headers:
        if name == PROVENANCE_HEADER and value is not None:
            try:
                return target in decode(value).path
            except ProvenanceError:
                return False
    return False
