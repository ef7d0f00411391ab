"""What a micro-batch window logs, on real Kafka: status lines only when something moved (an idle
window printed one every 5 s, 720 an hour)."""

from __future__ import annotations

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config
from .window_tools import WindowRun

MICRO_BATCH = "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = 200\n"


def test_an_idle_window_logs_what_it_holds_once_and_then_nothing_for_a_minute(
    shared_clusters, unique
) -> None:
    a, b = shared_clusters[:2]
    topic = unique("mb-idle")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, [{"key": b"k", "value": b"v", "partition": 0}])
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 1\n" + MICRO_BATCH)
    window = WindowRun(config, unique("idle"), length_s=20, handover=False)
    window.start()
    result = window.result()

    assert result.ok, (result.error, result.report.failure_message())
    assert result.report.totals()["records"] == 1
    # Its first status (the record copied, two partitions held); then 15 s of nothing: no line.
    assert len(window.lines) == 1, window.lines
    assert window.lines[0].startswith(f"window {window.flow.name}: 1 records"), window.lines
