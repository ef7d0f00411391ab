"""Run records (plans, reports and summaries) in a topic on the target cluster.

Airflow tasks and Spark jobs share no filesystem, so the plan task writes the plan here and
passes only its offset to the Spark job, and the job writes its report here for the report
task (and the status page) to read. The topic name ends in `.internal`, so neither MM2 nor
mirrorflow ever replicates it.

Bounded records. A plan of 120,000 partitions is ~11 MB of JSON and a report of 20,000
partitions ~8 MB, more than one Kafka record should hold (the topic allows 8 MiB, brokers and
clients often less). So a run record is stored as Kafka records of at most RECORD_LIMIT bytes:

* a body of at most CHUNK_BYTES is ONE Kafka record, exactly as before chunks existed: key
  `flow|run_id|kind`, value the UTF-8 JSON, no headers. Every reader, old or new, reads it;
  summaries are kept small enough to always take this form.
* a larger body is a series of chunk records, each keyed `flow|run_id|kind/chunk`, its value a
  slice of the UTF-8 JSON cut at a character boundary (so every value still decodes), with
  headers `mirrorflow.record` (the record's id, 32 hex digits, the same on every chunk) and
  `mirrorflow.chunk` (its index from 0, decimal); the last chunk also carries
  `mirrorflow.chunks` (how many chunks, decimal) and `mirrorflow.sha256` (hex digest of the
  whole body). One idempotent producer writes them in order, so they are in index order in the
  topic; other flows' records may come between them (the topic has one partition for all).
  Readers from before chunks existed ask for kinds such as `plan` or `summary` and skip
  `plan/chunk` records.

A reader handed the offset of the first chunk reads on from there, keeps only that record's
chunks, and returns the body once the last chunk arrived and the digest matches. A record
whose writer stopped mid-way (a chunk missing, the last chunk never written, a digest that
does not match) is reported missing, never returned in part (replicate/run_reading.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.kafka import await_topics, served

RUNS_TOPIC = "mirrorflow-runs.internal"
RETENTION_MS = 30 * 24 * 3600 * 1000
# The topic's max.message.bytes: what a record written before chunks existed may be. Records
# written now stay under RECORD_LIMIT.
MAX_RECORD_BYTES = 8 * 1024 * 1024
RECORD_LIMIT = 1024 * 1024
# Value bytes per Kafka record: the key (flow, run id, kind), the headers and Kafka's own
# per-record framing fit in the rest, so no record exceeds RECORD_LIMIT.
CHUNK_BYTES = RECORD_LIMIT - 8 * 1024
CHUNK_SUFFIX = "/chunk"
RECORD_HEADER = "mirrorflow.record"
CHUNK_HEADER = "mirrorflow.chunk"
COUNT_HEADER = "mirrorflow.chunks"
SHA256_HEADER = "mirrorflow.sha256"

RecordFilter = Callable[[str, str, str], bool]


class RunRecordMissing(LookupError):
    pass


class RunRecordNotStored(RuntimeError):
    """The target did not acknowledge a run record in time (it is down or unreachable)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One whole run record; `offset` is that of its first Kafka record, the one a step hands on."""

    offset: int
    flow: str
    run_id: str
    kind: str
    body: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class IncompleteRunRecord:
    """A chunked run record that cannot be put together: its writer stopped mid-way (or is
    still writing), or a chunk is missing or damaged."""

    offset: int
    flow: str
    run_id: str
    kind: str
    chunks_read: int
    reason: str

    @property
    def message(self) -> str:
        return (
            f"the {self.kind} of run {self.run_id} of {self.flow} at offset {self.offset} of {RUNS_TOPIC} "
            f"is incomplete ({self.chunks_read} chunk(s) read): {self.reason}; it is not used"
        )


def ensure_runs_topic(admin: AdminClient, replication_factor: int) -> bool:
    """Create the runs topic if it does not exist; True if it was created."""
    topic = NewTopic(
        RUNS_TOPIC,
        1,
        replication_factor,
        config={
            "cleanup.policy": "delete",
            "retention.ms": str(RETENTION_MS),
            "max.message.bytes": str(MAX_RECORD_BYTES),
        },
    )
    try:
        admin.create_topics([topic], request_timeout=60)[RUNS_TOPIC].result(60)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise
    await_topics(admin, {RUNS_TOPIC: 1}, timeout_s=60)
    return True


def run_key(flow: str, run_id: str, kind: str) -> bytes:
    return f"{flow}|{run_id}|{kind}".encode()


def _char_boundary(buffer: bytearray, position: int) -> int:
    """The nearest cut at or before `position` that does not split a UTF-8 character."""
    while position > 0 and buffer[position] & 0xC0 == 0x80:
        position -= 1
    return position


def body_chunks(body: str | Iterable[str], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The UTF-8 body in slices of at most `size` bytes, each a whole number of characters.

    `body` may be given in pieces (Plan.json_pieces, RunReport.json_pieces), so a 20,000-partition
    report never exists as one string: at most a chunk and a piece are held here at a time."""
    pieces = (body,) if isinstance(body, str) else body
    buffer = bytearray()
    for piece in pieces:
        buffer += piece.encode()
        start = 0
        while len(buffer) - start > size:
            cut = _char_boundary(buffer, start + size)
            yield bytes(buffer[start:cut])
            start = cut
        del buffer[:start]
    yield bytes(buffer)


