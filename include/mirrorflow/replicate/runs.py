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
does not match) is reported missing, never returned in part.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.kafka import await_topics, read_partition, served

log = logging.getLogger(__name__)

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


def parse_key(message: Message) -> tuple[str, str, str, bool]:
    """(flow, run_id, kind, is_chunk) of a Kafka record of the runs topic."""
    flow, run_id, kind = message.key().decode().split("|", 2)
    if kind.endswith(CHUNK_SUFFIX):
        return flow, run_id, kind[: -len(CHUNK_SUFFIX)], True
    return flow, run_id, kind, False


@dataclass
class _Assembly:
    offset: int
    timestamp_ms: int
    flow: str
    run_id: str
    kind: str
    parts: list[bytes] = field(default_factory=list)

    def incomplete(self, reason: str) -> IncompleteRunRecord:
        return IncompleteRunRecord(self.offset, self.flow, self.run_id, self.kind, len(self.parts), reason)


class RunRecordAssembler:
    """Turns the runs topic's Kafka records, fed in offset order, into whole run records.

    Only records `wanted` accepts (by flow, run id and kind) are kept, so a reader looking for a
    report does not hold the plan's chunks. A chunk whose first chunk came before the read
    started belongs to a record this read does not own, and is passed over."""

    def __init__(self, wanted: RecordFilter | None = None, *, record_id: bytes | None = None) -> None:
        self.wanted = wanted
        self.record_id = record_id
        self._open: dict[bytes, _Assembly] = {}

    def feed(self, message: Message) -> RunRecord | IncompleteRunRecord | None:
        flow, run_id, kind, is_chunk = parse_key(message)
        if self.wanted is not None and not self.wanted(flow, run_id, kind):
            return None
        timestamp_ms = message.timestamp()[1]
        if not is_chunk:
            if self.record_id is not None:
                return None
            return RunRecord(message.offset(), flow, run_id, kind, message.value().decode(), timestamp_ms)
        headers = dict(message.headers() or ())
        if RECORD_HEADER not in headers or CHUNK_HEADER not in headers:
            return IncompleteRunRecord(
                message.offset(), flow, run_id, kind, 0, "a chunk without its record id or index"
            )
        record_id, index = headers[RECORD_HEADER], int(headers[CHUNK_HEADER])
        if self.record_id is not None and record_id != self.record_id:
            return None
        if index == 0:
            self._open[record_id] = _Assembly(message.offset(), timestamp_ms, flow, run_id, kind)
        assembly = self._open.get(record_id)
        if assembly is None:
            return None
        if index != len(assembly.parts):
            del self._open[record_id]
            return assembly.incomplete(f"chunk {len(assembly.parts)} is missing (chunk {index} came next)")
        assembly.parts.append(message.value())
        if COUNT_HEADER not in headers:
            return None
        del self._open[record_id]
        count = int(headers[COUNT_HEADER])
        if count != len(assembly.parts):
            return assembly.incomplete(f"its last chunk says {count} chunks")
        body = b"".join(assembly.parts)
        assembly.parts.clear()
        if hashlib.sha256(body).hexdigest().encode() != headers.get(SHA256_HEADER):
            return IncompleteRunRecord(
                assembly.offset, flow, run_id, kind, count, "its chunks do not match its SHA-256 digest"
            )
        return RunRecord(assembly.offset, flow, run_id, kind, body.decode(), assembly.timestamp_ms)

    def unfinished(self) -> list[IncompleteRunRecord]:
        """Records whose last chunk has not been read, oldest first."""
        return [
            a.incomplete("its last chunk was never written (its writer stopped mid-way, or is still writing)")
            for a in sorted(self._open.values(), key=lambda a: a.offset)
        ]


