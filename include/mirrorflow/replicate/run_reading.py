"""Reading run records back from the runs topic (replicate/runs.py says how they are stored):
one whole record at the offset a step was handed, every record from an offset on, or a run's
records once they are there. A chunked record comes out whole, after its last chunk and its
digest were checked, or is reported incomplete; never in part.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from mirrorflow.kafka import read_partition
from mirrorflow.replicate.runs import (
    CHUNK_HEADER,
    CHUNK_SUFFIX,
    COUNT_HEADER,
    RECORD_HEADER,
    RUNS_TOPIC,
    SHA256_HEADER,
    IncompleteRunRecord,
    RecordFilter,
    RunRecord,
    RunRecordMissing,
)

log = logging.getLogger(__name__)


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
