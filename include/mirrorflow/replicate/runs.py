"""Run records (plans and reports) in a topic on the target cluster.

Airflow tasks and Spark jobs share no filesystem, so the plan task writes the plan here and
passes only its offset to the Spark job, and the job writes its report here for the report
task (and the status page) to read. The topic name ends in `.internal`, so neither MM2 nor
mirrorflow ever replicates it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.kafka import await_topics, read_partition

RUNS_TOPIC = "mirrorflow-runs.internal"
RETENTION_MS = 30 * 24 * 3600 * 1000
MAX_RECORD_BYTES = 8 * 1024 * 1024


class RunRecordMissing(LookupError):
    pass


class RunRecordNotStored(RuntimeError):
    """The target did not acknowledge a run record in time (it is down or unreachable)."""


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


def write_run_record(
    producer_config: Mapping[str, Any],
    flow: str,
    run_id: str,
    kind: str,
    body: str,
    *,
    timeout_s: float = 60.0,
) -> int:
    """Append one record and return its offset (what the next step is handed)."""
    producer = Producer(
        {
            **producer_config,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "message.max.bytes": MAX_RECORD_BYTES,
        }
    )
    # Metadata first: it brings up the broker connection, so the idempotent producer gets its
    # producer id at once instead of on librdkafka's 500 ms retry timer.
    with contextlib.suppress(KafkaException):
        producer.list_topics(RUNS_TOPIC, timeout=min(timeout_s, 10.0))
    delivered: list[Any] = []
    producer.produce(
        RUNS_TOPIC,
        key=run_key(flow, run_id, kind),
        value=body.encode(),
        partition=0,
        on_delivery=lambda err, msg: delivered.append((err, msg)),
    )
    producer.flush(timeout_s)
    if not delivered:
        producer.purge()
        raise RunRecordNotStored(
            f"the {kind} of run {run_id} was not acknowledged by the target cluster within {timeout_s:.0f}s"
        )
    error, message = delivered[0]
    if error is not None:
        raise KafkaException(error)
    return message.offset()


def read_run_record(consumer_config: Mapping[str, Any], offset: int) -> tuple[str, str, str, str]:
    """(flow, run_id, kind, body) of the record at `offset`."""
    for message in read_partition(consumer_config, RUNS_TOPIC, 0, start=offset, end=offset + 1):
        flow, run_id, kind = message.key().decode().split("|", 2)
        return flow, run_id, kind, message.value().decode()
    raise RunRecordMissing(f"no run record at offset {offset} of {RUNS_TOPIC}")


def iter_run_records(
    consumer_config: Mapping[str, Any], *, start: int = 0
) -> Iterator[tuple[int, str, str, str, str]]:
    """(offset, flow, run_id, kind, body) from `start` to the current end."""
    for message in read_partition(consumer_config, RUNS_TOPIC, 0, start=start):
        flow, run_id, kind = message.key().decode().split("|", 2)
        yield message.offset(), flow, run_id, kind, message.value().decode()


def wait_for_run_records(
    consumer_config: Mapping[str, Any],
    flow: str,
    run_id: str,
    kind: str,
    *,
    start: int,
    timeout_s: float = 0.0,
) -> list[dict[str, Any]]:
    """JSON bodies of every `kind` record of this run at or after `start`, oldest first (a retried
    copy step writes one report per attempt)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [
            json.loads(body)
            for _, f, r, k, body in iter_run_records(consumer_config, start=start)
            if (f, r, k) == (flow, run_id, kind)
        ]
        if found:
            return found
        if time.monotonic() >= deadline:
            raise RunRecordMissing(
                f"run {run_id} of {flow} wrote no {kind} to {RUNS_TOPIC} after offset {start}"
            )
        time.sleep(1.0)
