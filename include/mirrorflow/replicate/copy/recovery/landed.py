"""Whether a hanging progress transaction's records had landed, committed, on the target.

A broker that restarts can drop a transaction's markers in some of its partitions and keep them
in others ("Couldn't find leader endpoint ... likely deleted already and hence can be skipped"):
the transaction's records were committed in the remote partition while its progress record
stays open. Ending that open progress by an abort then loses progress that is true, and the next
run copies the same records again. Before a hanging progress record is aborted, its remote
partition is read, and the copy had committed when it ends, committed, with the copy of the
source offset the progress names, or with the copy of an earlier one and nothing after it on the
source that the copy would have written (commit markers of a transactional source, records
compacted away or skipped as loops). The last committed record's provenance says which source
offset it copies; without provenance it is compared with the source record at exactly that
offset (key, value, timestamp, headers), which cannot tell anything when that offset is a
commit marker or the remote topic stamps its own timestamps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, Message

from mirrorflow.kafka import UNKNOWN, KafkaCallError, reader
from mirrorflow.kafka_offsets import consumer_offsets
from mirrorflow.policy.provenance import ProvenanceError, is_loop, read_provenance
from mirrorflow.replicate.copy.recovery.decision import same_record
from mirrorflow.replicate.copy.recovery.tails import Candidate, last_committed, read_tails, scan_ranges

READ_TIMEOUT_S = 15.0
"""How long each batched read may take."""

Where = tuple[str, int]

# [(source topic, partition, source offset)] -> {(topic, partition): answer}: True, the remote
# partition holds, committed, everything the copy up to that offset wrote; False, it does not;
# None, it cannot be told (the source record or the remote one could not be read).
Landed = Callable[[Iterable[tuple[str, int, int]]], dict[Where, "bool | None"]]


def landed_check(
    source_consumer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    remote_topic: Callable[[str], str | None],
    *,
    source: str = "",
    target: str = "",
) -> Landed:
    """`remote_topic` names a source topic's remote topic; None where the caller does not know
    it (a slot writer knows its plan's topics), which answers "cannot be told". A source partition
    that no longer exists answers False: its progress copies nothing more, so ending it loses
    nothing. Every partition asked at once is read in batches: one metadata request per source
    topic, one ListOffsets per side, one consumer per read (a hanging transaction of a writer slot
    holds the progress of hundreds of partitions, and a consumer each took about 0.6 s apiece)."""

    def landed(asked: Iterable[tuple[str, int, int]]) -> dict[Where, bool | None]:
        offsets = {(topic, partition): offset for topic, partition, offset in asked}
        answers: dict[Where, bool | None] = {}
        present = _source_partitions(source_consumer, {topic for topic, _ in offsets})
        candidates: list[Candidate] = []
        for topic, partition in offsets:
            partitions = present.get(topic)
            remote = remote_topic(topic)
            if partitions is None or (partition in partitions and remote is None):
                answers[(topic, partition)] = None
            elif partition not in partitions:
                answers[(topic, partition)] = False
            else:
                candidates.append(Candidate(topic, partition, remote or "", 0, 0))
        tails = _last_committed(target_consumer, candidates)
        between: dict[Where, tuple[int, int]] = {}
        exactly: dict[Where, Message] = {}
        for candidate in candidates:
            where = (candidate.topic, candidate.partition)
            last = tails.get(where)
            if not isinstance(last, Message):
                answers[where] = None if last is None else False  # not read in time, or nothing committed
                continue
            try:
                stamp = read_provenance(last.headers())
            except ProvenanceError:
                stamp = None
            offset = offsets[where]
            if stamp is None or (stamp.source_topic, stamp.source_partition) != where:
                exactly[where] = last
            elif source and stamp.path[-1:] != (source,):
                answers[where] = None
            elif stamp.source_offset == offset:
                answers[where] = True
            elif stamp.source_offset > offset:
                # Copies past the open progress were committed since (by a later transaction):
                # writing this older progress again would move progress back, and the abort
                # loses nothing.
                answers[where] = False
            else:
                between[where] = (stamp.source_offset + 1, offset + 1)
        answers.update(_nothing_left_between(source_consumer, between, target))
        if exactly:
            # Without provenance: the source record at exactly the offset progress names.
            records, late = read_tails(
                source_consumer, {w: (offsets[w], offsets[w] + 1) for w in exactly}, timeout_s=READ_TIMEOUT_S
            )
            for where, last in exactly.items():
                record = records.get(where)
                if where in late or record is None or record.offset() != offsets[where]:
                    answers[where] = None  # gone, or not read in time
                else:
                    answers[where] = same_record(record, last)
        return answers

    return landed


def _source_partitions(config: Mapping[str, Any], topics: set[str]) -> dict[str, set[int] | None]:
    """Each topic's partitions on the source (an empty set for a topic it does not have); None
    for one whose metadata could not be read in time."""
    found: dict[str, set[int] | None] = {}
    if not topics:
        return found
    consumer = reader(config)
    try:
        for topic in sorted(topics):
            try:
                meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
            except KafkaException:
                found[topic] = None
                continue
            if meta is None or (meta.error is not None and meta.error.code() in UNKNOWN):
                found[topic] = set()
            elif meta.error is not None:
                found[topic] = None
            else:
                found[topic] = set(meta.partitions)
    finally:
        consumer.close()
    return found


def _last_committed(
    config: Mapping[str, Any], candidates: list[Candidate]
) -> dict[Where, Message | bool | None]:
    """Each candidate's remote partition's last committed record; False where it has none
    (nothing committed: no copy landed there); None where it cannot be read in time."""
    if not candidates:
        return {}
    remote = [(c.remote_topic, c.partition) for c in candidates]
    consumer = reader(config)
    try:
        low = consumer_offsets(consumer, remote, OFFSET_BEGINNING, timeout_s=READ_TIMEOUT_S)
        stable = consumer_offsets(consumer, remote, OFFSET_END, timeout_s=READ_TIMEOUT_S)
    except (KafkaException, KafkaCallError):
        return {(c.topic, c.partition): None for c in candidates}
    finally:
        consumer.close()
    bounded = [
        Candidate(
            c.topic,
            c.partition,
            c.remote_topic,
            low[(c.remote_topic, c.partition)],
            stable[(c.remote_topic, c.partition)],
        )
        for c in candidates
    ]
    try:
        found, unread = last_committed(config, bounded, timeout_s=READ_TIMEOUT_S)
    except (KafkaException, KafkaCallError):
        return {(c.topic, c.partition): None for c in candidates}
    answers: dict[Where, Message | bool | None] = {(c.topic, c.partition): False for c in candidates}
    answers.update(found)
    answers.update(dict.fromkeys(unread))
    return answers


def _nothing_left_between(
    config: Mapping[str, Any], ranges: Mapping[Where, tuple[int, int]], target: str
) -> dict[Where, bool | None]:
    """For each source partition whose remote partition's last committed record copies an offset
    before the one its open progress names: whether the source holds nothing in between (the
    `ranges`) that a copy would write (commit markers of a transactional source, records compacted
    away, loops of records that came from `target` are not written). None where the read did not
    reach the range's end in time. One consumer for all of them."""
    copyable: set[Where] = set()

    def take(where: Where, message: Message) -> bool:
        if target and is_loop(message.headers(), target):
            return False
        copyable.add(where)
        return True

    try:
        unread = scan_ranges(config, ranges, take, timeout_s=READ_TIMEOUT_S)
    except (KafkaException, KafkaCallError):
        unread = set(ranges) - copyable
    answers: dict[Where, bool | None] = {where: where not in copyable for where in ranges}
    answers.update(dict.fromkeys(unread))
    return answers
