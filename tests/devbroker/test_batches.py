"""Record batch encoding, validation and codecs without a broker (fast checks of batches.py)."""

from __future__ import annotations

import struct

import pytest
from kafka.record.memory_records import MemoryRecords

from devbroker import batches

RECORDS = [
    batches.Record(offset_delta=0, timestamp_delta=0, key=b"k", value=b"v", headers=[("h", b"1")]),
    batches.Record(offset_delta=1, timestamp_delta=5, key=None, value=None, headers=[("n", None)]),
    batches.Record(offset_delta=2, timestamp_delta=-3, key=b"", value=b"x" * 5000, headers=[]),
]


def kafka_python_records(data: bytes) -> list:
    """The records as kafka-python's own batch reader decodes them."""
    return [record for batch in MemoryRecords(data) for record in batch]


def build(codec: int, *, xerial: bool = False) -> bytes:
    return batches.build_batch(
        base_offset=0,
        records=[
            batches.Record(r.offset_delta, r.timestamp_delta, r.key, r.value, list(r.headers))
            for r in RECORDS
        ],
        attributes=codec,
        base_timestamp=1_000,
        max_timestamp=1_005,
        producer_id=7,
        producer_epoch=2,
        base_sequence=10,
        xerial=xerial,
    )


@pytest.mark.parametrize("codec", [batches.NONE, batches.GZIP, batches.SNAPPY, batches.LZ4, batches.ZSTD])
def test_round_trip_and_readable_by_kafka_python(codec: int) -> None:
    batch = build(codec)
    info = batches.validate(batch)
    assert (info.codec, info.record_count, info.last_offset, info.producer_id, info.last_sequence) == (
        codec,
        3,
        2,
        7,
        12,
    )
    decoded = list(batches.iter_records(batch))
    assert [(r.key, r.value, r.headers, r.timestamp_delta) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp_delta) for r in RECORDS
    ]
    other = kafka_python_records(batch)
    assert [(r.key, r.value, r.timestamp) for r in other] == [
        (b"k", b"v", 1000),
        (None, None, 1005),
        (b"", b"x" * 5000, 997),
    ]


def test_xerial_snappy_is_detected_and_read() -> None:
    framed = build(batches.SNAPPY, xerial=True)
    assert batches.is_xerial(framed[batches.HEADER_SIZE :])
    assert [r.value for r in batches.iter_records(framed)] == [r.value for r in RECORDS]
    assert [r.value for r in kafka_python_records(framed)] == [r.value for r in RECORDS]


def test_recompress_keeps_offsets_and_producer_fields() -> None:
    batch = batches.with_base_offset(build(batches.GZIP), 100)
    again = batches.recompress(bytes(batch), batches.ZSTD)
    info = batches.validate(again)
    assert (info.codec, info.base_offset, info.last_offset, info.producer_epoch, info.base_sequence) == (
        batches.ZSTD,
        100,
        102,
        2,
        10,
    )


def test_validate_rejects_bad_crc_count_and_codec() -> None:
    good = bytearray(build(batches.NONE))
    flipped = bytearray(good)
    flipped[-1] ^= 1
    with pytest.raises(batches.CorruptBatch, match="CRC"):
        batches.validate(bytes(flipped))
    with pytest.raises(batches.CorruptBatch, match="magic"):
        batches.split_batches(bytes(good[:16]) + b"\x01" + bytes(good[17:]))
    with pytest.raises(batches.CorruptBatch, match="does not fit"):
        batches.split_batches(bytes(good[:-1]))
    with pytest.raises(batches.CorruptBatch, match="too few"):
        batches.split_batches(bytes(good) + b"\0" * 10)


def test_log_append_time_rewrites_timestamp_type_and_crc() -> None:
    stamped = batches.set_log_append_time(build(batches.LZ4), 9_999)
    info = batches.validate(stamped)
    assert info.log_append_time and info.max_timestamp == 9_999
    assert all(r.timestamp == 9_999 for r in kafka_python_records(stamped))


def test_control_batches() -> None:
    marker = batches.control_batch(offset=5, producer_id=3, producer_epoch=1, commit=False, timestamp=10)
    info = batches.validate(marker)
    assert info.is_control and info.is_transactional and info.base_offset == 5
    assert batches.control_type(marker) == batches.CONTROL_ABORT
    assert struct.unpack_from(">h", marker, 21)[0] & batches.CONTROL_BIT
