"""The replication status built on MirrorClient (control/mirror_client.py).

`mirror_status` adds what MirrorClient does not: how old the newest heartbeat from each upstream
cluster is (an upper bound on that path's replication lag), which heartbeat jobs write into each
cluster, each flow's last run summary and last verification from the run-records topic, and
each flow's lag now, from the source offsets MM2 and mirrorflow both store (so a flow MM2 runs
shows it too). The status page, its metrics and `mirrorflow status` reuse it. A cluster that
does not answer is read once per status: the flows into and out of it are not asked again, so a
dead cluster costs one timeout, and their errors say which cluster is down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.config.replicate_mode import MICRO_BATCH
from mirrorflow.config.secrets import REDACTED, is_secret_key
from mirrorflow.control.mirror_client import (
    TIMEOUT_S,
    MirrorClient,
    ReplicationView,
    cluster_client_configs,
    cluster_policy,
    count_hops,
    status_client_config,
)
from mirrorflow.control.window_status import window_lag
from mirrorflow.kafka import KafkaCallError, admin_client
from mirrorflow.kafka_diagnosis import no_answer
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.ops.migration_evidence import MIGRATION_SUMMARY_KIND
from mirrorflow.ops.verification.report import SUMMARY_KIND as VERIFY_SUMMARY_KIND
from mirrorflow.policy import should_replicate_topic
from mirrorflow.replicate.progress import ProgressReadError, read_progress
from mirrorflow.replicate.run_history import newest_run_records

log = logging.getLogger("mirrorflow.status")

SUMMARY_KIND = "summary"
HISTORY_ROWS = 10  # migrations and verifications of a flow listed, the newest first
ERROR_CHARS = 400  # an error shown on the status: librdkafka's lines can run long
# librdkafka's answers that mean nothing of the cluster can be read now (its brokers down or not
# reachable from here, or refusing our login), not that one topic or permission is missing.
UNREACHABLE_CODES = (
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
    KafkaError._AUTHENTICATION,
)


@dataclass
class UpstreamStatus:
    """An upstream cluster as this cluster's heartbeat topics show it."""

    alias: str
    hops: int
    last_heartbeat_ms: int | None
    age_s: float | None
    via: str | None  # the heartbeat topic holding the newest heartbeat from it


@dataclass
class ClusterStatus:
    alias: str
    policy: str
    heartbeat_topics: list[str] = field(default_factory=list)
    checkpoint_topics: list[str] = field(default_factory=list)
    remote_topics: dict[str, list[str]] = field(default_factory=dict)  # direct source -> topics
    upstreams: list[UpstreamStatus] = field(default_factory=list)
    # heartbeat jobs writing into this cluster's own `heartbeats`: "S->alias" -> newest timestamp
    heartbeat_jobs: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    as_of_ms: int | None = None  # when the values above were read (None: never)
    # Set by a long-running reader (control.status_snapshots) that keeps the last values read
    # while the cluster does not answer: stale from the first failed read until one succeeds.
    stale: bool = False
    unreachable_since_ms: int | None = None


@dataclass
class FlowStatus:
    flow: str
    source: str | None = None
    target: str | None = None
    # The flow's cap in the config now (mirrorflow.replicate.max.bytes.per.second); 0: none.
    max_bytes_per_second: int = 0
    last_run: dict[str, Any] | None = None
    last_run_ms: int | None = None  # when the summary was written
    # The newest verification's verdict and figures (verification_overview); its mismatches stay
    # in the stored summary and report.
    last_verification: dict[str, Any] | None = None
    last_verification_ms: int | None = None  # when its summary was written
    # The newest migrations and verifications of the flow (history_entry), the newest first.
    history: list[dict[str, Any]] = field(default_factory=list)
    # Offsets of the source not replicated yet, per source topic, measured now from the flow's
    # stored source offsets, which MM2 and mirrorflow both keep: it shows a flow MM2 runs too.
    lag: dict[str, int] | None = None
    # A micro-batch flow's newest window: lag in seconds now and over the last minutes, per topic
    # too (control.window_status.window_overview); None for a batch flow.
    window: dict[str, Any] | None = None
    error: str | None = None
    as_of_ms: int | None = None  # when the values above were read in full (None: not this time)
    # As for ClusterStatus: set by control.status_snapshots when it shows values of an earlier read.
    stale: bool = False
    unreachable_since_ms: int | None = None


