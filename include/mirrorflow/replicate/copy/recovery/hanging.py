"""Transactions left open on the target that their producer can no longer end ("hanging").

Kafka ends a dead writer's transaction by writing an abort marker into every partition it wrote.
A broker that restarts can drop those markers (its coordinator finds no leader for a partition in
the moment after the restart and skips it) while recording the abort as done. The partition then
holds the dead transaction's records with no marker: read_committed readers stop in front of them
for good, and, since Kafka before transactions v2 (KIP-890, which librdkafka does not speak) ends
whatever a producer id has open in a partition with its next marker, the next commit of the same
transactional.id there commits the dead records too: the records it copies again are then on the
target twice. A dropped marker in the progress topic blocks every later read of progress.

mirrorflow never writes on top of one of its own:

- Before a slot writer writes a remote partition (which only this flow's copies write, unless
  local clients write an identity-named one), it asks for the partition's last stable offset and
  high watermark; after its init_transactions no transaction of the slot can still be open there,
  so one that is open is swept: the writer begins a transaction, writes a sweep record into the
  partition and aborts. Its abort marker ends whatever its producer id holds open there (Kafka
  ends a producer's transaction in a partition with its next marker, whatever epoch wrote it),
  and the last stable offset moves on.
- A progress partition is shared by the slots of a flow, so an open transaction there is usually
  a live one of another slot; a settle waits for it. One still open after the writers'
  transaction.timeout.ms (the broker aborts live ones then) is hanging: the first record it holds
  says which partition's progress it is, hence which slot's writer (or older writer) wrote it, and
  that writer's id sweeps it.
- A writer of an older kind still running is fenced, which aborts its transaction.
- What no id of this flow can end (another producer's, or markers lost twice) stops the copy of
  the partitions concerned with one message naming them, where the open transaction starts and
  the Kafka command that ends it: records written behind it would stay invisible to read_committed
  readers anyway.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer

from mirrorflow.kafka import ClusterWatch, KafkaCallError
from mirrorflow.kafka_offsets import consumer_offsets
from mirrorflow.mm2.connect_offsets import SourceOffsetKey
from mirrorflow.replicate.copy.calls import abort, flush_all
from mirrorflow.replicate.copy.counters import stats
from mirrorflow.replicate.copy.job import CopyError
from mirrorflow.replicate.copy.recovery.decision import SWEEP_CONNECTOR, SWEEP_HEADER, sweep_key_topic
from mirrorflow.replicate.plan import COPY_SLOTS

SWEEP_KEY = b"mirrorflow.sweep"
CLOSE_WAIT_S = 10.0
"""How long a sweep's abort marker may take to show in the last stable offset."""

log = logging.getLogger("mirrorflow.replicate.copy")

Where = tuple[str, int]


class HangingTransaction(CopyError):
    """A transaction is open in a partition the copy must write, and no writer of the flow can
    end it; `where` are the partitions concerned."""

    def __init__(self, message: str, where: Iterable[Where]) -> None:
        super().__init__(message)
        self.where = set(where)


def end_offsets(
    ends: tuple[Consumer, Consumer], partitions: Iterable[Where], timeout_s: float
) -> dict[Where, tuple[int, int]]:
    """(last stable offset, high watermark) of each partition, in one batched call per isolation
    level: where they differ, a transaction is open from the last stable offset on."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    committed, uncommitted = ends
    try:
        stable = consumer_offsets(committed, wanted, OFFSET_END, timeout_s=timeout_s)
        high = consumer_offsets(uncommitted, wanted, OFFSET_END, timeout_s=timeout_s)
    except KafkaCallError as exc:
        raise CopyError(f"cannot tell whether transactions are open on the target: {exc}") from exc
    return {where: (stable[where], high[where]) for where in wanted}


def sweep(
    producer: Producer, records: Mapping[Where, tuple[bytes, bytes | None]], watch: ClusterWatch
) -> None:
    """One transaction that writes a record (key, value) into each partition and aborts: its
    abort marker ends anything the producer's id holds open there."""
    producer.begin_transaction()
    for (topic, partition), (key, value) in records.items():
        producer.produce(topic, value, key, partition, headers=[(SWEEP_HEADER, b"")])
    flush_all(producer, watch, "sweep records")
    abort(producer, watch)
    stats.add("transactions_swept")


def await_closed(
    ends: tuple[Consumer, Consumer], stuck: Mapping[Where, int], timeout_s: float = CLOSE_WAIT_S
) -> dict[Where, int]:
    """Wait until the transaction open at each stuck offset has ended (the last stable offset
    moved past it); what is still open after `timeout_s`."""
    left = dict(stuck)
    deadline = time.monotonic() + timeout_s
    while left:
        try:
            stable = consumer_offsets(ends[0], left, OFFSET_END, timeout_s=timeout_s)
        except KafkaCallError:
            stable = {}
        left = {where: lso for where, lso in left.items() if stable.get(where, lso) <= lso}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return left


def data_sweep_records(stuck: Iterable[Where]) -> dict[Where, tuple[bytes, bytes | None]]:
    return {where: (SWEEP_KEY, None) for where in stuck}


def progress_sweep_records(
    source: str, slot: int, stuck: Iterable[Where], slots: int = COPY_SLOTS
) -> dict[Where, tuple[bytes, bytes | None]]:
    """Sweep records for progress partitions: keyed as a Connect offset of a connector nobody
    runs, with no value, so that no reader of the offsets topic (mirrorflow's, MM2's, Connect's)
    takes one for progress even when it reads uncommitted records. The key names the slot and its
    count (decision.sweep_key_topic): a sweep left open names the id that can end it."""
    key = SourceOffsetKey(
        cluster=source, topic=sweep_key_topic(slots), partition=slot, connector=SWEEP_CONNECTOR
    )
    return {where: (key.key_bytes(), None) for where in stuck}


def unresolved(
    stuck: Mapping[Where, int], bootstrap: str, leaders: Mapping[Where, int], why: str
) -> HangingTransaction:
    """The error for open transactions nobody of the flow can end, with Kafka's commands."""
    lines = []
    for (topic, partition), offset in sorted(stuck.items()):
        leader = leaders.get((topic, partition), -1)
        lines.append(
            f"{topic}-{partition} from offset {offset} (leader: broker {leader}): "
            f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic {topic} "
            f"--partition {partition} --start-offset {offset}"
        )
    return HangingTransaction(
        f"a transaction is open on the target that {why}, so mirrorflow does not write on top of it "
        "(its next commit there could make the open records visible): "
        + "; ".join(lines)
        + f" (kafka-transactions.sh --bootstrap-server {bootstrap} find-hanging --broker-id N lists them); "
        "then run again",
        stuck,
    )


def leaders(consumer: Consumer, where: Iterable[Where]) -> dict[Where, int]:
    """The leader broker of each partition, for the operator's command (best effort)."""
    out: dict[Where, int] = {}
    for topic in sorted({t for t, _ in where}):
        with contextlib.suppress(KafkaException):
            metadata = consumer.list_topics(topic, timeout=5).topics.get(topic)
            if metadata is not None:
                for partition, info in metadata.partitions.items():
                    out[(topic, partition)] = info.leader
    return out
