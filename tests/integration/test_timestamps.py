"""Record timestamps through a copy: every value librdkafka can write arrives unchanged (negative
ones included), a LogAppendTime source's times arrive as CreateTime as with MM2, and records with
CreateTime 0, which librdkafka cannot write (it reads 0 as "now"), are counted and reported
rather than changed in silence."""

from __future__ import annotations

import subprocess
from pathlib import Path

from localkafka import runtime
from mirrorflow.kafka import read_partition

from .kafkatools import create_topics, produce
from .test_replicate_scenarios import mirror_config, run_once

JAVA_PRODUCER = Path(__file__).parent / "java" / "ProduceAt.java"
CREATE_TIME, LOG_APPEND_TIME = 1, 2


def java_produce(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    """Kafka's own Java producer: the only way here to write a record with CreateTime 0."""
    classpath = ":".join(str(jar) for jar in runtime.classpath())
    subprocess.run(
        [
            runtime.java_binary(),
            "-cp",
            classpath,
            str(JAVA_PRODUCER),
            bootstrap,
            topic,
            *map(str, timestamps),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def timestamps(bootstrap: str, topic: str) -> list[tuple[bytes, int, int]]:
    return [
        (m.value(), *m.timestamp())
        for m in read_partition({"bootstrap.servers": bootstrap}, topic, 0, isolation="read_committed")
    ]


def test_timestamps_survive_the_copy_and_zero_is_reported(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic, appended = unique("ts"), unique("ts-append")
    create_topics(a.bootstrap, (topic, 1), (appended, 1, {"message.timestamp.type": "LogAppendTime"}))
    java_produce(a.bootstrap, topic, [1, 0, 1_700_000_000_000])
    produce(a.bootstrap, topic, [{"value": b"at--1", "timestamp": -1}, {"value": b"at--5", "timestamp": -5}])
    produce(a.bootstrap, appended, [{"value": b"appended"}])
    source = timestamps(a.bootstrap, topic)
    assert [(value, ts) for value, _, ts in source] == [
        (b"at-1", 1),
        (b"at-0", 0),
        (b"at-1700000000000", 1_700_000_000_000),
        (b"at--1", -1),
        (b"at--5", -5),
    ]
    config = mirror_config([a, b], ["A->B"], {"topics": f"{topic}|{appended}"})

    run = run_once(config, "A", "B", report=True)

    copied = timestamps(b.bootstrap, f"A.{topic}")
    assert [value for value, _, _ in copied] == [value for value, _, _ in source]
    for (value, _, before), (_, kind, after) in zip(source, copied, strict=True):
        assert kind == CREATE_TIME
        if before == 0:
            assert after > 1_700_000_000_000, "librdkafka writes the copy's time for 0"
        else:
            assert after == before, value
    by_topic = {r.topic: r for r in run.results}
    assert by_topic[topic].retimed == 1 and by_topic[appended].retimed == 0
    assert run.summary["totals"]["retimed"] == 1
    assert run.summary["retimed"] == [{"topic": topic, "partition": 0, "records": 1}]

    # LogAppendTime: the source broker's append time, kept as the record's CreateTime on the
    # target (MM2 does the same; the remote topic keeps the target's message.timestamp.type).
    ((_, kind, when),) = timestamps(a.bootstrap, appended)
    assert kind == LOG_APPEND_TIME
    assert timestamps(b.bootstrap, f"A.{appended}") == [(b"appended", CREATE_TIME, when)]
