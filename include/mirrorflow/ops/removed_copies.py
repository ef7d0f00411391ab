"""Whether moving a group to the target now would skip records whose copies the target removed.

A group moves to the first copy of its committed offset or a later one (control/translation).
When the target's retention or a DeleteRecords removed copies the group has not read yet, the
first copy still there is further on: the translation is right about what the target holds,
says `exact`, and the group would skip the records in between without a word. A migration's
verification catches this when it runs; the cut-over can come hours later, so the evidence asks
the clusters again, just before a group is offered and again before it is moved.

The target removes a prefix of a partition only, so a group can skip removed copies only where
its translated offset is the partition's log start (and that is past 0). There the copy it lands
on names its source offset; the source is read for a record between the group's committed offset
and that one. Two reads per such partition, none elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.translation.bounds import partition_bounds
from mirrorflow.ops.verification.reader import PartitionReader
from mirrorflow.policy.provenance import ProvenanceError, read_provenance

TopicPartition = tuple[str, int]
Skipped = dict[tuple[str, str, int], tuple[int, int]]  # (group, source topic, partition) -> [first, end)


def skipped_records(
    flow: FlowConfig,
    clients: FlowClients,
    rows: Iterable[Mapping[str, Any]],
    copied_to: Mapping[TopicPartition, int],
) -> Skipped:
    """Per (group, source topic, partition) of `rows` (a failover dry run's, as dicts) the
    source offsets [first record, end) the group has not read and whose copies the target no
    longer holds; `copied_to` is where the copy of each source partition ends (exclusive), the
    end when the target holds no copy at all any more."""
    landing = [r for r in rows if r["target_offset"] is not None]
    bounds = partition_bounds(clients.target_admin, {(r["topic"], r["partition"]) for r in landing})
    at_start = [
        r for r in landing if 0 < bounds.get((r["topic"], r["partition"]), (0, 0))[0] == r["target_offset"]
    ]
    if not at_start:
        return {}
    source_bounds = partition_bounds(
        clients.source_admin, {(r["source_topic"], r["partition"]) for r in at_start}
    )
    target = PartitionReader(clients.target_consumer, f"target {flow.target}", "mirrorflow-translate")
    source = PartitionReader(
        clients.source_consumer, f"source {flow.source}", f"mirrorflow-{flow.source}->{flow.target}"
    )
    out: Skipped = {}
    landed: dict[tuple[str, str, int], int | None] = {}
    try:
        for row in at_start:
            remote, source_topic, partition = row["topic"], row["source_topic"], row["partition"]
            where = (remote, source_topic, partition)
            if where not in landed:
                low, high = bounds[(remote, partition)]
                landed[where] = _first_copy(flow, target, where, low, high)
            end = landed[where]
            if end is None:
                end = copied_to.get((source_topic, partition))
            start = max(row["source_offset"], source_bounds.get((source_topic, partition), (0, 0))[0])
            end = min(end or 0, source_bounds.get((source_topic, partition), (0, 0))[1])
            if start >= end:
                continue
            first = source.first(source_topic, partition, start, end)
            if first is not None:
                out[(row["group"], source_topic, partition)] = (first.offset(), end)
    finally:
        target.close()
        source.close()
    return out


def _first_copy(
    flow: FlowConfig, target: PartitionReader, where: tuple[str, str, int], low: int, high: int
) -> int | None:
    """The source offset of the flow's first copy at or after `low` in the remote partition
    (records other writers put there are passed over), or None when it holds none."""
    remote, source_topic, partition = where
    for message in target.peek(remote, partition, low, high):
        try:
            provenance = read_provenance(message.headers())
        except ProvenanceError:
            continue
        if (
            provenance is not None
            and provenance.source_topic == source_topic
            and provenance.source_partition == partition
            and provenance.path[-1] == flow.source
        ):
            return provenance.source_offset
    return None
