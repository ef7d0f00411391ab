"""Test-side helpers: create topics, produce fixtures, read partitions back."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from localkafka import runtime
from localkafka.jmx import tools_jar
from mirrorflow.kafka import KafkaCallError, await_topics, read_partition
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.policy.provenance import HEADER_PREFIX, PROVENANCE_HEADER, decode


def create_topics(bootstrap: str, *topics: tuple[str, int] | tuple[str, int, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(t[0], t[1], 1, config=t[2] if len(t) > 2 else {}) for t in topics]
    for future in admin.create_topics(new, operation_timeout=10).values():
        future.result()
    # As every creator of topics for others to use: wait until the brokers serve them.
    await_topics(admin, {t[0]: t[1] for t in topics})


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def content(self) -> tuple:
        """What must survive a copy byte for byte (mirrorflow's own headers aside)."""
        user_headers = tuple(h for h in self.headers if not h[0].startswith(HEADER_PREFIX))
        return (self.key, self.value, user_headers, self.timestamp)


# How long a read_committed read waits for the markers of transactions just committed (see
# await_markers); a transaction a test leaves open on purpose costs a read this much.
MARKERS_WAIT_S = 5.0


def await_markers(
    bootstrap: str, topic: str, partitions: range | list[int], wait_s: float = MARKERS_WAIT_S
) -> None:
    """Wait until no transaction is open in `topic`'s `partitions` (last stable offset = high
    watermark), for at most `wait_s`. A transaction's commit returns once its coordinator has logged
    the decision; the markers reach the partitions after that. A read_committed reader that starts
    at once can meet the end of a partition (at the last stable offset) short of records the
    writer already saw committed. A transaction still open after `wait_s` is taken as meant (a test
    that leaves one open), and the read ends before it as readers see it."""
    # Quiet: a cluster that does not answer is the read's to report.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + wait_s
    while True:
        try:
            held = held_partitions(admin, topic, partitions, timeout_s=wait_s)
        except KafkaCallError:
            return  # a cluster that does not answer: the read itself says so
        if not held or time.monotonic() >= deadline:  # None: no such topic or partition (yet)
            return
        time.sleep(0.05)


def held_partitions(
    admin: AdminClient, topic: str, partitions: range | list[int], timeout_s: float
) -> list[int] | None:
    """The `partitions` of `topic` whose last stable offset an open transaction holds below their
    high watermark; None when the topic or one of them does not exist."""
    wanted = [(topic, p) for p in partitions]
    missing: set[tuple[str, int]] = set()
    stable = list_offsets(admin, wanted, OffsetSpec.latest(), missing=missing, timeout_s=timeout_s)
    if missing:
        return None
    high = list_offsets(admin, wanted, OffsetSpec.latest(), read_committed=False, timeout_s=timeout_s)
    return [p for t, p in wanted if stable[(t, p)] < high[(t, p)]]


def read_all(
    bootstrap: str,
    topic: str,
    partition: int = 0,
    isolation: str = "read_committed",
    markers_wait_s: float = MARKERS_WAIT_S,
) -> list[Rec]:
    """Every record of one partition, as `isolation` readers see it once the transactions just
    committed there have their markers (await_markers; 0 `markers_wait_s` where transactions are
    left open on purpose)."""
    if isolation == "read_committed" and markers_wait_s > 0:
        await_markers(bootstrap, topic, [partition], markers_wait_s)
    return [
        Rec(m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])
        for m in read_partition({"bootstrap.servers": bootstrap}, topic, partition, isolation=isolation)
    ]


def read_topic(
    bootstrap: str, topic: str, partitions: int, markers_wait_s: float = MARKERS_WAIT_S
) -> dict[int, list[Rec]]:
    """Every partition of `topic` as read_committed readers see it once the transactions just
    committed there have their markers (await_markers; a transaction left open ends the read
    instead of holding it; 0 `markers_wait_s` where transactions are left open on purpose), with
    one consumer; {} per partition for a topic that does not exist. Much quicker than read_all
    partition by partition."""
    if markers_wait_s > 0:
        await_markers(bootstrap, topic, range(partitions), markers_wait_s)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            # At a partition's end the broker would hold each fetch 500 ms for more data.
            "fetch.wait.max.ms": 10,
            "log_level": 3,
        }
    )
    found: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return found
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        reading = set(range(partitions))
        deadline = time.monotonic() + 60
        while reading:
            assert time.monotonic() < deadline, f"reading {topic} did not reach the end of {sorted(reading)}"
            for message in consumer.consume(2000, timeout=0.1):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    reading.discard(message.partition())
                    continue
                found[message.partition()].append(
                    Rec(
                        message.offset(),
                        message.key(),
                        message.value(),
                        tuple(message.headers() or ()),
                        message.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    return found


def produce(bootstrap: str, topic: str, records: list[dict], **config: object) -> None:
    """Write `records` and fail unless the broker acknowledged every one of them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **config})
    errors = []

    def delivered(error, _message) -> None:
        if error is not None:
            errors.append(error)

    for record in records:
        producer.produce(topic, on_delivery=delivered, **record)
    assert producer.flush(30) == 0
    assert not errors, f"the broker refused records for {topic}: {errors[0]}"


def produce_aborted(bootstrap: str, topic: str, partition: int, transactional_id: str) -> None:
    """One record written in a transaction that is then aborted: it holds an offset (and its abort
    marker another) that a read_committed reader, and so a copy, never sees."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=partition)
    assert producer.flush(30) == 0  # written, then aborted (abort alone would purge it unsent)
    producer.abort_transaction(30)


def produce_keyed(bootstrap: str, topic: str, count: int, partitions: int, value: bytes) -> None:
    """`count` records keyed b"0", b"1", ... dealt round-robin over `partitions`, all acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=value, partition=i % partitions)
        if i % 50_000 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0


def kafka_transactions(bootstrap: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Kafka's own `kafka-transactions.sh --bootstrap-server BOOTSTRAP ARGUMENTS…` (the tools
    jar's TransactionsCommand), as an operator runs it; its output captured."""
    return subprocess.run(
        [
            runtime.java_binary(),
            "-cp",
            ":".join(str(p) for p in [*runtime.classpath(), tools_jar()]),
            "org.apache.kafka.tools.TransactionsCommand",
            "--bootstrap-server",
            bootstrap,
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def provenance_runs(records) -> str:
    """Target offsets and the source offsets their provenance names, as runs ("t0-t1<-s0-s1"):
    where a copy went back or skipped, for a failure message."""
    runs: list[list[int]] = []
    for record in records:
        stamp = dict(record.headers).get(PROVENANCE_HEADER)
        source = -1 if stamp is None else decode(stamp).source_offset
        if runs and record.offset == runs[-1][1] + 1 and source == runs[-1][3] + 1:
            runs[-1][1], runs[-1][3] = record.offset, source
        else:
            runs.append([record.offset, record.offset, source, source])
    return " ".join(f"{t0}-{t1}<-{s0}-{s1}" for t0, t1, s0, s1 in runs)
