"""What one source partition's progress is: the stored value, its incarnation (the topic ids it
was copied between) and the progress record that carries it, in MM2's Connect source-offset
format (mirrorflow.mm2.connect_offsets). Reading progress back is mirrorflow.replicate.progress."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mirrorflow.mm2.connect_offsets import SourceOffsetKey, encode_offset_value, java_partition


class ProgressReadError(RuntimeError):
    pass


class ProgressBlocked(ProgressReadError):
    """A settle waited its whole limit for transactions to end in some progress partitions.

    `stuck` maps each of those partitions to the offset its committed view could not pass (the
    first offset of the oldest transaction still open there). No live writer of the flow keeps a
    transaction open past its transaction.timeout.ms (the broker aborts it then), so with a limit
    above that, what is left is a hanging transaction (see replicate/copy/recovery/hanging.py)."""

    def __init__(self, message: str, stuck: dict[int, int]) -> None:
        super().__init__(message)
        self.stuck = stuck


@dataclass(frozen=True, slots=True)
class Stored:
    """One source partition's stored progress: the last replicated upstream offset, and the
    topic incarnations it was copied between (see `incarnation`; "" when the writer named
    none: MM2, or an older mirrorflow)."""

    offset: int
    incarnation: str = ""
    slots: int = 0
    """The writer slots of the copy that wrote it (see replicate.plan.COPY_SLOTS); 0 when the
    writer named none (MM2, or a mirrorflow that wrote with a transactional.id per partition)."""
    commit: str = ""
    """The token of the transaction that wrote it ("" when the writer named none)."""

    @property
    def floor(self) -> int:
        return split_incarnation(self.incarnation)[2]


@dataclass(frozen=True)
class ProgressSnapshot:
    """A settled read of a source cluster's whole progress: what it found and how far it read
    each partition of the progress topic. A reader seeded with it (ProgressReader, `start`) reads
    only what was written after, as if it had read the topic from its start itself: a plan hands
    its read to the copy tasks this way, so a window's tasks do not each read the topic's history
    again (which grows through the day until a segment rolls and is compacted)."""

    topic: str
    topic_id: str
    """The progress topic's id when it was read: a topic deleted and made again since has other
    records at the same offsets, and a seed of it is not taken."""
    positions: tuple[int, ...]
    """The next offset not read, partition by partition (index = partition)."""
    entries: tuple[tuple[str, int, int, str, int, str], ...]
    """(topic, partition, offset, incarnation, slots, commit) of every source partition found."""

    def stored(self) -> dict[tuple[str, int], Stored]:
        return {
            (t, p): Stored(offset, inc, slots, commit) for t, p, offset, inc, slots, commit in self.entries
        }

    def json_pieces(self, rows_per_piece: int = 1000) -> Iterator[str]:
        """Its JSON object in pieces (a flow of 120,000 partitions has as many entries)."""
        head = {"topic": self.topic, "topic_id": self.topic_id, "positions": list(self.positions)}
        yield json.dumps(head, separators=(",", ":"))[:-1] + ',"entries":['
        for first in range(0, len(self.entries), rows_per_piece):
            rows = [list(row) for row in self.entries[first : first + rows_per_piece]]
            yield ("," if first else "") + json.dumps(rows, separators=(",", ":"))[1:-1]
        yield "]}"

    @classmethod
    def from_json_data(cls, data: dict[str, Any]) -> ProgressSnapshot:
        return cls(
            topic=data["topic"],
            topic_id=data["topic_id"],
            positions=tuple(int(p) for p in data["positions"]),
            entries=tuple(
                (str(t), int(p), int(o), str(i), int(s), str(c)) for t, p, o, i, s, c in data["entries"]
            ),
        )


def incarnation(source_id: str, remote_id: str, floor: int = 0) -> str:
    """`<source topic id>,<remote topic id>[,<floor>]`: the topic IDs (librdkafka prints them in
    standard base64, which has "/" and "+" but never ",") and, when above 0, the remote
    offset where this source incarnation's records begin (records below it came from an
    earlier incarnation of the source topic, with the same offsets, and never translate)."""
    if not source_id and not remote_id:
        return ""
    return f"{source_id},{remote_id}" + (f",{floor}" if floor > 0 else "")


def split_incarnation(text: str) -> tuple[str, str, int]:
    """(source topic id, remote topic id, floor) of an incarnation; ("", "", 0) when unknown."""
    fields = text.split(",")
    source_id = fields[0] if fields else ""
    remote_id = fields[1] if len(fields) > 1 else ""
    try:
        floor = int(fields[2]) if len(fields) > 2 else 0
    except ValueError:
        floor = 0
    return source_id, remote_id, max(0, floor)


def progress_record(
    source_alias: str,
    topic: str,
    partition: int,
    offset: int,
    num_partitions: int,
    incarnation: str = "",
    slots: int = 0,
    commit: str = "",
):
    """(key, value, partition) of the progress record for one source partition."""
    key, where = _progress_key(source_alias, topic, partition, num_partitions)
    return key, encode_offset_value(offset, incarnation, slots, commit), where


@functools.lru_cache(maxsize=1 << 16)
def _progress_key(source_alias: str, topic: str, partition: int, num_partitions: int) -> tuple[bytes, int]:
    """A partition's progress key and the offsets-topic partition it goes to: the same at every
    commit, and costly to make in Python (Jackson's string escaping, murmur2), which a window
    over 1,000 partitions did for each of them every batch."""
    key = SourceOffsetKey(cluster=source_alias, topic=topic, partition=partition)
    data = key.key_bytes()
    return data, java_partition(data, num_partitions)
