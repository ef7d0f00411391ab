"""One translation pass of a flow X->Y: group offsets on X become offsets to commit on Y.

A pass reads each thing once, in this order, so every later read covers what an earlier one
refers to: the offset-syncs topic, the flow's progress, then the log start and last stable
offset of each partition it needs. Probes of the target and finished translations are cached
for the pass (probe.py), so many groups on one partition cost little more than one.

Two kinds of topics translate:
- forward: topics the flow replicates (`orders` on X is `X.orders` on Y), through the dense
  syncs: by arithmetic inside a run a sync states (translate.translate_by_runs), else confirmed
  by the provenance headers of this flow's records on Y (translate.translate_exact), or
  MM2's rule when the flow writes no provenance headers; where this flow's records on Y turn
  out not to be in source order (an at-least-once re-copy), from one read of the partition
  (translate.translate_scanned);
- backward: topics on X that came from Y through the reverse flow Y->X (`Y.orders` on X is
  `orders` on Y; MM2 names the checkpoint this way but has no syncs to translate it). The first
  record of Y->X at or after the group's offset names its offset on Y (translate.translate_back).
  This is what makes failback exact.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.probe import Origin, Prober
from mirrorflow.control.syncs import flow_sync_index
from mirrorflow.control.translate import (
    FlowRecord,
    PartitionView,
    ScanIndex,
    Status,
    Translation,
    translate_back,
    translate_by_runs,
    translate_exact,
    translate_mm2_copy,
    translate_mm2_rule,
    translate_scanned,
)
from mirrorflow.kafka import POLL_S, TIMEOUT_S, KafkaCallError, admin_client, list_offsets, reader, topic_ids
from mirrorflow.policy import checkpoint_topic, should_replicate_topic
from mirrorflow.replicate.progress import read_progress, read_progress_entries, split_incarnation

FORWARD = "forward"
BACKWARD = "backward"


@dataclass(frozen=True, slots=True)
class Route:
    """How a topic of X maps to Y: the kind of translation and the topic name on Y.

    For BACKWARD routes the topic on Y is also the one the reverse flow copied from.
    """

    kind: str
    target_topic: str


def partition_bounds(
    admin_config: Mapping[str, Any], parts: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, last stable offset) of each partition that exists; missing ones are left out."""
    wanted = sorted(set(parts))
    if not wanted:
        return {}
    admin = admin_client(admin_config)
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    existing = [
        (t, p) for t, p in wanted if t in topics and topics[t].error is None and p in topics[t].partitions
    ]
    earliest = list_offsets(admin, existing, OffsetSpec.earliest())
    stable = list_offsets(admin, existing, OffsetSpec.latest(), read_committed=True)
    return {tp: (earliest[tp], stable[tp]) for tp in existing}


# Records left for a group are counted by reading the partition when the stretch is short: the
# offset difference also counts transaction markers (a group that read everything of an
# exactly-once copy would show 1 left) and aborted records. Longer stretches, or more than the
# budget in one call, keep the offset difference.
RECORDS_LEFT_SPAN = 1_000
RECORDS_LEFT_BUDGET = 1_000_000


def records_left(
    consumer_config: Mapping[str, Any],
    positions: Iterable[tuple[str, int, int]],
    bounds: Mapping[tuple[str, int], tuple[int, int]],
    *,
    span_limit: int = RECORDS_LEFT_SPAN,
    budget: int = RECORDS_LEFT_BUDGET,
    timeout_s: float = TIMEOUT_S,
) -> dict[tuple[str, int, int], int]:
    """How many records a read_committed consumer at each (topic, partition, offset) reads before
    the partition's last stable offset in `bounds`: exact, markers and aborted records not
    counted. Positions at or past the end are 0 without a read. The rest is counted from one
    read per partition, from its lowest position, with one consumer for all partitions, for
    stretches of at most `span_limit` offsets and `budget` offsets in all; positions left out of
    the answer are the caller's to estimate (the offset difference)."""
    wanted: dict[tuple[str, int], set[int]] = {}
    for topic, partition, offset in positions:
        if (topic, partition) in bounds:
            wanted.setdefault((topic, partition), set()).add(offset)
    out: dict[tuple[str, int, int], int] = {}
    plans: dict[tuple[str, int], tuple[int, list[int]]] = {}
    spent = 0
    for tp in sorted(wanted):
        low, end = bounds[tp]
        pending = []
        for offset in sorted(wanted[tp]):
            if max(offset, low) >= end:
                out[(*tp, offset)] = 0
            else:
                pending.append(offset)
        if not pending:
            continue
        start = max(pending[0], low)
        if end - start > span_limit or spent + end - start > budget:
            continue
        spent += end - start
        plans[tp] = (start, pending)
    if not plans:
        return out
    # counts[tp][i]: records at offsets from pending[i] up to the next position.
    counts = {tp: [0] * len(pending) for tp, (_, pending) in plans.items()}
    open_parts = set(plans)
    consumer = reader(consumer_config)
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in plans.items()])
        deadline = time.monotonic() + timeout_s
        while open_parts and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=POLL_S):
                tp = (message.topic(), message.partition())
                if tp not in open_parts:
                    continue
                end = bounds[tp][1]
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and message.offset() >= end:
                        open_parts.discard(tp)
                    continue
                if message.offset() >= end:
                    open_parts.discard(tp)
                    continue
                pending = plans[tp][1]
                at = bisect_right(pending, message.offset()) - 1
                if at >= 0:
                    counts[tp][at] += 1
                if message.offset() + 1 >= end:
                    open_parts.discard(tp)
    finally:
        consumer.close()
    for tp, (_, pending) in plans.items():
        if tp in open_parts:
            continue  # not read to its end in time: left to the caller's estimate
        left = 0
        for i in range(len(pending) - 1, -1, -1):
            left += counts[tp][i]
            out[(*tp, pending[i])] = left
    return out


