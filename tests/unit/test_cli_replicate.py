"""`mirrorflow replicate` and `mirrorflow migrate` through click's CliRunner, against real Kafka clusters."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Producer
from rich.console import Console

from mirrorflow.cli import main
from mirrorflow.commands.flow_args import cli_run_id
from mirrorflow.commands.replicate import ProgressWatcher, unfinished
from mirrorflow.commands.run_display import CopyProgress, print_plan, progress_bar
from mirrorflow.replicate import runner
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.progress import progress_record
from mirrorflow.replicate.run_reading import iter_run_records

from ..integration.kafkatools import create_topics, produce, read_all

SINGLE_BROKER = (
    "replication.factor = 1\n"
    "offset-syncs.topic.replication.factor = 1\n"
    "checkpoints.topic.replication.factor = 1\n"
    "heartbeats.topic.replication.factor = 1\n"
    "offset.storage.replication.factor = 1\n"
)
DIE_ONCE_ENV = "MIRRORFLOW_TEST_DIE_ONCE"
_REAL_COPY_SLICE = runner.copy_slice


def write_config(tmp_path: Path, source: str, target: str, extra: str = "") -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {source}\n"
        f"B.bootstrap.servers = {target}\n"
        "A->B.enabled = true\n" + SINGLE_BROKER + extra
    )
    return path


def invoke(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "250"})


def run_records(bootstrap: str, run_id: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for _, _, rid, kind, body in iter_run_records({"bootstrap.servers": bootstrap}):
        if rid == run_id:
            found.setdefault(kind, []).append(json.loads(body))
    return found


def run_id_of(output: str) -> str:
    match = re.search(r" run (cli__\S+) ", output)
    assert match, output
    return match.group(1)


def test_replicate_copies_the_flow_and_stores_the_run_like_a_dag_run(
    shared_clusters, unique, tmp_path
) -> None:
    a, b, _ = shared_clusters
    orders, payments = unique("cli-orders"), unique("cli-payments")
    create_topics(a.bootstrap, (orders, 3), (payments, 1))
    produce(a.bootstrap, orders, [{"value": b"o" * 10, "partition": i % 3} for i in range(30)])
    produce(a.bootstrap, payments, [{"key": b"k", "value": None} for _ in range(5)])
    config = write_config(
        tmp_path, a.bootstrap, b.bootstrap, f"A->B.topics = {orders}|{payments}\ntasks.max = 2\n"
    )

    result = invoke("replicate", config, "--flow", "A->B")

    assert result.exit_code == 0, result.output
    run_id = run_id_of(result.output)
    assert re.fullmatch(r"cli__\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", run_id)
    assert "2 topic(s), 4 partition(s) to copy, 35 offset(s) planned" in result.output
    assert re.search(rf"{orders}\s+│ A\.{orders}\s+│\s+3 │\s+30 │\s+30 │\s+300 │\s+0 │\s+0 │", result.output)
    assert re.search(rf"{payments}\s+│ A\.{payments}\s+│\s+1 │\s+5 │\s+5 │\s+5 │\s+0 │\s+0 │", result.output)
    assert "35/35 offsets" in result.output and "4/4 partitions" in result.output
    assert "OK A->B replicate run done" in result.output
    for partition in range(3):
        assert len(read_all(b.bootstrap, f"A.{orders}", partition)) == 10
    stored = run_records(b.bootstrap, run_id)
    assert sorted(stored) == ["plan", "report", "summary"]
    (summary,) = stored["summary"]
    assert summary["mode"] == "replicate" and summary["totals"]["records"] == 35
    assert summary["lag_left"] == {orders: 0, payments: 0}


def test_failed_partitions_and_topics_exit_one_and_say_why(shared_clusters, unique, tmp_path) -> None:
    a, b, _ = shared_clusters
    topic, no_room = unique("cli-too-big"), unique("cli-no-room")
    create_topics(a.bootstrap, (topic, 2), (no_room, 1))
    create_topics(b.bootstrap, (f"A.{topic}", 2, {"max.message.bytes": "1000"}))
    produce(
        a.bootstrap, topic, [{"value": b"x" * (5000 if i == 0 else 10), "partition": i % 2} for i in range(4)]
    )
    config = write_config(
        tmp_path,
        a.bootstrap,
        b.bootstrap,
        # No cluster here has 100 brokers, so A.<no_room> cannot be created.
        f"A->B.topics = {topic}|{no_room}\nA->B.replication.factor = 100\n",
    )

    result = invoke("replicate", config, "--flow", "A->B")

    assert result.exit_code == 1, result.output
    assert "FAILED\n1 of 2 partitions of A->B run cli__" in result.output
    assert re.search(
        rf"{topic}-0: {topic}-0 offset 0: the target refuses the record as too large", result.output
    )
    assert f"raise max.message.bytes of A.{topic} on the target cluster B" in result.output
    # partitions, planned, records, bytes, lag left, lost to retention, failed
    assert re.search(rf"{topic}\s+│ A\.{topic}\s+│\s+2 │\s+4 │\s+2 │\s+20 │\s+2 │\s+0 │\s+1 │", result.output)
    assert f"{no_room} is not copied: cannot create A.{no_room}" in result.output
    assert "topics that could not be replicated" in result.output
    assert "set replication.factor (or -1 for the target broker default)" in result.output
    assert len(read_all(b.bootstrap, f"A.{topic}", 1)) == 2, "the healthy partition is copied"


def test_migrate_copies_only_what_came_before_the_time_and_counts_per_topic(
    shared_clusters, unique, tmp_path
) -> None:
    a, b, _ = shared_clusters
    chosen, other = unique("cli-until"), unique("cli-other")
    create_topics(a.bootstrap, (chosen, 2), (other, 1))
    cutoff = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    cutoff_ms = int(cutoff.timestamp() * 1000)
    produce(
        a.bootstrap,
        chosen,
        [{"value": f"{i}".encode(), "partition": i % 2, "timestamp": cutoff_ms - 20 + i} for i in range(30)],
    )
    produce(a.bootstrap, other, [{"value": b"not asked for"}])
    # Migrations run for any pair of clusters, enabled or not.
    config = write_config(
        tmp_path, a.bootstrap, b.bootstrap, f"topics = {chosen}|{other}\nA->B.enabled = false\n"
    )

    until = cutoff.strftime("%Y-%m-%dT%H:%M:%SZ")
    result = invoke(
        "migrate",
        config,
        "--flow",
        "A->B",
        "--topics",
        chosen,
        "--until",
        until,
        "--delivery",
        "at-least-once",
    )

    assert result.exit_code == 0, result.output
    assert re.search(r"migrate A->B run cli__\S+ \(at-least-once\)", result.output)
    assert re.search(rf"{chosen}\s+│ A\.{chosen}\s+│\s+2 │\s+20 │\s+20 │", result.output)
    assert other not in result.output
    copied = [int(r.value) for p in (0, 1) for r in read_all(b.bootstrap, f"A.{chosen}", p)]
    assert sorted(copied) == list(range(20))
    (summary,) = run_records(b.bootstrap, run_id_of(result.output))["summary"]
    assert summary["mode"] == "migrate" and summary["topics"][chosen]["records"] == 20
    # At-least-once writes data outside transactions; progress goes through the fencing
    # producer's transactions, one per chunk: here one per partition.
    assert summary["delivery"] == "at-least-once" and summary["totals"]["transactions"] == 2


def copy_slice_dying_once(job, spans):  # type: ignore[no-untyped-def]
    """Fault injection in the worker: the first worker to start dies, as an OOM-killed one would."""
    marker = Path(os.environ[DIE_ONCE_ENV])
    if not marker.exists():
        marker.touch()
        os._exit(1)
    return _REAL_COPY_SLICE(job, spans)


def test_migrate_runs_again_what_a_dead_worker_left_unfinished(
    shared_clusters, unique, tmp_path, monkeypatch
) -> None:
    a, b, _ = shared_clusters
    topic = unique("cli-retry")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 2} for i in range(10)])
    config = write_config(tmp_path, a.bootstrap, b.bootstrap, f"A->B.topics = {topic}\n")
    monkeypatch.setenv(DIE_ONCE_ENV, str(tmp_path / "died"))
    monkeypatch.setattr(runner, "copy_slice", copy_slice_dying_once)

    result = invoke("migrate", config, "--flow", "A->B")

    assert result.exit_code == 0, result.output
    assert (tmp_path / "died").exists(), "the first pass lost its worker"
    assert "in 2 passes" in result.output
    assert sorted(int(r.value) for p in (0, 1) for r in read_all(b.bootstrap, f"A.{topic}", p)) == list(
        range(10)
    )
    stored = run_records(b.bootstrap, run_id_of(result.output))
    first, second = stored["report"]
    assert all(u["error"].startswith("the worker process copying it died") for u in first["units"])
    assert all(u["error"] is None for u in second["units"])
    assert stored["summary"][0]["failed"] == [] and stored["summary"][0]["totals"]["records"] == 10


# -- errors before anything runs (no cluster needed) ----------------------------------------------


def test_config_errors_are_listed_with_their_fixes(tmp_path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nA->B.enabled = true\n"
        "emit.checkpoints.interval.seconds = 1m\n"
    )
    result = invoke("replicate", path, "--flow", "A->B")
    assert result.exit_code == 1
    for text in (
        "B.bootstrap.servers",
        "emit.checkpoints.interval.seconds",
        "fix:",
        "2 configuration error(s)",
    ):
        assert text in result.output, text


@pytest.mark.parametrize(
    ("flow", "message"),
    [
        ("A-B", "'A-B' is not a flow; write SOURCE->TARGET"),
        ("A->C", "'C' is not a cluster of"),
        ("A->A", "copies a cluster onto itself"),
    ],
)
def test_the_flow_must_name_two_clusters_of_the_config(tmp_path, flow, message) -> None:
    config = write_config(tmp_path, "a:9092", "b:9092")
    result = invoke("migrate", config, "--flow", flow)
    assert result.exit_code == 2
    assert message in result.output
    assert "Invalid value for '--flow'" in result.output


def test_replicate_refuses_a_flow_that_is_not_enabled(tmp_path) -> None:
    config = write_config(tmp_path, "a:9092", "b:9092")
    result = invoke("replicate", config, "--flow", "B->A")
    assert result.exit_code == 1
    assert "B->A is not enabled" in result.output and "set B->A.enabled = true" in result.output
    assert "mirrorflow migrate" in result.output


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--until", "yesterday", "is not a time mirrorflow reads: write now, epoch milliseconds"),
        ("--until", "1795680000", "looks like epoch seconds (2026-11-26 08:00:00 UTC)"),
        ("--topics", "orders(", "is not a regular expression"),
        ("--delivery", "twice", "'twice' is not one of 'exactly-once', 'at-least-once'"),
    ],
)
def test_bad_migrate_options_are_usage_errors(tmp_path, option, value, message) -> None:
    config = write_config(tmp_path, "a:9092", "b:9092")
    result = invoke("migrate", config, "--flow", "A->B", option, value)
    assert result.exit_code == 2
    assert message in result.output


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_cluster_is_named_with_its_address_and_no_credentials(
    shared_clusters, tmp_path
) -> None:
    a, _, _ = shared_clusters
    address = f"127.0.0.1:{_closed_port()}"
    config = write_config(
        tmp_path,
        a.bootstrap,
        address,
        "B.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = PLAIN\n"
        "B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="mirror" password="pw-never-shown";\n',
    )
    result = invoke("replicate", config, "--flow", "A->B", "--connect-timeout", "1")
    assert result.exit_code == 1
    assert f"cluster B (target of A->B) at {address} did not answer within 1s" in result.output
    assert "check B.bootstrap.servers" in result.output
    assert "pw-never-shown" not in result.output


# -- pieces ---------------------------------------------------------------------------------------


def test_cli_run_ids_are_utc_times() -> None:
    moment = datetime(2026, 3, 1, 12, 30, 5, 250000, tzinfo=timezone(timedelta(hours=2)))
    assert cli_run_id(moment) == "cli__2026-03-01T10:30:05.250000+00:00"


def test_unfinished_keeps_failed_and_short_partitions_only() -> None:
    spans = tuple(PartitionSpan("t", p, "A.t", 0, 10) for p in range(4))
    plan = Plan("r", "A", "B", "migrate", 0, 100, 1 << 20, "exactly-once", 2, spans)
    results = [
        UnitResult("t", 0, "A.t", 0, 10, progress=9),
        UnitResult("t", 1, "A.t", 0, 10, progress=9, error="fenced"),
        UnitResult("t", 2, "A.t", 0, 10, progress=4),
        UnitResult("t", 3, "A.t", 0, 10, progress=9),
    ]
    left = unfinished(plan, results)
    assert left is not None and [s.partition for s in left.spans] == [1, 2]
    assert left.run_id == plan.run_id and left.mode == "migrate"
    assert unfinished(plan, [results[0], results[3]]) is None


def _plan(*spans: PartitionSpan) -> Plan:
    return Plan("r", "A", "B", "replicate", 0, 100, 1 << 20, "exactly-once", 2, spans)


def test_copy_progress_counts_offsets_and_partitions_per_topic_and_in_total() -> None:
    plan = _plan(
        PartitionSpan("orders", 0, "A.orders", 10, 20, progress=9),
        PartitionSpan("orders", 1, "A.orders", 0, 30),
        PartitionSpan("users", 0, "A.users", 0, 5),
        PartitionSpan("idle", 0, "A.idle", 7, 7, progress=6),
    )
    progress = progress_bar(Console(file=io.StringIO()))
    tracker = CopyProgress(progress, plan)
    total, orders, users = progress.tasks
    assert (total.total, orders.total, users.total) == (45, 40, 5)

    # Read from the target while copying: orders-0 is done, orders-1 a third of the way.
    tracker.observed({("orders", 0): 19, ("orders", 1): 9, ("other", 0): 99})
    assert (total.completed, orders.completed, users.completed) == (20, 20, 0)
    assert orders.fields["partitions"] == "1/2 partitions"
    assert total.fields["partitions"] == "1/3 partitions"

    tracker.finished(UnitResult("users", 0, "A.users", 0, 5, progress=2, error="fenced"))
    tracker.finished(UnitResult("orders", 1, "A.orders", 0, 30, progress=29))
    assert (total.completed, orders.completed, users.completed) == (43, 40, 3)
    assert users.fields["partitions"] == "0/1 partitions, [red]1 failed[/red]"
    # A later pass finishes the failed partition.
    tracker.finished(UnitResult("users", 0, "A.users", 0, 5, progress=4))
    assert total.fields["partitions"] == "3/3 partitions" and total.completed == 45


def test_the_watcher_reports_progress_read_from_the_target(shared_clusters, unique) -> None:
    _, b, _ = shared_clusters
    progress_topic = unique("mm2-offsets.W.internal")
    create_topics(b.bootstrap, (progress_topic, 5, {"cleanup.policy": "compact"}))
    producer = Producer({"bootstrap.servers": b.bootstrap})
    key, value, partition = progress_record("W", "orders", 3, 41, 5)
    producer.produce(progress_topic, key=key, value=value, partition=partition)
    assert producer.flush(10) == 0
    seen: list[dict] = []
    arrived = threading.Event()

    def on_progress(stored: dict) -> None:
        seen.append(stored)
        arrived.set()

    watcher = ProgressWatcher(
        {"bootstrap.servers": b.bootstrap}, progress_topic, "W", [("orders", 3)], on_progress
    )
    watcher.start()
    try:
        assert arrived.wait(30), "the watcher reads the progress topic while the copy runs"
    finally:
        watcher.stop()
    assert seen[0] == {("orders", 3): 41}
    assert not watcher.is_alive()


def test_the_plan_says_what_the_run_will_do_and_what_it_cannot() -> None:
    plan = _plan(
        PartitionSpan("orders", 0, "A.orders", 30, 50, progress=9, lost=20),
        PartitionSpan("orders", 1, "A.orders", 0, 4, progress=7),
    )
    planned = {
        "created_topics": ["A.fresh"],
        "grown_topics": {"A.orders": [1, 2]},
        "topic_errors": {"big": "cannot create A.big: no room"},
        "restarted_partitions": {
            "orders-1": "the source partition ends before what was already copied (topic recreated?); "
            "copying it from its start"
        },
    }
    out = io.StringIO()
    print_plan(Console(file=out, width=250), planned, plan)
    text = out.getvalue()
    assert (
        "replicate A->B run r (exactly-once): 1 topic(s), 2 partition(s) to copy, 24 offset(s) planned"
        in text
    )
    assert "created A.fresh on B" in text and "grew A.orders from 1 to 2 partitions" in text
    assert "orders: 20 offset(s) were deleted from the source (retention or DeleteRecords)" in text
    assert "big is not copied: cannot create A.big: no room" in text
    assert "orders-1: the source partition ends before what was already copied" in text


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        ((), "nothing to copy: no topic of A passes the flow's topic filter and cycle check"),
        ((PartitionSpan("t", 0, "A.t", 5, 5, progress=4),), "nothing to copy: every partition is caught up"),
    ],
)
def test_the_plan_says_why_there_is_nothing_to_copy(spans, message) -> None:
    out = io.StringIO()
    empty = {"created_topics": [], "grown_topics": {}, "topic_errors": {}, "restarted_partitions": {}}
    print_plan(Console(file=out, width=250), empty, _plan(*spans))
    assert message in out.getvalue()
