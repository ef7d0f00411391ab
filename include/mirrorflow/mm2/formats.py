"""MM2's offset-sync, checkpoint and heartbeat records, byte-identical to Java's.

MM2's tools (RemoteClusterUtils.translateOffsets, MirrorClient, a restarted MM2) read these
topics with Kafka's protocol `Schema`/`Struct` classes, so every record mirrorflow writes must
be exactly what MM2 itself would write, and every record MM2 wrote must decode here. The
layouts follow apache/kafka's OffsetSync (connect/mirror), Checkpoint and Heartbeat
(connect/mirror-client) as of 3.0 through 4.0 trunk; they have not changed since MM2 shipped.

Encoding: big-endian fixed-width integers, STRING = int16 length + UTF-8 bytes (never null,
at most 32767 bytes), no tagged fields, no varints. Checkpoint and heartbeat values start with
an int16 version that is written as 0. Java's readers ignore bytes after the last field and
decode any version with the v0 layout (the `assert version == 0` in Checkpoint/Heartbeat is
disabled in production JVMs), so the decoders here do the same. Malformed UTF-8 inside a
string decodes to U+FFFD like Java's `new String(bytes, UTF_8)`; anything else that Java's
`Struct` reader would reject raises `Mm2FormatError`, which readers of these topics catch to
skip the record, as MirrorClient and MM2's CheckpointStore skip a `SchemaException`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Self

FORMAT_VERSION = 0
MAX_STRING_BYTES = 32767

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


class Mm2FormatError(ValueError):
    """A key or value of an MM2 internal topic that Java's reader would also reject."""


def _check_str(record: str, field: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{record}.{field} must be a str, got {type(value).__name__} {value!r}")


def _check_int(record: str, field: str, value: object, bits: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{record}.{field} must be an int, got {type(value).__name__} {value!r}")
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise ValueError(
            f"{record}.{field}={value} does not fit Java's {bits}-bit signed integer "
            f"({low}..{high}); pass a value in that range"
        )


def _string(record: str, field: str, value: str) -> bytes:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{record}.{field} has an unpaired surrogate at index {exc.start}, which UTF-8 cannot "
            "encode; decode the text it came from with a proper codec"
        ) from exc
    if len(data) > MAX_STRING_BYTES:
        raise ValueError(
            f"{record}.{field} is {len(data)} bytes in UTF-8; Kafka's STRING type holds at most "
            f"{MAX_STRING_BYTES} bytes: shorten it"
        )
    return _INT16.pack(len(data)) + data


class _Reader:
    """Reads fields in order from one key or value, with the checks of Java's `Type.read`."""

    def __init__(self, record: str, part: str, data: Buffer | None) -> None:
        if data is None:
            raise Mm2FormatError(f"{record} record has a null {part}; MM2 never writes one")
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"{record} {part} must be bytes, got {type(data).__name__}")
        self._record = record
        self._part = part
        self._data = bytes(data)
        self._pos = 0

    def _take(self, field: str, size: int) -> bytes:
        end = self._pos + size
        if end > len(self._data):
            raise Mm2FormatError(
                f"cannot read {self._record} {self._part} field '{field}': needs {size} bytes at "
                f"position {self._pos}, only {len(self._data) - self._pos} left"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self, field: str) -> int:
        return _INT16.unpack(self._take(field, 2))[0]

    def int32(self, field: str) -> int:
        return _INT32.unpack(self._take(field, 4))[0]

    def int64(self, field: str) -> int:
        return _INT64.unpack(self._take(field, 8))[0]

    def string(self, field: str) -> str:
        length = self.int16(field)
        if length < 0:
            raise Mm2FormatError(
                f"cannot read {self._record} {self._part} field '{field}': string length {length} "
                "is negative (STRING is not nullable)"
            )
        return self._take(field, length).decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """One (upstream, downstream) offset pair of a replicated source partition.

    Key: topic (the *upstream* topic name), partition. Value: upstreamOffset, offset. Unlike
    checkpoints and heartbeats the value has no version header.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def __post_init__(self) -> None:
        _check_str("OffsetSync", "topic", self.topic)
        _check_int("OffsetSync", "partition", self.partition, 32)
        _check_int("OffsetSync", "upstream_offset", self.upstream_offset, 64)
        _check_int("OffsetSync", "downstream_offset", self.downstream_offset, 64)

    def key_bytes(self) -> bytes:
        return _string("OffsetSync", "topic", self.topic) + _INT32.pack(self.partition)

    def value_bytes(self) -> bytes:
        return _INT64.pack(self.upstream_offset) + _INT64.pack(self.downstream_offset)

    @classmethod
    def decode(cls, key: Buffer | None, value: Buffer | None) -> Self:
        k = _Reader("OffsetSync", "key", key)
        topic, partition = k.string("topic"), k.int32("partition")
        v = _Reader("OffsetSync", "value", value)
        return cls(topic, partition, v.int64("upstreamOffset"), v.int64("offset"))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consumer group's committed offset translated to the target cluster.

    `topic` is the *downstream* (renamed, e.g. `A.orders`) topic: the key names the partition
    the group should commit on the cluster that holds the checkpoints topic.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def __post_init__(self) -> None:
        _check_str("Checkpoint", "group", self.group)
        _check_str("Checkpoint", "topic", self.topic)
        _check_int("Checkpoint", "partition", self.partition, 32)
        _check_int("Checkpoint", "upstream_offset", self.upstream_offset, 64)
        _check_int("Checkpoint", "downstream_offset", self.downstream_offset, 64)
        _check_str("Checkpoint", "metadata", self.metadata)

    def key_bytes(self) -> bytes:
        return (
            _string("Checkpoint", "group", self.group)
            + _string("Checkpoint", "topic", self.topic)
            + _INT32.pack(self.partition)
        )

    def value_bytes(self) -> bytes:
        return (
            _INT16.pack(FORMAT_VERSION)
            + _INT64.pack(self.upstream_offset)
            + _INT64.pack(self.downstream_offset)
            + _string("Checkpoint", "metadata", self.metadata)
        )

    @classmethod
    def decode(cls, key: Buffer | None, value: Buffer | None) -> Self:
        v = _Reader("Checkpoint", "value", value)
        v.int16("version")
        upstream, downstream, metadata = v.int64("upstreamOffset"), v.int64("offset"), v.string("metadata")
        k = _Reader("Checkpoint", "key", key)
        group, topic, partition = k.string("group"), k.string("topic"), k.int32("partition")
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Proof that the replication path source_alias -> target_alias was alive at timestamp_ms."""

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def __post_init__(self) -> None:
        _check_str("Heartbeat", "source_alias", self.source_alias)
        _check_str("Heartbeat", "target_alias", self.target_alias)
        _check_int("Heartbeat", "timestamp_ms", self.timestamp_ms, 64)

    def key_bytes(self) -> bytes:
        return _string("Heartbeat", "source_alias", self.source_alias) + _string(
            "Heartbeat", "target_alias", self.target_alias
        )

    def value_bytes(self) -> bytes:
        return _INT16.pack(FORMAT_VERSION) + _INT64.pack(self.timestamp_ms)

    @classmethod
    def decode(cls, key: Buffer | None, value: Buffer | None) -> Self:
        v = _Reader("Heartbeat", "value", value)
        v.int16("version")
        timestamp = v.int64("timestamp")
        k = _Reader("Heartbeat", "key", key)
        source, target = k.string("sourceClusterAlias"), k.string("targetClusterAlias")
        return cls(source, target, timestamp)