@dataclass
class MirrorStatus:
    generated_ms: int
    clusters: list[ClusterStatus]
    flows: list[FlowStatus]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cluster(self, alias: str) -> ClusterStatus:
        return next(c for c in self.clusters if c.alias == alias)

    def flow(self, name: str) -> FlowStatus:
        return next(f for f in self.flows if f.flow == name)


def heartbeat_age(now_ms: int, timestamp_ms: int | None) -> float | None:
    return None if timestamp_ms is None else round(max(0, now_ms - timestamp_ms) / 1000, 3)


def unreachable(exc: BaseException) -> bool:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() in UNREACHABLE_CODES


def error_text(exc: BaseException, *client_configs: dict[str, Any]) -> str:
    """An error fit for the status page: librdkafka's error name and text, any secret of the
    clients involved masked (librdkafka does not put them in errors; a wrapper might), and cut
    to ERROR_CHARS."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    text = (
        f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(exc) or type(exc).__name__
    )
    for config in client_configs:
        for key, value in config.items():
            if is_secret_key(key) and isinstance(value, str) and len(value) >= 4:
                text = text.replace(value, REDACTED)
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def cluster_status(client: MirrorClient, alias: str, now_ms: int) -> ClusterStatus:
    """One cluster's MirrorClient answers plus the freshness of every heartbeat topic."""
    status = ClusterStatus(alias=alias, policy=type(client.policy).__name__)
    topics = client.list_topics()
    view = ReplicationView(client.policy, frozenset(topics))
    heartbeat_topics = sorted(view.heartbeat_topics())
    status.heartbeat_topics = heartbeat_topics
    status.checkpoint_topics = sorted(view.checkpoint_topics())
    for topic in sorted(view.remote_topics()):
        status.remote_topics.setdefault(str(client.policy.topic_source(topic)), []).append(topic)
    newest = client.latest_heartbeats({topic: topics[topic] for topic in heartbeat_topics})
    for topic, beats in newest.items():
        if client.policy.topic_source(topic) is None:
            status.heartbeat_jobs.update({f"{s}->{t}": ts for (s, t), ts in sorted(beats.items())})
    for upstream in sorted(view.upstream_clusters()):
        carriers = [t for t in heartbeat_topics if count_hops(client.policy, t, upstream) != -1]
        stamped = [(max(newest[t].values()), t) for t in carriers if newest[t]]
        last_ms, via = max(stamped) if stamped else (None, None)
        status.upstreams.append(
            UpstreamStatus(
                upstream, view.replication_hops(upstream), last_ms, heartbeat_age(now_ms, last_ms), via
            )
        )
    return status


def verification_overview(summary: dict[str, Any]) -> dict[str, Any]:
    """What the status shows of a verification summary: its verdict and figures, a few hundred
    bytes whatever the summary's mismatch and topic lists hold."""
    totals = summary.get("totals", {})
    return {
        "run_id": summary.get("run_id"),
        "verdict": summary.get("verdict"),
        "finished_ms": summary.get("finished_ms"),
        "matched": totals.get("matched", 0),
        "wrong_total": totals.get("wrong_total", 0),
        "explained_total": totals.get("explained_total", 0),
        # Copies the target removed: below every position still needed (explained), and not.
        "removed_from_target": totals.get("explained", {}).get("removed_from_target", 0),
        "removed_needed": totals.get("removed_needed", 0),
        "pending": totals.get("pending", 0),
        "failed_partitions": totals.get("failed_partitions", 0),
        "sample": summary.get("sample"),
        "confidence": summary.get("confidence"),
        "mismatch_count": summary.get("mismatch_count", 0),
    }


