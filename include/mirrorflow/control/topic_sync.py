"""A flow's topic sync jobs: new topics and partitions, topic configs and topic ACLs on the target.

These are MirrorSourceConnector's three periodic jobs (refresh.topics, sync.topic.configs,
sync.topic.acls) with MM2 4.0's rules. Each works on any flow and two admin clients, so the
Airflow tasks, the CLI and the tests run the same code:

* refresh: `replicate.topics.sync_remote_topics`, the same function every replicate run calls.
* configs: incrementalAlterConfigs on each remote topic that exists: SET of the source's
  non-default values, DELETE of its default-valued ones (the target's default then applies)
  unless use.defaults.from=source; excluded, read-only, sensitive and static-broker entries are
  left alone, so settings only the target has for excluded keys stay.
* ACLs: LITERAL topic ACLs of the source mapped to the remote names (ALLOW WRITE dropped, ALLOW
  ALL downgraded to ALLOW READ, so only the replication flow writes remote topics), created on
  the target and never deleted there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.admin_batches import request_batches
from mirrorflow.clients import FlowClients, check_reachable
from mirrorflow.config import FlowConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.kafka import admin_client
from mirrorflow.ops.acl_check import require_job_acls
from mirrorflow.policy import remote_topic, should_replicate_topic
from mirrorflow.policy.filters import ConfigOp, ConfigOpType, topic_config_sync_ops
from mirrorflow.replicate.topics import TIMEOUT_S, describe_topic_configs, sync_remote_topics

log = logging.getLogger("mirrorflow.topic_sync")

ANY_TOPIC_ACL = AclBindingFilter(
    ResourceType.TOPIC,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)
NO_AUTHORIZER = (
    "the source cluster has no ACL authorizer (SECURITY_DISABLED), so there are no ACLs to sync; "
    "set sync.topic.acls.enabled=false for this flow to stop trying"
)


class TopicSyncFailed(RuntimeError):
    """Some topics, configs or ACLs could not be synced; the message lists each with its cause and
    `result` holds what the job did manage (for the CLI's table and the task log)."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def replicated_topics(
    flow: FlowConfig, source_admin: AdminClient, target_admin: AdminClient
) -> dict[str, str]:
    """Source topic -> remote topic for the topics the flow replicates whose remote topic exists
    (MM2's topicsBeingReplicated): configs are synced only onto topics that are there."""
    source = source_admin.list_topics(timeout=TIMEOUT_S).topics
    target = target_admin.list_topics(timeout=TIMEOUT_S).topics
    pairs = {}
    for topic in sorted(source):
        if source[topic].error is not None or not should_replicate_topic(flow, topic):
            continue
        remote = remote_topic(flow, topic)
        if remote in target and target[remote].error is None:
            pairs[topic] = remote
    return pairs


@dataclass
class ConfigSync:
    """Per remote topic, the operations sent; per remote topic that failed, why."""

    ops: dict[str, list[ConfigOp]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": {
                remote: {
                    "set": {op.name: op.value for op in ops if op.op is ConfigOpType.SET},
                    "deleted": [op.name for op in ops if op.op is ConfigOpType.DELETE],
                }
                for remote, ops in self.ops.items()
            },
            "errors": dict(self.errors),
        }


def _alter_resource(remote: str, ops: list[ConfigOp]) -> ConfigResource:
    entries = [
        ConfigEntry(op.name, op.value, incremental_operation=AlterConfigOpType[op.op.value]) for op in ops
    ]
    return ConfigResource(ResourceType.TOPIC, remote, incremental_configs=entries)


def sync_topic_configs(flow: FlowConfig, source_admin: AdminClient, target_admin: AdminClient) -> ConfigSync:
    """Make each existing remote topic's configs follow its source topic (incrementalAlterConfigs)."""
    pairs = replicated_topics(flow, source_admin, target_admin)
    described = describe_topic_configs(source_admin, pairs)
    out = ConfigSync()
    resources = {}
    for topic, remote in pairs.items():
        ops = topic_config_sync_ops(described.get(topic, []), flow.config_property_filter)
        if ops:
            out.ops[remote] = ops
            resources[remote] = _alter_resource(remote, ops)
    if not resources:
        return out
    # A record for each config that changes, at most one an operation (admin_batches).
    for batch in request_batches(list(resources.values()), lambda r: len(r.incremental_configs)):
        futures = target_admin.incremental_alter_configs(batch, request_timeout=TIMEOUT_S)
        for resource, future in futures.items():
            try:
                future.result(TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0]
                out.errors[resource.name] = (
                    f"cannot alter the configs of {resource.name}: {error.name()}: {error.str()}"
                )
                out.ops.pop(resource.name, None)
    return out


