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
  (`log_append_time`, `retimed`: CreateTime 0, which librdkafka reads as "now");
* neither: copies the target removed at or above the span's `needed_from` (a group to move has
  not read them, or a migration promised them) are `removed_needed`, with their range: nothing
  is wrong, but the copy is not complete for those who need it.

Aborted source transactions never show: both sides are read read_committed, and an aborted copy
transaction on the target is as invisible as the source's own. Source offsets that hold no record
(transaction markers, aborted or compacted records) are counted as `gaps`.

Each side also gets an order-sensitive digest (digests), computed as it is read.
"""

from __future__ import annotations

import struct
import time

from confluent_kafka import KafkaException, Message

from mirrorflow.kafka import KafkaCallError
from mirrorflow.ops.verification.checks import CompareJob, PartitionCheck, VerifySpan
from mirrorflow.ops.verification.digests import SOURCE, TARGET, Digests, record_bytes, without_provenance
from mirrorflow.ops.verification.reader import PartitionReader
from mirrorflow.policy.provenance import PROVENANCE_HEADER, ProvenanceError, decode

COMPACTED_KEYS_LIMIT = (
    100_000  # missing records of a compacted remote topic awaiting a later copy of their key
)
TIMESTAMP_LOG_APPEND = 2  # confluent_kafka.TIMESTAMP_LOG_APPEND_TIME


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
        return self.source_offset(headers), without_provenance(headers)

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
        needed_from=span.needed_from,
        needed_by=span.needed_by,
    )
    digests = Digests()
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
    digests: Digests,
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
            record_bytes(message.key(), message.value(), without_provenance(headers), *message.timestamp()),
        )
        if headers and _is_loop(headers, job.target):
            check.explained["loops"] += 1
        elif before_any_copy and head_trimmed:
            if span.needed_from is not None and offset >= span.needed_from:
                check.removed(offset)
            else:
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
        copy_bytes = record_bytes(key, value, copy_headers, *copy_ts)
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
        source_headers = without_provenance(original.headers())
        if (
            source_ts == copy_ts
            and source_value == value
            and source_key == key
            and source_headers == copy_headers
        ):
            digest(SOURCE, copy_bytes)  # an exact copy: the source record's bytes are the same
            check.matched += 1
            continue
        digest(SOURCE, record_bytes(source_key, source_value, source_headers, *source_ts))
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
