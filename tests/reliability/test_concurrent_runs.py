"""Two runs of one flow started together (a scheduled run beside a manual one): exactly-once
makes them exclude each other partition by partition. Whoever loses a partition says so in
plain words and exits 1; nothing is copied twice; the next run finishes the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.mm2.connect_offsets import SourceOffsetKey
from mirrorflow.replicate.run_reading import iter_run_records

from ..integration.kafkatools import create_topics, produce_keyed, provenance_runs, read_all, read_topic
from ..integration.mirror_setup import mm2_text

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")
RECORDS, PARTITIONS = 120_000, 4


def run_together(commands: list[list[str]]) -> list[str]:
    """Start the runs at once and check each one either finished or lost its partitions to the
    other with the plain "fenced" message (exit 1), never with a crash; returns their outputs."""
    runs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in commands]
    try:
        outputs = [run.communicate(timeout=240)[0].decode(errors="replace") for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    for run, text in zip(runs, outputs, strict=True):
        assert run.returncode in (0, 1), text[-3000:]
        assert "Traceback" not in text and "SystemError" not in text, text[-3000:]
        if run.returncode == 1:
            failed = [line for line in text.splitlines() if line.strip().startswith("orders-")]
            assert failed, text[-3000:]
            other = [line for line in failed if "fenced: another writer took over" not in line]
            assert not other, "\n".join(other) + "\n--- the run's output:\n" + text[-6000:]
    return outputs


def evidence(b: str, topic: str, partition: int, outputs: list[str]) -> str:
    """Everything that says who copied `topic`-`partition`: each run's plan and report of it, its
    records on the target (both isolation levels) and its progress records, and each run's output."""
    lines = []
    for _, _, run_id, kind, body in iter_run_records({"bootstrap.servers": b}):
        if kind == "plan":  # spans are rows in PartitionSpan's field order
            lines += [f"run {run_id} plan: {row}" for row in json.loads(body)["spans"] if row[1] == partition]
        elif kind == "report":
            lines += [
                f"run {run_id} report: {u}" for u in json.loads(body)["units"] if u["partition"] == partition
            ]
    for isolation in ("read_uncommitted", "read_committed"):
        records = read_all(b, f"A.{topic}", partition, isolation)
        lines.append(f"target {isolation} ({len(records)}): {provenance_runs(records)}")
    progress_topic = "mm2-offsets.A.internal"
    count = len(
        AdminClient({"bootstrap.servers": b})
        .list_topics(progress_topic, 10)
        .topics[progress_topic]
        .partitions
    )
    key = SourceOffsetKey("A", topic, partition)
    for isolation in ("read_uncommitted", "read_committed"):
        stored = [
            r
            for r in read_all(b, progress_topic, key.offsets_partition(count), isolation)
            if r.key == key.key_bytes()
        ]
        lines.append(f"progress {isolation}: " + " ".join(f"{r.offset}:{r.value.decode()}" for r in stored))
    lines += [f"--- output of run {n} ---\n{text}" for n, text in enumerate(outputs)]
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("partitions", "records", "chunk"),
    [(PARTITIONS, RECORDS, 500), (24, 24 * 40 * 10, 300)],
    ids=["large partitions", "small partitions sharing transactions"],
)
def test_two_runs_of_one_flow_fence_each_other_and_never_duplicate(
    kafka_clusters, tmp_path, partitions, records, chunk
) -> None:
    """Both shapes: partitions copied chunk after chunk, and many partitions with a few records
    each, whose copies share transactions (each run then copies 10 batches of 40 records per
    partition, so the runs meet inside shared transactions)."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", partitions))
    produce_keyed(a.bootstrap, "orders", records, partitions, b"v" * 100)
    config = tmp_path / "mm2.properties"
    # Small transactions and two workers per run, so the runs meet on most partitions.
    config.write_text(
        mm2_text(
            [a, b], ["A->B"], f"A->B.topics = orders\ntasks.max = 2\nmirrorflow.range.max.records = {chunk}\n"
        )
    )
    command = [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"]

    outputs = run_together([command, command])
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:]
    outputs.append(again.stdout + again.stderr)
    source = read_topic(a.bootstrap, "orders", partitions)
    target = read_topic(b.bootstrap, "A.orders", partitions)
    for partition in range(partitions):
        copied = [r.content() for r in target[partition]]
        if copied != [r.content() for r in source[partition]]:
            pytest.fail(
                f"orders-{partition} not copied exactly once:\n"
                + evidence(b.bootstrap, "orders", partition, outputs)
            )


@pytest.mark.parametrize("modes", [("at-least-once", "at-least-once"), ("at-least-once", "exactly-once")])
def test_writers_in_any_mode_exclude_each_other_and_progress_never_goes_back(
    kafka_clusters, tmp_path, modes
) -> None:
    """Two at-least-once runs started together used to copy everything twice side by side
    (62,500 duplicates of 100,000 records), and a paused at-least-once writer could move
    progress back when it woke. Every writer now takes the partition's transactional.id, data
    or not: the newer one fences the older, which can then write no progress. At-least-once
    may still copy again what was in flight: at most one chunk per partition and writer."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", PARTITIONS))
    produce_keyed(a.bootstrap, "orders", RECORDS, PARTITIONS, b"v" * 100)
    chunk = 500
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_text(
            [a, b], ["A->B"], f"A->B.topics = orders\ntasks.max = 2\nmirrorflow.range.max.records = {chunk}\n"
        )
    )
    commands = [
        [MIRRORFLOW, "replicate", str(config), "--flow", "A->B", "--delivery", mode] for mode in modes
    ]

    run_together(commands)
    again = subprocess.run(commands[1], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:]
    for partition in range(PARTITIONS):
        source = [r.content() for r in read_all(a.bootstrap, "orders", partition)]
        target = [r.content() for r in read_all(b.bootstrap, "A.orders", partition)]
        # Nothing missing, source order kept, and duplicates only of the chunks in flight
        # when a writer was fenced (one per writer that lost the partition).
        assert set(target) == set(source), f"partition {partition}"
        assert len(target) - len(source) <= chunk * len(modes), (
            f"partition {partition}: {len(target) - len(source)} duplicates"
        )
        seen: set = set()
        firsts = [r for r in target if not (r in seen or seen.add(r))]
        assert firsts == source, f"partition {partition}: first copies out of source order"
