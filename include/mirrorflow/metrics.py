"""Prometheus metrics from a replication status (mirrorflow.control.mirror_status.MirrorStatus).

Airflow itself exports only StatsD/OpenTelemetry, so mirrorflow's status app serves these on
/metrics. Everything comes from one status snapshot: the last run of every flow (its figures
and the lag it left), every flow's last verification (its verdict and counts), every flow's lag
now (also for a flow MM2 runs), every micro-batch flow's lag in seconds (its newest window's
figures) and every cluster's upstreams (heartbeat age, hops).

The status app serves a snapshot that keeps the last known values of what cannot be read now
(mirrorflow.control.status_snapshots), so during an outage every series stays, with
`mirrorflow_flow_stale`, `mirrorflow_flow_data_age_seconds` and
`mirrorflow_cluster_unreachable_seconds` saying how old it is: alerts on run age or failed
partitions keep firing instead of going quiet for want of series.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mirrorflow.control.mirror_status import FlowStatus, MirrorStatus
from mirrorflow.ops.verification.report import PASSING
from mirrorflow.replicate.report import achieved_bytes_per_second

# ops.verification's verdicts, the passing ones first.
VERDICTS_OK = PASSING
VERDICTS = (*VERDICTS_OK, "incomplete", "failed")


class StatusCollector(Collector):
    """Series of one status snapshot; ages are taken at `now_ms` (the scrape), so they grow
    while the snapshot's values cannot be refreshed."""

    def __init__(self, status: MirrorStatus | None, now_ms: int) -> None:
        self.status = status
        self.now_ms = now_ms

    def collect(self) -> Iterator[GaugeMetricFamily]:
        status = self.status
        yield from snapshot_metrics(status, self.now_ms)
        if status is None:
            return
        up = GaugeMetricFamily(
            "mirrorflow_cluster_up", "1 if the cluster answered the status read", labels=["cluster"]
        )
        age = GaugeMetricFamily(
            "mirrorflow_heartbeat_age_seconds",
            "Age of the newest heartbeat that reached the cluster from an upstream cluster",
            labels=["cluster", "upstream"],
        )
        hops = GaugeMetricFamily(
            "mirrorflow_replication_hops",
            "Replication hops from an upstream cluster",
            labels=["cluster", "upstream"],
        )
        unreachable = GaugeMetricFamily(
            "mirrorflow_cluster_unreachable_seconds",
            "How long the cluster has not answered the status reads (0 while it answers)",
            labels=["cluster"],
        )
        for cluster in status.clusters:
            up.add_metric([cluster.alias], 0.0 if cluster.error else 1.0)
            since = cluster.unreachable_since_ms or status.generated_ms
            unreachable.add_metric([cluster.alias], _seconds(self.now_ms - since) if cluster.error else 0.0)
            for upstream in cluster.upstreams:
                if upstream.age_s is not None:
                    age.add_metric([cluster.alias, upstream.alias], upstream.age_s)
                hops.add_metric([cluster.alias, upstream.alias], float(upstream.hops))
        yield up
        yield unreachable
        yield age
        yield hops

        labels = ["flow"]
        last = GaugeMetricFamily(
            "mirrorflow_flow_last_run_timestamp_seconds",
            "When the flow's last run summary was written",
            labels=labels,
        )
        records = GaugeMetricFamily(
            "mirrorflow_flow_last_run_records", "Records copied by the last run", labels=labels
        )
        copied = GaugeMetricFamily(
            "mirrorflow_flow_last_run_bytes", "Bytes copied by the last run", labels=labels
        )
        rate = GaugeMetricFamily(
            "mirrorflow_flow_last_run_bytes_per_second",
            "Byte rate the last run's copy reached: its bytes over the copy's seconds",
            labels=labels,
        )
        cap = GaugeMetricFamily(
            "mirrorflow_flow_max_bytes_per_second",
            "The flow's configured byte-rate cap (mirrorflow.replicate.max.bytes.per.second); 0: none",
            labels=labels,
        )
        failed = GaugeMetricFamily(
            "mirrorflow_flow_last_run_failed_partitions",
            "Partitions the last run failed to copy",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "mirrorflow_flow_lag_records",
            "Offsets still to copy when the last run ended, per source topic",
            labels=["flow", "topic"],
        )
        lost = GaugeMetricFamily(
            "mirrorflow_flow_last_run_lost_to_retention",
            "Offsets the source deleted (retention, DeleteRecords) before the last run could copy them, "
            "per source topic",
            labels=["flow", "topic"],
        )
        progress_lag = GaugeMetricFamily(
            "mirrorflow_flow_progress_lag_records",
            "Offsets of the source not replicated yet, per source topic, measured when the status was read "
            "from the flow's stored source offsets (mirrorflow's or MirrorMaker 2's)",
            labels=["flow", "topic"],
        )
        stale = GaugeMetricFamily(
            "mirrorflow_flow_stale",
            "1 if the flow could not be read at the last refresh: its other series show the last values "
            "read (as old as mirrorflow_flow_data_age_seconds says)",
            labels=labels,
        )
        data_age = GaugeMetricFamily(
            "mirrorflow_flow_data_age_seconds",
            "Age of the flow's values shown: since they were last read in full",
            labels=labels,
        )
        for flow in status.flows:
            cap.add_metric([flow.flow], float(flow.max_bytes_per_second))
            stale.add_metric([flow.flow], 1.0 if flow.stale or flow.error else 0.0)
            if flow.as_of_ms is not None:
                data_age.add_metric([flow.flow], _seconds(self.now_ms - flow.as_of_ms))
            for topic, left in sorted((flow.lag or {}).items()):
                progress_lag.add_metric([flow.flow, topic], float(left))
            if flow.last_run is None or flow.last_run_ms is None:
                continue
            totals = flow.last_run.get("totals", {})
            last.add_metric([flow.flow], flow.last_run_ms / 1000)
            records.add_metric([flow.flow], float(totals.get("records", 0)))
            copied.add_metric([flow.flow], float(totals.get("bytes", 0)))
            achieved = achieved_bytes_per_second(flow.last_run)
            if achieved is not None:
                rate.add_metric([flow.flow], achieved)
            failed.add_metric([flow.flow], float(totals.get("failed_partitions", 0)))
            for topic, left in sorted(flow.last_run.get("lag_left", {}).items()):
                lag.add_metric([flow.flow, topic], float(left))
            for topic, row in sorted(flow.last_run.get("topics", {}).items()):
                lost.add_metric([flow.flow, topic], float(row.get("lost_to_retention", 0)))
        yield from (stale, data_age, cap, last, records, copied, rate, failed, lag, lost, progress_lag)
        yield from window_metrics(status.flows)
        yield from verification_metrics(status.flows)


