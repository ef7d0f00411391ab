"""The target cluster killed (SIGKILL, every node) in the middle of a copy and started again on
its data, with Kafka's default broker settings (no shortened session timeout), the next run
starting at several moments after the restart: the target ends up equal to the source, record for
record, whatever the moment.

Why the moments matter: a restarted KRaft node keeps its pre-crash registration until
broker.session.timeout.ms (9 s by default) has passed, then fences it, and for a moment its
partitions have no leader. Abort markers of the dead copy's transaction sent in that moment
(when the rerun's init_transactions ends it, or when the broker's own timeout does) were dropped,
leaving the transaction hanging, and the rerun's commit then made the dead copy's records
visible a second time (issue 21, defect 9; tests/reliability/test_hanging_transactions.py builds
that state on purpose). The suite's other fault tests shorten the session timeout to restart
quickly, which hid it; here every broker runs with Kafka's defaults.

The run being copied dies with the target (both are killed), as when an Airflow retry or the
next scheduled run is what comes after. Trials chain on one pair of clusters: each adds records,
copies, kills, restarts, waits its moment and reruns until a run succeeds. Seeded (SEED).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from localkafka import LocalKafka

from ..conftest import Cluster
from ..integration.kafkatools import create_topics, read_topic
from ..integration.mirror_setup import mm2_text
from .test_kill_nine import MIRRORFLOW, kill_nine

pytestmark = pytest.mark.local_kafka

SEED = 2_101
PARTITIONS = 4
PER_TRIAL = 8_000
FLOW = "A->B.topics = orders\nemit.heartbeats.enabled = false\nmirrorflow.range.max.records = 2000\ntasks.max = 2\n"
# Every topic the copy writes on the 3-broker target has three replicas; offset-syncs live there too.
DURABLE = (
    "offset-syncs.topic.location = target\nreplication.factor = 3\noffset.storage.replication.factor = 3\n"
    "offset-syncs.topic.replication.factor = 3\ncheckpoints.topic.replication.factor = 3\n"
)


def remote_end(admin: AdminClient) -> int:
    request = {TopicPartition("A.orders", p): OffsetSpec.latest() for p in range(PARTITIONS)}
    try:
        return sum(f.result(5).offset for f in admin.list_offsets(request, request_timeout=5).values())
    except Exception:  # noqa: BLE001 - down, or the topic not there yet
        return 0


def produce_trial(bootstrap: str, rng: random.Random, trial: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(PER_TRIAL):
        producer.produce(
            "orders",
            key=b"t%d-%d" % (trial, i),
            value=rng.randbytes(rng.randrange(50, 250)),
            partition=i % PARTITIONS,
        )
    assert producer.flush(30) == 0


def run_until_ok(command: list[str], log: Path, where: str) -> int:
    """Runs of the flow until one succeeds (the first may meet the target still starting); how
    many it took."""
    for attempt in range(1, 5):
        with log.open("ab") as out:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=300)
        if done.returncode == 0:
            return attempt
        time.sleep(2)
    raise AssertionError(f"{where}: no rerun succeeded:\n{log.read_text(errors='replace')[-4000:]}")


def crash_chain(
    source: LocalKafka, target: LocalKafka, tmp_path: Path, moments: list[float], durable: bool
) -> None:
    a, b = Cluster("A", source.bootstrap, source), Cluster("B", target.bootstrap, target)
    create_topics(a.bootstrap, ("orders", PARTITIONS))
    config = tmp_path / "crash.properties"
    if durable:
        config.write_text(
            f"clusters = A, B\nA.bootstrap.servers = {a.bootstrap}\nB.bootstrap.servers = {b.bootstrap}\n"
            "A->B.enabled = true\n" + FLOW + DURABLE
        )
    else:
        config.write_text(mm2_text([a, b], ["A->B"], FLOW))
    command = [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"]
    rng = random.Random(SEED)
    env = {**os.environ, "COLUMNS": "200"}
    for trial, moment in enumerate(moments):
        where = f"seed {SEED}, trial {trial} (rerun {moment:.1f}s after the restart)"
        produce_trial(a.bootstrap, rng, trial)
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
        goal = remote_end(admin) + int(PER_TRIAL * rng.uniform(0.2, 0.7))
        log = tmp_path / f"trial-{trial}.log"
        with log.open("wb") as out:
            run = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
        deadline = time.monotonic() + 180
        while run.poll() is None and remote_end(admin) < goal:
            assert time.monotonic() < deadline, f"{where}: the copy did not reach its kill point"
            time.sleep(0.01)
        for node in target.nodes:
            os.kill(node.process.pid, signal.SIGKILL)
        kill_nine(run, where)
        for node in target.nodes:
            node.process.wait(30)
        del admin
        target.launch()
        time.sleep(moment)
        runs = run_until_ok(command, log, where)
        target.wait_ready()
        source_records = read_topic(a.bootstrap, "orders", PARTITIONS)
        copied = read_topic(b.bootstrap, "A.orders", PARTITIONS)
        for p in range(PARTITIONS):
            twice = sum(n - 1 for n in Counter(r.content() for r in copied[p]).values())
            assert twice == 0, (
                f"{where}: partition {p}: {twice} records on the target twice (after {runs} runs)"
            )
            assert [r.content() for r in copied[p]] == [r.content() for r in source_records[p]], (
                f"{where}: partition {p}"
            )


def test_a_single_node_target_killed_mid_copy_with_kafkas_defaults_ends_exact(local_kafka, tmp_path) -> None:
    source = local_kafka()
    target = LocalKafka(tmp_path / "target")  # Kafka's defaults: no overrides at all
    try:
        target.start()
        crash_chain(source, target, tmp_path, [0.0, 4.0, 8.0], durable=False)
    finally:
        target.stop()


@pytest.mark.chaos  # the family's `make test` run is the single-node one above
def test_a_three_broker_target_killed_mid_copy_with_kafkas_defaults_ends_exact(local_kafka, tmp_path) -> None:
    source = local_kafka()
    target = LocalKafka(tmp_path / "target", brokers=3)
    try:
        target.start()
        crash_chain(source, target, tmp_path, [2.0, 7.0], durable=True)
    finally:
        target.stop()
