"""Provenance header: the documented bytes and the loop rule for active/active."""

from __future__ import annotations

import struct

import pytest

from mirrorflow.policy import (
    PROVENANCE_HEADER,
    Provenance,
    ProvenanceError,
    is_loop,
    read_provenance,
    stamp_provenance,
)
from mirrorflow.policy.provenance import fresh_stamp, pack_offset


def test_header_name_is_the_documented_one() -> None:
    assert PROVENANCE_HEADER == "mirrorflow.provenance"


def test_first_hop_bytes() -> None:
    headers = stamp_provenance([("trace", b"t1")], source_alias="A", topic="orders", partition=3, offset=258)
    expected = bytes.fromhex("010000000000000102000000030006") + b"orders" + bytes.fromhex("0001") + b"A"
    assert headers == [("trace", b"t1"), ("mirrorflow.provenance", expected)]
    provenance = read_provenance(headers)
    assert provenance == Provenance(("A",), "orders", 3, 258)
    assert provenance.origin == "A"


def test_fast_path_stamp_is_byte_identical() -> None:
    prefix, suffix = fresh_stamp("A", "orders", 7)
    ((_, value),) = stamp_provenance(None, source_alias="A", topic="orders", partition=7, offset=99)
    assert prefix + pack_offset(99) + suffix == value


def test_second_hop_keeps_origin_and_appends_to_path() -> None:
    first = stamp_provenance(None, source_alias="A", topic="orders", partition=0, offset=5)
    second = stamp_provenance(first, source_alias="B", topic="A.orders", partition=0, offset=9)
    provenance = read_provenance(second)
    assert provenance == Provenance(("A", "B"), "A.orders", 0, 9)
    assert provenance.origin == "A"
    assert [name for name, _ in second] == ["mirrorflow.provenance"]


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


def test_last_header_counts() -> None:
    old = stamp_provenance(None, source_alias="B", topic="t", partition=0, offset=1)
    new = stamp_provenance(None, source_alias="A", topic="t", partition=0, offset=2)
    headers = [*old, *new]
    assert is_loop(headers, "A")
    assert not is_loop(headers, "B")


def test_malformed_provenance_is_reported() -> None:
    ((_, good),) = stamp_provenance(None, source_alias="A", topic="t", partition=0, offset=0)
    with pytest.raises(ProvenanceError, match="head"):
        read_provenance([(PROVENANCE_HEADER, good[:5])])
    with pytest.raises(ProvenanceError, match="version 2"):
        read_provenance([(PROVENANCE_HEADER, b"\x02" + good[1:])])
    with pytest.raises(ProvenanceError, match="inside its path"):
        read_provenance([(PROVENANCE_HEADER, good[:-1])])
    with pytest.raises(ProvenanceError, match="no value"):
        read_provenance([(PROVENANCE_HEADER, None)])
    empty_path = bytes([1]) + struct.pack(">qi", 0, 0) + struct.pack(">h", 1) + b"t" + struct.pack(">h", 0)
    with pytest.raises(ProvenanceError, match="no cluster"):
        read_provenance([(PROVENANCE_HEADER, empty_path)])
    with pytest.raises(ProvenanceError, match="comma"):
        stamp_provenance(None, source_alias="A,B", topic="t", partition=0, offset=0)
    assert read_provenance([("other", b"x")]) is None
