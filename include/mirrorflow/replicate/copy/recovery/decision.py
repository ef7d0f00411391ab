"""What a transaction found open after a crash is, and so what ending it must do: the decision
table of docs/concepts/exactly-once.md ("Transactions left open"), in one place.

A slot writer (before it writes a remote partition, and at its settle of progress) and a run's
plan (at its read of progress) meet transactions that no live writer will end: a restarted
coordinator wrote a transaction's markers into some partitions and skipped others, or a writer
died and the broker's abort marker was lost. Kafka before transactions v2 ends whatever a
producer id holds open in a partition with that id's next marker, so every such transaction is
ended by a sweep (hanging.py), and what the sweep may cost is decided here, from what the open
records are, never from where they are:

- open records in a remote partition, the first of which is a copy of a source offset that
  committed progress has not reached: the transaction never committed. Ending it loses nothing.
- the same, but committed progress is at or past that source offset: the transaction committed
  and the broker skipped its marker in this partition (progress kept its own). Ending it aborts
  records that progress says are copied, so progress goes back to just before them and they are
  copied again: nothing lost, nothing twice.
- open records that say nothing of their source (provenance off) but equal the source record
  right after progress: never committed, as above. Anything else cannot be told: the partition
  stops, naming the transaction and the command that ends it, rather than guess.
- open progress records in a progress partition: every key the transaction holds is one source
  partition's progress; each is written again after the abort when its copy had committed
  (landed.py), and when any cannot be told the transaction is left open and reported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaException, Message

from mirrorflow.kafka import KafkaCallError, read_partition
from mirrorflow.mm2.connect_offsets import ConnectOffsetFormatError, SourceOffsetKey, decode_offset_entry
from mirrorflow.policy.provenance import HEADER_PREFIX, ProvenanceError, read_provenance
from mirrorflow.replicate.plan import COPY_SLOTS, writer_slot
from mirrorflow.replicate.progress import Stored

Where = tuple[str, int]

SWEEP_HEADER = "mirrorflow.sweep"
SWEEP_CONNECTOR = "mirrorflow-sweep"
READ_TIMEOUT_S = 10.0
MAX_HELD_RECORDS = 100_000
"""How many records of an open progress transaction's range are read to find every key it holds
(a progress partition takes every slot's commits; a hanging transaction is found within the
writers' transaction.timeout.ms of its start, so far fewer lie behind it)."""


class Verdict(Enum):
    DEAD = "dead"
    """Never committed: ending it by an abort loses nothing."""
    COMMITTED = "committed"
    """Committed, its marker lost in this partition: abort, then progress goes back before it."""
    UNTOLD = "untold"
    """Whether it committed cannot be told: stop, name it, end nothing."""


@dataclass(frozen=True)
class OpenData:
    """What a transaction open in a remote partition is."""

    verdict: Verdict
    first_source_offset: int = -1
    """The source offset its first record copies (provenance), when known."""
    why: str = ""

    @property
    def rewind_to(self) -> int:
        """The progress that a COMMITTED transaction's abort leaves true: just before its records."""
        return self.first_source_offset - 1


def classify_open_data(
    first: Message | None,
    stored: Stored | None,
    source: str,
    topic: str,
    partition: int,
    next_source_record: Callable[[int], Message | None],
) -> OpenData:
    """What the transaction open in the remote partition of `topic`-`partition` is, from its
    first record `first` (None: it could not be read) and the partition's settled progress.
    `next_source_record(offset)` is the first source record at or after `offset` (None when there
    is none or it cannot be read)."""
    if first is None:
        return OpenData(Verdict.UNTOLD, why="its first record could not be read")
    headers = first.headers() or []
    if any(name == SWEEP_HEADER for name, _ in headers):
        return OpenData(Verdict.DEAD, why="it holds a sweep record of this flow")
    if stored is None:
        # Progress and data commit together: with no progress committed for the partition, no
        # transaction of this flow ever committed a copy of it.
        return OpenData(Verdict.DEAD, why="no progress was ever committed for the partition")
    try:
        stamp = read_provenance(headers)
    except ProvenanceError:
        stamp = None
    if stamp is not None:
        if stamp.source_topic != topic or stamp.source_partition != partition or stamp.path[-1:] != (source,):
            return OpenData(
                Verdict.UNTOLD,
                why=f"its first record is a copy of {stamp.source_topic}-{stamp.source_partition} from "
                f"{','.join(stamp.path)}, not of {topic}-{partition} from {source}",
            )
        offset = stamp.source_offset
        if offset > stored.offset:
            return OpenData(
                Verdict.DEAD, offset, f"it copies source offset {offset}, past progress {stored.offset}"
            )
        return OpenData(
            Verdict.COMMITTED,
            offset,
            f"it copies source offset {offset} and progress, committed at {stored.offset}, covers it: "
            "the broker skipped its commit marker in this partition",
        )
    following = next_source_record(stored.offset + 1)
    if following is not None and same_record(following, first):
        return OpenData(Verdict.DEAD, why="it starts with the source record right after progress")
    return OpenData(
        Verdict.UNTOLD,
        why="its records carry no provenance (mirrorflow.provenance off, or another producer's) and do "
        "not start with the source record after progress, so whether they were committed cannot be told",
    )


def same_record(source: Message, remote: Message) -> bool:
    """Whether `remote` is a copy of `source`: key, value, timestamp and headers (mirrorflow's
    own headers aside)."""

    def headers(message: Message) -> list[tuple[str, bytes | None]]:
        return [(k, v) for k, v in message.headers() or [] if not k.startswith(HEADER_PREFIX)]

    return (
        source.key() == remote.key()
        and source.value() == remote.value()
        and source.timestamp()[1] == remote.timestamp()[1]
        and headers(source) == headers(remote)
    )


def first_record_at(
    config: Mapping[str, object], where: Where, offset: int, *, committed: bool
) -> Message | None:
    """The first record at or after `offset` (a read_uncommitted read when not `committed`: the
    first of a transaction open there); None when there is none or it cannot be read in time."""
    read = read_partition(
        config,
        where[0],
        where[1],
        start=offset,
        isolation="read_committed" if committed else "read_uncommitted",
        idle_timeout_s=READ_TIMEOUT_S,
    )
    try:
        with contextlib.closing(read):
            return next(read, None)
    except (KafkaException, KafkaCallError):
        return None


def progress_slot(message: Message, source: str) -> tuple[tuple[int, int], Where | None] | None:
    """The writer slot whose transaction wrote a record of a progress partition, as (slot, slot
    count), and the source partition whose progress it is (None for a sweep record, keyed by the
    slot); None when the record is not this flow's. A record says the count its writer used (a
    batch flow's 256, a micro-batch flow's tasks.max, see plan.flow_writer_slots); a sweep record
    says it in its key; a record that names none (an older writer's) is taken for one of COPY_SLOTS,
    and the sweep also tries the id a writer per partition had (progress_sweep.py)."""
    try:
        key = SourceOffsetKey.decode(message.key())
    except ConnectOffsetFormatError:
        return None
    if key.cluster != source:
        return None
    if key.connector == SWEEP_CONNECTOR:
        return (key.partition, sweep_slots(key.topic)), None
    try:
        slots = decode_offset_entry(message.value()).slots if message.value() else 0
    except ConnectOffsetFormatError:
        return None
    slots = slots or COPY_SLOTS
    return (writer_slot(key.topic, key.partition, slots), slots), (key.topic, key.partition)


def sweep_key_topic(slots: int) -> str:
    """The topic field of a sweep record's key: the slot count of the id that swept."""
    return SWEEP_HEADER if slots == COPY_SLOTS else f"{SWEEP_HEADER}.of-{slots}"


def sweep_slots(topic: str) -> int:
    prefix = f"{SWEEP_HEADER}.of-"
    if topic.startswith(prefix) and topic[len(prefix) :].isdigit():
        return int(topic[len(prefix) :])
    return COPY_SLOTS


@dataclass
class HeldProgress:
    """What an open transaction holds in a progress partition."""

    slot: int
    """The writer slot whose id (or an older id of its partitions) opened it."""
    first: Where | None
    """The source partition its first record is the progress of (None: a sweep record)."""
    records: dict[Where, Message]
    """Each source partition's last progress record of that slot in the open range."""
    slots: int = COPY_SLOTS
    """The slot count of that id."""


def held_progress(
    config: Mapping[str, object], where: Where, offset: int, end: int, source: str
) -> HeldProgress | None:
    """The progress records an open transaction holds in a progress partition, from its first
    record at `offset` up to `end` (the high watermark). A shared transaction holds the keys of
    several source partitions that hash to one progress partition, and its abort takes every one
    of them back. None when the first record is not this flow's, or the range cannot be read in
    time."""
    held: HeldProgress | None = None
    read = read_partition(
        config,
        where[0],
        where[1],
        start=offset,
        end=min(end, offset + MAX_HELD_RECORDS),
        isolation="read_uncommitted",
        idle_timeout_s=READ_TIMEOUT_S,
    )
    try:
        with contextlib.closing(read):
            for message in read:
                found = progress_slot(message, source)
                if held is None:
                    if found is None or message.offset() != offset:
                        return None
                    held = HeldProgress(found[0][0], found[1], {}, found[0][1])
                # Kafka before transactions v2 ends a producer id's transaction in a partition
                # with that id's next marker, so the slot's records behind the first belong to
                # the same open transaction; other slots' are their own writers' (settled).
                if (
                    found is not None
                    and found[1] is not None
                    and found[0] == (held.slot, held.slots)
                    and message.value()
                ):
                    held.records[found[1]] = message
    except (KafkaException, KafkaCallError):
        return None
    return held
