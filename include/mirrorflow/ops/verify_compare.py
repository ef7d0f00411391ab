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
from itertools import chain
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.kafka import KafkaCallError
from mirrorflow.policy.provenance import PROVENANCE_HEADER, ProvenanceError, decode
from mirrorflow.replicate.copy import CONSUMER_DEFAULTS

BATCH = 5000
FETCH_BYTES = 1 << 20  # per partition and fetch (see PartitionReader)
FETCH_WAIT_MS = 10  # how long the broker may hold a fetch that finds no new record
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
_NO_HEADERS_STAMP = struct.Struct(">ibq").pack  # a header count of 0, then the timestamp
_NULL = b"\xff\xff\xff\xff"
_ERROR = Message.error


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


SOURCE, TARGET = 0, 1  # the sides of _Digests


class _Digests:
    """The source's and the target's digest of one partition (see the module docstring), each
    fed one _record_bytes per record.

    As long as both sides have taken the same bytes (every record so far an exact copy of its
    source record) they are one hash state, fed once per pair: the bytes one side takes wait
    until the other side takes the same, or the sides part, each going on from a copy of the
    shared state. Hashing (about 1 us per KiB) is the largest single cost of comparing records,
    and an exact copy halves it; either digest is the same as if each side had a hash of its own."""

    def __init__(self) -> None:
        self._shared = hashlib.blake2b(digest_size=16)
        self._held: list[bytes | None] = [None, None]  # a side's bytes beyond the shared state
        # (source, target): a hash each, once the sides differ
        self._parted: tuple[hashlib.blake2b, hashlib.blake2b] | None = None

    def add(self, side: int, data: bytes) -> None:
        if self._parted is not None:
            self._parted[side].update(data)
            return
        held = self._held
        other = held[1 - side]
        if other is not None and other == data:
            self._shared.update(data)
            held[1 - side] = None
        elif other is None and held[side] is None:
            held[side] = data
        else:
            self._part()[side].update(data)

    def _part(self) -> tuple[hashlib.blake2b, hashlib.blake2b]:
        parted = self._parted = (self._shared.copy(), self._shared)
        for side, data in enumerate(self._held):
            if data is not None:
                parted[side].update(data)
        self._held = [None, None]
        return parted

    def hexdigests(self) -> tuple[str, str]:
        """(source, target)."""
        if self._parted is None and self._held == [None, None]:
            shared = self._shared.hexdigest()
            return shared, shared
        source, target = self._parted or self._part()
        return source.hexdigest(), target.hexdigest()


def _record_bytes(
    key: bytes | None, value: bytes | None, headers: list | None, ts_type: int, ts: int
) -> bytes:
    """What a digest takes of one record: key and value length-prefixed (-1 for null), the
    header count and each header's name and value length-prefixed, the timestamp type and the
    timestamp. One bytes object, so a record costs one digest update, and a copy equal to its
    source record lends the source's digest the same bytes."""
    if headers is None:  # the common case: no list to build
        return b"".join(
            (
                _NULL if key is None else _INT(len(key)),
                key or b"",
                _NULL if value is None else _INT(len(value)),
                value or b"",
                _NO_HEADERS_STAMP(0, ts_type, ts),
            )
        )
    parts = [
        _NULL if key is None else _INT(len(key)),
        key or b"",
        _NULL if value is None else _INT(len(value)),
        value or b"",
        _INT(len(headers)),
    ]
    for name, hvalue in headers:
        raw_name = name.encode()
        parts += (_INT(len(raw_name)), raw_name)
        if hvalue is None:
            parts.append(_NULL)
        else:
            raw = hvalue.encode() if isinstance(hvalue, str) else hvalue
            parts += (_INT(len(raw)), raw)
    parts.append(_STAMP(ts_type, ts))
    return b"".join(parts)


def _without_provenance(headers: list | None) -> list | None:
    if not headers:
        return None
    kept = [h for h in headers if h[0] != PROVENANCE_HEADER]
    return kept or None