def window_metrics(flows: list[FlowStatus]) -> Iterator[GaugeMetricFamily]:
    """Lag in seconds of every micro-batch flow's newest window (the oldest record not yet on the
    target: now, and p50 / p99 / max over the last minutes), per flow and per topic (its most
    lagging topics), with the window's records; `stat` is now, p50, p99 or max."""
    flow_lag = GaugeMetricFamily(
        "mirrorflow_flow_lag_seconds",
        "How long the oldest record not yet on the target has waited (micro-batch flows): now, and "
        "p50 / p99 / max over the last minutes",
        labels=["flow", "stat"],
    )
    topic_lag = GaugeMetricFamily(
        "mirrorflow_topic_lag_seconds",
        "As mirrorflow_flow_lag_seconds, per source topic (the most lagging topics of the window)",
        labels=["flow", "topic", "stat"],
    )
    records = GaugeMetricFamily(
        "mirrorflow_flow_window_records",
        "Records the flow's newest micro-batch window copied so far",
        labels=["flow"],
    )
    when = GaugeMetricFamily(
        "mirrorflow_flow_window_timestamp_seconds",
        "When the newest micro-batch window's tasks last stored their figures",
        labels=["flow"],
    )
    rate = GaugeMetricFamily(
        "mirrorflow_flow_window_bytes_per_second",
        "Bytes per second the newest micro-batch window copied over about the last minute",
        labels=["flow"],
    )
    for flow in flows:
        window = flow.window
        if window is None:
            continue
        records.add_metric([flow.flow], float(window["records"]))
        if "bytes_per_s" in window:
            rate.add_metric([flow.flow], float(window["bytes_per_s"]))
        when.add_metric([flow.flow], window["at_ms"] / 1000)
        flow_lag.add_metric([flow.flow, "now"], float(window["lag_now_s"]))
        for stat, value in window["lag_recent_s"].items():
            if value is not None:
                flow_lag.add_metric([flow.flow, stat], float(value))
        for topic, row in sorted(window["topics"].items()):
            topic_lag.add_metric([flow.flow, topic, "now"], float(row["lag_now_s"]))
            for stat in ("p50", "p99", "max"):
                if row.get(stat) is not None:
                    topic_lag.add_metric([flow.flow, topic, stat], float(row[stat]))
    yield from (flow_lag, topic_lag, records, rate, when)


