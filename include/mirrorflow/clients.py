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
from mirrorflow.kafka import LIBRDKAFKA_LOG

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