def migration_overview(summary: dict[str, Any]) -> dict[str, Any]:
    """What the status shows of a migration summary: its outcome and figures."""
    moved = summary.get("groups_moved") or summary.get("would_move") or []
    return {
        "run_id": summary.get("run_id"),
        "outcome": summary.get("outcome"),
        "done": summary.get("done", not summary.get("failed_steps")),
        "records": summary.get("records"),
        "verdict": summary.get("verdict"),
        "approval": summary.get("approval"),
        "dry_run": summary.get("dry_run", False),
        "groups_moved": len(moved),
        "groups_blocked": len(summary.get("groups_blocked") or {}),
    }


def history(
    verifications: list[tuple[dict[str, Any], int]], migrations: list[tuple[dict[str, Any], int]]
) -> list[dict[str, Any]]:
    """Migrations and verifications, each with its kind and when its summary was written, the
    newest first, at most HISTORY_ROWS."""
    rows = [{"kind": "verification", "at_ms": at, **verification_overview(s)} for s, at in verifications]
    rows += [{"kind": "migration", "at_ms": at, **migration_overview(s)} for s, at in migrations]
    return sorted(rows, key=lambda r: -r["at_ms"])[:HISTORY_ROWS]


def flow_lag(
    flow: FlowConfig, *, connection_extra: ConnectionExtra | None = None, timeout_s: float = TIMEOUT_S
) -> dict[str, int]:
    """Offsets each replicated source topic holds beyond the flow's progress, now.

    Progress is MirrorSourceConnector's Connect source offsets in `offset.storage.topic` on the
    target: mirrorflow writes it, and so does MirrorMaker 2 (every offset.flush.interval.ms), so
    the figure is the same whichever of them runs the flow. A partition never replicated counts
    from its log start. The end is the last stable offset, as a replicate run plans it.
    """
    admin_config = status_client_config(flow, "source", "admin", connection_extra)
    consumer = status_client_config(flow, "target", "consumer", connection_extra)
    admin = admin_client(admin_config)
    topics = admin.list_topics(timeout=timeout_s).topics
    parts = [
        (name, p)
        for name, meta in sorted(topics.items())
        if meta.error is None and should_replicate_topic(flow, name)
        for p in meta.partitions
    ]
    earliest = list_offsets(admin, parts, OffsetSpec.earliest())
    ends = list_offsets(admin, parts, OffsetSpec.latest())
    progress = read_progress(consumer, flow.offset_storage_topic, flow.source, timeout_s=timeout_s)
    lag: dict[str, int] = {}
    for topic, partition in parts:
        done = progress.get((topic, partition))
        start = earliest[(topic, partition)] if done is None else max(done + 1, earliest[(topic, partition)])
        lag[topic] = lag.get(topic, 0) + max(0, ends[(topic, partition)] - start)
    return lag


