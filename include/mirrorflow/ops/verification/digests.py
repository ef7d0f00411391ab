"""The order-sensitive digest of each side of a partition: BLAKE2b over every compared record's
key, value, headers without the provenance header, timestamp type and timestamp, computed as the
records are read. Equal digests say both sides hold the same records in the same order."""

from __future__ import annotations

import hashlib
import struct

from mirrorflow.policy.provenance import PROVENANCE_HEADER

_INT = struct.Struct(">i").pack
_STAMP = struct.Struct(">bq").pack
_NO_HEADERS_STAMP = struct.Struct(">ibq").pack  # a header count of 0, then the timestamp
_NULL = b"\xff\xff\xff\xff"


SOURCE, TARGET = 0, 1  # the sides of Digests


class Digests:
    """The source's and the target's digest of one partition (see the module docstring), each
    fed one record_bytes per record.

    As long as both sides have taken the same bytes (every record so far an exact copy of its
    source record) they are one hash state, fed once per pair: the bytes one side takes wait
    until the other side takes the same, or the sides part, each going on from a copy of the
    shared state. Hashing (about 1 us per KiB) is the largest single cost of comparing records,
    and an exact copy halves it; either digest is the same as if each side had a hash of its own."""

    def __init__(self) -> None:
        self._shared = hashlib.blake2b(digest_size=16)
        self._held: list[bytes | None] = [None, None]  # a side's bytes beyond the shared state
        # (source, target): a hash each, once the sides differ
        self._parted: tuple[hashlib.blake2b, hashlib.blake2b] | None = None

    def add(self, side: int, data: bytes) -> None:
        if self._parted is not None:
            self._parted[side].update(data)
            return
        held = self._held
        other = held[1 - side]
        if other is not None and other == data:
            self._shared.update(data)
            held[1 - side] = None
        elif other is None and held[side] is None:
            held[side] = data
        else:
            self._part()[side].update(data)

    def _part(self) -> tuple[hashlib.blake2b, hashlib.blake2b]:
        parted = self._parted = (self._shared.copy(), self._shared)
        for side, data in enumerate(self._held):
            if data is not None:
                parted[side].update(data)
        self._held = [None, None]
        return parted

    def hexdigests(self) -> tuple[str, str]:
        """(source, target)."""
        if self._parted is None and self._held == [None, None]:
            shared = self._shared.hexdigest()
            return shared, shared
        source, target = self._parted or self._part()
        return source.hexdigest(), target.hexdigest()


def record_bytes(
    key: bytes | None, value: bytes | None, headers: list | None, ts_type: int, ts: int
) -> bytes:
    """What a digest takes of one record: key and value length-prefixed (-1 for null), the
    header count and each header's name and value length-prefixed, the timestamp type and the
    timestamp. One bytes object, so a record costs one digest update, and a copy equal to its
    source record lends the source's digest the same bytes."""
    if headers is None:  # the common case: no list to build
        return b"".join(
            (
                _NULL if key is None else _INT(len(key)),
                key or b"",
                _NULL if value is None else _INT(len(value)),
                value or b"",
                _NO_HEADERS_STAMP(0, ts_type, ts),
            )
        )
    parts = [
        _NULL if key is None else _INT(len(key)),
        key or b"",
        _NULL if value is None else _INT(len(value)),
        value or b"",
        _INT(len(headers)),
    ]
    for name, hvalue in headers:
        raw_name = name.encode()
        parts += (_INT(len(raw_name)), raw_name)
        if hvalue is None:
            parts.append(_NULL)
        else:
            raw = hvalue.encode() if isinstance(hvalue, str) else hvalue
            parts += (_INT(len(raw)), raw)
    parts.append(_STAMP(ts_type, ts))
    return b"".join(parts)


def without_provenance(headers: list | None) -> list | None:
    if not headers:
        return None
    kept = [h for h in headers if h[0] != PROVENANCE_HEADER]
    return kept or None