class PartitionReader:
    """One reusable read_committed consumer that reads offset ranges of one partition at a time
    (a worker verifies many partitions; a consumer per partition would cost a connection each)."""

    def __init__(self, config: Mapping[str, Any], what: str, group_id: str) -> None:
        # The copy's client settings; the group id is the one the ACL table grants. An offset
        # retention removed after the plan is an error event, never a silent jump.
        # Fetches differ from the copy's. A verification moves its consumer from range to
        # range (partition after partition, probe after probe, stretch after stretch), and each
        # move waited for the fetch under way: up to max.partition.fetch.bytes (the copy's
        # 8 MiB) read to be thrown away, or, at a partition's end, up to fetch.wait.max.ms
        # (500 ms) for records that were not coming, as no range reaches past a last stable
        # offset the plan saw. 1 MiB fetches stream a partition as fast as 8 MiB ones.
        self.consumer = Consumer(
            {
                **CONSUMER_DEFAULTS,
                **config,
                "max.partition.fetch.bytes": FETCH_BYTES,
                "fetch.wait.max.ms": FETCH_WAIT_MS,
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
        return chain.from_iterable(self._batches(BATCH, topic, partition, start, end))

    def peek(self, topic: str, partition: int, start: int, end: int) -> Iterator[Message]:
        """read()'s records one at a time, for a caller that wants only the first one or few (a
        binary search's probe), without turning a fetch's worth of records into messages."""
        return chain.from_iterable(self._batches(1, topic, partition, start, end))

    def first(self, topic: str, partition: int, start: int, end: int) -> Message | None:
        """The first record at or after `start` (before `end`), or None."""
        for message in self.peek(topic, partition, start, end):
            return message
        return None

    def _batches(
        self, most: int, topic: str, partition: int, start: int, end: int
    ) -> Iterator[list[Message]]:
        """The records at [start, end) in batches of at most `most`. A batch with no error
        event that ends before `end` (nearly all of them) passes as consume() returned it;
        the others are checked record by record."""
        if start >= end:
            return
        consumer = self.consumer
        consumer.assign([TopicPartition(topic, partition, start)])
        try:
            last_seen = time.monotonic()
            position = start  # offsets below this were read
            while True:
                # consume() waits out its timeout unless it gets as many messages as asked for
                # (an EOF event counts), so it is never asked for more than the offsets left.
                batch = consumer.consume(min(most, end - position), timeout=POLL_S)
                if not batch:
                    if time.monotonic() - last_seen > IDLE_TIMEOUT_S:
                        raise KafkaCallError(
                            f"reading {topic}-{partition} on the {self.what}: nothing arrived for "
                            f"{IDLE_TIMEOUT_S:.0f}s before offset {end}"
                        )
                    continue
                last_seen = time.monotonic()
                last = batch[-1]
                if last.error() is None and last.offset() + 1 < end and not any(map(_ERROR, batch)):
                    position = last.offset() + 1
                    yield batch
                    continue
                records: list[Message] = []
                done = False
                failure = None
                for message in batch:
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            failure = KafkaException(error)
                            break
                        if message.offset() >= end:
                            done = True
                            break
                        continue
                    offset = message.offset()
                    if offset >= end:
                        done = True
                        break
                    records.append(message)
                    position = offset + 1
                    if position >= end:
                        done = True
                        break
                if records:
                    yield records  # the records before a failure are compared, as they were read
                if failure is not None:
                    raise failure
                if done:
                    return
        finally:
            consumer.unassign()


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
        return self._offset(value)

    def split(self, headers: list | None) -> tuple[int | None, list | None]:
        """source_offset() of a target record, and its headers without provenance (None if no
        other is left), in one look at the headers."""
        if not headers:
            return None, None
        if len(headers) == 1:  # a copy of a record without headers: only the copy's own
            name, value = headers[0]
            if name == PROVENANCE_HEADER:
                return self._offset(value), None
            return None, headers
        return self.source_offset(headers), _without_provenance(headers)

    def _offset(self, value: str | bytes | None) -> int | None:
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
    digests = _Digests()
    provenances = _Provenances(job, span)
    try:
        if span.stretches:
            for lo, hi in span.stretches:
                at = _target_position(target, span, provenances, lo)
                _merge(job, span, check, source, target, provenances, digests, lo, hi, at)
        else:
            _merge(
                job,
                span,
                check,
                source,
                target,
                provenances,
                digests,
                span.start,
                span.compare_end,
                span.target_start,
            )
    except (KafkaException, KafkaCallError) as exc:
        check.error = f"{span.topic}-{span.partition}: {exc}"
    check.source_digest, check.target_digest = digests.hexdigests()
    check.seconds = round(time.monotonic() - started, 3)
    return check


def _target_position(
    target: PartitionReader, span: VerifySpan, provenances: _Provenances, source_offset: int
) -> int:
    """The first target offset holding this flow's copy of `source_offset` or a later one (a
    binary search over the target range, one record peeked per step)."""
    lo, hi = span.target_start, span.target_end
    while lo < hi:
        mid = (lo + hi) // 2
        found = None
        for message in target.peek(span.remote_topic, span.partition, mid, hi):
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
    digests: _Digests,
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
    split = provenances.split
    digest = digests.add

    def account_source(message: Message, *, before_any_copy: bool) -> None:
        """A source record that has no copy on the target."""
        nonlocal expected_next
        offset = message.offset()
        check.gaps += offset - expected_next
        expected_next = offset + 1
        check.source_records += 1
        headers = message.headers()
        digest(
            SOURCE,
            _record_bytes(message.key(), message.value(), _without_provenance(headers), *message.timestamp()),
        )
        if headers and _is_loop(headers, job.target):
            check.explained["loops"] += 1
        elif before_any_copy and head_trimmed:
            check.explained["removed_from_target"] += 1
        elif span.target_compacted and len(compacted_missing) < COMPACTED_KEYS_LIMIT:
            compacted_missing.setdefault(message.key(), []).append(offset)
        else:
            check.note("missing", offset, None, "no copy of this source record on the target")

    for copy in target.read(span.remote_topic, span.partition, target_from, span.target_end):
        copied_from, copy_headers = split(copy.headers())
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
        key, value, copy_ts = copy.key(), copy.value(), copy.timestamp()
        copy_bytes = _record_bytes(key, value, copy_headers, *copy_ts)
        digest(TARGET, copy_bytes)
        check.target_records += 1
        if copied_from <= last_copied:
            _repeated(job, check, copied_from, copy.offset())
            continue
        last_copied = copied_from
        if span.target_compacted and compacted_missing and key in compacted_missing:
            check.explained["compacted_on_target"] += len(compacted_missing.pop(key))
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
        offset = original.offset()
        check.gaps += offset - expected_next
        expected_next = offset + 1
        check.source_records += 1
        source_key, source_value, source_ts = original.key(), original.value(), original.timestamp()
        source_headers = _without_provenance(original.headers())
        if (
            source_ts == copy_ts
            and source_value == value
            and source_key == key
            and source_headers == copy_headers
        ):
            digest(SOURCE, copy_bytes)  # an exact copy: the source record's bytes are the same
            check.matched += 1
            continue
        digest(SOURCE, _record_bytes(source_key, source_value, source_headers, *source_ts))
        differ = []
        if source_key != key:
            differ.append("key")
        if source_value != value:
            differ.append("value")
        if source_headers != copy_headers:
            differ.append("headers")
        timestamp_explained = None
        if source_ts[1] != copy_ts[1]:
            if copy_ts[0] == TIMESTAMP_LOG_APPEND and source_ts[0] != TIMESTAMP_LOG_APPEND:
                timestamp_explained = "log_append_time"
            elif source_ts[1] == 0:
                timestamp_explained = "retimed"
            else:
                differ.append("timestamp")
        if differ:
            check.note("different", offset, copy.offset(), ", ".join(differ) + " differ")
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
