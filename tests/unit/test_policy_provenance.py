"""Provenance headers: the documented bytes and the loop rule for active/active."""

from __future__ import annotations

import pytest

from mirrorflow.policy import (
    ORIGIN_HEADER,
    PATH_HEADER,
    SOURCE_OFFSET_HEADER,
    SOURCE_PARTITION_HEADER,
    SOURCE_TOPIC_HEADER,
    Provenance,
    ProvenanceError,
    is_loop,
    read_provenance,
    stamp_provenance,
)


def test_header_names_are_the_documented_ones() -> None:
    assert (
        ORIGIN_HEADER,
        PATH_HEADER,
        SOURCE_TOPIC_HEADER,
        SOURCE_PARTITION_HEADER,
        SOURCE_OFFSET_HEADER,
    ) == (
        "mirrorflow.origin",
        "mirrorflow.path",
        "mirrorflow.source.topic",
        "mirrorflow.source.partition",
        "mirrorflow.source.offset",
    )


def test_first_hop_bytes() -> None:
    headers = stamp_provenance([("trace", b"t1")], source_alias="A", topic="orders", partition=3, offset=258)
    assert headers == [
        ("trace", b"t1"),
        ("mirrorflow.origin", b"A"),
        ("mirrorflow.path", b"A"),
        ("mirrorflow.source.topic", b"orders"),
        ("mirrorflow.source.partition", bytes.fromhex("00000003")),
        ("mirrorflow.source.offset", bytes.fromhex("0000000000000102")),
    ]
    assert read_provenance(headers) == Provenance("A", ("A",), "orders", 3, 258)


def test_second_hop_keeps_origin_and_appends_to_path() -> None:
    first = stamp_provenance(None, source_alias="A", topic="orders", partition=0, offset=5)
    second = stamp_provenance(first, source_alias="B", topic="orders", partition=0, offset=9)
    provenance = read_provenance(second)
    assert provenance == Provenance("A", ("A", "B"), "orders", 0, 9)
    assert sum(name.startswith("mirrorflow.") for name, _ in second) == 5


def test_is_loop_for_active_active_identity_names() -> None:
    produced_on_a: list[tuple[str, bytes]] = [("k", b"v")]
    assert not is_loop(produced_on_a, "B")
    on_b = stamp_provenance(produced_on_a, source_alias="A", topic="orders", partition=0, offset=0)
    assert is_loop(on_b, "A")  # B->A must not send it home
    assert not is_loop(on_b, "C")
    on_c = stamp_provenance(on_b, source_alias="B", topic="orders", partition=0, offset=0)
    assert is_loop(on_c, "A")
    assert is_loop(on_c, "B")
    assert not is_loop(on_c, "D")
    assert not is_loop(None, "A")


def test_last_header_counts_and_str_values_are_accepted() -> None:
    headers = [("mirrorflow.origin", "B"), ("mirrorflow.origin", b"A")]
    assert is_loop(headers, "A")
    assert not is_loop(headers, "B")


def test_malformed_provenance_is_reported() -> None:
    with pytest.raises(ProvenanceError, match="missing"):
        read_provenance([("mirrorflow.origin", b"A")])
    bad = stamp_provenance(None, source_alias="A", topic="t", partition=0, offset=0)
    bad = [(n, b"\x00\x01" if n == SOURCE_PARTITION_HEADER else v) for n, v in bad]
    with pytest.raises(ProvenanceError, match="expected 4"):
        read_provenance(bad)
    with pytest.raises(ProvenanceError, match="comma"):
        stamp_provenance(None, source_alias="A,B", topic="t", partition=0, offset=0)
    assert read_provenance([("other", b"x")]) is None
