"""MM2's offset-sync, checkpoint and heartbeat records: Java's exact bytes, Java's lenient reads.

tests/mm2/test_formats_java.py checks the same bytes against MirrorMaker 2's own classes."""

from __future__ import annotations

import pytest

from mirrorflow.mm2.formats import MAX_STRING_BYTES, Checkpoint, Heartbeat, Mm2FormatError, OffsetSync


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# The worked examples of mm2-semantics.md §2.
def test_offset_sync_worked_example() -> None:
    sync = OffsetSync("orders", 0, 100, 42)
    assert sync.key_bytes() == hexbytes("00 06 6f 72 64 65 72 73 00 00 00 00")
    assert sync.value_bytes() == hexbytes("00 00 00 00 00 00 00 64 00 00 00 00 00 00 00 2a")
    assert OffsetSync.decode(sync.key_bytes(), sync.value_bytes()) == sync


def test_checkpoint_worked_example() -> None:
    checkpoint = Checkpoint("g1", "A.orders", 0, 100, 42, "")
    assert checkpoint.key_bytes() == hexbytes("00 02 67 31 00 08 41 2e 6f 72 64 65 72 73 00 00 00 00")
    assert checkpoint.value_bytes() == hexbytes(
        "00 00 | 00 00 00 00 00 00 00 64 | 00 00 00 00 00 00 00 2a | 00 00"
    )
    assert Checkpoint.decode(checkpoint.key_bytes(), checkpoint.value_bytes()) == checkpoint


def test_heartbeat_worked_example() -> None:
    heartbeat = Heartbeat("A", "B", 1700000000000)
    assert heartbeat.key_bytes() == hexbytes("00 01 41 00 01 42")
    assert heartbeat.value_bytes() == hexbytes("00 00 00 00 01 8b cf e5 68 00")
    assert Heartbeat.decode(heartbeat.key_bytes(), heartbeat.value_bytes()) == heartbeat


def test_strings_count_utf8_bytes_not_characters() -> None:
    sync = OffsetSync("é", 0, 0, 0)
    assert sync.key_bytes()[:4] == b"\x00\x02\xc3\xa9"


def test_longest_string_is_32767_bytes() -> None:
    longest = "x" * MAX_STRING_BYTES
    checkpoint = Checkpoint("g", "t", 0, 1, 1, longest)
    assert Checkpoint.decode(checkpoint.key_bytes(), checkpoint.value_bytes()).metadata == longest
    with pytest.raises(ValueError, match=r"Checkpoint\.metadata is 32768 bytes in UTF-8.*at most 32767"):
        Checkpoint("g", "t", 0, 1, 1, longest + "y").value_bytes()
    with pytest.raises(ValueError, match=r"OffsetSync\.topic is 32768 bytes"):
        OffsetSync("é" * 16384, 0, 0, 0).key_bytes()


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: OffsetSync("t", 2**31, 0, 0), ValueError, r"OffsetSync\.partition=2147483648 does not fit"),
        (lambda: OffsetSync("t", 0, 2**63, 0), ValueError, r"OffsetSync\.upstream_offset=.*64-bit"),
        (lambda: Checkpoint("g", "t", 0, 0, -(2**63) - 1), ValueError, r"downstream_offset"),
        (lambda: Heartbeat("A", "B", True), TypeError, r"Heartbeat\.timestamp_ms must be an int"),
        (lambda: OffsetSync(b"t", 0, 0, 0), TypeError, r"OffsetSync\.topic must be a str"),
        (lambda: Checkpoint("g", "t", "0", 0, 0), TypeError, r"Checkpoint\.partition must be an int"),
        (lambda: Checkpoint("g", "t", 0, 0, 0, None), TypeError, r"Checkpoint\.metadata must be a str"),
    ],
)
def test_bad_fields_are_rejected_by_name(make, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()


def test_unencodable_text_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"Heartbeat\.target_alias has an unpaired surrogate at index 1"):
        Heartbeat("A", "B\ud800", 0).key_bytes()


def test_readers_ignore_trailing_bytes_and_any_version() -> None:
    sync = OffsetSync("orders", 3, 7, 9)
    assert OffsetSync.decode(sync.key_bytes() + b"\xff\xff", sync.value_bytes() + b"extra") == sync
    checkpoint = Checkpoint("g", "A.orders", 1, 5, 6, "meta")
    for version in (b"\x00\x01", b"\x7f\xff", b"\xff\xff"):
        value = version + checkpoint.value_bytes()[2:] + b"\x00"
        assert Checkpoint.decode(checkpoint.key_bytes() + b"\x00", value) == checkpoint
    heartbeat = Heartbeat("A", "B", 123)
    assert (
        Heartbeat.decode(heartbeat.key_bytes(), b"\x00\x05" + heartbeat.value_bytes()[2:] + b"\x01")
        == heartbeat
    )


def test_malformed_utf8_decodes_to_replacement_characters() -> None:
    key = b"\x00\x03a\xffb" + b"\x00\x00\x00\x00"
    assert OffsetSync.decode(key, OffsetSync("x", 0, 1, 2).value_bytes()).topic == "a\ufffdb"


@pytest.mark.parametrize(
    ("record_type", "key", "value", "message"),
    [
        (OffsetSync, None, b"\x00" * 16, "null key"),
        (OffsetSync, b"\x00\x01t\x00\x00\x00\x00", None, "null value"),
        (OffsetSync, b"\x00\x05ab", b"\x00" * 16, r"field 'topic': needs 5 bytes"),
        (OffsetSync, b"\x00\x01t\x00\x00", b"\x00" * 16, r"field 'partition'"),
        (OffsetSync, b"\x00\x01t\x00\x00\x00\x00", b"\x00" * 15, r"field 'offset'"),
        (OffsetSync, b"\xff\xff\x00\x00\x00\x00", b"\x00" * 16, r"string length -1 is negative"),
        (Checkpoint, b"\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00" * 10, r"Checkpoint value field 'offset'"),
        (Checkpoint, b"\x00\x01g", b"\x00" * 20, r"Checkpoint key field 'topic'"),
        (Heartbeat, b"\x00\x01A\x00\x01B", b"\x00\x00\x00", r"Heartbeat value field 'timestamp'"),
    ],
)
def test_undecodable_records_raise_format_error(record_type, key, value, message: str) -> None:
    with pytest.raises(Mm2FormatError, match=message):
        record_type.decode(key, value)


def test_a_foreign_record_raises_the_format_error_readers_skip() -> None:
    """A heartbeat record in a checkpoints topic is too short: readers skip it, as MirrorClient does."""
    heartbeat = Heartbeat("A", "B", 1)
    with pytest.raises(Mm2FormatError, match="Checkpoint value field 'offset'"):
        Checkpoint.decode(heartbeat.key_bytes(), heartbeat.value_bytes())
    assert issubclass(Mm2FormatError, ValueError)


def test_decode_accepts_bytearray_and_memoryview() -> None:
    sync = OffsetSync("t", 1, 2, 3)
    assert OffsetSync.decode(bytearray(sync.key_bytes()), memoryview(sync.value_bytes())) == sync


def test_records_are_frozen() -> None:
    sync = OffsetSync("t", 0, 1, 2)
    with pytest.raises(AttributeError):
        sync.upstream_offset = 5  # type: ignore[misc]
