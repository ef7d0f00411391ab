"""The six librdkafka client configs of one flow, resolved once and handed around as data.

Resolving reads Airflow connections (when the config names them), so it happens once per task
on the Airflow side or the Spark driver; executors receive plain dicts. The configs carry
credentials, so they never show in repr() and never go into task arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mirrorflow.config import FlowConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.kafka import LIBRDKAFKA_LOG, UNREACHABLE_TIMEOUT_KEY, ClusterUnreachable
from mirrorflow.kafka_diagnosis import no_answer

ClientConfig = dict[str, Any]


@dataclass(frozen=True)
class FlowClients:
    source_consumer: ClientConfig = field(repr=False)
    source_producer: ClientConfig = field(repr=False)
    source_admin: ClientConfig = field(repr=False)
    target_consumer: ClientConfig = field(repr=False)
    target_producer: ClientConfig = field(repr=False)
    target_admin: ClientConfig = field(repr=False)

    @classmethod
    def resolve(cls, flow: FlowConfig, connection_extra: ConnectionExtra | None = None) -> FlowClients:
        cache: dict[str, Any] = {}

        def extra(conn_id: str) -> Any:
            if conn_id not in cache:
                if connection_extra is None:
                    from mirrorflow.config.airflow_connections import fetch_connection_extra

                    cache[conn_id] = fetch_connection_extra(conn_id)
                else:
                    cache[conn_id] = connection_extra(conn_id)
            return cache[conn_id]

        def logged(config: ClientConfig) -> ClientConfig:
            # librdkafka's lines go through Python logging at their real level, repeats held back
            # (mirrorflow.kafka.RepeatFilter), unless the user gave a logger of their own.
            return {"logger": LIBRDKAFKA_LOG, **config}

        return cls(
            source_consumer=logged(flow.source_consumer_config(connection_extra=extra)),
            source_producer=logged(flow.source_producer_config(connection_extra=extra)),
            source_admin=logged(flow.source_admin_config(connection_extra=extra)),
            target_consumer=logged(flow.target_consumer_config(connection_extra=extra)),
            target_producer=logged(flow.target_producer_config(connection_extra=extra)),
            target_admin=logged(flow.target_admin_config(connection_extra=extra)),
        )

    def admin(self, side: str) -> ClientConfig:
        return self.source_admin if side == "source" else self.target_admin

    def consumer(self, side: str) -> ClientConfig:
        return self.source_consumer if side == "source" else self.target_consumer

    def producer(self, side: str) -> ClientConfig:
        return self.source_producer if side == "source" else self.target_producer


LOST_PROBE_S = 3.0
"""How long a caller that lost a cluster (its copy waited out the limit) asks again before it says so."""


def unreachable_now(flow: FlowConfig, clients: FlowClients) -> ClusterUnreachable | None:
    """The error a plan raises for a cluster of the flow that does not answer (which cluster, its
    role, its address, why, what to check), from a short probe (LOST_PROBE_S); None when both
    answer."""
    try:
        check_reachable(flow, clients, probe_s=LOST_PROBE_S)
    except ClusterUnreachable as exc:
        return exc
    return None


def lost_cluster(flow: FlowConfig, clients: FlowClients, seen: str) -> str:
    """The sentence for a cluster a copy lost (unreachable_now's), or `seen` (what the copy saw)
    when both clusters answer again by then."""
    now = unreachable_now(flow, clients)
    return seen if now is None else str(now)


def check_reachable(
    flow: FlowConfig,
    clients: FlowClients,
    timeout_s: float | None = None,
    *,
    probe_s: float | None = None,
    sides: tuple[str, ...] = ("source", "target"),
) -> None:
    """Raise ClusterUnreachable, naming the cluster, its role, its address and the setting to
    check, if the source or the target does not answer a metadata request within `timeout_s`
    (default: the flow's mirrorflow.cluster.unreachable.timeout.ms, which the error then names).

    A run starts with this so that a cluster that is down fails it in seconds with one clear
    error, instead of each later call waiting out its own timeout while librdkafka logs every
    failed connection. Only the address is shown: it comes from the client config, never the
    credentials next to it.

    `probe_s` asks for that long only, for a caller that has waited out the limit already (a copy
    that lost a cluster): the error still names the limit it waited. `sides` limits the check to
    the clusters the caller needs."""
    wait_s = flow.cluster_unreachable_timeout_ms / 1000 if timeout_s is None else timeout_s
    for side, alias in (("source", flow.source), ("target", flow.target)):
        if side not in sides:
            continue
        config = clients.admin(side)
        why = no_answer(config, wait_s if probe_s is None else min(probe_s, wait_s))
        if why is None:
            continue
        conn_id = flow.airflow_connection_id(side)
        address_key = f"{alias}.bootstrap.servers" + (
            f" (or bootstrap.servers in Airflow connection {conn_id!r})" if conn_id else ""
        )
        raise ClusterUnreachable.not_answering(
            alias,
            f"{side} of {flow.name}",
            str(config.get("bootstrap.servers", "(no bootstrap.servers)")),
            wait_s,
            why,
            address_key=address_key,
            wait_setting=UNREACHABLE_TIMEOUT_KEY if timeout_s is None else None,
        )