def write_run_record(
    producer_config: Mapping[str, Any],
    flow: str,
    run_id: str,
    kind: str,
    body: str | Iterable[str],
    *,
    timeout_s: float = 60.0,
) -> int:
    """Append one run record (one Kafka record, or chunks when the body is larger than
    CHUNK_BYTES) and return the offset of its first Kafka record: what the next step is handed."""
    producer = Producer(
        {
            **producer_config,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "message.max.bytes": MAX_RECORD_BYTES,
        }
    )
    deadline = time.monotonic() + timeout_s  # for the whole record, however many steps it takes
    # Metadata first: it brings up the broker connection, so the idempotent producer gets its
    # producer id at once instead of on librdkafka's 500 ms retry timer.
    with contextlib.suppress(KafkaException):
        producer.list_topics(RUNS_TOPIC, timeout=min(timeout_s, 10.0))
    delivered: dict[int, tuple[Any, Any]] = {}

    def send(index: int, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None) -> None:
        producer.produce(
            RUNS_TOPIC,
            key=key,
            value=value,
            headers=headers,
            partition=0,
            on_delivery=lambda err, msg: delivered.__setitem__(index, (err, msg)),
        )
        served(producer.poll, 0)

    chunks = body_chunks(body)
    first = next(chunks)
    following = next(chunks, None)
    if following is None:
        send(0, run_key(flow, run_id, kind), first, None)
        sent = 1
    else:
        record_id = uuid.uuid4().hex.encode()
        chunk_key = run_key(flow, run_id, kind + CHUNK_SUFFIX)
        digest = hashlib.sha256()
        pending, sent = first, 0
        for chunk in itertools.chain((following,), chunks):
            digest.update(pending)
            send(sent, chunk_key, pending, [(RECORD_HEADER, record_id), (CHUNK_HEADER, str(sent).encode())])
            pending, sent = chunk, sent + 1
        digest.update(pending)
        last_headers = [
            (RECORD_HEADER, record_id),
            (CHUNK_HEADER, str(sent).encode()),
            (COUNT_HEADER, str(sent + 1).encode()),
            (SHA256_HEADER, digest.hexdigest().encode()),
        ]
        send(sent, chunk_key, pending, last_headers)
        sent += 1
    served(producer.flush, max(0.0, deadline - time.monotonic()))
    if len(delivered) < sent:
        producer.purge()
        raise RunRecordNotStored(
            f"the {kind} of run {run_id} was not acknowledged by the target cluster within {timeout_s:.0f}s"
            + (f" ({len(delivered)} of its {sent} chunks were)" if sent > 1 else "")
        )
    errors = [err for err, _ in delivered.values() if err is not None]
    if errors:
        raise KafkaException(errors[0])
    return delivered[0][1].offset()
