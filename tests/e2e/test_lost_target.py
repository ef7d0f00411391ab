"""A target killed while a replicate run copies (issue 36, item 1), in a real Airflow DAG run
with a real Spark job.

The run used to stay "running" almost five minutes: the copy failed 74 s after the kill with
`spark-submit exited with code 1; the job's last errors: … Connection refused | Traceback …`,
was retried twice 30 s apart, and the report said `stopped before offset None`; the sentence a
plan says for a cluster that does not answer showed only when the next run's plan failed. Now the
copy fails once, its error is that sentence, and the report says it too.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.spark.outcome import LOST_MARK

from ..integration.kafkatools import create_topics, produce_keyed
from ..integration.mirror_setup import mm2_text

RECORDS = 60_000
LIMIT_S = 5


def first_records_landed(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> bool:
    """Whether records show in `topic` on the target within `timeout_s` (the copy is under way)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "watch", "isolation.level": "read_uncommitted"}
    )
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                highs = [
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2)[1]
                    for p in range(partitions)
                ]
            except Exception:  # noqa: BLE001 - the remote topic may not exist yet
                highs = []
            if highs and sum(highs) > 0:
                return True
            time.sleep(0.2)
        return False
    finally:
        consumer.close()


MODES = {
    "batch": "",
    # A window of a minute, a batch every 250 ms: the target is killed while it copies.
    "micro-batch": "A->B.mirrorflow.replicate.mode = micro-batch\nA->B.mirrorflow.microbatch.window.seconds = 60\n",
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_target_killed_mid_copy_fails_the_run_once_in_the_plans_sentence(
    airflow_home, kafka_clusters, tmp_path, mode
) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 4))
    produce_keyed(a.bootstrap, "orders", RECORDS, 4, b"x" * 500)
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_text(
            [a, b],
            ["A->B"],
            f"mirrorflow.cluster.unreachable.timeout.ms = {LIMIT_S * 1000}\n"
            # 30 MB at 300 kB/s: the copy is still running when the target is killed.
            "A->B.mirrorflow.replicate.max.bytes.per.second = 300000\n" + MODES[mode],
        )
    )
    env = {"MIRRORFLOW_CONFIG": str(config)}
    killed: list[float] = []

    def kill_when_copying() -> None:
        if first_records_landed(b.bootstrap, "A.orders", 4, 240):
            for node in b.kafka.nodes:
                node.kill()
            killed.append(time.monotonic())

    killer = threading.Thread(target=kill_when_copying, daemon=True)
    killer.start()
    result = airflow_home.dags_test("mirrorflow__A__B__replicate", env=env, timeout=600)
    ended = time.monotonic()
    killer.join(5)

    assert killed, "the copy never started writing the target"
    assert result.state == "failed", result.log[-4000:]
    states = airflow_home.task_states(result.dag_id, result.run_id, env=env)
    assert states == {"plan": "success", "copy": "failed", "report": "failed"}, states
    sentence = f"cluster B (target of A->B) at {b.bootstrap} did not answer within {LIMIT_S}s"
    lines = result.log.splitlines()
    assert sum(LOST_MARK in line for line in lines) == 1, "the copy was tried again after losing its target"
    told = [line for line in lines if sentence in line]
    assert len(told) >= 3, "the job, the copy task's error and the report each say it"
    assert "stopped before offset None" not in result.log
    # What the run took after the kill, Airflow's own start-up of the report task included: retried
    # copies (30 s apart, each waiting out the limit again) took it to almost five minutes; a copy
    # that noticed the loss only at its throttled chunk's next flush, 55 s (batch) and 59 s (window);
    # now 27 s and 30 s on a loaded 2-core machine (the bound is about 30 s).
    print(f"failed {ended - killed[0]:.1f}s after the kill")
    assert ended - killed[0] < 50, f"the run failed {ended - killed[0]:.0f}s after the kill"
