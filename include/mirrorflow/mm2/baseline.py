"""MM2's own offset-sync emission, offset translation and checkpoint rule: "MM2 today".

This is the baseline that benchmarks hold mirrorflow's exact translation against, so it
reproduces MM2's behaviour rule for rule, including its losses. It is not mirrorflow's
translation. Reference: apache/kafka trunk at 1eb7644 (2024-10-25, the 4.0 line), which
behaves as Kafka 3.7.1+, 3.8 and 3.9 do:

- OffsetSyncWriter / MirrorSourceTask.commitRecord and commit: the 3.5+ lag rule
  (KAFKA-14797) and delayed syncs promoted on every task commit (KAFKA-15906, 3.7.0).
- OffsetSyncStore: 64 exponentially spaced syncs per partition repaired by invariants B and C
  (KAFKA-14666/KAFKA-15202, 3.6.0), the "+1 rule" translation (KAFKA-12468, 3.5.0), and the
  "only keep the last sync while reading the backlog" mode MirrorCheckpointTask asks for when
  it could not read the checkpoints topic (KAFKA-15905, 3.7.1/3.8.0).
- MirrorCheckpointTask.checkpointIsMoreRecent: which translated checkpoints are emitted.

Offsets are Java longs; where MM2's arithmetic can overflow (the store's bounds), the same
64-bit wrap-around is applied so results match Java on every input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from mirrorflow.mm2.formats import Checkpoint, OffsetSync

DEFAULT_OFFSET_LAG_MAX = 100
MAX_OUTSTANDING_OFFSET_SYNCS = 10
SYNCS_PER_PARTITION = 64

TopicPartition = tuple[str, int]


def _wrap64(value: int) -> int:
    """Wrap to Java's long."""
    return ((value + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


@dataclass
class _PartitionState:
    """OffsetSyncWriter.PartitionState: what decides whether a replicated record gets a sync."""

    offset_lag_max: int
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1
    should_sync: bool = False

    def update(self, upstream: int, downstream: int) -> bool:
        first_this_lifetime = self.last_sync_downstream == -1
        # Translation claims at most one offset past a sync, hence the + 1.
        translation_too_stale = downstream - (self.last_sync_downstream + 1) >= self.offset_lag_max
        skipped_upstream = upstream - self.previous_upstream != 1
        truncated_downstream = downstream < self.previous_downstream
        if first_this_lifetime or translation_too_stale or skipped_upstream or truncated_downstream:
            self.last_sync_downstream = downstream
            self.should_sync = True
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        return self.should_sync


class Mm2OffsetSyncWriter:
    """The offset syncs one MirrorSourceTask writes, fed with its acknowledged records.

    Per partition, a record gets an immediate ("pending") sync if it is the first this task
    lifetime, if translation from the last sync would be `offset.lag.max` or more behind, if
    the upstream offset did not advance by exactly one (compaction, transaction markers,
    aborted records, a restart elsewhere), or if the downstream offset went backwards.
    Otherwise it becomes the partition's "delayed" sync, which only `commit()` (every
    `offset.flush.interval.ms`, 60 s by default) promotes to pending. Only the latest pending
    and latest delayed sync per partition are kept, and pending syncs are sent while fewer
    than 10 are in flight.

    `deliver_immediately=True` models a producer whose acks for the syncs sent by one call
    arrive before the next call (what a healthy cluster does); one call still sends at most
    `max_outstanding` syncs. With False the caller reports acks with `delivered()`.
    """

    def __init__(
        self,
        offset_lag_max: int = DEFAULT_OFFSET_LAG_MAX,
        *,
        deliver_immediately: bool = True,
        max_outstanding: int = MAX_OUTSTANDING_OFFSET_SYNCS,
    ) -> None:
        if not isinstance(offset_lag_max, int) or isinstance(offset_lag_max, bool):
            raise TypeError(f"offset_lag_max must be an int (offset.lag.max), got {offset_lag_max!r}")
        if not isinstance(max_outstanding, int) or max_outstanding < 1:
            raise ValueError(f"max_outstanding must be a positive int, got {max_outstanding!r}")
        self.offset_lag_max = offset_lag_max
        self._deliver_immediately = deliver_immediately
        self._max_outstanding = max_outstanding
        self._outstanding = 0
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._pending: dict[TopicPartition, OffsetSync] = {}
        self._delayed: dict[TopicPartition, OffsetSync] = {}

    @property
    def pending(self) -> Mapping[TopicPartition, OffsetSync]:
        """Syncs due now, waiting only for an in-flight slot, in Java's LinkedHashMap order."""
        return MappingProxyType(self._pending)

    @property
    def delayed(self) -> Mapping[TopicPartition, OffsetSync]:
        """Syncs that wait for the next `commit()`."""
        return MappingProxyType(self._delayed)

    @property
    def outstanding(self) -> int:
        """Syncs sent whose producer acknowledgement has not arrived."""
        return self._outstanding

    def commit_record(
        self, topic: str, partition: int, upstream_offset: int, downstream_offset: int
    ) -> list[OffsetSync]:
        """One record acknowledged by the target; returns the syncs written as a result.

        `topic`/`partition` name the *source* partition (offset-syncs are keyed upstream);
        the record landed at `downstream_offset` of the same partition number on the target.
        """
        key = (topic, partition)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _PartitionState(self.offset_lag_max)
        sync = OffsetSync(topic, partition, upstream_offset, downstream_offset)
        if state.update(upstream_offset, downstream_offset):
            self._delayed.pop(key, None)
            self._pending[key] = sync
            state.should_sync = False
        else:
            self._delayed[key] = sync
        return self._fire_pending()

    def commit(self) -> list[OffsetSync]:
        """The task's periodic offset commit: promote delayed syncs and send what is pending."""
        self._pending.update(self._delayed)
        self._delayed.clear()
        return self._fire_pending()

    def delivered(self, count: int = 1) -> None:
        """Producer acks for `count` sent syncs.

        Like MM2's callback this only frees in-flight slots: waiting pending syncs go out on
        the next `commit_record` or `commit`, by which time a newer sync may have replaced them.
        """
        if count < 0 or count > self._outstanding:
            raise ValueError(f"{count} acks reported but only {self._outstanding} syncs are in flight")
        self._outstanding -= count

    def _fire_pending(self) -> list[OffsetSync]:
        sent: list[OffsetSync] = []
        while self._pending and self._outstanding < self._max_outstanding:
            key = next(iter(self._pending))
            sent.append(self._pending.pop(key))
            self._outstanding += 1
        if self._deliver_immediately:
            self._outstanding = 0
        return sent


def _invariant_b(x: OffsetSync, y: OffsetSync, i: int, j: int) -> bool:
    """x (at slot i) is recent enough relative to y (at slot j > i)."""
    bound = _wrap64(y.upstream_offset + (1 << j) - (1 << i))
    return x is y or bound < 0 or x.upstream_offset <= bound


def _invariant_c(x: OffsetSync, y: OffsetSync, i: int) -> bool:
    """x (at slot i) is far enough ahead of y (at a later slot)."""
    bound = _wrap64(y.upstream_offset + (1 << max(i - 2, 0)))
    return x is y or (bound >= 0 and x.upstream_offset >= bound)


class Mm2OffsetSyncStore:
    """MirrorCheckpointTask's OffsetSyncStore: sparse syncs per partition and MM2's translation.

    Slot 0 holds the newest sync and later slots exponentially older ones, so translation is
    precise near the end of a partition and halves in precision with distance. Syncs are
    compared by identity, as Java compares them with `==`: two syncs with equal offsets that
    arrived separately are different entries.

    Lifecycle as in MM2: feed the offset-syncs backlog with `add`, then call
    `finish_initial_read()`; until then nothing translates. `initialization_must_read_to_end`
    is what MirrorCheckpointTask passes when it could *not* read its checkpoints topic: while
    the backlog is read, each sync then replaces the whole array, so only the last one
    survives the initial read.
    """

    def __init__(self, *, initialization_must_read_to_end: bool = True) -> None:
        self.initialization_must_read_to_end = initialization_must_read_to_end
        self._read_to_end = False
        self._syncs: dict[TopicPartition, tuple[OffsetSync, ...]] = {}

    @property
    def read_to_end(self) -> bool:
        return self._read_to_end

    def finish_initial_read(self) -> None:
        """The initial read-to-end of the offset-syncs topic is complete."""
        self._read_to_end = True

    def syncs(self, topic: str, partition: int) -> tuple[OffsetSync, ...]:
        """The 64 slots of a partition (newest first); empty if no sync was seen."""
        return self._syncs.get((topic, partition), ())

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        original = self._syncs.get(key)
        if original is None:
            self._syncs[key] = (sync,) * SYNCS_PER_PARTITION
            return
        updated = list(original)
        self._update(updated, original, sync)
        self._syncs[key] = tuple(updated)

    def _update(self, syncs: list[OffsetSync], original: tuple[OffsetSync, ...], sync: OffsetSync) -> None:
        only_load_last = not self._read_to_end and self.initialization_must_read_to_end
        upstream_rewind = sync.upstream_offset < syncs[0].upstream_offset
        if only_load_last or upstream_rewind:
            syncs[:] = [sync] * SYNCS_PER_PARTITION
            return
        replacement = sync
        replacement_index = 0
        syncs[0] = replacement
        for current in range(1, SYNCS_PER_PARTITION):
            previous = current - 1
            while True:
                old = original[replacement_index]
                is_recent = _invariant_b(syncs[previous], old, previous, current)
                separated_from_previous = _invariant_c(syncs[previous], old, previous)
                following = current + 1
                separated_from_next = following >= SYNCS_PER_PARTITION or _invariant_c(
                    old, syncs[following], current
                )
                duplicate = (
                    replacement_index + 1 < SYNCS_PER_PARTITION and old is original[replacement_index + 1]
                )
                promote = is_recent and separated_from_previous and separated_from_next
                if promote:
                    replacement = old
                skip = duplicate or not separated_from_previous
                if promote or skip:
                    replacement_index += 1
                if not (replacement_index < current and skip):
                    break
            if _invariant_b(syncs[previous], syncs[current], previous, current):
                break
            syncs[current] = replacement

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """MM2's downstream offset for a group committed at `upstream_offset`.

        None: no checkpoint (initial read unfinished, or no sync for the partition). -1: the
        group is behind the oldest usable sync, so MM2 drops it. Otherwise the chosen sync's
        downstream offset, plus one if the group is past it (the "+1 rule": records between
        two syncs may have been dropped upstream, so MM2 never claims more than one).
        """
        if not self._read_to_end:
            return None
        syncs = self._syncs.get((topic, partition))
        if syncs is None:
            return None
        chosen = next((s for s in syncs if s.upstream_offset <= upstream_offset), syncs[-1])
        if chosen.upstream_offset > upstream_offset:
            return -1
        step = 0 if upstream_offset == chosen.upstream_offset else 1
        return _wrap64(chosen.downstream_offset + step)


def mm2_checkpoint_should_emit(previous: Checkpoint | None, new: Checkpoint) -> bool:
    """Whether MM2 emits `new`, given the last checkpoint it holds for that group and partition.

    Emitted when there is none, when the group rewound upstream, or when the downstream
    offset advanced; a downstream rewind or a repeat is never emitted.
    """
    if previous is None:
        return True
    if (previous.group, previous.topic, previous.partition) != (new.group, new.topic, new.partition):
        raise ValueError(
            f"previous checkpoint is for {previous.group!r} {previous.topic}-{previous.partition}, "
            f"new one for {new.group!r} {new.topic}-{new.partition}: pass the previous checkpoint "
            "of the same group and partition"
        )
    if new.upstream_offset < previous.upstream_offset:
        return True
    return new.downstream_offset > previous.downstream_offset