def target_acl_binding(flow: FlowConfig, binding: AclBinding) -> AclBinding | None:
    """The ACL MM2 creates on the target for a source ACL, or None if it is not synced.

    Only LITERAL topic ACLs of replicated topics count. The wildcard `*` is renamed like a topic
    (`A.*` under the default policy), which Kafka then reads as a plain name, not a wildcard: MM2
    does exactly this. ALLOW WRITE is dropped and ALLOW ALL becomes ALLOW READ, because only the
    replication flow may write remote topics; everything else, DENY included, is copied as is.
    """
    if binding.restype != ResourceType.TOPIC or binding.resource_pattern_type != ResourcePatternType.LITERAL:
        return None
    allow = binding.permission_type == AclPermissionType.ALLOW
    if allow and binding.operation == AclOperation.WRITE:
        return None
    if not should_replicate_topic(flow, binding.name):
        return None
    operation = AclOperation.READ if allow and binding.operation == AclOperation.ALL else binding.operation
    return AclBinding(
        ResourceType.TOPIC,
        remote_topic(flow, binding.name),
        ResourcePatternType.LITERAL,
        binding.principal,
        binding.host,
        operation,
        binding.permission_type,
    )


def is_security_disabled(exc: KafkaException) -> bool:
    """True when the cluster answered that it has no authorizer (MM2 then skips the ACL sync)."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() == KafkaError.SECURITY_DISABLED


@dataclass
class AclSync:
    """The ACLs now on the target (created, or already there), failures, or why nothing was synced."""

    synced: list[AclBinding] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "synced": [_acl_text(b) for b in self.synced],
            "errors": dict(self.errors),
            "skipped": self.skipped,
        }


def _acl_text(binding: AclBinding) -> str:
    return (
        f"{binding.permission_type.name} {binding.principal} {binding.operation.name} "
        f"topic:{binding.name} host:{binding.host}"
    )


NOT_ALLOWED_TO_DESCRIBE = (
    "the source cluster does not let mirrorflow's principal DESCRIBE the cluster, which reading its "
    "ACLs needs: grant DESCRIBE on CLUSTER to that principal on the source, or set "
    "sync.topic.acls.enabled=false for this flow"
)


class AclReadRefused(RuntimeError):
    """The source refuses to show its ACLs; the message says what to grant."""


def read_source_topic_acls(admin: AdminClient) -> list[AclBinding] | None:
    """The source's topic ACLs, or None when the source has no authorizer.

    librdkafka drops DescribeAcls' error code (its response parser returns success whatever
    the broker said), so an empty answer alone can mean no ACLs, no authorizer
    (SECURITY_DISABLED) or no permission (CLUSTER_AUTHORIZATION_FAILED). DescribeCluster's
    authorized operations say whether we may describe the cluster at all, and the broker's
    `authorizer.class.name` whether an empty answer means there is no authorizer."""
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S).result(
        TIMEOUT_S
    )
    # Kafka answers an empty set (librdkafka: None) when the principal may not DESCRIBE the cluster.
    if not {AclOperation.DESCRIBE, AclOperation.ALL} & set(cluster.authorized_operations or ()):
        raise AclReadRefused(NOT_ALLOWED_TO_DESCRIBE)
    try:
        bindings = admin.describe_acls(ANY_TOPIC_ACL, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    except KafkaException as exc:
        if is_security_disabled(exc):
            return None
        raise
    if bindings or not cluster.nodes:
        return bindings
    broker = ConfigResource(ResourceType.BROKER, str(cluster.nodes[0].id))
    try:
        configs = admin.describe_configs([broker], request_timeout=TIMEOUT_S)[broker].result(TIMEOUT_S)
    except KafkaException:
        return bindings  # may not read broker configs: no ACLs is all we can say
    authorizer = configs.get("authorizer.class.name")
    return None if authorizer is not None and not authorizer.value else bindings


def sync_topic_acls(flow: FlowConfig, source_admin: AdminClient, target_admin: AdminClient) -> AclSync:
    """Copy the source's topic ACLs onto the remote topics (additions only)."""
    try:
        bindings = read_source_topic_acls(source_admin)
    except AclReadRefused as exc:
        return AclSync(errors={"source ACLs": str(exc)})
    if bindings is None:
        log.info("%s: %s", flow.name, NO_AUTHORIZER)
        return AclSync(skipped=NO_AUTHORIZER)
    wanted = list(dict.fromkeys(t for b in bindings if (t := target_acl_binding(flow, b)) is not None))
    out = AclSync()
    if not wanted:
        return out
    for batch in request_batches(wanted, lambda _: 1):  # a record for each new ACL
        for binding, future in target_admin.create_acls(batch, request_timeout=TIMEOUT_S).items():
            try:
                future.result(TIMEOUT_S)
                out.synced.append(binding)
            except KafkaException as exc:
                error = exc.args[0]
                out.errors[_acl_text(binding)] = f"{error.name()}: {error.str()}"
    return out


