"""Partition logs: record batches as bytes in segments, with the offsets Kafka derives from them.

A partition keeps an index entry per batch (offsets, timestamps, producer fields, flags), the
high watermark (= log end offset: this single node is the whole ISR), the log start offset,
the last stable offset and the aborted-transaction index that read_committed fetches need.

With a data dir the layout is Kafka's (`<topic>-<partition>/<base offset>.log`): batches are
appended with os.write before the produce response is sent, so acknowledged data survives a
SIGKILL (it is in the page cache); at start each segment is scanned, the index rebuilt, and a
torn or corrupt tail cut off. Without a data dir segments are in-memory byte arrays.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import logging
import os
import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crc32c import crc32c

from devbroker import batches
from devbroker.batches import BatchInfo
from devbroker.producers import PartitionProducers

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".log"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass(slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker


class Segment:
    """One segment: contiguous batch bytes plus an index of the batches in it."""

    def __init__(self, base_offset: int, path: Path | None, created_ms: int | None = None) -> None:
        self.base_offset = base_offset
        self.path = path
        self.size = 0
        self.created_ms = created_ms if created_ms is not None else now_ms()
        self.max_timestamp = -1
        self.lasts: list[int] = []
        self.positions: list[int] = []
        self.infos: list[BatchInfo] = []
        self._fd: int | None = None
        self._buf = bytearray() if path is None else None

    # -- storage --------------------------------------------------------------------------
    def open(self) -> None:
        if self.path is not None and self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, data: bytes) -> int:
        pos = self.size
        if self._buf is not None:
            self._buf += data
        else:
            self.open()
            assert self._fd is not None
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        self.size += len(data)
        return pos

    def read(self, pos: int, length: int) -> bytes:
        if self._buf is not None:
            return bytes(self._buf[pos : pos + length])
        if self._fd is not None:
            return os.pread(self._fd, length, pos)
        # Closed segments keep no descriptor open (a log may have thousands of them).
        assert self.path is not None
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, length, pos)
        finally:
            os.close(fd)

    def truncate(self, size: int) -> None:
        if self._buf is not None:
            del self._buf[size:]
        else:
            self.open()
            assert self._fd is not None
            os.ftruncate(self._fd, size)
        self.size = size

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    # -- index ----------------------------------------------------------------------------
    def add(self, info: BatchInfo, pos: int) -> None:
        self.lasts.append(info.last_offset)
        self.positions.append(pos)
        self.infos.append(info)
        if info.max_timestamp > self.max_timestamp:
            self.max_timestamp = info.max_timestamp

    def find(self, offset: int) -> int:
        """Index of the first batch whose last offset >= offset (len if none)."""
        return bisect.bisect_left(self.lasts, offset)

    @property
    def next_offset(self) -> int | None:
        return self.lasts[-1] + 1 if self.lasts else None

    def batch_bytes(self, index: int) -> bytes:
        return self.read(self.positions[index], self.infos[index].size)


class PartitionLog:
    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Path | None,
        settings: Callable[[str], Any],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.settings = settings  # effective topic config lookup: settings("segment.bytes")
        self.segments: list[Segment] = []
        self.log_start_offset = 0
        self.next_offset = 0
        self.producers = PartitionProducers()
        self.aborted: list[AbortedTxn] = []
        self.dirty_from = 0  # compaction: offsets >= this have not been cleaned yet
        self._waiters: set[asyncio.Future[None]] = set()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._recover()
        if not self.segments:
            self.segments.append(self._new_segment(self.next_offset))

    # -- offsets --------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.next_offset

    @property
    def last_stable_offset(self) -> int:
        first = self.producers.first_unstable_offset()
        return self.next_offset if first is None else min(first, self.next_offset)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- appends --------------------------------------------------------------------------
    def _new_segment(self, base_offset: int) -> Segment:
        path = None
        if self.directory is not None:
            path = self.directory / f"{base_offset:020d}{SEGMENT_SUFFIX}"
        segment = Segment(base_offset, path)
        segment.open()
        return segment

    def roll(self) -> None:
        """Start a new active segment (no-op if the active one is empty)."""
        if self.segments[-1].size == 0:
            return
        self.segments[-1].close()
        self.segments.append(self._new_segment(self.next_offset))

    def _maybe_roll(self, incoming: int, now: int) -> None:
        active = self.segments[-1]
        if active.size == 0:
            return
        segment_bytes = int(self.settings("segment.bytes"))
        segment_ms = int(self.settings("segment.ms"))
        if active.size + incoming > segment_bytes or now - active.created_ms >= segment_ms:
            self.roll()

    def append(self, batch: bytes, info: BatchInfo, now: int) -> int:
        """Append a validated batch at the log end; returns its base offset."""
        base = self.next_offset
        batch = batches.with_base_offset(batch, base)
        info.last_offset = base + (info.last_offset - info.base_offset)
        info.base_offset = base
        self._maybe_roll(len(batch), now)
        segment = self.segments[-1]
        pos = segment.write(batch)
        segment.add(info, pos)
        self.next_offset = info.last_offset + 1
        if info.is_control:
            self._apply_control(info, batch)
        else:
            self.producers.record(info)
        self.wake()
        return base

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, now: int, coordinator_epoch: int = 0
    ) -> int:
        batch = batches.control_batch(
            offset=self.next_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            timestamp=now,
            coordinator_epoch=coordinator_epoch,
        )
        return self.append(batch, batches.parse_header(batch), now)

    def _apply_control(self, info: BatchInfo, batch: bytes) -> None:
        first = self.producers.end_txn(info.producer_id, info.producer_epoch)
        if batches.control_type(batch) == batches.CONTROL_ABORT and first is not None:
            self.aborted.append(AbortedTxn(info.producer_id, first, info.base_offset))

    # -- waiting for data -----------------------------------------------------------------
    def waiter(self) -> asyncio.Future[None]:
        """A future resolved by the next append (or marker); pass it to `unwait` when done."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        return fut

    def unwait(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)
        fut.cancel()

    def wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    # -- reads ----------------------------------------------------------------------------
    def locate(self, offset: int) -> tuple[int, int] | None:
        """(segment index, batch index) of the batch holding `offset` or the next one after it."""
        seg_index = bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1
        seg_index = max(seg_index, 0)
        while seg_index < len(self.segments):
            segment = self.segments[seg_index]
            idx = segment.find(offset)
            if idx < len(segment.lasts):
                return seg_index, idx
            seg_index += 1
        return None

    def read(self, offset: int, max_bytes: int, upper: int, min_one: bool) -> tuple[bytes, int]:
        """Whole batches from the one holding `offset`, ending before `upper`, within `max_bytes`
        (the first batch even if larger when `min_one`). Returns (bytes, next offset after them)."""
        found = self.locate(offset)
        if found is None:
            return b"", offset
        seg_index, idx = found
        chunks: list[bytes] = []
        total = 0
        next_offset = offset
        while seg_index < len(self.segments):
            segment = self.segments[seg_index]
            start = idx
            end = idx
            start_pos = segment.positions[idx] if idx < len(segment.positions) else 0
            length = 0
            while end < len(segment.infos):
                info = segment.infos[end]
                if info.last_offset >= upper:
                    break
                if total + length + info.size > max_bytes and not (min_one and total + length == 0):
                    break
                length += info.size
                next_offset = info.last_offset + 1
                end += 1
            if end > start:
                chunks.append(segment.read(start_pos, length))
                total += length
            if end < len(segment.infos):
                break
            seg_index += 1
            idx = 0
        return b"".join(chunks), next_offset

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions a read_committed consumer needs for offsets [start, end)."""
        return [t for t in self.aborted if t.last_offset >= start and t.first_offset < end]

    def iter_batches(self, start: int = 0, upper: int | None = None):
        """(segment, index, info) of every batch with last offset >= start (and base < upper)."""
        for segment in self.segments:
            if segment.next_offset is not None and segment.next_offset <= start:
                continue
            for i in range(segment.find(start), len(segment.infos)):
                info = segment.infos[i]
                if upper is not None and info.base_offset >= upper:
                    return
                yield segment, i, info

    def offset_for_timestamp(self, timestamp: int, upper: int) -> tuple[int, int] | None:
        """First record at or after `timestamp` below `upper`: (offset, its timestamp)."""
        for segment, i, info in self.iter_batches(self.log_start_offset, upper):
            if info.is_control or info.max_timestamp < timestamp:
                continue
            if info.log_append_time:
                return max(info.base_offset, self.log_start_offset), info.max_timestamp
            for record in batches.iter_records(segment.batch_bytes(i)):
                offset = info.base_offset + record.offset_delta
                ts = info.base_timestamp + record.timestamp_delta
                if offset >= self.log_start_offset and offset < upper and ts >= timestamp:
                    return offset, ts
        return None

    def max_timestamp_offset(self, upper: int) -> tuple[int, int] | None:
        """The record with the largest timestamp below `upper` (its first occurrence)."""
        best: tuple[Segment, int, BatchInfo] | None = None
        for segment, i, info in self.iter_batches(self.log_start_offset, upper):
            if info.is_control:
                continue
            if best is None or info.max_timestamp > best[2].max_timestamp:
                best = (segment, i, info)
        if best is None:
            return None
        segment, i, info = best
        if info.log_append_time:
            return info.last_offset, info.max_timestamp
        for record in batches.iter_records(segment.batch_bytes(i)):
            if info.base_timestamp + record.timestamp_delta == info.max_timestamp:
                return info.base_offset + record.offset_delta, info.max_timestamp
        return info.last_offset, info.max_timestamp

    # -- cleanup --------------------------------------------------------------------------
    def advance_start(self, offset: int) -> bool:
        """DeleteRecords / retention: move the log start offset forward and drop whole segments."""
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self._drop_segments_before(offset)
        return True

    def _drop_segments_before(self, offset: int) -> None:
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self.segments.pop(0).delete()
        self.producers.drop_before(offset)
        self.aborted = [t for t in self.aborted if t.last_offset >= offset]

    def enforce_retention(self, now: int) -> bool:
        """cleanup.policy=delete: drop the oldest segments past retention.ms or retention.bytes,
        as Kafka does (by the segment's largest timestamp; the active segment too, after a roll)."""
        retention_ms = int(self.settings("retention.ms"))
        retention_bytes = int(self.settings("retention.bytes"))
        count = 0
        if retention_ms >= 0:
            for segment in self.segments:
                newest = segment.max_timestamp if segment.max_timestamp >= 0 else segment.created_ms
                if segment is self.segments[-1] and segment.size == 0 or now - newest <= retention_ms:
                    break
                count += 1
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes
            by_size = 0
            for segment in self.segments:
                if segment is self.segments[-1] and segment.size == 0 or excess - segment.size < 0:
                    break
                excess -= segment.size
                by_size += 1
            count = max(count, by_size)
        if not count:
            return False
        if count >= len(self.segments):
            self.roll()
        new_start = self.segments[count].base_offset
        for _ in range(count):
            self.segments.pop(0).delete()
        self.log_start_offset = max(self.log_start_offset, new_start)
        self.producers.drop_before(self.log_start_offset)
        self.aborted = [t for t in self.aborted if t.last_offset >= self.log_start_offset]
        return True

    def replace_segments_at(self, index: int, cleaned: list[tuple[bytes, BatchInfo]]) -> None:
        """Swap a closed segment for its compacted contents (written aside, then renamed over).

        A segment left empty is removed, except the first one, which keeps the log's base."""
        old = self.segments[index]
        if not cleaned and index > 0:
            self.segments.pop(index).delete()
            return
        tmp_path = None
        if self.directory is not None:
            tmp_path = self.directory / f"{old.base_offset:020d}.cleaned"
            tmp_path.unlink(missing_ok=True)
        fresh = Segment(old.base_offset, tmp_path, old.created_ms)
        for data, info in cleaned:
            fresh.add(info, fresh.write(data))
        if fresh.path is not None and old.path is not None:
            fresh.flush()
            fresh.close()
            old.close()
            os.replace(fresh.path, old.path)
            fresh.path = old.path
        self.segments[index] = fresh

    # -- lifecycle ------------------------------------------------------------------------
    def flush(self) -> None:
        for segment in self.segments:
            segment.flush()

    def close(self) -> None:
        self.wake()
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        self.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    # -- recovery -------------------------------------------------------------------------
    def _recover(self) -> None:
        assert self.directory is not None
        for leftover in self.directory.glob("*.cleaned"):
            leftover.unlink()
        paths = sorted(self.directory.glob(f"*{SEGMENT_SUFFIX}"))
        for n, path in enumerate(paths):
            try:
                base = int(path.stem)
            except ValueError:
                continue
            segment = Segment(base, path, int(path.stat().st_mtime * 1000))
            segment.size = path.stat().st_size
            valid = self._scan(segment, verify_crc=n == len(paths) - 1)
            self.segments.append(segment)
            if valid < segment.size:
                log.warning(
                    "%s-%d: truncating %s at byte %d of %d (torn or corrupt tail)",
                    self.topic,
                    self.partition,
                    path.name,
                    valid,
                    segment.size,
                )
                segment.truncate(valid)
                for later in paths[n + 1 :]:
                    later.unlink()
                break
        if self.segments:
            self.segments[-1].open()
            self.log_start_offset = self.segments[0].base_offset
            last = next((s.next_offset for s in reversed(self.segments) if s.next_offset is not None), None)
            self.next_offset = last if last is not None else self.segments[-1].base_offset
            self.next_offset = max(self.next_offset, self.segments[-1].base_offset)

    def _scan(self, segment: Segment, *, verify_crc: bool) -> int:
        """Index a segment's batches; returns the byte length of its valid prefix."""
        pos = 0
        while pos + batches.HEADER_SIZE <= segment.size:
            header = segment.read(pos, batches.HEADER_SIZE)
            length, _epoch, magic = struct.unpack_from(">iib", header, 8)
            total = length + batches.LOG_OVERHEAD
            if (
                magic != 2
                or length < batches.HEADER_SIZE - batches.LOG_OVERHEAD
                or pos + total > segment.size
            ):
                return pos
            info = batches.parse_header(header)
            if info.record_count <= 0 or info.last_offset < info.base_offset:
                return pos
            data: bytes | None = None
            if verify_crc or info.is_control:
                data = segment.read(pos, total)
                (crc,) = struct.unpack_from(">I", data, 17)
                if crc32c(data[batches.CRC_START :]) != crc:
                    return pos
            segment.add(info, pos)
            self.next_offset = info.last_offset + 1
            if info.is_control:
                assert data is not None
                self._apply_control(info, data)
            else:
                self.producers.record(info)
            pos += total
        return pos
