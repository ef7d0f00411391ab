"""Kafka record batches (message format v2): header access, validation, codecs, rebuilding.

The broker stores and serves batches as the producer sent them; only the base offset is
rewritten on append. Records are decoded only where Kafka itself must look inside a batch:
keys of compacted topics, compaction, recompression to a topic's compression.type.
"""

from __future__ import annotations

import dataclasses
import gzip
import struct
from collections.abc import Iterator

import cramjam
import lz4.frame
import zstandard
from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset + batch length: the bytes not counted by batch length
CRC_START = 21  # the CRC covers everything from the attributes on

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_BY_TOPIC_CONFIG = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_XERIAL_MAGIC = b"\x82SNAPPY\x00"


class CorruptBatch(ValueError):
    """A batch that fails Kafka's checks: answered with CORRUPT_MESSAGE (or INVALID_RECORD)."""


@dataclasses.dataclass(slots=True)
class BatchInfo:
    """What the log index keeps of one stored batch."""

    base_offset: int
    last_offset: int
    size: int  # total bytes including the 12-byte log overhead
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset - self.base_offset) & 0x7FFFFFFF


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchInfo:
    """Header fields of the batch at `pos` (no CRC check)."""
    (
        base_offset,
        batch_length,
        _leader_epoch,
        _magic,
        _crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_seq,
        count,
    ) = HEADER.unpack_from(buf, pos)
    return BatchInfo(
        base_offset,
        base_offset + last_delta,
        batch_length + LOG_OVERHEAD,
        attributes,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_seq,
        count,
    )


def split_batches(data: bytes | memoryview) -> list[tuple[int, int]]:
    """(start, end) of every whole v2 batch in `data`; raises CorruptBatch on anything else."""
    spans = []
    pos = 0
    total = len(data)
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise CorruptBatch(f"{total - pos} trailing bytes are too few for a record batch header")
        batch_length, _epoch, magic = struct.unpack_from(">iib", data, pos + 8)
        if magic != 2:
            raise CorruptBatch(f"record batch magic {magic} is not supported (only v2)")
        end = pos + LOG_OVERHEAD + batch_length
        if batch_length < HEADER_SIZE - LOG_OVERHEAD or end > total:
            raise CorruptBatch(
                f"record batch length {batch_length} does not fit the {total - pos} bytes sent"
            )
        spans.append((pos, end))
        pos = end
    return spans


def validate(batch: bytes | memoryview) -> BatchInfo:
    """Check one whole batch as Kafka's broker does before appending it."""
    info = parse_header(batch)
    (stored_crc,) = struct.unpack_from(">I", batch, 17)
    if crc32c(batch[CRC_START:]) != stored_crc:
        raise CorruptBatch("record batch CRC32C does not match its contents")
    if info.record_count <= 0:
        raise CorruptBatch(f"record batch claims {info.record_count} records")
    if info.last_offset - info.base_offset != info.record_count - 1:
        raise CorruptBatch(
            f"record batch last offset delta {info.last_offset - info.base_offset} does not match"
            f" its {info.record_count} records"
        )
    if info.codec > ZSTD:
        raise CorruptBatch(f"unknown compression codec id {info.codec}")
    return info


def with_base_offset(batch: bytes, base_offset: int, leader_epoch: int = 0) -> bytearray:
    """The same batch at the broker's base offset and partition leader epoch (neither is
    covered by the CRC, so nothing else changes)."""
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    return buf


def set_log_append_time(batch: bytes, timestamp: int) -> bytes:
    """Stamp the broker's time as Kafka does for message.timestamp.type=LogAppendTime."""
    buf = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attributes | TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", buf, 35, timestamp)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[CRC_START:])))
    return bytes(buf)


# ---- codecs -------------------------------------------------------------------------------


def decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            return _xerial_decompress(data)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == LZ4:
        return lz4.frame.decompress(data)
    if codec == ZSTD:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise CorruptBatch(f"unknown compression codec id {codec}")


def compress(codec: int, data: bytes, *, xerial: bool = False) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6)
    if codec == SNAPPY:
        return _xerial_compress(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise ValueError(f"unknown compression codec id {codec}")


def _xerial_decompress(data: bytes) -> bytes:
    """Java's snappy framing: 16-byte header, then blocks of (int32 length, raw snappy)."""
    out = bytearray()
    pos = 16
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)


