"""Connect source offsets of MirrorSourceConnector: Java's key bytes, values and partitioning."""

from __future__ import annotations

import random

import confluent_kafka
import pytest

from mirrorflow.mm2.connect_offsets import (
    DEFAULT_OFFSETS_PARTITIONS,
    LIBRDKAFKA_JAVA_PARTITIONER,
    MIRROR_SOURCE_CONNECTOR,
    ConnectOffsetFormatError,
    SourceOffsetKey,
    decode_offset_entry,
    decode_offset_value,
    encode_offset_value,
    jackson_string,
    java_hashmap_order,
    java_partition,
    murmur2,
    resume_offset,
)
from mirrorflow.replicate.progress import incarnation, split_incarnation


def test_key_is_byte_identical_to_java() -> None:
    key = SourceOffsetKey(cluster="A", topic="orders", partition=0)
    assert key.connector == MIRROR_SOURCE_CONNECTOR == "MirrorSourceConnector"
    assert key.key_bytes() == b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]'


def test_connector_name_is_the_key_namespace() -> None:
    key = SourceOffsetKey("us-east", "payments.v2", 17, connector="mm2-east-to-west")
    assert (
        key.key_bytes() == b'["mm2-east-to-west",{"cluster":"us-east","partition":17,"topic":"payments.v2"}]'
    )


def test_field_order_is_java_hashmap_iteration_order() -> None:
    # MirrorUtils.wrapPartition puts topic, partition, cluster into a HashMap.
    assert java_hashmap_order(("topic", "partition", "cluster")) == ("cluster", "partition", "topic")


def test_hashmap_order_model() -> None:
    # Single-character keys hash to their code point: buckets 1, 2, 3 whatever the put order.
    assert java_hashmap_order(("c", "a", "b")) == ("a", "b", "c")
    # "Aa" and "BB" share String.hashCode 2112, so one bucket: put order decides.
    assert java_hashmap_order(("BB", "Aa")) == ("BB", "Aa")
    assert java_hashmap_order(("Aa", "BB")) == ("Aa", "BB")
    # "a" (97) and "q" (113) share bucket 1 in a 16-slot table but not after growing to 32.
    small = java_hashmap_order(("q", "a"))
    grown = java_hashmap_order(("q", "a", *(f"k{i}" for i in range(11))))
    assert small == ("q", "a")
    assert grown.index("a") < grown.index("q")


@pytest.mark.parametrize(
    ("text", "json"),
    [
        ("plain", '"plain"'),
        ('quote" back\\slash/', '"quote\\" back\\\\slash/"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001F"'),
        ("del\x7f", '"del\x7f"'),
        ("café ü 日本", '"café ü 日本"'),
        ("\u2028", '"\u2028"'),
        ("😀", '"\\uD83D\\uDE00"'),
        ("lone\udc80", '"lone\\uDC80"'),
    ],
)
def test_strings_are_escaped_as_jackson_does(text: str, json: str) -> None:
    assert jackson_string(text) == json


def test_non_ascii_names_stay_utf8_in_the_key() -> None:
    key = SourceOffsetKey("zürich", "orders", 1)
    assert b'"cluster":"z\xc3\xbcrich"' in key.key_bytes()


@pytest.mark.parametrize(
    "cluster",
    ["A", 'we"ird\\', "tab\there", "\x01ctl", "zürich", "emoji😀", "lone\ud800"],
)
def test_keys_round_trip(cluster: str) -> None:
    key = SourceOffsetKey(cluster, "orders", 2147483647, connector=f"c-{cluster}")
    assert SourceOffsetKey.decode(key.key_bytes()) == key


@pytest.mark.parametrize(
    "spelling",
    [
        b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]',
        b'["MirrorSourceConnector", {"topic": "orders", "partition": 0, "cluster": "A"}]',
        b' [ "MirrorSourceConnector" ,\n {"partition":0,"cluster":"\\u0041","topic":"orders"} ] ',
    ],
)
def test_decoder_accepts_any_json_spelling(spelling: bytes) -> None:
    assert SourceOffsetKey.decode(spelling) == SourceOffsetKey("A", "orders", 0)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "null key"),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"not json", "not UTF-8 JSON"),
        (b'{"cluster":"A"}', r"must be a JSON array \[connector, partition\]"),
        (b'[1,{"cluster":"A","partition":0,"topic":"t"}]', "connector name must be a string"),
        (
            b'["MirrorCheckpointConnector",{"group":"g","partition":0,"topic":"t"}]',
            "is not a MirrorSourceConnector partition",
        ),
        (
            b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]',
            "is not a MirrorSourceConnector partition",
        ),
        (b'["M",{"cluster":"A","partition":"0","topic":"t"}]', "partition must be an int"),
        (b'["M",{"cluster":"A","partition":-1,"topic":"t"}]', "partition must be an int"),
        (b'["M",{"cluster":"A","partition":true,"topic":"t"}]', "partition must be an int"),
        (b'["M",{"cluster":null,"partition":0,"topic":"t"}]', "cluster must be a str"),
    ],
)
def test_decoder_rejects_other_keys(key: bytes | None, message: str) -> None:
    with pytest.raises(ConnectOffsetFormatError, match=message):
        SourceOffsetKey.decode(key)


