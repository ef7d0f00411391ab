"""Copies on the target that no progress accounts for.

A source partition with no stored progress is copied from its start, which is right for a new
flow and wrong when its remote partition already holds this flow's copies: the progress topic was
deleted or emptied (an operator "resetting" the mirror, a changed `offset.storage.topic`, a
target that lost it), and copying from the start would write every record there a second time,
with every run reporting success. Before a plan copies such a partition, the last committed
record of its remote partition is read (one consumer for up to CHUNK partitions), and:

- a copy of this very source partition, from this source cluster, whose source record is still
  there and equal (key, value, timestamp, headers): the copy goes on right after it, and the
  plan's copy writes that progress;
- nothing committed there (a new topic, or only aborted records): copied from the start;
- anything else (no provenance, another partition's or cluster's copy, a source record gone or
  different, a read not done in time): the plan stops, naming each partition and what to do.
  Identity-named remote topics are the exception: other clients write there (active/active
  with local producers), so their last record says nothing, and they are copied as before.

Nothing is read for partitions with progress, so a flow that has its progress pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.policy.provenance import ProvenanceError, read_provenance
from mirrorflow.replicate.copy.recovery.decision import same_record
from mirrorflow.replicate.copy.recovery.tails import Candidate, last_committed, read_tails
from mirrorflow.replicate.progress_records import ProgressReadError, ProgressSnapshot, Stored

log = logging.getLogger(__name__)

Where = tuple[str, int]

NAMED = 20
CHUNK = 2_000
"""Partitions whose tails one consumer reads at once (each a record held until decided)."""


class CopiesWithoutProgress(ProgressReadError):
    """Remote partitions hold records that no progress of the flow accounts for (a progress
    problem: where the flow's progress is read, the plan stops the same way)."""


def copies_without_progress(
    flow: FlowConfig,
    clients: FlowClients,
    target_admin: AdminClient,
    parts: list[tuple[str, int, str]],
    progress: dict[Where, Stored],
    earliest: Mapping[Where, int],
    stable: Mapping[Where, int],
    *,
    reread: Callable[[], ProgressSnapshot | None],
) -> tuple[dict[Where, int], dict[Where, Stored]]:
    """(source offsets to go on after, the progress to plan with) for the plan's `parts` (source
    topic, partition, remote topic): two batched ListOffsets on the target for the partitions
    with no progress, and reads only where their remote partitions hold records. Before it
    refuses, progress is read again (`reread`): a copy running beside the plan (a window's tasks,
    another run) commits a partition's first copies with their progress, after the plan read
    progress and before it listed the remote partitions; those it finds there are planned with
    that progress instead."""

    def adopted(known: Mapping[Where, Stored]) -> dict[Where, int]:
        missing = [(t, p, remote) for t, p, remote in parts if (t, p) not in known]
        if not missing:
            return {}
        remote = [(r, p) for _, p, r in missing]
        low = list_offsets(target_admin, remote, OffsetSpec.earliest())
        high = list_offsets(target_admin, remote, OffsetSpec.latest(), read_committed=True)
        return adopted_progress(
            source=flow.source,
            source_consumer=clients.source_consumer,
            target_consumer=clients.target_consumer,
            candidates=[
                Candidate(t, p, r, low[(r, p)], high[(r, p)])
                for t, p, r in missing
                if high.get((r, p), 0) > low.get((r, p), 0)
            ],
            earliest=earliest,
            stable=stable,
            progress_topic=flow.offset_storage_topic,
        )

    try:
        return adopted(progress), progress
    except CopiesWithoutProgress:
        now = reread()
        if now is None:
            raise
        progress = {**progress, **now.stored()}
        return adopted(progress), progress


def adopted_progress(
    *,
    source: str,
    source_consumer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    candidates: list[Candidate],
    earliest: Mapping[Where, int],
    stable: Mapping[Where, int],
    progress_topic: str,
) -> dict[Where, int]:
    """The source offset each candidate's copies reach, for those whose remote partition holds
    this flow's copies (see the module); raises CopiesWithoutProgress for the ones that cannot
    be told. Read CHUNK partitions at a time, so that at most twice as many records are held."""
    adopted: dict[Where, int] = {}
    refused: dict[Where, str] = {}
    for first in range(0, len(candidates), CHUNK):
        chunk = candidates[first : first + CHUNK]
        found, why = _decide(source, source_consumer, target_consumer, chunk, earliest, stable)
        adopted.update(found)
        refused.update(why)
    if refused:
        by_where = {(c.topic, c.partition): c for c in candidates}
        raise CopiesWithoutProgress(_refusal(source, by_where, refused, progress_topic))
    if adopted:
        named = sorted(adopted)
        log.warning(
            "%d source partition(s) have no progress in %s, but their remote partitions hold this flow's "
            "copies: progress goes on after the last copy (%s%s). Was %s deleted or emptied?",
            len(named),
            progress_topic,
            ", ".join(f"{t}-{p} after offset {adopted[(t, p)]}" for t, p in named[:NAMED]),
            f" and {len(named) - NAMED:,} more" if len(named) > NAMED else "",
            progress_topic,
        )
    return adopted


def _decide(
    source: str,
    source_consumer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    candidates: list[Candidate],
    earliest: Mapping[Where, int],
    stable: Mapping[Where, int],
) -> tuple[dict[Where, int], dict[Where, str]]:
    """(source offsets to go on after, reasons for those that cannot be told) of `candidates`."""
    identity = {(c.topic, c.partition) for c in candidates if c.remote_topic == c.topic}
    tails, unread = last_committed(target_consumer, candidates)
    refused = {where: "its last committed record could not be read in time" for where in unread}
    stamped: dict[Where, int] = {}
    for where, record in tails.items():
        try:
            stamp = read_provenance(record.headers())
        except ProvenanceError:
            stamp = None
        ours = (
            stamp is not None
            and (stamp.source_topic, stamp.source_partition) == where
            and stamp.path[-1:] == (source,)
        )
        low, end = earliest[where], stable[where]
        if ours and low <= stamp.source_offset < end:
            stamped[where] = stamp.source_offset
        elif where in identity:
            continue  # other clients write there: its last record says nothing of the flow
        elif ours:
            holds = f"it holds offsets {low} to {end - 1}" if end > low else f"it is empty, from offset {low}"
            refused[where] = (
                f"its last copy is of source offset {stamp.source_offset}, which the source no longer holds ({holds})"
            )
        else:
            refused[where] = (
                f"its last committed record (offset {record.offset()}) is not a copy of {where[0]}-{where[1]} "
                f"from {source}"
            )
    if stamped:
        records, late = read_tails(source_consumer, {w: (x, x + 1) for w, x in stamped.items()})
        for where, offset in list(stamped.items()):
            record = records.get(where)
            if record is not None and record.offset() == offset and same_record(record, tails[where]):
                continue
            del stamped[where]
            if where not in identity:
                refused[where] = (
                    f"the source record at offset {offset} could not be read in time"
                    if where in late
                    else f"its last copy does not equal the source record at offset {offset} it names"
                )
    return stamped, refused


def _refusal(
    source: str, by_where: Mapping[Where, Candidate], refused: Mapping[Where, str], topic: str
) -> str:
    named = sorted(refused)
    lines = [
        f"  {by_where[w].remote_topic}-{w[1]} (offsets {by_where[w].remote_low:,} to {by_where[w].remote_stable - 1:,}): "
        f"{refused[w]}"
        for w in named[:NAMED]
    ]
    if len(named) > NAMED:
        lines.append(f"  ... and {len(named) - NAMED:,} more")
    return (
        f"nothing was planned: {len(named):,} remote partition(s) already hold records, but {topic} has no "
        f"progress for their source partitions on {source}, and copying them from the start would write "
        "those records a second time:\n" + "\n".join(lines) + "\n"
        f"If {topic} was deleted or emptied, restore it (or set offset.storage.topic back to the topic that "
        "holds the flow's progress). To copy such a partition again from its start, empty its remote "
        "partition first (delete the remote topic, or kafka-delete-records.sh up to its end)."
    )