def verification_metrics(flows: list[FlowStatus]) -> Iterator[GaugeMetricFamily]:
    """The last verification of every flow that has one; a flow never verified has no series,
    so `absent()` or `time() - mirrorflow_verification_timestamp_seconds` alerts on it."""
    labels = ["flow"]
    when = GaugeMetricFamily(
        "mirrorflow_verification_timestamp_seconds",
        "When the flow's last verification summary was written",
        labels=labels,
    )
    ok = GaugeMetricFamily(
        "mirrorflow_verification_ok",
        "1 if the flow's last verification passed (verified, or its sample passed), else 0",
        labels=labels,
    )
    verdict = GaugeMetricFamily(
        "mirrorflow_verification_verdict",
        "1 for the verdict of the flow's last verification, 0 for the others",
        labels=["flow", "verdict"],
    )
    matched = GaugeMetricFamily(
        "mirrorflow_verification_matched_records",
        "Records the last verification found copied exactly",
        labels=labels,
    )
    wrong = GaugeMetricFamily(
        "mirrorflow_verification_wrong_records",
        "Records the last verification found missing, different, unexpected or repeated on the target",
        labels=labels,
    )
    explained = GaugeMetricFamily(
        "mirrorflow_verification_explained_records",
        "Differences the last verification found explained (retention, compaction, at-least-once repeats)",
        labels=labels,
    )
    pending = GaugeMetricFamily(
        "mirrorflow_verification_pending_records",
        "Source offsets the last verification found not copied yet",
        labels=labels,
    )
    for flow in flows:
        last = flow.last_verification
        if last is None or flow.last_verification_ms is None:
            continue
        when.add_metric([flow.flow], flow.last_verification_ms / 1000)
        ok.add_metric([flow.flow], 1.0 if last["verdict"] in VERDICTS_OK else 0.0)
        for name in VERDICTS:
            verdict.add_metric([flow.flow, name], 1.0 if last["verdict"] == name else 0.0)
        matched.add_metric([flow.flow], float(last["matched"]))
        wrong.add_metric([flow.flow], float(last["wrong_total"]))
        explained.add_metric([flow.flow], float(last["explained_total"]))
        pending.add_metric([flow.flow], float(last["pending"]))
    yield from (when, ok, verdict, matched, wrong, explained, pending)


def snapshot_metrics(status: MirrorStatus | None, now_ms: int) -> Iterator[GaugeMetricFamily]:
    """Whether there is a snapshot yet and how old it is (a refresh that stalls shows here)."""
    ready = GaugeMetricFamily(
        "mirrorflow_status_ready", "1 once the first status snapshot has been read, 0 while collecting it"
    )
    ready.add_metric([], 0.0 if status is None else 1.0)
    yield ready
    if status is not None:
        age = GaugeMetricFamily(
            "mirrorflow_status_snapshot_age_seconds", "Age of the status snapshot these series come from"
        )
        age.add_metric([], _seconds(now_ms - status.generated_ms))
        yield age


def _seconds(ms: int) -> float:
    return round(max(0, ms) / 1000, 3)


def render(
    status: MirrorStatus | None, *, now_ms: int | None = None, extra: Iterable[Collector] = ()
) -> bytes:
    """The Prometheus text of a status snapshot (None: the first one is still being read), and
    of the `extra` collectors (the status app's series of Airflow's DAG runs)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(status, now_ms))
    for collector in extra:
        registry.register(collector)
    return generate_latest(registry)