def _xerial_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    block = 32 * 1024
    for start in range(0, max(len(data), 1), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def is_xerial(data: bytes) -> bool:
    return data.startswith(_XERIAL_MAGIC)


# ---- records ------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise CorruptBatch("record varint runs past the end of the batch")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptBatch("record varint is longer than 10 bytes")
    return (raw >> 1) ^ -(raw & 1), pos


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptBatch("record field runs past the end of the batch")
    return buf[pos : pos + length], pos + length


def batch_payload(batch: bytes) -> bytes:
    """The decompressed records section of a batch."""
    info = parse_header(batch)
    return decompress(info.codec, batch[HEADER_SIZE:])


def iter_records(batch: bytes) -> Iterator[Record]:
    info = parse_header(batch)
    payload = batch_payload(batch)
    pos = 0
    for _ in range(info.record_count):
        length, pos = _read_varint(payload, pos)
        end = pos + length
        if end > len(payload):
            raise CorruptBatch("record runs past the end of the batch")
        attributes = payload[pos]
        ts_delta, p = _read_varint(payload, pos + 1)
        off_delta, p = _read_varint(payload, p)
        key, p = _read_bytes(payload, p)
        value, p = _read_bytes(payload, p)
        count, p = _read_varint(payload, p)
        headers = []
        for _h in range(count):
            hkey, p = _read_bytes(payload, p)
            hval, p = _read_bytes(payload, p)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hval))
        if p != end:
            raise CorruptBatch("record length does not match its fields")
        yield Record(off_delta, ts_delta, key, value, headers, attributes)
        pos = end


def encode_record(record: Record) -> bytes:
    body = bytearray([record.attributes])
    _write_varint(body, record.timestamp_delta)
    _write_varint(body, record.offset_delta)
    for field in (record.key, record.value):
        if field is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(field))
            body += field
    _write_varint(body, len(record.headers))
    for hkey, hval in record.headers:
        raw = hkey.encode()
        _write_varint(body, len(raw))
        body += raw
        if hval is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(hval))
            body += hval
    out = bytearray()
    _write_varint(out, len(body))
    return bytes(out + body)


def build_batch(
    *,
    base_offset: int,
    records: list[Record],
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    last_offset_delta: int | None = None,
    partition_leader_epoch: int = 0,
    xerial: bool = False,
) -> bytes:
    """Encode a v2 batch; compressed with the codec in `attributes`, CRC computed."""
    payload = b"".join(encode_record(r) for r in records)
    payload = compress(attributes & COMPRESSION_MASK, payload, xerial=xerial)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else 0
    body = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    body += payload
    crc = crc32c(body)
    length = 4 + 1 + 4 + len(body)
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + body


def control_batch(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    timestamp: int,
    coordinator_epoch: int = 0,
) -> bytes:
    """A transaction marker as the coordinator writes it (key: version + type, value: version + epoch)."""
    kind = CONTROL_COMMIT if commit else CONTROL_ABORT
    record = Record(
        offset_delta=0,
        timestamp_delta=0,
        key=struct.pack(">hh", 0, kind),
        value=struct.pack(">hi", 0, coordinator_epoch),
        headers=[],
    )
    return build_batch(
        base_offset=offset,
        records=[record],
        attributes=TRANSACTIONAL_BIT | CONTROL_BIT,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
    )


def control_type(batch: bytes) -> int | None:
    """ABORT or COMMIT for a control batch's marker record, None if unreadable."""
    for record in iter_records(batch):
        if record.key is not None and len(record.key) >= 4:
            return struct.unpack_from(">h", record.key, 2)[0]
    return None


def recompress(batch: bytes, codec: int) -> bytes:
    """The same records with another codec, as Kafka does when compression.type overrides the
    producer's (snappy in Java's xerial framing, which is what a Kafka broker writes)."""
    info = parse_header(batch)
    records = list(iter_records(batch))
    attributes = (info.attributes & ~COMPRESSION_MASK) | codec
    return build_batch(
        base_offset=info.base_offset,
        records=records,
        attributes=attributes,
        base_timestamp=info.base_timestamp,
        max_timestamp=info.max_timestamp,
        producer_id=info.producer_id,
        producer_epoch=info.producer_epoch,
        base_sequence=info.base_sequence,
        last_offset_delta=info.last_offset - info.base_offset,
        xerial=codec == SNAPPY,
    )