def read_run_record_at(consumer_config: Mapping[str, Any], offset: int) -> RunRecord:
    """The whole run record whose first Kafka record is at `offset`; RunRecordMissing if there is
    none there, or if it is incomplete."""
    assembler: RunRecordAssembler | None = None
    for message in read_partition(consumer_config, RUNS_TOPIC, 0, start=offset):
        if assembler is None:
            if message.offset() != offset:
                break
            flow, run_id, kind, is_chunk = parse_key(message)
            headers = dict(message.headers() or ())
            if is_chunk and headers.get(CHUNK_HEADER, b"0") != b"0":
                raise RunRecordMissing(
                    f"offset {offset} of {RUNS_TOPIC} holds chunk {headers[CHUNK_HEADER].decode()} of the "
                    f"{kind} of run {run_id} of {flow}, not the start of a run record"
                )
            assembler = RunRecordAssembler(record_id=headers.get(RECORD_HEADER) if is_chunk else None)
        found = assembler.feed(message)
        if isinstance(found, RunRecord):
            return found
        if isinstance(found, IncompleteRunRecord):
            raise RunRecordMissing(found.message)
    if assembler is not None:
        raise RunRecordMissing("; ".join(item.message for item in assembler.unfinished()))
    raise RunRecordMissing(f"no run record at offset {offset} of {RUNS_TOPIC}")


def read_run_record(consumer_config: Mapping[str, Any], offset: int) -> tuple[str, str, str, str]:
    """(flow, run_id, kind, body) of the run record that starts at `offset`."""
    record = read_run_record_at(consumer_config, offset)
    return record.flow, record.run_id, record.kind, record.body


def scan_run_records(
    consumer_config: Mapping[str, Any], *, start: int = 0, wanted: RecordFilter | None = None
) -> Iterator[RunRecord | IncompleteRunRecord]:
    """Whole run records that start at or after `start`, up to the current end, each as soon as
    its last chunk is read (so a chunked record comes after the small ones written among its
    chunks), then the ones left incomplete at the end."""
    assembler = RunRecordAssembler(wanted)
    for message in read_partition(consumer_config, RUNS_TOPIC, 0, start=start):
        found = assembler.feed(message)
        if found is not None:
            yield found
    yield from assembler.unfinished()


def iter_run_records(
    consumer_config: Mapping[str, Any], *, start: int = 0, wanted: RecordFilter | None = None
) -> Iterator[tuple[int, str, str, str, str]]:
    """(offset, flow, run_id, kind, body) of every whole run record from `start` to the current
    end; incomplete ones are logged and left out."""
    for found in scan_run_records(consumer_config, start=start, wanted=wanted):
        if isinstance(found, IncompleteRunRecord):
            log.warning("%s", found.message)
            continue
        yield found.offset, found.flow, found.run_id, found.kind, found.body


def wait_for_run_records(
    consumer_config: Mapping[str, Any],
    flow: str,
    run_id: str,
    kind: str,
    *,
    start: int,
    timeout_s: float = 0.0,
) -> list[dict[str, Any]]:
    """JSON bodies of every whole `kind` record of this run at or after `start`, oldest first (a
    retried copy step writes one report per attempt). An incomplete one is logged and left out;
    if nothing whole is found by the deadline, RunRecordMissing says what was incomplete."""
    deadline = time.monotonic() + timeout_s

    def wanted(f: str, r: str, k: str) -> bool:
        return (f, r, k) == (flow, run_id, kind)

    while True:
        found: list[RunRecord] = []
        broken: list[IncompleteRunRecord] = []
        for item in scan_run_records(consumer_config, start=start, wanted=wanted):
            (found if isinstance(item, RunRecord) else broken).append(item)
        if found:
            for item in broken:
                log.warning("%s", item.message)
            return [json.loads(r.body) for r in sorted(found, key=lambda r: r.offset)]
        if time.monotonic() >= deadline:
            detail = "".join(f"; {item.message}" for item in broken)
            raise RunRecordMissing(
                f"run {run_id} of {flow} wrote no {kind} to {RUNS_TOPIC} after offset {start}{detail}"
            )
        time.sleep(1.0)
