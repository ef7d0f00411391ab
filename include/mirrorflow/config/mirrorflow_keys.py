"""mirrorflow's own keys: one table (type, default, validator, doc) that the key reference
(docs/configuration/reference.md) is generated from.

They all start with `mirrorflow.` so MM2 ignores them when the same file runs under MM2; set them
at the top level for every flow or as `<source>-><target>.mirrorflow.…` for one flow. The one
per-cluster key, `<alias>.airflow.connection.id`, is ignored by MM2 the same way (it only ever
reaches an unused `source.cluster.*` connector setting).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from croniter import croniter

from mirrorflow.config.values import InvalidValue, parse_bool, parse_int

AIRFLOW_PRESETS = (
    "@once",
    "@continuous",
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@quarterly",
    "@yearly",
)
DELIVERY_CHOICES = ("exactly-once", "at-least-once")
MODE_CHOICES = ("batch", "micro-batch")
MIN_INTERVAL_MS = 10
MICROBATCH_INTERVAL_MS = 250
"""The default interval: p99 lag well under a second at 10,000 records/s for a fraction more CPU
per record than 1 s (docs/concepts/micro-batch.md, "Expected lag")."""
AIRFLOW_CONNECTION_KEY = "airflow.connection.id"


def parse_schedule(raw: str) -> str:
    value = raw.strip()
    if value in AIRFLOW_PRESETS or (not value.startswith("@") and croniter.is_valid(value)):
        return value
    raise InvalidValue(
        f"{value!r} is not a cron expression or an Airflow preset",
        "write a 5-field cron expression such as */5 * * * *, or one of " + ", ".join(AIRFLOW_PRESETS),
    )


def parse_positive(raw: str) -> int:
    value = parse_int(raw, kind="long")
    if value < 1:
        raise InvalidValue(f"{value} is not positive", "write a whole number of at least 1")
    return value


def parse_run_seconds(raw: str) -> int:
    value = parse_int(raw, kind="long")
    if value < 60:
        raise InvalidValue(
            f"{value} is under a minute",
            "write at least 60: Airflow runs a DAG at most about once a minute usefully",
        )
    return value


def parse_rate(raw: str) -> int:
    value = parse_int(raw, kind="long")
    if value < 0:
        raise InvalidValue(f"{value} is negative", "write a number of bytes per second, or 0 for no limit")
    return value


def parse_delivery(raw: str) -> str:
    value = raw.strip()
    if value not in DELIVERY_CHOICES:
        raise InvalidValue(f"{value!r} is not a delivery mode", "write exactly-once or at-least-once")
    return value


def parse_mode(raw: str) -> str:
    value = raw.strip()
    if value not in MODE_CHOICES:
        raise InvalidValue(f"{value!r} is not a replication mode", "write batch or micro-batch")
    return value


def parse_interval_ms(raw: str) -> int:
    value = parse_int(raw, kind="long", unit="milliseconds")
    if value < MIN_INTERVAL_MS:
        raise InvalidValue(
            f"{value} ms is shorter than {MIN_INTERVAL_MS} ms",
            f"write at least {MIN_INTERVAL_MS}: each interval asks the source for its end offsets once",
        )
    return value


def parse_window_seconds(raw: str) -> int:
    value = parse_int(raw, kind="long", unit="seconds")
    if value < 1:
        raise InvalidValue(f"{value} is not positive", "write a whole number of seconds, e.g. 3600")
    return value


def parse_connection_id(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise InvalidValue(
            "the connection id is empty", "write the id of an Airflow connection of type kafka"
        )
    return value


@dataclass(frozen=True, slots=True)
class MirrorflowKey:
    name: str
    type: str
    default: object
    parse: Callable[[str], object]
    doc: str
    scope: str = "top level or flow"

    @property
    def attribute(self) -> str:
        return self.name.removeprefix("mirrorflow.").replace(".", "_")


MIRRORFLOW_KEYS: tuple[MirrorflowKey, ...] = (
    MirrorflowKey(
        "mirrorflow.replicate.schedule",
        "cron, Airflow preset or @continuous",
        "*/5 * * * *",
        parse_schedule,
        "When a flow's replication DAG runs; @continuous starts the next run as soon as one ends.",
    ),
    MirrorflowKey(
        "mirrorflow.replicate.mode",
        "batch or micro-batch",
        "batch",
        parse_mode,
        "batch: each replication DAG run plans, copies what the source holds then and ends (lag: the "
        "schedule plus a run). micro-batch: each DAG run is a window, one Spark application that copies "
        "every mirrorflow.microbatch.interval.ms for mirrorflow.microbatch.window.seconds and hands "
        "over to the next window without a gap (lag: seconds); mirrorflow.replicate.schedule is not "
        "used then.",
    ),
    MirrorflowKey(
        "mirrorflow.microbatch.interval.ms",
        f"integer >= {MIN_INTERVAL_MS}",
        MICROBATCH_INTERVAL_MS,
        parse_interval_ms,
        "Micro-batch mode: how often a batch closes. Every interval each task of the window asks the "
        "source for its partitions' last stable offsets (one request) and copies what arrived since "
        "its last batch, committed with its progress; a record waits up to an interval for its batch, "
        "then the batch's copy and commit. Longer: fewer transactions, more lag.",
    ),
    MirrorflowKey(
        "mirrorflow.microbatch.window.seconds",
        "integer >= 1",
        3600,
        parse_window_seconds,
        "Micro-batch mode: how long one window (one DAG run, one Spark application) copies before the "
        "next one takes over; the replication DAG runs this often. The window is a checkpoint and "
        "reporting boundary, not the lag. `mirrorflow replicate --window` overrides it.",
    ),
    MirrorflowKey(
        "mirrorflow.range.max.records",
        "integer >= 1",
        100000,
        parse_positive,
        "Most offsets one copy range covers; a partition's backlog is cut into ranges of this size.",
    ),
    MirrorflowKey(
        "mirrorflow.range.max.bytes",
        "integer >= 1",
        67108864,
        parse_positive,
        "Most record bytes a copy range carries before it is cut (64 MiB).",
    ),
    MirrorflowKey(
        "mirrorflow.replicate.max.bytes.per.second",
        "integer >= 0",
        0,
        parse_rate,
        "Most record bytes (keys and values) a flow's copy moves per second, all its workers and Spark "
        "tasks together: each of a run's workers gets an equal share and holds its reads to it. 0: no limit.",
    ),
    MirrorflowKey(
        "mirrorflow.delivery",
        "exactly-once or at-least-once",
        "exactly-once",
        parse_delivery,
        "exactly-once: each range and its progress commit in one transaction; "
        "at-least-once: plain writes, so a retried range may write duplicates.",
    ),
    MirrorflowKey(
        "mirrorflow.provenance.headers.enabled",
        "boolean",
        True,
        parse_bool,
        "Stamp copied records with the mirrorflow.provenance header and never copy a record back where it has been.",
    ),
    MirrorflowKey(
        "mirrorflow.cluster.unreachable.timeout.ms",
        "integer >= 1",
        15000,
        parse_positive,
        "How long every broker of the source or the target may stay unreachable: a run (replicate, "
        "migrate, the DAGs' plan task) whose cluster does not answer within it when it starts fails "
        "with one error naming the cluster, its bootstrap servers and what to check, without Airflow "
        "retries; a copy that loses a cluster for this long gives up on it instead of waiting out each "
        "partition's timeouts.",
    ),
    MirrorflowKey(
        "mirrorflow.heartbeats.run.seconds",
        "integer >= 60",
        3600,
        parse_run_seconds,
        "How long one run of the mirrorflow_heartbeats DAG emits (every pair at its "
        "emit.heartbeats.interval.seconds) before the next run takes over: 3600 gives 24 DAG runs a day "
        "in Airflow's database for all pairs together; the shortest value set for any pair is used.",
    ),
    MirrorflowKey(
        f"<alias>.{AIRFLOW_CONNECTION_KEY}",
        "string",
        None,
        parse_connection_id,
        "Airflow connection (type mirrorflow_kafka or kafka) whose extra JSON of librdkafka properties overrides this cluster's client settings at run time.",
        scope="cluster",
    ),
)
FLOW_KEYS = {key.name: key for key in MIRRORFLOW_KEYS if key.scope != "cluster"}
CLUSTER_KEYS = {key.name.removeprefix("<alias>."): key for key in MIRRORFLOW_KEYS if key.scope == "cluster"}


def mirrorflow_keys_markdown() -> str:
    """The table of mirrorflow keys in docs/configuration/reference.md."""
    rows = ["| key | where | type | default | meaning |", "|---|---|---|---|---|"]
    for key in MIRRORFLOW_KEYS:
        default = (
            "(none)"
            if key.default is None
            else f"`{str(key.default).lower() if isinstance(key.default, bool) else key.default}`"
        )
        rows.append(f"| `{key.name}` | {key.scope} | {key.type} | {default} | {key.doc} |")
    return "\n".join(rows) + "\n"
