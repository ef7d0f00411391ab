"""What the status app keeps between refreshes (no Kafka: statuses as mirror_status returns them)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow import metrics
from mirrorflow.airflow.plugin import seconds_from_env
from mirrorflow.airflow.status_app import ago, outage_banners
from mirrorflow.control.mirror_status import (
    ERROR_CHARS,
    ClusterStatus,
    FlowStatus,
    MirrorStatus,
    UpstreamStatus,
    error_text,
)
from mirrorflow.control.status_snapshots import StatusSnapshots, carry_forward

T0 = 1_700_000_000_000


def good(at_ms: int) -> MirrorStatus:
    upstream = UpstreamStatus("A", 1, T0 - 2_000, 2.0, "A.heartbeats")
    return MirrorStatus(
        at_ms,
        [
            ClusterStatus("A", "DefaultReplicationPolicy", as_of_ms=at_ms),
            ClusterStatus("B", "DefaultReplicationPolicy", upstreams=[upstream], as_of_ms=at_ms),
        ],
        [
            FlowStatus(
                "A->B",
                "A",
                "B",
                last_run={"run_id": "r1", "totals": {"records": 7, "failed_partitions": 2}},
                last_run_ms=T0 - 60_000,
                lag={"orders": 3},
                as_of_ms=at_ms,
            )
        ],
    )


def b_down(at_ms: int) -> MirrorStatus:
    return MirrorStatus(
        at_ms,
        [
            ClusterStatus("A", "DefaultReplicationPolicy", as_of_ms=at_ms),
            ClusterStatus("B", "DefaultReplicationPolicy", error="cluster B at b:9092: _TRANSPORT"),
        ],
        [FlowStatus("A->B", "A", "B", error="target B unreachable: cluster B at b:9092: _TRANSPORT")],
    )


def test_values_of_an_unreachable_cluster_are_kept_stale_until_it_answers() -> None:
    first = carry_forward(None, good(T0))
    down = carry_forward(first, b_down(T0 + 15_000))
    flow = down.flow("A->B")
    assert flow.stale and flow.unreachable_since_ms == T0 + 15_000 and flow.as_of_ms == T0
    assert (flow.last_run, flow.lag) == (first.flow("A->B").last_run, {"orders": 3})
    cluster = down.cluster("B")
    assert cluster.stale and cluster.as_of_ms == T0 and cluster.unreachable_since_ms == T0 + 15_000
    assert cluster.upstreams[0].age_s == 17.0, "the newest heartbeat known keeps ageing"
    assert first.cluster("B").upstreams[0].age_s == 2.0, "the earlier snapshot is left as it was"
    assert not down.cluster("A").stale

    later = carry_forward(down, b_down(T0 + 30_000))
    assert later.flow("A->B").unreachable_since_ms == T0 + 15_000, "since the first failed read"
    assert later.flow("A->B").as_of_ms == T0 and later.flow("A->B").lag == {"orders": 3}

    text = metrics.render(later, now_ms=T0 + 31_000).decode()
    for line in (
        'mirrorflow_flow_stale{flow="A->B"} 1.0',
        'mirrorflow_flow_data_age_seconds{flow="A->B"} 31.0',
        'mirrorflow_flow_last_run_failed_partitions{flow="A->B"} 2.0',
        'mirrorflow_flow_progress_lag_records{flow="A->B",topic="orders"} 3.0',
        'mirrorflow_cluster_up{cluster="B"} 0.0',
        'mirrorflow_cluster_unreachable_seconds{cluster="B"} 16.0',
        'mirrorflow_cluster_unreachable_seconds{cluster="A"} 0.0',
        'mirrorflow_heartbeat_age_seconds{cluster="B",upstream="A"} 32.0',
        "mirrorflow_status_ready 1.0",
        "mirrorflow_status_snapshot_age_seconds 1.0",
    ):
        assert line in text, line

    (banner,) = outage_banners(later, T0 + 150_000)
    assert banner["text"] == (
        "B (target of A->B) unreachable since 2023-11-14 22:13:35 UTC (2 min 15 s ago); "
        "showing values as of 2023-11-14 22:13:20 UTC"
    )

    back = carry_forward(later, good(T0 + 45_000))
    assert not back.flow("A->B").stale and back.flow("A->B").unreachable_since_ms is None
    assert outage_banners(back, T0 + 46_000) == []


def test_a_flow_unreadable_with_its_clusters_up_gets_a_banner_of_its_own() -> None:
    broken = good(T0 + 15_000)
    broken.flows[0] = FlowStatus("A->B", "A", "B", error="progress of A->B cannot be read")
    status = carry_forward(good(T0), broken)
    (banner,) = outage_banners(status, T0 + 20_000)
    assert banner["kind"] == "flow" and banner["error"] == "progress of A->B cannot be read"
    assert banner["text"].startswith("flow A->B unreadable since ") and "(5 s ago)" in banner["text"]
    assert status.flow("A->B").last_run["run_id"] == "r1"


def test_a_failed_refresh_keeps_the_snapshot_and_says_why() -> None:
    reads = iter([good(T0), RuntimeError("config file: bad key x"), good(T0 + 15_000)])

    def read() -> MirrorStatus:
        answer = next(reads)
        if isinstance(answer, Exception):
            raise answer
        return answer

    snapshots = StatusSnapshots(read, interval_s=60)
    assert snapshots.refresh().generated_ms == T0
    assert snapshots.refresh().generated_ms == T0
    assert snapshots.describe(T0 + 1_000)["refresh_error"] == "config file: bad key x"
    assert snapshots.refresh().generated_ms == T0 + 15_000
    assert snapshots.describe(T0 + 16_000)["refresh_error"] is None


def test_requests_do_not_wait_past_their_bound_for_the_first_snapshot() -> None:
    release = threading.Event()

    def slow_read() -> MirrorStatus:
        release.wait(10)
        return good(T0)

    snapshots = StatusSnapshots(slow_read, interval_s=60)
    try:
        assert snapshots.current(wait_s=0.1) is None
        assert snapshots.describe(T0)["state"] == "collecting"
        assert b"mirrorflow_status_ready 0.0" in metrics.render(None)
        release.set()
        assert snapshots.current(wait_s=10) is not None
        assert snapshots.running
    finally:
        release.set()
        snapshots.stop()
    assert not snapshots.running


def test_bad_intervals_are_refused() -> None:
    with pytest.raises(ValueError, match="more than 0 s"):
        StatusSnapshots(lambda: good(T0), interval_s=0)


def test_refresh_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIRRORFLOW_STATUS_REFRESH_S", raising=False)
    assert seconds_from_env("MIRRORFLOW_STATUS_REFRESH_S", 15.0) == 15.0
    monkeypatch.setenv("MIRRORFLOW_STATUS_REFRESH_S", "30")
    assert seconds_from_env("MIRRORFLOW_STATUS_REFRESH_S", 15.0) == 30.0
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv("MIRRORFLOW_STATUS_REFRESH_S", bad)
        with pytest.raises(ValueError, match="MIRRORFLOW_STATUS_REFRESH_S"):
            seconds_from_env("MIRRORFLOW_STATUS_REFRESH_S", 15.0)


def test_errors_shown_are_bounded_and_carry_no_secret() -> None:
    error = KafkaException(KafkaError(KafkaError._AUTHENTICATION, "SASL failed for hunter2-secret"))
    text = error_text(error, {"sasl.password": "hunter2-secret", "bootstrap.servers": "b:9092"})
    assert text == "_AUTHENTICATION: SASL failed for [redacted]"
    assert len(error_text(RuntimeError("x" * 5_000))) == ERROR_CHARS


def test_relative_ages() -> None:
    assert [ago(s) for s in (0, 35, 125, 3 * 3600 + 240 + 5, 2 * 86_400 + 3_600)] == [
        "0 s ago",
        "35 s ago",
        "2 min 5 s ago",
        "3 h 4 min ago",
        "2 d 1 h ago",
    ]
