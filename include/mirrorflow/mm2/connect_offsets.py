"""Connect's stored source offsets of MirrorSourceConnector, byte-identical to Java's.

A flow moves from mirrorflow to MM2 (and back) without re-copying only if MM2 finds, in
`mm2-offsets.<source>.internal` on the target, the position mirrorflow reached. Connect's
offset store (KafkaOffsetBackingStore) is a map keyed by the *serialized key bytes*, so a key
that differs from Java's in a single byte (a space, another field order, another escape) is a
different partition to Connect, and its offset is never used.

What Java writes (OffsetStorageWriter + JsonConverter, schemas.enable=false, which Connect
forces for its internal topics since 2.0):

- key: `[<connector name>, <source partition map>]`, serialized by Jackson without spaces. The
  map is MirrorUtils.wrapPartition's `HashMap` (puts topic, partition, cluster), and Jackson
  keeps its iteration order, which for these three keys is cluster, partition, topic:
  `["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`.
- value: `{"offset":N}`, N = the last *replicated* upstream offset; a restarted task seeks to
  N + 1. A null value (tombstone) deletes the stored offset. mirrorflow may add one key of its
  own (see encode_offset_value); MM2 reads only `offset`, so only the key must be byte-identical.
- partition of the offsets topic (25 partitions by default): the Java producer's
  `Utils.toPositive(Utils.murmur2(key)) % partitions` (BuiltInPartitioner.partitionForKey).
  The partition matters: Connect rebuilds its map by reading every partition, so a copy of a
  key on another partition races with the real one.

The connector name is the Connect namespace of the key. MM2's dedicated mode names the source
connector after its class, "MirrorSourceConnector"; a MirrorSourceConnector deployed on a
Connect cluster has whatever name its config gives, which must be passed instead.

librdkafka (confluent-kafka) producers: the default partitioner, consistent_random, hashes
with CRC32 and lands keys elsewhere. `partitioner=murmur2_random` computes
`(rd_murmur2(key) & 0x7fffffff) % partition_cnt` for every non-null key
(rdkafka_msg.c, rd_kafka_msg_partitioner_murmur2_random), which is `java_partition` below:
rd_murmur2 is the same MurmurHash2 with Kafka's seed, and `& 0x7fffffff` is Java's
`toPositive`. Offset keys are never null, so a producer with that setting puts every key where
a Java worker would.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple, Self

MIRROR_SOURCE_CONNECTOR = "MirrorSourceConnector"
DEFAULT_OFFSETS_PARTITIONS = 25
LIBRDKAFKA_JAVA_PARTITIONER = MappingProxyType({"partitioner": "murmur2_random"})

MURMUR2_SEED = 0x9747B28C
_MURMUR2_M = 0x5BD1E995
_MURMUR2_R = 24

# MirrorUtils.wrapPartition puts the source partition's fields in this order.
_WRAP_PARTITION_PUT_ORDER = ("topic", "partition", "cluster")
# java.util.HashMap's initial table size and load factor.
_HASHMAP_INITIAL_CAPACITY = 16
_HASHMAP_LOAD_FACTOR = 0.75

# Jackson's named escapes for ASCII (CharTypes.sOutputEscapes128); other controls use \u00XX.
_JACKSON_NAMED_ESCAPES = {
    0x22: '\\"',
    0x5C: "\\\\",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
}


class ConnectOffsetFormatError(ValueError):
    """A key or value in a Connect offsets topic that is not a MirrorSourceConnector offset."""


def _i32(value: int) -> int:
    """Wrap to Java's int, as every Java int operation does."""
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _ushr32(value: int, shift: int) -> int:
    """Java's `>>>` on an int."""
    return _i32((value & 0xFFFFFFFF) >> shift)


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: MurmurHash2 with Kafka's seed, as a signed 32-bit Java int."""
    m = _i32(_MURMUR2_M)
    length = len(data)
    h = _i32(_i32(MURMUR2_SEED) ^ length)
    whole = length & ~3
    for i in range(0, whole, 4):
        k = _i32(int.from_bytes(data[i : i + 4], "little"))
        k = _i32(k * m)
        k = _i32(k ^ _ushr32(k, _MURMUR2_R))
        k = _i32(k * m)
        h = _i32(h * m)
        h = _i32(h ^ k)
    tail = length & 3
    if tail == 3:
        h = _i32(h ^ (data[whole + 2] << 16))
    if tail >= 2:
        h = _i32(h ^ (data[whole + 1] << 8))
    if tail >= 1:
        h = _i32(h ^ data[whole])
        h = _i32(h * m)
    h = _i32(h ^ _ushr32(h, 13))
    h = _i32(h * m)
    return _i32(h ^ _ushr32(h, 15))


