"""Faults in the middle of a micro-batch window, on the worker's shared clusters (Kafka's default
session and transaction settings), in one chain of windows run as `mirrorflow replicate` runs
them while a seeded producer keeps writing:

1. a window's command killed (SIGKILL, its whole process group: the command and its workers) at
   a seeded moment mid-window; the next window fences the dead writers, takes over, and leaves
   the target equal to the source: nothing lost, nothing twice, offset-syncs exact, progress at
   the source's end;
2. the target cluster killed mid-window: the window fails within
   mirrorflow.cluster.unreachable.timeout.ms with one error naming the cluster and no traceback,
   and after the target is back (it waits out broker.session.timeout.ms, 9 s by default) the
   next window resumes exactly. Two defects made this fail: a batch that met the dead target
   while checking its topics' identities failed with "unexpected TimeoutError" and a traceback
   (DescribeTopics' futures raise TimeoutError, not KafkaException), and a task holding no
   partition (here the topic's partitions are all the other task's) went on until the window's
   end, holding the window up.

One chain instead of two tests: the window after the kill is the one whose target dies, so each
fault costs one window start fewer. The kill takes the window's command and its task processes
at once; an executor killed under Spark leaves Kafka the same state (writers gone mid-transaction)
and is run on the suite's standalone cluster (tests/e2e/test_microbatch_window.py).
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.replicate.plan import writer_slot
from mirrorflow.replicate.progress import read_progress

from ..integration.kafkatools import create_topics
from ..integration.mirror_setup import mm2_text
from ..integration.window_tools import SteadyProducer
from .test_kill_nine import MIRRORFLOW, PROGRESS, assert_copied_once, kill_nine

SEED = 7_331
PARTITIONS = 4
RATE = 1_000  # records a second while windows run
UNREACHABLE_MS = 5_000


def _flow(topic: str) -> str:
    return (
        f"A->B.topics = {topic}\ntasks.max = 2\nemit.heartbeats.enabled = false\n"
        "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = 200\n"
        f"mirrorflow.cluster.unreachable.timeout.ms = {UNREACHABLE_MS}\n"
    )


def _quiet(topic: str) -> frozenset[int]:
    """The partitions of the second of two tasks (the flow's two writer slots, tasks.max 2): the
    producer leaves them quiet, so that task has nothing to copy, and it must notice the lost
    target too."""
    return frozenset(p for p in range(PARTITIONS) if writer_slot(topic, p, 2) % 2 == 1)


def _remote_end(admin: AdminClient, remote: str) -> int:
    """The remote topic's last stable offsets, summed: what windows committed so far (and their
    transaction markers); 0 while it is not there."""
    request = {TopicPartition(remote, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    try:
        answers = admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5
        ).values()
        return sum(f.result(5).offset for f in answers)
    except Exception:  # noqa: BLE001 - not created yet
        return 0


def _window(command: list[str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_copies(admin: AdminClient, remote: str, goal: int, run: subprocess.Popen, where: str) -> None:
    deadline = time.monotonic() + 90
    while _remote_end(admin, remote) < goal:
        assert run.poll() is None, f"{where}: the window ended (code {run.returncode}) before copying {goal}"
        assert time.monotonic() < deadline, f"{where}: the window did not copy {goal} records within 90s"
        time.sleep(0.1)


def _next_window(command: list[str], log: Path, producer: SteadyProducer, where: str) -> None:
    """A short window that takes over while the producer still writes; the producer stops well
    before the window's end, so the window's last batches copy everything."""
    run = _window([*command, "--window", "6"], log)
    time.sleep(2)
    producer.stop()
    assert run.wait(120) == 0, f"{where}: the next window failed:\n{log.read_text()[-3000:]}"


def _behind(a, b, topic: str) -> int:
    """Offsets of the source the mirror's progress has not reached yet."""
    admin = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 0})
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    ends = {tp.partition: f.result(10).offset for tp, f in admin.list_offsets(request).items()}
    progress = read_progress({"bootstrap.servers": b.bootstrap}, PROGRESS, "A")
    return sum(end - 1 - progress.get((topic, p), -1) for p, end in ends.items())


