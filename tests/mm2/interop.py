"""Test-side helpers shared by the MM2 interoperability tests: one properties file for both tools,
source data with the shapes a copy must keep, and record-by-record comparisons."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from localkafka import runtime
from localkafka.mirrormaker import SINGLE_BROKER_WORKER
from mirrorflow.policy.provenance import read_provenance

from ..integration.kafkatools import Rec, produce, read_all
from ..integration.mirror_setup import mm2_text

COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)
JAVA = Path(__file__).with_name("java")
# Base of the record timestamps: old fixed timestamps (the test clusters keep data regardless).
TIMESTAMP_BASE = 1_700_000_000_000


def write_properties(
    directory: Path, clusters: Sequence[Any], extra: str = "", flows: Sequence[str] = ("A->B",)
) -> Path:
    """The mm2.properties both MM2 and mirrorflow read in a test: the test clusters, `flows`,
    replication factors of 1 for everything (single-broker clusters) and `extra`."""
    path = directory / "mm2.properties"
    path.write_text(mm2_text(clusters, flows, SINGLE_BROKER_WORKER + extra))
    return path


def produce_shaped(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> None:
    """`count` records dealt round-robin over the partitions: keys, null values (tombstones),
    headers (with a null header value) and explicit timestamps, all of which a copy must keep."""
    records = []
    for i in range(start, start + count):
        record: dict[str, Any] = {
            "key": f"key-{i % 11}".encode(),
            "value": None if i % 13 == 0 else f"{topic}:{i}".encode(),
            "partition": i % partitions,
            "timestamp": TIMESTAMP_BASE + i,
        }
        if i % 3 == 0:
            record["headers"] = [("trace", f"t-{i}".encode()), ("empty", None)]
        records.append(record)
    produce(bootstrap, topic, records)


def contents(records: Sequence[Rec]) -> list[tuple]:
    """What each record must keep across a copy, in partition order (mirrorflow's header aside)."""
    return [r.content() for r in records]


def partition_contents(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple]]:
    return {p: contents(read_all(bootstrap, topic, p)) for p in range(partitions)}


def copied_by_mirrorflow(record: Rec) -> bool:
    """mirrorflow stamps its provenance header on every record it copies; MM2 copies headers as they are."""
    return read_provenance(list(record.headers)) is not None


def commit_groups(bootstrap: str, offsets: dict[str, dict[tuple[str, int], int]]) -> None:
    """Commit offsets for many (memberless) groups through the Admin API, as
    `kafka-consumer-groups --reset-offsets` does (a consumer per group would cost a second each).
    A group whose coordinator is still being elected (a cluster just emptied) is asked again.
    No metadata is given: confluent-kafka would send "" as one NUL byte, which MM2 copies."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    pending = dict(offsets)
    deadline = time.monotonic() + 30
    while pending:
        futures = {
            group: admin.alter_consumer_group_offsets(
                [
                    ConsumerGroupTopicPartitions(
                        group, [TopicPartition(t, p, o) for (t, p), o in sorted(parts.items())]
                    )
                ],
                request_timeout=30,
            )[group]
            for group, parts in pending.items()
        }
        for group, future in futures.items():
            try:
                errors = [tp.error for tp in future.result(30).topic_partitions if tp.error is not None]
            except KafkaException as exc:
                errors = [exc.args[0]]
            if not errors:
                del pending[group]
            elif not all(e.code() in COORDINATOR_MOVING for e in errors) or time.monotonic() > deadline:
                raise AssertionError(f"committing offsets of {group} failed: {errors}")
        time.sleep(0.2 if pending else 0)


def exact_offset(remote: Sequence[Rec], upstream: int) -> int:
    """The definition of an exact translation, from a remote partition copied by mirrorflow: the
    target offset of the first copied record whose source offset is >= `upstream` (the end of the
    partition's records if the group read them all)."""
    for record in remote:
        provenance = read_provenance(list(record.headers))
        if provenance is not None and provenance.source_offset >= upstream:
            return record.offset
    return remote[-1].offset + 1


def run_java(program: str, *args: str, line: str | None = None) -> list[str]:
    """Run tests/mm2/java/<program> (a single-file source launch) with MirrorMaker 2's jars (or
    those of the Kafka `line` named); its output lines."""
    jars = (runtime.mirrormaker_line() if line is None else runtime.line(line)).classpath()
    classpath = ":".join(str(j) for j in jars)
    command = [runtime.java_binary(), "-cp", classpath, str(JAVA / program), *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()
