"""One ordered cluster pair S->T with every MM2 and mirrorflow setting resolved and typed.

A FlowConfig is what planning, copying, checkpointing and DAG generation read: typed values
with MM2's defaults, the flow's replication policy and filters, and the six client configs as
librdkafka property dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from mirrorflow.config import librdkafka
from mirrorflow.config.airflow_connections import fetch_connection_extra, merge_connection_extra
from mirrorflow.config.layers import java_client_settings
from mirrorflow.config.mirrorflow_keys import AIRFLOW_CONNECTION_KEY
from mirrorflow.config.problems import Problem
from mirrorflow.config.providers import Setting
from mirrorflow.config.secrets import REDACTED, is_secret_key
from mirrorflow.policy.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from mirrorflow.policy.replication import (
    ReplicationPolicy,
)

ConnectionExtra = Callable[[str], Mapping[str, object]]


def _interval(enabled: bool, seconds: int) -> timedelta | None:
    return timedelta(seconds=seconds) if enabled and seconds >= 0 else None


@dataclass(frozen=True, repr=False, eq=False)
class FlowConfig:
    """Flow `source`->`target`. Attribute names are MM2's keys with `.`/`-` as `_`.

    `enabled` is the replication switch (`S->T.enabled`); a flow that is not enabled may still
    exist for heartbeats, as MM2 creates the pair when heartbeats are on (see MirrorConfig).
    """

    source: str
    target: str
    settings: Mapping[str, Setting] = field(repr=False)
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    group_filter: GroupFilter
    config_property_filter: ConfigPropertyFilter
    # common
    enabled: bool
    tasks_max: int
    admin_timeout_ms: int
    replication_policy_class: str
    replication_policy_separator: str
    replication_policy_internal_topic_separator_enabled: bool
    offset_syncs_topic_location: str
    emit_offset_syncs_enabled: bool
    forwarding_admin_class: str
    topic_filter_class: str
    group_filter_class: str
    config_property_filter_class: str
    # source connector
    topics: tuple[str, ...]
    topics_exclude: tuple[str, ...]
    config_properties_exclude: tuple[str, ...]
    use_defaults_from: str
    consumer_poll_timeout_ms: int
    refresh_topics_enabled: bool
    refresh_topics_interval_seconds: int
    sync_topic_configs_enabled: bool
    sync_topic_configs_interval_seconds: int
    sync_topic_acls_enabled: bool
    sync_topic_acls_interval_seconds: int
    replication_factor: int
    offset_syncs_topic_replication_factor: int
    offset_lag_max: int
    heartbeats_replication_enabled: bool
    use_incremental_alter_configs: str
    add_source_alias_to_metrics: bool
    exactly_once_support: str
    # checkpoint connector
    groups: tuple[str, ...]
    groups_exclude: tuple[str, ...]
    refresh_groups_enabled: bool
    refresh_groups_interval_seconds: int
    emit_checkpoints_enabled: bool
    emit_checkpoints_interval_seconds: int
    sync_group_offsets_enabled: bool
    sync_group_offsets_interval_seconds: int
    checkpoints_topic_replication_factor: int
    # heartbeat connector
    emit_heartbeats_enabled: bool
    emit_heartbeats_interval_seconds: int
    heartbeats_topic_replication_factor: int
    # Connect worker of the herder (where MM2 keeps source offsets; mirrorflow's progress)
    offset_storage_topic: str
    offset_storage_replication_factor: int
    offset_storage_partitions: int
    # mirrorflow
    replicate_schedule: str
    replicate_mode: str
    microbatch_interval_ms: int
    microbatch_window_seconds: int
    range_max_records: int
    range_max_bytes: int
    replicate_max_bytes_per_second: int
    delivery: str
    provenance_headers_enabled: bool
    cluster_unreachable_timeout_ms: int
    heartbeats_run_seconds: int

    def __repr__(self) -> str:
        return f"FlowConfig({self.source}->{self.target}, enabled={self.enabled}, policy={self.policy!r})"

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    # periodic jobs: None when disabled (`*.enabled=false` or a negative interval), as in MM2
    @property
    def refresh_topics_interval(self) -> timedelta | None:
        return _interval(self.refresh_topics_enabled, self.refresh_topics_interval_seconds)

    @property
    def sync_topic_configs_interval(self) -> timedelta | None:
        return _interval(self.sync_topic_configs_enabled, self.sync_topic_configs_interval_seconds)

    @property
    def sync_topic_acls_interval(self) -> timedelta | None:
        return _interval(self.sync_topic_acls_enabled, self.sync_topic_acls_interval_seconds)

    @property
    def refresh_groups_interval(self) -> timedelta | None:
        return _interval(self.refresh_groups_enabled, self.refresh_groups_interval_seconds)

    @property
    def emit_checkpoints_interval(self) -> timedelta | None:
        return _interval(self.emit_checkpoints_enabled, self.emit_checkpoints_interval_seconds)

    @property
    def sync_group_offsets_interval(self) -> timedelta | None:
        return _interval(self.sync_group_offsets_enabled, self.sync_group_offsets_interval_seconds)

    @property
    def emit_heartbeats_interval(self) -> timedelta | None:
        return _interval(self.emit_heartbeats_enabled, self.emit_heartbeats_interval_seconds)

    # internal topics
    @property
    def offset_syncs_cluster(self) -> str:
        """Alias of the cluster holding this flow's offset-syncs topic."""
        return self.source if self.offset_syncs_topic_location == "source" else self.target

    @property
    def offset_syncs_topic(self) -> str:
        other = self.target if self.offset_syncs_topic_location == "source" else self.source
        return self.policy.offset_syncs_topic(other)

    @property
    def checkpoints_topic(self) -> str:
        """Name of the checkpoints topic on the target."""
        return self.policy.checkpoints_topic(self.source)

    @property
    def heartbeats_topic(self) -> str:
        return self.policy.heartbeats_topic()

    # clients (librdkafka properties)
    def airflow_connection_id(self, side: str) -> str | None:
        setting = self.settings.get(f"{side}.cluster.{AIRFLOW_CONNECTION_KEY}")
        return setting.value.strip() if setting else None

    def file_client_config(
        self, side: str, kind: str, role: str | None = None
    ) -> tuple[dict[str, str], list[Problem]]:
        """The client config from the file alone, and the problems its translation found."""
        java = java_client_settings(self.settings, side, kind)
        config, problems = librdkafka.translate(java)
        label = f"{self.source}->{self.target}" + (f"|{role}" if role else "")
        user_id = config.get("client.id")
        config["client.id"] = f"{user_id}|{label}" if user_id else label
        if kind in ("producer", "admin"):
            # Every topic mirrorflow writes is created first with its own settings. A producer or
            # an admin client (a producer handle in librdkafka) may auto-create by librdkafka's
            # default, and recreates a deleted topic with the broker's defaults the moment it asks
            # for its metadata: a zombie writer of a deleted progress topic would bring it back
            # with one partition and cleanup.policy=delete. (Consumers default to false.)
            config["allow.auto.create.topics"] = "false"
        return config, problems

    def client_config(
        self,
        side: str,
        kind: str,
        *,
        role: str | None = None,
        connection_extra: ConnectionExtra | None = None,
    ) -> dict[str, object]:
        """librdkafka properties for a `kind` client on the `side` cluster, Airflow credentials merged in.

        `connection_extra(conn_id)` returns a connection's extra; by default the Airflow
        connection is read, and only when the cluster has an airflow.connection.id.
        """
        config, _ = self.file_client_config(side, kind, role)
        conn_id = self.airflow_connection_id(side)
        if conn_id is None:
            return dict(config)
        if connection_extra is None:
            alias = self.source if side == "source" else self.target
            extra = fetch_connection_extra(conn_id, key=f"{alias}.{AIRFLOW_CONNECTION_KEY}")
        else:
            extra = connection_extra(conn_id)
        return merge_connection_extra(config, extra, kind)

    def source_consumer_config(self, *, connection_extra: ConnectionExtra | None = None) -> dict[str, object]:
        return self.client_config(
            "source", "consumer", role="source-consumer", connection_extra=connection_extra
        )

    def source_producer_config(self, *, connection_extra: ConnectionExtra | None = None) -> dict[str, object]:
        """For writing to the source, which holds the offset-syncs topic by default."""
        return self.client_config(
            "source", "producer", role="source-producer", connection_extra=connection_extra
        )

    def source_admin_config(self, *, connection_extra: ConnectionExtra | None = None) -> dict[str, object]:
        return self.client_config("source", "admin", role="source-admin", connection_extra=connection_extra)

    def target_producer_config(self, *, connection_extra: ConnectionExtra | None = None) -> dict[str, object]:
        return self.client_config(
            "target", "producer", role="target-producer", connection_extra=connection_extra
        )

    def target_consumer_config(self, *, connection_extra: ConnectionExtra | None = None) -> dict[str, object]:
        return self.client_config(
            "target", "consumer", role="target-consumer", connection_extra=connection_extra
        )

    def target_admin_config(self, *, connection_extra: ConnectionExtra | None = None) -> dict[str, object]:
        return self.client_config("target", "admin", role="target-admin", connection_extra=connection_extra)

    def redacted(self) -> dict[str, str]:
        """The flow's resolved settings, safe for logs, Airflow task arguments and the UI."""
        return redacted_view(self.settings)


def redacted_view(settings: Mapping[str, Setting]) -> dict[str, str]:
    """Secrets hidden; values that came from config providers shown as their references."""
    view = {}
    for key, setting in sorted(settings.items()):
        if is_secret_key(key):
            view[key] = REDACTED
        elif setting.from_provider:
            view[key] = setting.raw
        else:
            view[key] = setting.value
    return view
