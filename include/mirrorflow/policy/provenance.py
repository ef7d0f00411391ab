"""Provenance: where a copied record came from, so active/active never loops and offsets translate.

MM2 prevents loops by topic names alone, which the identity policy defeats. mirrorflow also
stamps every copied record with one header naming the clusters it passed through and its
position on the cluster this hop copied it from; a flow never copies a record into a cluster
that is its origin or already on its path.

Wire format (a compatibility promise: records written by one mirrorflow version are read by all):
header `mirrorflow.provenance`, value (big-endian, Kafka protocol types)

| field     | type                     | meaning                                                      |
|-----------|--------------------------|--------------------------------------------------------------|
| version   | INT8 = 1                 | readers reject other versions                                |
| offset    | INT64                    | offset on the cluster this hop copied from                   |
| partition | INT32                    | partition on that cluster                                    |
| topic     | STRING (INT16 len+UTF-8) | topic name on that cluster                                   |
| path      | STRING (INT16 len+UTF-8) | aliases of every cluster it was copied from, oldest first,   |
|           |                          | joined by `,`; the first is the cluster it was produced on   |

One header rather than one per field: a copy writes it on every record, and each extra header
costs the producer about 0.2 µs and the record about 20 bytes on the target. Aliases cannot
contain commas (MM2 splits `clusters` on commas), so `,` is an unambiguous separator. Each hop
replaces the previous hop's header; other headers are kept in order. When the header occurs more
than once the last one counts, as with Kafka's `Headers.lastHeader`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

HEADER_PREFIX = "mirrorflow."
PROVENANCE_HEADER = "mirrorflow.provenance"
VERSION = 1

# Bytes a copied record may grow by on the target: the provenance header (its name, a value of
# 13 bytes plus the topic name (at most 249) and the path) and the longer varints of the record's
# framing. Remote topics get the source topic's max.message.bytes plus this, so that every record
# that fits the source fits the target.
RECORD_HEADROOM = 1024

_VERSION_BYTE = bytes([VERSION])
_HEAD = struct.Struct(">bqi")  # version, offset, partition
_pack_offset = struct.Struct(">q").pack

HeaderValue = bytes | str | None
Headers = Iterable[tuple[str, HeaderValue]]


class ProvenanceError(ValueError):
    """A mirrorflow.provenance header holds bytes that do not follow the documented encoding."""


@dataclass(frozen=True, slots=True)
class Provenance:
    path: tuple[str, ...]
    source_topic: str
    source_partition: int
    source_offset: int

    @property
    def origin(self) -> str:
        """The cluster the record was first produced on."""
        return self.path[0]


def _string(field: str, text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ProvenanceError(f"provenance {field} is {len(raw)} bytes; at most 32767 fit")
    return struct.pack(">h", len(raw)) + raw


def encode(provenance: Provenance) -> bytes:
    return (
        _HEAD.pack(VERSION, provenance.source_offset, provenance.source_partition)
        + _string("topic", provenance.source_topic)
        + _string("path", ",".join(provenance.path))
    )


def decode(value: HeaderValue) -> Provenance:
    if value is None:
        raise ProvenanceError(f"header {PROVENANCE_HEADER} has no value")
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(raw) < _HEAD.size:
        raise ProvenanceError(
            f"header {PROVENANCE_HEADER} has {len(raw)} bytes, fewer than its {_HEAD.size}-byte head"
        )
    version, offset, partition = _HEAD.unpack_from(raw, 0)
    if version != VERSION:
        raise ProvenanceError(
            f"header {PROVENANCE_HEADER} has version {version}; this mirrorflow reads {VERSION}"
        )
    position = _HEAD.size
    texts = []
    for field in ("topic", "path"):
        if len(raw) < position + 2:
            raise ProvenanceError(f"header {PROVENANCE_HEADER} ends before its {field}")
        (length,) = struct.unpack_from(">h", raw, position)
        position += 2
        if length < 0 or len(raw) < position + length:
            raise ProvenanceError(f"header {PROVENANCE_HEADER} ends inside its {field}")
        try:
            texts.append(raw[position : position + length].decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ProvenanceError(f"the {field} of header {PROVENANCE_HEADER} is not UTF-8: {exc}") from exc
        position += length
    topic, path = texts
    if not path:
        raise ProvenanceError(f"header {PROVENANCE_HEADER} names no cluster in its path")
    return Provenance(tuple(path.split(",")), topic, partition, offset)


_ABSENT = object()


def _last_value(headers: Headers | None) -> object:
    """The last provenance header's value, or _ABSENT."""
    found: object = _ABSENT
    for name, value in headers or ():
        if name == PROVENANCE_HEADER:
            found = value
    return found


def read_provenance(headers: Headers | None) -> Provenance | None:
    """The record's provenance, or None if it was never copied by mirrorflow."""
    value = _last_value(headers)
    return None if value is _ABSENT else decode(value)  # type: ignore[arg-type]


def is_loop(record_headers: Headers | None, target_alias: str) -> bool:
    """True if copying this record into `target_alias` would send it back where it has been."""
    provenance = read_provenance(record_headers)
    return provenance is not None and target_alias in provenance.path


def fresh_stamp(source_alias: str, topic: str, partition: int) -> tuple[bytes, bytes]:
    """(prefix, suffix) such that `prefix + offset_bytes + suffix` is the provenance value of a
    record produced on `source_alias` (no provenance yet) at that offset: the copy's fast path."""
    value = encode(Provenance((_alias(source_alias),), topic, partition, 0))
    return _VERSION_BYTE, value[9:]


def stamp_provenance(
    headers: Headers | None, *, source_alias: str, topic: str, partition: int, offset: int
) -> list[tuple[str, HeaderValue]]:
    """The headers to write on the target for one copied record (this hop appended to the path)."""
    kept: list[tuple[str, HeaderValue]] = []
    previous: object = _ABSENT
    for name, value in headers or ():
        if name == PROVENANCE_HEADER:
            previous = value
        else:
            kept.append((name, value))
    earlier = () if previous is _ABSENT else decode(previous).path  # type: ignore[arg-type]
    path = (*earlier, _alias(source_alias))
    kept.append((PROVENANCE_HEADER, encode(Provenance(path, topic, partition, offset))))
    return kept


def pack_offset(offset: int) -> bytes:
    return _pack_offset(offset)


def _alias(alias: str) -> str:
    if "," in alias:
        raise ProvenanceError(f"cluster alias {alias!r} contains a comma")
    return alias