# The jobs as the Airflow tasks and the CLI run them: resolve the flow's clients (Airflow
# connections included), run, return a JSON-safe summary, raise TopicSyncFailed on any error.


def _admins(
    flow: FlowConfig, job: str, connection_extra: ConnectionExtra | None
) -> tuple[AdminClient, AdminClient]:
    clients = FlowClients.resolve(flow, connection_extra)
    check_reachable(flow, clients)
    require_job_acls(flow, job, clients)
    return admin_client(clients.source_admin), admin_client(clients.target_admin)


def _finish(flow: FlowConfig, job: str, result: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    result = {"flow": flow.name, **result}
    if errors:
        lines = "\n".join(f"  {name}: {why}" for name, why in sorted(errors.items()))
        raise TopicSyncFailed(f"{job} for {flow.name} failed for {len(errors)} item(s):\n{lines}", result)
    return result


def run_refresh_topics(
    flow: FlowConfig, *, connection_extra: ConnectionExtra | None = None
) -> dict[str, Any]:
    outcome = sync_remote_topics(flow, *_admins(flow, "refresh_topics", connection_extra))
    result = {
        "replicated_topics": len(outcome.remote),
        "created": list(outcome.created),
        "grown": {remote: list(counts) for remote, counts in outcome.grown.items()},
        "errors": dict(outcome.errors),
    }
    return _finish(flow, "refresh topics", result, outcome.errors)


def run_sync_topic_configs(
    flow: FlowConfig, *, connection_extra: ConnectionExtra | None = None
) -> dict[str, Any]:
    outcome = sync_topic_configs(flow, *_admins(flow, "sync_topic_configs", connection_extra))
    return _finish(flow, "topic config sync", outcome.to_dict(), outcome.errors)


def run_sync_topic_acls(
    flow: FlowConfig, *, connection_extra: ConnectionExtra | None = None
) -> dict[str, Any]:
    outcome = sync_topic_acls(flow, *_admins(flow, "sync_topic_acls", connection_extra))
    return _finish(flow, "topic ACL sync", outcome.to_dict(), outcome.errors)


@dataclass(frozen=True)
class TopicJob:
    """One periodic job as the scheduler and the CLI see it: its name, the MM2 settings that switch
    and time it, its interval for a flow (None when MM2's settings turn it off) and its runner."""

    name: str
    keys: str
    description: str
    interval: Callable[[FlowConfig], timedelta | None]
    run: Callable[..., dict[str, Any]]


TOPIC_JOBS = {
    job.name: job
    for job in (
        TopicJob(
            "refresh_topics",
            "refresh.topics.enabled, refresh.topics.interval.seconds",
            "create remote topics for new source topics and grow remote partition counts (never shrink)",
            lambda flow: flow.refresh_topics_interval,
            run_refresh_topics,
        ),
        TopicJob(
            "sync_topic_configs",
            "sync.topic.configs.enabled, sync.topic.configs.interval.seconds",
            "make remote topic configs follow the source (incrementalAlterConfigs, config.properties.exclude)",
            lambda flow: flow.sync_topic_configs_interval,
            run_sync_topic_configs,
        ),
        TopicJob(
            "sync_topic_acls",
            "sync.topic.acls.enabled, sync.topic.acls.interval.seconds",
            "copy literal topic ACLs to the remote topics (ALLOW WRITE dropped, ALLOW ALL -> READ, never deletes)",
            lambda flow: flow.sync_topic_acls_interval,
            run_sync_topic_acls,
        ),
    )
}