def test_bad_key_fields_are_rejected_by_name() -> None:
    with pytest.raises(ValueError, match=r"SourceOffsetKey\.partition must be an int in 0\.\.2147483647"):
        SourceOffsetKey("A", "t", 2**31)
    with pytest.raises(TypeError, match=r"SourceOffsetKey\.topic must be a str"):
        SourceOffsetKey("A", None, 0)  # type: ignore[arg-type]


def test_offset_values() -> None:
    assert encode_offset_value(123) == b'{"offset":123}'
    assert encode_offset_value(-1) == b'{"offset":-1}'
    assert encode_offset_value(2**63 - 1) == b'{"offset":9223372036854775807}'
    assert encode_offset_value(None) is None
    assert decode_offset_value(b'{"offset":123}') == 123
    assert decode_offset_value(b'{ "offset" : 7 }') == 7
    assert decode_offset_value(None) is None
    assert decode_offset_value(b'{"offset":null}') is None
    with pytest.raises(ValueError, match="must be a Java long"):
        encode_offset_value(2**63)
    with pytest.raises(ValueError, match="must be a Java long"):
        encode_offset_value(True)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"[]", r'must be \{"offset":N\}'),
        (b'{"position":1}', r'must be \{"offset":N\}'),
        (b'{"offset":"5"}', "must be an integer"),
        (b'{"offset":1.5}', "must be an integer"),
        (b'{"offset":true}', "must be an integer"),
        (b"{", "not UTF-8 JSON"),
    ],
)
def test_offset_value_decoder_rejects_other_values(value: bytes, message: str) -> None:
    with pytest.raises(ConnectOffsetFormatError, match=message):
        decode_offset_value(value)


def test_resume_offset_follows_mirror_source_task() -> None:
    assert resume_offset(41) == 42
    assert resume_offset(0) == 1
    assert resume_offset(None) is None
    assert resume_offset(-1) is None


# Kafka's UtilsTest.testMurmur2.
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS.items())
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS.items())
def test_java_partition_is_to_positive_murmur2_modulo(data: bytes, expected: int) -> None:
    for partitions in (1, 7, DEFAULT_OFFSETS_PARTITIONS, 100):
        assert java_partition(data, partitions) == (expected & 0x7FFFFFFF) % partitions


def test_java_partition_of_the_example_key() -> None:
    key = SourceOffsetKey("A", "orders", 0)
    assert key.offsets_partition() == java_partition(key.key_bytes(), 25)
    assert key.offsets_partition(1) == 0


@pytest.mark.parametrize("partitions", [0, -3, 2.5, True])
def test_java_partition_needs_a_positive_count(partitions: object) -> None:
    with pytest.raises(ValueError, match="num_partitions must be a positive int"):
        java_partition(b"k", partitions)  # type: ignore[arg-type]


# librdkafka's partitioner=murmur2_random, transcribed from rdmurmur2.c (rd_murmur2, unsigned
# 32-bit, little-endian words) and rdkafka_msg.c (rd_kafka_msg_partitioner_murmur2_random:
# non-null key -> (rd_murmur2(key) & 0x7fffffff) % partition_cnt). Written independently of
# mirrorflow's signed Java-style implementation so the two can be compared.
def librdkafka_murmur2(key: bytes) -> int:
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    n = len(key)
    pos = 0
    while n >= 4:
        k = key[pos] | key[pos + 1] << 8 | key[pos + 2] << 16 | key[pos + 3] << 24
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
        pos += 4
        n -= 4
    if n == 3:
        h ^= key[pos + 2] << 16
    if n >= 2:
        h ^= key[pos + 1] << 8
    if n >= 1:
        h ^= key[pos]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def librdkafka_murmur2_random_partition(key: bytes, partition_cnt: int) -> int:
    return (librdkafka_murmur2(key) & 0x7FFFFFFF) % partition_cnt