class Translator:
    """Translate group offsets of flow X->Y for one pass; close it (or use `with`) when done."""

    def __init__(
        self,
        flow: FlowConfig,
        clients: FlowClients,
        *,
        reverse: FlowConfig | None = None,
    ) -> None:
        self.flow = flow
        self.clients = clients
        self.reverse = reverse
        self.syncs = flow_sync_index(flow, clients)
        self.stored = read_progress_entries(clients.target_consumer, flow.offset_storage_topic, flow.source)
        self.progress = {where: entry.offset for where, entry in self.stored.items()}
        self._source_ids: dict[str, str] = {}
        self._reverse_progress: dict[tuple[str, int], int] | None = None
        self._target_prober = Prober(clients.target_consumer)
        self._source_prober = Prober(clients.source_consumer)
        self._target_bounds: dict[tuple[str, int], tuple[int, int]] = {}
        self._source_bounds: dict[tuple[str, int], tuple[int, int]] = {}
        self._prepared: set[tuple[str, int]] = set()
        self._cache: dict[tuple[str, int, int], Translation | None] = {}
        self._routes: dict[str, Route | None] = {}
        self._scans: dict[tuple[str, int], ScanIndex] = {}
        self._searched: dict[tuple[str, int], list[int]] = {}
        self.reasons: dict[tuple[str, int], str] = {}

    def close(self) -> None:
        self._target_prober.close()
        self._source_prober.close()

    def __enter__(self) -> Translator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def probes(self) -> int:
        """Fetches issued to answer probes (cache misses)."""
        return self._target_prober.fetches + self._source_prober.fetches

    def route(self, topic: str) -> Route | None:
        if topic not in self._routes:
            self._routes[topic] = self._route(topic)
        return self._routes[topic]

    def _route(self, topic: str) -> Route | None:
        flow = self.flow
        if should_replicate_topic(flow, topic):
            remote = flow.policy.format_remote_topic(flow.source, topic)
            return Route(FORWARD, remote)
        if self.reverse is None or flow.policy.topic_source(topic) != flow.target:
            return None
        upstream = flow.policy.upstream_topic(topic)
        if upstream is None or upstream != checkpoint_topic(flow, topic):
            return None
        return Route(BACKWARD, upstream)

    def prepare(self, parts: Iterable[tuple[str, int]]) -> None:
        """Measure, in one batch per cluster, the partitions the coming translations need."""
        forward, backward = [], []
        for topic, partition in set(parts) - self._prepared:
            self._prepared.add((topic, partition))
            route = self.route(topic)
            if route is None:
                continue
            if route.kind == FORWARD:
                forward.append((route.target_topic, partition))
            else:
                backward.append((topic, partition))
        if forward:
            self._target_bounds.update(partition_bounds(self.clients.target_admin, forward))
            incarnations = {
                t for t, p in set(parts) if (t, p) in self.stored and self.stored[(t, p)].incarnation
            }
            self._source_ids.update(
                topic_ids(admin_client(self.clients.source_admin), incarnations - set(self._source_ids))
            )
        if backward:
            self._source_bounds.update(partition_bounds(self.clients.source_admin, backward))

    def warm(self, wanted: Iterable[tuple[str, int, int]]) -> None:
        """Read ahead, in one batched read, the target records the coming translations of
        these (topic, partition, offset) will probe first: the record the nearest offset-sync
        points to (which says who copied the partition, see _copied_by_mm2), where the exact
        search starts too. Partitions already read, and translations that need no probe (a sync
        names the offset, or a run the copy stated holds it), cost nothing."""
        probes = []
        for topic, partition, offset in wanted:
            route = self.route(topic)
            if route is None or route.kind != FORWARD or not self.flow.provenance_headers_enabled:
                continue
            bounds = self._target_bounds.get((route.target_topic, partition))
            syncs = self.syncs.run(topic, partition)
            if bounds is None or not syncs.ups:
                continue
            if syncs.downs[-1] < bounds[1] and translate_by_runs(
                offset, PartitionView(syncs, None, bounds[0], bounds[1])
            ):
                continue  # the copy's stated run answers it without a read
            down = syncs.downs[max(0, bisect_right(syncs.ups, offset) - 1)]
            if bounds[0] <= down < bounds[1]:
                origin = Origin(self.flow.source, topic, partition)
                probes.append((route.target_topic, partition, origin, down, bounds[1]))
        if probes:
            self._target_prober.warm(probes)

    def translate(self, topic: str, partition: int, offset: int) -> Translation | None:
        """Offset on Y for a group at `offset` of `topic`-`partition` on X; None (see `reasons`) if unknown."""
        key = (topic, partition, offset)
        if key in self._cache:
            return self._cache[key]
        self.prepare([(topic, partition)])
        route = self.route(topic)
        try:
            if route is None:
                self.reasons[(topic, partition)] = (
                    f"{topic} is not replicated by {self.flow.name} (topic filter, internal topic or a cycle)"
                )
                result = None
            elif route.kind == FORWARD:
                result = self._forward(topic, partition, route.target_topic, offset)
            else:
                result = self._backward(topic, partition, route.target_topic, offset)
        except KafkaException as exc:
            raise KafkaCallError(f"translating {topic}-{partition} at {offset}: {exc}") from exc
        self._cache[key] = result
        return result

    def _forward(self, topic: str, partition: int, remote: str, offset: int) -> Translation | None:
        bounds = self._target_bounds.get((remote, partition))
        if bounds is None:
            self.reasons[(topic, partition)] = f"{self.flow.target} has no partition {remote}-{partition} yet"
            return None
        stored = self.stored.get((topic, partition))
        start, end = bounds
        if stored is not None and stored.incarnation:
            copied_from = split_incarnation(stored.incarnation)[0]
            now = self._source_ids.get(topic, "")
            if copied_from and now and copied_from != now:
                self.reasons[(topic, partition)] = (
                    f"{topic} on {self.flow.source} was deleted and created again after {self.flow.name} last "
                    "copied it; its offsets belong to the new topic, so they are translated once a "
                    "replicate run has copied it"
                )
                return None
            # Records below the floor came from an earlier incarnation of the source topic.
            start = max(start, stored.floor)
        syncs = self.syncs.run(topic, partition)
        trimmed = bool(syncs.downs) and syncs.downs[-1] >= end
        if trimmed:
            # Syncs past the partition's end (the remote topic was deleted and created again, or
            # truncated, after they were written) point at nothing this flow copied: never used.
            syncs = syncs[: bisect_left(syncs.downs, end)]
        view = PartitionView(syncs, self.progress.get((topic, partition)), start, end)
        origin = Origin(self.flow.source, topic, partition)
        if not self.flow.provenance_headers_enabled:
            result = translate_mm2_rule(offset, view)
        elif not trimmed and (proven := self._by_runs(topic, partition, remote, origin, offset, view)):
            result = proven
        elif self._copied_by_mm2(remote, partition, origin, view, offset):
            result = translate_mm2_copy(offset, view)
            if result is None:
                self.reasons[(topic, partition)] = (
                    f"MirrorMaker 2 copied {topic}-{partition} and no offset-sync lies at or below offset "
                    f"{offset}: neither MM2 nor mirrorflow can place the group on {self.flow.target}"
                )
                return None
        else:
            result = self._by_provenance(topic, partition, remote, origin, offset, view)
        if result is None:
            self.reasons[(topic, partition)] = (
                f"nothing of {topic}-{partition} has been replicated to {self.flow.target} by {self.flow.name}"
                + ("" if len(view.syncs) else " (and it has no offset-syncs)")
            )
        return result

    def _in_order(self, topic: str, partition: int, remote: str, origin: Origin, start: int) -> bool:
        """Whether nothing known says this flow's records in the partition (from `start`) are out
        of source order: no re-copy in the syncs, no scan, no inversion seen by a probe."""
        recopied = self.syncs.recopied_at(topic, partition)
        return (
            (topic, partition) not in self._scans
            and (recopied is None or recopied <= start)
            and self._target_prober.inverted_at(remote, partition, origin) < start
        )

    def _by_runs(
        self, topic: str, partition: int, remote: str, origin: Origin, offset: int, view: PartitionView
    ) -> Translation | None:
        """The answer the copy's stated runs prove (translate.translate_by_runs), with no read of
        the target; like the exact search's, dropped by `stale` if a probe of the same pass
        then finds the partition's records out of order."""
        if not self._in_order(topic, partition, remote, origin, view.start):
            return None
        result = translate_by_runs(offset, view)
        if result is not None:
            self._searched.setdefault((topic, partition), []).append(offset)
        return result

    def _by_provenance(
        self, topic: str, partition: int, remote: str, origin: Origin, offset: int, view: PartitionView
    ) -> Translation | None:
        """The exact search, unless this partition's records are known, or turn out, not to be in
        source order: then the answer comes from one sequential read of the partition."""
        key = (topic, partition)
        recopied = self.syncs.recopied_at(topic, partition)
        if key not in self._scans and (recopied is None or recopied <= view.start):
            prober = self._target_prober

            def probe(at: int, limit: int) -> FlowRecord | None:
                return prober.first(remote, partition, origin, at, limit, end=view.end)

            result = translate_exact(offset, view, probe)
            if prober.inverted_at(remote, partition, origin) < view.start:
                self._searched.setdefault(key, []).append(offset)
                return result
        if key not in self._scans:
            records = self._target_prober.scan(remote, partition, origin, view.start, view.end)
            self._scans[key] = ScanIndex.of(records)
        return translate_scanned(offset, self._scans[key], view.progress)

    def stale(self) -> set[tuple[str, int]]:
        """Partitions translated by the exact search before a later translation of the same pass
        found their records out of order; their cached answers are dropped, so translating
        those offsets again gives the scanned answer."""
        found = {key for key in self._searched if key in self._scans}
        for topic, partition in found:
            for offset in self._searched.pop((topic, partition)):
                self._cache.pop((topic, partition, offset), None)
        return found

    def _copied_by_mm2(
        self, remote: str, partition: int, origin: Origin, view: PartitionView, offset: int
    ) -> bool:
        """Whether the records around `offset` were copied without provenance headers (by MirrorMaker 2,
        before or beside mirrorflow): the record that the nearest offset-sync (the last at or below
        `offset`, else the first above it) points to is not stamped by this flow."""
        ups, downs = view.syncs.ups, view.syncs.downs
        if not ups:
            return False
        nearest = max(0, bisect_right(ups, offset) - 1)
        if downs[nearest] < view.start:
            return False  # deleted from the target; the exact search handles what is left
        return self._target_prober.copied_by(remote, partition, origin, downs[nearest], view.end) is False

    def _backward(self, topic: str, partition: int, upstream: str, offset: int) -> Translation | None:
        reverse = self.reverse
        if reverse is None:
            return None
        bounds = self._source_bounds.get((topic, partition))
        if bounds is None:
            self.reasons[(topic, partition)] = f"{self.flow.source} has no partition {topic}-{partition}"
            return None
        end = bounds[1]
        origin = Origin(self.flow.target, upstream, partition)
        prober = self._source_prober

        def first_from(at: int) -> FlowRecord | None:
            return prober.first(topic, partition, origin, at, end) if at < end else None

        progress = self._reverse_progress_of(reverse, upstream, partition)
        upstream_offset = translate_back(offset, first_from, progress)
        if upstream_offset is None:
            self.reasons[(topic, partition)] = (
                f"{topic}-{partition} holds no record copied by {reverse.name} with provenance "
                f"headers at or after {offset}, and {reverse.name} has no progress for {upstream}-{partition}"
            )
            return None
        return Translation(offset, upstream_offset, Status.EXACT)

    def _reverse_progress_of(self, reverse: FlowConfig, topic: str, partition: int) -> int | None:
        if self._reverse_progress is None:
            self._reverse_progress = read_progress(
                self.clients.source_consumer, reverse.offset_storage_topic, reverse.source
            )
        return self._reverse_progress.get((topic, partition))
