"""A verification's digests: the bytes a record contributes follow the documented layout, and the
source and target digests, shared while both sides take the same bytes, come out the same as two
hashes fed side by side, however the sides' records interleave."""

from __future__ import annotations

import hashlib
import random
import struct

import pytest

from mirrorflow.ops.verification.digests import SOURCE, TARGET, Digests, record_bytes


def test_a_record_is_its_key_value_headers_and_timestamp_length_prefixed() -> None:
    raw = record_bytes(b"k", None, [("h", b"vv"), ("n", None), ("s", "x")], 1, 1_700_000_000_000)
    assert raw == (
        struct.pack(">i", 1)
        + b"k"
        + b"\xff\xff\xff\xff"
        + struct.pack(">i", 3)
        + struct.pack(">i", 1)
        + b"h"
        + struct.pack(">i", 2)
        + b"vv"
        + struct.pack(">i", 1)
        + b"n"
        + b"\xff\xff\xff\xff"
        + struct.pack(">i", 1)
        + b"s"
        + struct.pack(">i", 1)
        + b"x"
        + struct.pack(">bq", 1, 1_700_000_000_000)
    )
    # No headers and an empty header list are the same: a count of 0.
    assert record_bytes(None, b"", None, 0, -1) == record_bytes(None, b"", [], 0, -1)
    assert record_bytes(None, b"", None, 0, -1) == (
        b"\xff\xff\xff\xff" + struct.pack(">i", 0) + struct.pack(">i", 0) + struct.pack(">bq", 0, -1)
    )


def _separate(steps: list[tuple[int, bytes]]) -> tuple[str, str]:
    hashes = (hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16))
    for side, data in steps:
        hashes[side].update(data)
    return hashes[SOURCE].hexdigest(), hashes[TARGET].hexdigest()


def _paired(steps: list[tuple[int, bytes]]) -> tuple[str, str]:
    digests = Digests()
    for side, data in steps:
        digests.add(side, data)
    return digests.hexdigests()


@pytest.mark.parametrize(
    "steps",
    [
        [],
        [(TARGET, b"a"), (SOURCE, b"a"), (TARGET, b"b"), (SOURCE, b"b")],
        [(SOURCE, b"a"), (TARGET, b"a")],
        [(TARGET, b"a")],  # a side's last bytes still held at the end
        [(TARGET, b"a"), (SOURCE, b"a"), (SOURCE, b"b")],
        [(TARGET, b"a"), (SOURCE, b"x"), (TARGET, b"b"), (SOURCE, b"b")],  # differ, then the same
        [(TARGET, b"a"), (TARGET, b"b"), (SOURCE, b"a"), (SOURCE, b"b")],  # same bytes, other order
        [(TARGET, b"ab"), (SOURCE, b"a"), (SOURCE, b"b")],  # same stream, other record bounds
    ],
)
def test_paired_digests_equal_separate_ones(steps: list[tuple[int, bytes]]) -> None:
    assert _paired(steps) == _separate(steps)


def test_paired_digests_equal_separate_ones_for_random_interleavings() -> None:
    rng = random.Random(11)
    for _ in range(500):
        steps = []
        for _ in range(rng.randrange(12)):
            data = rng.choice([b"a", b"b", b"c", b""])
            if rng.random() < 0.6:
                steps += [(TARGET, data), (SOURCE, data)]
            else:
                steps.append((rng.choice((SOURCE, TARGET)), data))
        assert _paired(steps) == _separate(steps), steps