# rdmurmur2.c's unittest_murmur2 table, which librdkafka states are Java's results.
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_VECTORS = {
    b"kafka": 0xD067CF64,
    b"giberish123456789": 0x8F552B0C,
    b"1234": 0x9FC97B14,
    b"234": 0xE7C009CA,
    b"34": 0x873930DA,
    b"4": 0x5A4B5CA1,
    _UNALIGNED: 0x78424F1C,
    _UNALIGNED[1:]: 0x4A62B377,
    _UNALIGNED[2:]: 0xE0E4E09E,
    _UNALIGNED[3:]: 0x62B8B43F,
    b"": 0x106E08D9,
}


@pytest.mark.parametrize(("data", "expected"), LIBRDKAFKA_VECTORS.items())
def test_transcription_and_murmur2_match_librdkafka_vectors(data: bytes, expected: int) -> None:
    assert librdkafka_murmur2(data) == expected
    assert murmur2(data) & 0xFFFFFFFF == expected


def test_librdkafka_murmur2_random_places_keys_where_java_does() -> None:
    """Proven from librdkafka's algorithm, without producing a single record."""
    rnd = random.Random(1)
    keys = [
        SourceOffsetKey(c, t, p).key_bytes()
        for c in ("A", "B", "eu")
        for t in ("orders", "x")
        for p in range(40)
    ]
    keys += [rnd.randbytes(rnd.randrange(0, 80)) for _ in range(3000)]
    keys += list(KAFKA_MURMUR2_VECTORS)
    for key in keys:
        for partitions in (1, 2, 3, 25, 50, 101):
            assert librdkafka_murmur2_random_partition(key, partitions) == java_partition(key, partitions)


def test_bundled_librdkafka_accepts_the_java_compatible_partitioner() -> None:
    """The confluent-kafka in use validates `partitioner` and knows murmur2_random; no broker is contacted."""
    assert LIBRDKAFKA_JAVA_PARTITIONER == {"partitioner": "murmur2_random"}
    producer = confluent_kafka.Producer({**LIBRDKAFKA_JAVA_PARTITIONER, "log_level": 0})
    assert len(producer) == 0
    with pytest.raises(confluent_kafka.KafkaException, match="partitioner"):
        confluent_kafka.Producer({"partitioner": "no_such_partitioner"})


def test_the_incarnation_rides_along_in_the_offset_value_and_plain_values_stay_byte_exact() -> None:
    assert encode_offset_value(41) == b'{"offset":41}'
    assert encode_offset_value(41, "") == b'{"offset":41}'
    value = encode_offset_value(41, "AAAAAAAAAAEAAAAAAAAAAg,a+b/c==,7")
    assert value == b'{"offset":41,"mirrorflow.incarnation":"AAAAAAAAAAEAAAAAAAAAAg,a+b/c==,7"}'
    assert decode_offset_entry(value) == (41, "AAAAAAAAAAEAAAAAAAAAAg,a+b/c==,7", 0, "")
    assert decode_offset_value(value) == 41
    assert decode_offset_entry(b'{"offset":41}') == (41, "", 0, "")
    assert decode_offset_entry(None) == (None, "", 0, "")
    assert split_incarnation("AAAAAAAAAAEAAAAAAAAAAg,a+b/c==,7") == ("AAAAAAAAAAEAAAAAAAAAAg", "a+b/c==", 7)
    assert split_incarnation("") == ("", "", 0)
    assert (
        incarnation("", "") == "" and incarnation("s", "r") == "s,r" and incarnation("s", "r", 9) == "s,r,9"
    )


def test_the_writer_slot_count_rides_along_and_values_without_it_read_as_zero() -> None:
    value = encode_offset_value(41, "s,r", 256)
    assert value == b'{"offset":41,"mirrorflow.incarnation":"s,r","mirrorflow.slots":256}'
    assert decode_offset_entry(value) == (41, "s,r", 256, "")
    assert decode_offset_entry(encode_offset_value(7, "", 16, "c0ffee")) == (7, "", 16, "c0ffee")
    assert decode_offset_value(value) == 41
    # Anything but a positive integer is "named none": such a writer is fenced by its old id.
    for odd in (b"true", b'"256"', b"0", b"-3", b"null"):
        assert decode_offset_entry(b'{"offset":5,"mirrorflow.slots":%s}' % odd) == (5, "", 0, "")