def mirror_status(
    config: MirrorConfig,
    *,
    connection_extra: ConnectionExtra | None = None,
    timeout_s: float = TIMEOUT_S,
    clusters: Iterable[str] | None = None,
) -> MirrorStatus:
    """Every cluster's (or the named ones') replication paths and every replication flow's last run
    and last verification.

    A cluster that cannot be reached gets an `error` instead of failing the whole status, and so
    does every flow into it (nothing of it can be read: its run records live there) or out of it
    (its lag cannot be measured; the run records on the target still are read), without waiting
    on it once more.
    """
    now_ms = int(time.time() * 1000)
    wanted = list(clusters) if clusters is not None else list(config.clusters)
    cluster_rows = []
    down: dict[str, str] = {}  # clusters that do not answer at all: not asked again for their flows
    for alias in wanted:
        admin, consumer = cluster_client_configs(config, alias, connection_extra=connection_extra)
        # Asked first with the probe that says why a cluster does not answer: a host that does not
        # resolve or a protocol mismatch is told at once, in words, instead of after the whole
        # wait as librdkafka's "Broker transport failure".
        why_not = no_answer(admin, timeout_s)
        if why_not is not None:
            where = admin.get("bootstrap.servers", "?")
            error = f"cluster {alias} at {where} (waited up to {timeout_s:g}s): {error_text(KafkaCallError(why_not), admin, consumer)}"
            log.warning("status of %s: %s", alias, error)
            policy = type(cluster_policy(config, alias)).__name__
            cluster_rows.append(ClusterStatus(alias=alias, policy=policy, error=error))
            down[alias] = error
            continue
        try:
            client = MirrorClient(
                admin, cluster_policy(config, alias), consumer_config=consumer, timeout_s=timeout_s
            )
            row = cluster_status(client, alias, now_ms)
            row.as_of_ms = now_ms
            cluster_rows.append(row)
        except (KafkaException, KafkaCallError) as exc:
            where = admin.get("bootstrap.servers", "?")
            why = error_text(exc, admin, consumer)
            error = f"cluster {alias} at {where} (waited up to {timeout_s:g}s): {why}"
            log.warning("status of %s: %s", alias, error)
            policy = type(cluster_policy(config, alias)).__name__
            cluster_rows.append(ClusterStatus(alias=alias, policy=policy, error=error))
            if unreachable(exc):
                down[alias] = error
    flow_rows = []
    for flow in config.replication_flows:
        if clusters is not None and flow.target not in wanted:
            continue
        flow_rows.append(
            flow_status(flow, down, connection_extra=connection_extra, timeout_s=timeout_s, now_ms=now_ms)
        )
    return MirrorStatus(now_ms, cluster_rows, flow_rows)


def flow_status(
    flow: FlowConfig,
    down: dict[str, str],
    *,
    connection_extra: ConnectionExtra | None,
    timeout_s: float,
    now_ms: int,
) -> FlowStatus:
    """One flow's last run, last verification and lag now; `down` names the clusters found not
    answering (alias -> why), which are not asked again. `as_of_ms` is set when all was read."""
    row = FlowStatus(
        flow.name,
        source=flow.source,
        target=flow.target,
        max_bytes_per_second=flow.replicate_max_bytes_per_second,
    )
    if flow.target in down:
        row.error = f"target {flow.target} unreachable: {down[flow.target]}"
        return row
    consumer = status_client_config(flow, "target", "consumer", connection_extra)
    try:
        found = newest_run_records(
            consumer,
            flow.name,
            {SUMMARY_KIND: 1, VERIFY_SUMMARY_KIND: HISTORY_ROWS, MIGRATION_SUMMARY_KIND: HISTORY_ROWS},
            timeout_s=timeout_s,
        )
        if SUMMARY_KIND in found:
            row.last_run, row.last_run_ms = found[SUMMARY_KIND][0]
        if VERIFY_SUMMARY_KIND in found:
            summary, row.last_verification_ms = found[VERIFY_SUMMARY_KIND][0]
            row.last_verification = verification_overview(summary)
        row.history = history(found.get(VERIFY_SUMMARY_KIND, []), found.get(MIGRATION_SUMMARY_KIND, []))
        if flow.replicate_mode == MICRO_BATCH:
            row.window = window_lag(consumer, flow.name, timeout_s=timeout_s)
        if flow.source in down:
            row.error = f"source {flow.source} unreachable: {down[flow.source]}"
            return row
        row.lag = flow_lag(flow, connection_extra=connection_extra, timeout_s=timeout_s)
    except (KafkaException, KafkaCallError, ProgressReadError) as exc:
        source = status_client_config(flow, "source", "admin", connection_extra)
        row.error = error_text(exc, consumer, source)
        return row
    row.as_of_ms = now_ms
    return row