def _windows_until_caught_up(command: list[str], log: Path, a, b, topic: str, where: str) -> None:
    """Scheduled windows after a target came back: a window that starts while the restarted
    broker still loads its coordinators spends its 6 s waiting on it (seen under the suite's
    load: the takeover's producer got "Coordinator load in progress" until the window was over,
    and the window ended with its lag left, as it says). The next window copies what it left."""
    for window in range(1, 4):
        behind = _behind(a, b, topic)
        if behind == 0:
            return
        with log.open("ab") as out:
            out.write(f"\n--- window {window} after, {behind} offsets behind\n".encode())
            out.flush()
            run = subprocess.run(
                [*command, "--window", "6"], stdout=out, stderr=subprocess.STDOUT, timeout=120
            )
        assert run.returncode == 0, f"{where}: a window after failed:\n{log.read_text()[-3000:]}"
    assert _behind(a, b, topic) == 0, (
        f"{where}: three more windows did not catch up:\n{log.read_text()[-3000:]}"
    )


def test_a_window_killed_then_one_that_lost_its_target_are_followed_by_exact_windows(
    shared_clusters, unique, tmp_path
) -> None:
    a, b = shared_clusters[:2]
    assert b.kafka is not None, "the target is killed: it needs a cluster this test can restart"
    topic = unique("mb-faults")
    quiet = _quiet(topic)
    busy = [p for p in range(PARTITIONS) if p not in quiet]
    remote = f"A.{topic}"
    create_topics(a.bootstrap, (topic, PARTITIONS))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], _flow(topic)))
    command = [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"]
    rng = random.Random(SEED)
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})

    # 1. kill -9 mid-window, then the next window.
    where = f"seed {SEED}, kill -9"
    producer = SteadyProducer(
        a.bootstrap, topic, PARTITIONS, rate=RATE, seed=rng.randrange(1 << 30), only=busy
    )
    producer.start()
    killed = _window([*command, "--window", "300"], tmp_path / "killed.log")
    goal = rng.randrange(500, 3_000)
    _wait_for_copies(admin, remote, goal, killed, where)
    assert kill_nine(killed, where) > 1, f"{where}: the window had no worker processes to kill"
    _next_window(command, tmp_path / "after-kill.log", producer, where)
    assert_copied_once(a, b, topic, PARTITIONS, f"{where} (kill after {goal} records): ", quiet)

    # 2. the target killed mid-window: one clear error within the limit, then the next window.
    where = f"seed {SEED}, target killed"
    producer = SteadyProducer(
        a.bootstrap, topic, PARTITIONS, rate=RATE, seed=rng.randrange(1 << 30), only=busy
    )
    producer.start()
    log = tmp_path / "target-lost.log"
    lost = _window([*command, "--window", "300"], log)
    try:
        _wait_for_copies(admin, remote, _remote_end(admin, remote) + rng.randrange(500, 3_000), lost, where)
        b.kafka.kill()
        died = time.monotonic()
        lost.wait(120)
        took = time.monotonic() - died
    finally:
        if lost.poll() is None:
            kill_nine(lost, where)
    text = log.read_text(errors="replace")
    b.kafka.start()

    assert lost.returncode == 1, f"{where}:\n{text[-3000:]}"
    # Every task stops at the first batch that meets the limit; the report gets a short last
    # chance to be stored, and the command ends.
    assert took < UNREACHABLE_MS / 1000 + 20, f"{where}: the window took {took:.0f}s to fail"
    assert "Traceback" not in text and "unexpected" not in text, f"{where}:\n{text[-3000:]}"
    assert text.count(f"cluster B ({b.bootstrap}) has been unreachable") == 1, f"{where}:\n{text[-3000:]}"
    _next_window(command, tmp_path / "after-loss.log", producer, where)
    _windows_until_caught_up(command, tmp_path / "caught-up.log", a, b, topic, where)
    assert_copied_once(a, b, topic, PARTITIONS, f"{where}: ", quiet)
