"""One translation pass of a flow X->Y: what it answers for each partition a group committed on.

A pass reads each thing once, in this order, so every later read covers what an earlier one
refers to: the offset-syncs topic, the flow's progress, then the log start and last stable
offset of each partition it needs, then the IDs of the topics they belong to (so a topic
recreated in between is seen as recreated). Probes of the target and finished translations are
cached for the pass (probe.py), so many groups on one partition cost little more than one.

Two kinds of topics translate (routes.py):
- forward: topics the flow replicates (`orders` on X is `X.orders` on Y), through the dense
  syncs of the topics as they are now (incarnations.py): by arithmetic inside a run a sync
  states (rule.translate_by_runs), else confirmed by the provenance headers of this flow's
  records on Y (rule.translate_exact), or MM2's rule when the flow writes no provenance headers;
  where this flow's records on Y turn out not to be in source order (an at-least-once re-copy),
  from one read of the partition (rule.translate_scanned);
- backward: topics on X that came from Y through the reverse flow Y->X (`Y.orders` on X is
  `orders` on Y; MM2 names the checkpoint this way but has no syncs to translate it). The first
  record of Y->X at or after the group's offset names its offset on Y (rule.translate_back).
  This is what makes failback exact.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.translation.bounds import measure_bounds
from mirrorflow.control.translation.coverage import Origin
from mirrorflow.control.translation.incarnations import Recreated, current_syncs
from mirrorflow.control.translation.probe import Prober
from mirrorflow.control.translation.routes import FORWARD, Route, route_of
from mirrorflow.control.translation.rule import (
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
from mirrorflow.control.translation.sync_index import flow_sync_index
from mirrorflow.kafka import KafkaCallError, admin_client, topic_ids
from mirrorflow.replicate.progress import read_progress, read_progress_entries, split_incarnation


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
        self._remote_ids: dict[str, str] = {}
        self._asked_ids: set[tuple[str, str]] = set()
        self._admins: dict[str, AdminClient] = {}
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
        self._views: dict[tuple[str, int], tuple[PartitionView, bool] | None] = {}
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
            self._routes[topic] = route_of(self.flow, topic, reverse=self.reverse)
        return self._routes[topic]

    def prepare(self, parts: Iterable[tuple[str, int]]) -> None:
        """Measure, in one batch per cluster, the partitions the coming translations need."""
        forward, backward = [], []
        for topic, partition in set(parts) - self._prepared:
            self._prepared.add((topic, partition))
            route = self.route(topic)
            if route is None:
                continue
            if route.kind == FORWARD:
                forward.append((topic, route.target_topic, partition))
            else:
                backward.append((topic, partition))
        if forward:
            self._target_bounds.update(measure_bounds(self._admin("target"), [(r, p) for _, r, p in forward]))
            # After the bounds: a topic recreated since shows a new ID, never old bounds under it.
            self._source_ids.update(self._topic_ids("source", {t for t, _, _ in forward}))
            self._remote_ids.update(self._topic_ids("target", {r for _, r, _ in forward}))
        if backward:
            self._source_bounds.update(measure_bounds(self._admin("source"), backward))

    def _topic_ids(self, side: str, topics: set[str]) -> dict[str, str]:
        """IDs of the topics not asked for yet this pass, in one call to the `side` cluster."""
        new = {t for t in topics if (side, t) not in self._asked_ids}
        self._asked_ids.update((side, t) for t in new)
        if not new:
            return {}
        try:
            return topic_ids(self._admin(side), new, answered=True)
        except (TimeoutError, KafkaException):
            return {}  # unanswered: their partitions are not translated this pass (_measure)

    def _admin(self, side: str) -> AdminClient:
        """One admin client per cluster for the pass's batched calls."""
        if side not in self._admins:
            self._admins[side] = admin_client(self.clients.admin(side))
        return self._admins[side]

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
            measured = self._view(topic, partition, route.target_topic)
            if measured is None or not measured[0].syncs:
                continue
            view, trimmed = measured
            if not trimmed and translate_by_runs(offset, view):
                continue  # the copy's stated run answers it without a read
            down = view.syncs.downs[max(0, bisect_right(view.syncs.ups, offset) - 1)]
            if view.start <= down < view.end:
                origin = Origin(self.flow.source, topic, partition)
                probes.append((route.target_topic, partition, origin, down, view.end))
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

    def _view(self, topic: str, partition: int, remote: str) -> tuple[PartitionView, bool] | None:
        """What the pass knows of a forward partition before probing it, and whether syncs past
        its end were left out; None (the reason in `reasons`) when it cannot be translated now."""
        key = (topic, partition)
        if key not in self._views:
            self._views[key] = self._measure(topic, partition, remote)
        return self._views[key]

    def _measure(self, topic: str, partition: int, remote: str) -> tuple[PartitionView, bool] | None:
        key = (topic, partition)
        bounds = self._target_bounds.get((remote, partition))
        if bounds is None:
            self.reasons[key] = f"{self.flow.target} has no partition {remote}-{partition} yet"
            return None
        stored = self.stored.get(key)
        source_id, remote_id = self._source_ids.get(topic, ""), self._remote_ids.get(remote, "")
        copied_source, copied_remote, _ = split_incarnation(stored.incarnation if stored else "")
        if (copied_source and not source_id) or (copied_remote and not remote_id):
            # Fails closed: a topic missing now, or ids the cluster did not give, could hide a
            # topic created again, whose offsets the old topic's syncs would misplace.
            side = (
                f"{topic} on {self.flow.source}"
                if copied_source and not source_id
                else f"{remote} on {self.flow.target}"
            )
            self.reasons[key] = (
                f"the topic id of {side} could not be read now (the topic is missing, or the cluster did "
                f"not answer), so whether it is still the topic {self.flow.name} copied cannot be told; "
                "translated again by the next pass"
            )
            return None
        syncs = current_syncs(self.syncs, topic, partition, source_id, remote_id, stored)
        if syncs == Recreated.SOURCE:
            self.reasons[key] = (
                f"{topic} on {self.flow.source} was deleted and created again after {self.flow.name} last "
                "copied it; its offsets belong to the new topic, so they are translated once a "
                "replicate run has copied it"
            )
            return None
        if syncs == Recreated.REMOTE:
            self.reasons[key] = (
                f"{remote} on {self.flow.target} was deleted and created again (a new topic ID) after "
                f"{self.flow.name} last copied {topic}-{partition} into it; its offset-syncs name the old "
                "topic, so offsets are translated once a replicate run has copied into the new one"
            )
            return None
        start, end = bounds
        if stored is not None:
            # Records below the floor came from an earlier incarnation of the source topic.
            start = max(start, stored.floor)
        trimmed = bool(syncs.downs) and syncs.downs[-1] >= end
        if trimmed:
            # Syncs past the partition's end (the remote topic was truncated, or recreated with
            # syncs that name no incarnation) point at nothing this flow copied: never used.
            syncs = syncs[: bisect_left(syncs.downs, end)]
        return PartitionView(syncs, self.progress.get(key), start, end), trimmed

    def _forward(self, topic: str, partition: int, remote: str, offset: int) -> Translation | None:
        measured = self._view(topic, partition, remote)
        if measured is None:
            return None
        view, trimmed = measured
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

    def _in_order(self, topic: str, partition: int, remote: str, origin: Origin, view: PartitionView) -> bool:
        """Whether nothing known says this flow's records in the partition (from the view's
        start) are out of source order: no re-copy in the syncs, no scan, no inversion seen by a
        probe."""
        recopied = view.syncs.recopied
        return (
            (topic, partition) not in self._scans
            and (recopied is None or recopied <= view.start)
            and self._target_prober.inverted_at(remote, partition, origin) < view.start
        )

    def _by_runs(
        self, topic: str, partition: int, remote: str, origin: Origin, offset: int, view: PartitionView
    ) -> Translation | None:
        """The answer the copy's stated runs prove (rule.translate_by_runs), with no read of
        the target; like the exact search's, dropped by `stale` if a probe of the same pass
        then finds the partition's records out of order."""
        if not self._in_order(topic, partition, remote, origin, view):
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
        recopied = view.syncs.recopied
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