def java_partition(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Java's producer picks for a non-null key: toPositive(murmur2(key)) % n."""
    if not isinstance(num_partitions, int) or isinstance(num_partitions, bool) or num_partitions < 1:
        raise ValueError(f"num_partitions must be a positive int, got {num_partitions!r}")
    return (murmur2(bytes(key_bytes)) & 0x7FFFFFFF) % num_partitions


def _java_string_hash(text: str) -> int:
    """String.hashCode over UTF-16 code units."""
    units = text.encode("utf-16-be", errors="surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = _i32(31 * h + int.from_bytes(units[i : i + 2], "big"))
    return h


def java_hashmap_order(keys_in_put_order: Sequence[str]) -> tuple[str, ...]:
    """Iteration order of a `new HashMap<>()` after putting these distinct String keys.

    Buckets are iterated in table order (index = (h ^ h >>> 16) & (capacity - 1)); keys sharing
    a bucket keep their put order, also across resizes. Bins that Java turns into trees (8+
    keys in one bucket) are outside what this models.
    """
    capacity = _HASHMAP_INITIAL_CAPACITY
    while len(keys_in_put_order) > capacity * _HASHMAP_LOAD_FACTOR:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ _ushr32(h, 16)) & (capacity - 1)

    indexed = sorted(enumerate(keys_in_put_order), key=lambda item: (bucket(item[1]), item[0]))
    return tuple(key for _, key in indexed)


_KEY_FIELD_ORDER = java_hashmap_order(_WRAP_PARTITION_PUT_ORDER)


def jackson_string(text: str) -> str:
    """A JSON string literal exactly as Jackson's UTF8JsonGenerator writes it by default.

    Unlike Python's json module: control characters other than \\b \\t \\n \\f \\r become
    \\u00XX with upper-case hex, non-ASCII stays raw (UTF-8), and UTF-16 surrogates, which is
    every character above U+FFFF, are written as \\u escapes (four upper-case hex digits), one per code
    unit, since Jackson escapes surrogate chars instead of combining them.
    """
    out = ['"']
    for char in text:
        code = ord(char)
        if code < 0x80:
            if code in _JACKSON_NAMED_ESCAPES:
                out.append(_JACKSON_NAMED_ESCAPES[code])
            elif code < 0x20:
                out.append(f"\\u{code:04X}")
            else:
                out.append(char)
        elif code > 0xFFFF:
            high = 0xD800 + ((code - 0x10000) >> 10)
            low = 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04X}\\u{low:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _check_text(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"SourceOffsetKey.{field} must be a str, got {type(value).__name__} {value!r}")
    return value


def _check_partition(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0x7FFFFFFF:
        raise ValueError(f"SourceOffsetKey.partition must be an int in 0..2147483647, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class SourceOffsetKey:
    """Which source partition a stored MirrorSourceConnector offset belongs to.

    `cluster` is the source cluster alias, `topic`/`partition` the *upstream* topic-partition.
    """

    cluster: str
    topic: str
    partition: int
    connector: str = MIRROR_SOURCE_CONNECTOR

    def __post_init__(self) -> None:
        _check_text("cluster", self.cluster)
        _check_text("topic", self.topic)
        _check_partition(self.partition)
        _check_text("connector", self.connector)

    def key_bytes(self) -> bytes:
        fields = {
            "cluster": jackson_string(self.cluster),
            "partition": str(self.partition),
            "topic": jackson_string(self.topic),
        }
        body = ",".join(f"{jackson_string(name)}:{fields[name]}" for name in _KEY_FIELD_ORDER)
        text = f"[{jackson_string(self.connector)},{{{body}}}]"
        return text.encode("utf-8")

    def offsets_partition(self, num_partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
        """Partition of the Connect offsets topic a Java worker writes this key to."""
        return java_partition(self.key_bytes(), num_partitions)

    @classmethod
    def decode(cls, key: bytes | bytearray | memoryview | None) -> Self:
        """Parse a key in any JSON spelling (field order, spacing, escapes), as Connect does."""
        if key is None:
            raise ConnectOffsetFormatError("Connect offset record has a null key; Connect never writes one")
        parsed = _parse_json("key", key)
        if not (isinstance(parsed, list) and len(parsed) == 2):
            raise ConnectOffsetFormatError(
                f"Connect offset key must be a JSON array [connector, partition], got {parsed!r}"
            )
        connector, partition_map = parsed
        if not isinstance(connector, str):
            raise ConnectOffsetFormatError(
                f"Connect offset key's connector name must be a string, got {connector!r}"
            )
        if not (isinstance(partition_map, dict) and set(partition_map) == set(_KEY_FIELD_ORDER)):
            raise ConnectOffsetFormatError(
                f"offset key of connector {connector!r} is not a MirrorSourceConnector partition "
                f"(needs exactly the fields cluster, partition, topic): {partition_map!r}"
            )
        try:
            return cls(
                cluster=partition_map["cluster"],
                topic=partition_map["topic"],
                partition=partition_map["partition"],
                connector=connector,
            )
        except (TypeError, ValueError) as exc:
            raise ConnectOffsetFormatError(f"invalid MirrorSourceConnector offset key: {exc}") from exc


def _parse_json(part: str, data: bytes | bytearray | memoryview) -> object:
    try:
        return json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConnectOffsetFormatError(f"Connect offset {part} is not UTF-8 JSON: {exc}") from exc


INCARNATION_KEY = "mirrorflow.incarnation"
SLOTS_KEY = "mirrorflow.slots"
COMMIT_KEY = "mirrorflow.commit"


def encode_offset_value(
    offset: int | None, incarnation: str = "", slots: int = 0, commit: str = ""
) -> bytes | None:
    """`{"offset":N}`, or None for the tombstone that deletes the stored offset.

    mirrorflow adds `"mirrorflow.incarnation":"<source topic id>,<remote topic id>"` when it
    knows them: the topic incarnations the offset was copied between; `"mirrorflow.slots":S`
    when its writer's transactional.id was that of one of S writer slots (see replicate.copy);
    and `"mirrorflow.commit":"<token>"`, a token of the transaction that wrote it, by which a
    writer whose commit failed tells whether it happened all the same.
    MirrorSourceTask reads only `offset` from the map (MirrorUtils.unwrapOffset), so MM2
    continues from it unchanged, and the value it writes back has neither (which mirrorflow
    then reads as "written by another kind of writer")."""
    if offset is None:
        return None
    if not isinstance(offset, int) or isinstance(offset, bool) or not -(1 << 63) <= offset < (1 << 63):
        raise ValueError(f"source offset must be a Java long (64-bit int), got {offset!r}")
    value = b'{"offset":%d' % offset
    if incarnation:
        value += b',"%s":%s' % (INCARNATION_KEY.encode(), _json_bytes(incarnation))
    if slots:
        value += b',"%s":%d' % (SLOTS_KEY.encode(), slots)
    if commit:
        value += b',"%s":%s' % (COMMIT_KEY.encode(), _json_bytes(commit))
    return value + b"}"


@functools.lru_cache(maxsize=1 << 14)
def _json_bytes(text: str) -> bytes:
    """jackson_string(text) as UTF-8: a topic's incarnation and a transaction's token are written
    into the value of every partition's progress at every commit."""
    return jackson_string(text).encode("utf-8")


def decode_offset_value(value: bytes | bytearray | memoryview | None) -> int | None:
    """The stored upstream offset; None for a tombstone or `{"offset":null}`."""
    return decode_offset_entry(value)[0]


class OffsetEntry(NamedTuple):
    """A stored MirrorSourceConnector offset and what mirrorflow wrote beside it ("" or 0 when
    the writer named none)."""

    offset: int | None
    incarnation: str = ""
    slots: int = 0
    commit: str = ""


def decode_offset_entry(value: bytes | bytearray | memoryview | None) -> OffsetEntry:
    if value is None:
        return OffsetEntry(None)
    parsed = _parse_json("value", value)
    if not (isinstance(parsed, dict) and "offset" in parsed):
        raise ConnectOffsetFormatError(
            f'MirrorSourceConnector offset value must be {{"offset":N}}, got {parsed!r}'
        )
    offset = parsed["offset"]
    incarnation = parsed.get(INCARNATION_KEY)
    incarnation = incarnation if isinstance(incarnation, str) else ""
    slots = parsed.get(SLOTS_KEY)
    slots = slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else 0
    commit = parsed.get(COMMIT_KEY)
    commit = commit if isinstance(commit, str) else ""
    if offset is None:
        return OffsetEntry(None, incarnation, slots, commit)
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise ConnectOffsetFormatError(f"MirrorSourceConnector offset must be an integer, got {offset!r}")
    return OffsetEntry(offset, incarnation, slots, commit)


def resume_offset(stored_offset: int | None) -> int | None:
    """Where a restarted MirrorSourceTask continues: stored + 1, or None (auto.offset.reset).

    MirrorSourceTask treats a missing or negative stored offset as "uncommitted" and does not
    seek, leaving the consumer's auto.offset.reset to decide.
    """
    if stored_offset is None or stored_offset < 0:
        return None
    return stored_offset + 1
