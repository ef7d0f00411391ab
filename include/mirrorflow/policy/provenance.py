"""Provenance headers: where a copied record came from, so active/active never loops.

MM2 prevents loops by topic names alone, which the identity policy defeats. mirrorflow also
stamps every copied record with headers naming its origin and the clusters it passed through;
a flow never copies a record into a cluster that is its origin or already on its path.

Wire format (a compatibility promise: records written by one mirrorflow version are read by all):

| header                        | value                                                         |
|-------------------------------|---------------------------------------------------------------|
| `mirrorflow.origin`           | UTF-8 alias of the cluster the record was first produced on   |
| `mirrorflow.path`             | UTF-8 aliases of every cluster it was copied from, oldest first, joined by `,` |
| `mirrorflow.source.topic`     | UTF-8 topic name on the cluster this hop copied from          |
| `mirrorflow.source.partition` | 4-byte big-endian signed int: partition on that cluster       |
| `mirrorflow.source.offset`    | 8-byte big-endian signed int: offset on that cluster          |

Aliases cannot contain commas (MM2 splits `clusters` on commas), so `,` is an unambiguous
separator. Each hop replaces the previous hop's `mirrorflow.*` headers with one new set; other
headers are kept in order. When a header occurs more than once the last one counts, as with
Kafka's `Headers.lastHeader`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

HEADER_PREFIX = "mirrorflow."
ORIGIN_HEADER = "mirrorflow.origin"
PATH_HEADER = "mirrorflow.path"
SOURCE_TOPIC_HEADER = "mirrorflow.source.topic"
SOURCE_PARTITION_HEADER = "mirrorflow.source.partition"
SOURCE_OFFSET_HEADER = "mirrorflow.source.offset"
PROVENANCE_HEADERS = (
    ORIGIN_HEADER,
    PATH_HEADER,
    SOURCE_TOPIC_HEADER,
    SOURCE_PARTITION_HEADER,
    SOURCE_OFFSET_HEADER,
)

HeaderValue = bytes | str | None
Headers = Iterable[tuple[str, HeaderValue]]


class ProvenanceError(ValueError):
    """A mirrorflow.* header holds bytes that do not follow the documented encoding."""


@dataclass(frozen=True, slots=True)
class Provenance:
    origin: str
    path: tuple[str, ...]
    source_topic: str
    source_partition: int
    source_offset: int


def _as_bytes(name: str, value: HeaderValue) -> bytes:
    if value is None:
        raise ProvenanceError(f"header {name} has no value")
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _text(name: str, value: HeaderValue) -> str:
    try:
        return _as_bytes(name, value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProvenanceError(f"header {name} is not UTF-8: {exc}") from exc


def _int(name: str, value: HeaderValue, fmt: str) -> int:
    raw = _as_bytes(name, value)
    if len(raw) != struct.calcsize(fmt):
        raise ProvenanceError(f"header {name} has {len(raw)} bytes, expected {struct.calcsize(fmt)}")
    return struct.unpack(fmt, raw)[0]


def _last_values(headers: Headers | None) -> dict[str, HeaderValue]:
    found: dict[str, HeaderValue] = {}
    for name, value in headers or ():
        if name in PROVENANCE_HEADERS:
            found[name] = value
    return found


def _path(values: dict[str, HeaderValue]) -> tuple[str, ...]:
    if PATH_HEADER not in values:
        return ()
    text = _text(PATH_HEADER, values[PATH_HEADER])
    return tuple(text.split(",")) if text else ()


def read_provenance(headers: Headers | None) -> Provenance | None:
    """The record's provenance, or None if it was never copied by mirrorflow."""
    values = _last_values(headers)
    if ORIGIN_HEADER not in values:
        return None
    missing = [name for name in PROVENANCE_HEADERS if name not in values]
    if missing:
        raise ProvenanceError(f"incomplete provenance headers, missing {', '.join(missing)}")
    return Provenance(
        origin=_text(ORIGIN_HEADER, values[ORIGIN_HEADER]),
        path=_path(values),
        source_topic=_text(SOURCE_TOPIC_HEADER, values[SOURCE_TOPIC_HEADER]),
        source_partition=_int(SOURCE_PARTITION_HEADER, values[SOURCE_PARTITION_HEADER], ">i"),
        source_offset=_int(SOURCE_OFFSET_HEADER, values[SOURCE_OFFSET_HEADER], ">q"),
    )


def is_loop(record_headers: Headers | None, target_alias: str) -> bool:
    """True if copying this record into `target_alias` would send it back where it has been."""
    values = _last_values(record_headers)
    if ORIGIN_HEADER in values and _text(ORIGIN_HEADER, values[ORIGIN_HEADER]) == target_alias:
        return True
    return target_alias in _path(values)


def stamp_provenance(
    headers: Headers | None, *, source_alias: str, topic: str, partition: int, offset: int
) -> list[tuple[str, bytes | str | None]]:
    """The headers to write on the target for one copied record (this hop appended to the path)."""
    if "," in source_alias:
        raise ProvenanceError(f"cluster alias {source_alias!r} contains a comma")
    kept: list[tuple[str, HeaderValue]] = []
    previous: dict[str, HeaderValue] = {}
    for name, value in headers or ():
        if name in PROVENANCE_HEADERS:
            previous[name] = value
        else:
            kept.append((name, value))
    origin = _text(ORIGIN_HEADER, previous[ORIGIN_HEADER]) if ORIGIN_HEADER in previous else source_alias
    path = (*_path(previous), source_alias)
    kept.extend(
        [
            (ORIGIN_HEADER, origin.encode("utf-8")),
            (PATH_HEADER, ",".join(path).encode("utf-8")),
            (SOURCE_TOPIC_HEADER, topic.encode("utf-8")),
            (SOURCE_PARTITION_HEADER, struct.pack(">i", partition)),
            (SOURCE_OFFSET_HEADER, struct.pack(">q", offset)),
        ]
    )
    return kept
