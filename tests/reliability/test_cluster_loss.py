"""A cluster that dies in the middle of a run: the run ends in seconds with one cause per
partition (no traceback, no flood of client lines), and the next run after the cluster is back
leaves the target equal to the source, record for record."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..conftest import Cluster
from ..integration.kafkatools import create_topics, produce_keyed, read_all
from ..integration.mirror_setup import mm2_text

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")
RECORDS, PARTITIONS = 240_000, 4
# A killed broker comes back once the controller has expired its old session.
FAST_SESSIONS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000}


def remote_end(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    try:
        return sum(f.result(5).offset for f in admin.list_offsets(request).values())
    except Exception:  # noqa: BLE001 - the topic may not exist yet
        return 0


# Losing the source is the family's long variant (`make chaos`); `make test` loses the target.
@pytest.mark.parametrize("lost", ["target", pytest.param("source", marks=pytest.mark.chaos)])
def test_a_cluster_killed_mid_copy_ends_the_run_in_seconds_and_the_next_run_completes(
    local_kafka, tmp_path, lost
) -> None:
    a_kafka, b_kafka = local_kafka(overrides=FAST_SESSIONS), local_kafka(overrides=FAST_SESSIONS)
    a, b = Cluster("A", a_kafka.bootstrap, a_kafka), Cluster("B", b_kafka.bootstrap, b_kafka)
    create_topics(a.bootstrap, ("big", PARTITIONS))
    produce_keyed(a.bootstrap, "big", RECORDS, PARTITIONS, b"v" * 200)
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_text(
            [a, b],
            ["A->B"],
            "A->B.topics = big\nmirrorflow.range.max.records = 2000\n"
            "mirrorflow.cluster.unreachable.timeout.ms = 5000\n"
            # A small fetch queue: a copy must still be reading the source when it dies, however
            # late under load the test sees the target fill up and kills it.
            "A.consumer.queued.max.messages.kbytes = 1024\nA.consumer.max.partition.fetch.bytes = 262144\n",
        )
    )
    command = [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"]

    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while remote_end(b.bootstrap, "A.big") < 20_000:
            assert run.poll() is None and time.monotonic() < deadline, "the copy did not get going"
            time.sleep(0.1)
        victim = a_kafka if lost == "source" else b_kafka
        victim.kill()
        killed = time.monotonic()
        output, _ = run.communicate(timeout=180)
        took = time.monotonic() - killed
    finally:
        if run.poll() is None:
            run.kill()
    text = output.decode(errors="replace")

    assert run.returncode == 1, text[-3000:]
    # The limit is 5 s: every copy waiting on the dead cluster gives up when it is reached (they
    # used to give up one after another: 55-58 s with the default 15 s limit), a request made after
    # it waits at most METADATA_FLOOR_S more, the report gets a short last chance, and nothing else
    # waits on the dead cluster. Measured: 10-12 s with the machine loaded by other tests or busy
    # processes, 26 s once beside the suite's kill tests (CPU-starved workers); before the fixes of
    # issue 21's defect 11, 49 s in CI. The bound leaves room for that load, not for a wait per copy.
    assert took < 35, f"the run took {took:.0f}s to give up after the {lost} died:\n{text[-3000:]}"
    assert "Traceback" not in text
    assert len(output) < 30_000, f"{len(output)} bytes of output"
    alias = "A" if lost == "source" else "B"
    bootstrap = victim.bootstrap
    assert f"cluster {alias} ({bootstrap}) has been unreachable" in text
    failed_lines = [line for line in text.splitlines() if line.strip().startswith("big-")]
    assert failed_lines and all(f"cluster {alias} ({bootstrap})" in line for line in failed_lines)
    if lost == "source":
        # Not measured (the source is gone): once "0", which read as caught up.
        row = next(line for line in text.splitlines() if "A.big" in line and "│" in line)
        assert row.split("│")[7].strip() == "unknown", row

    victim.start()
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    for partition in range(PARTITIONS):
        source = read_all(a.bootstrap, "big", partition)
        target = read_all(b.bootstrap, "A.big", partition)
        assert [r.content() for r in target] == [r.content() for r in source], partition
        assert len(source) == RECORDS // PARTITIONS
