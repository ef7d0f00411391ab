"""Least privilege: the ACLs mirrorflow's principal needs, per job and per cluster (ops/acl_check.py
checks that a job's principal holds them before the job changes anything).

MM2's documentation lists the ACLs of its connectors loosely ("READ on source topics, WRITE on
target topics, ..."); a principal built from such a list fails somewhere in the middle of a run
with a bare TOPIC_AUTHORIZATION_FAILED. Here the list is data, one place that the docs' table,
the least-privilege tests and `check_job_acls` all read, so a job that needs an ACL the table
does not name fails a test, and a principal that lacks one is told which one before the job
starts.

Names that depend on the data are placeholders (SOURCE_TOPICS, REMOTE_TOPICS, GROUPS): the table
shows them as such, and `grants` expands them for given topics and groups. Internal topics,
transactional ids and mirrorflow's own consumer group ids are named exactly.

What a job needs (observed on Kafka 4.3 with the StandardAuthorizer, a principal with no ACLs
and the broker's authorizer log, and read from the code):

* Every consumer mirrorflow makes has a group.id, and librdkafka looks up that group's
  coordinator even for assigned reads, so each needs DESCRIBE on its group id, never READ
  (nothing is committed).
* The idempotent and transactional producers need WRITE on a topic (Kafka >= 3.0 no longer
  asks for IDEMPOTENT_WRITE on the cluster); the copy's transactional ids need WRITE (which
  implies DESCRIBE) on the prefix `mirrorflow-<source>-><target>-`.
* Kafka implies DESCRIBE from READ, WRITE, DELETE and ALTER, and DESCRIBE_CONFIGS from
  ALTER_CONFIGS, so the table never lists an implied operation next to the one implying it.
* A topic or group the principal may not DESCRIBE is invisible to it (metadata and group
  listings leave it out): nothing fails, it is simply not mirrored. That is how Kafka answers
  (MM2 behaves the same); `check_job_acls` can only check what it can see.
* Kafka has no "may I" request for transactional ids; `check_job_acls` initialises a producer
  on an id of the copy's prefix that no copy uses (`<prefix>acl-check`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka.admin import (
    AclOperation,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.config import FlowConfig
from mirrorflow.policy import remote_topic, should_replicate_group, should_replicate_topic
from mirrorflow.replicate.copy import transactional_id_prefix
from mirrorflow.replicate.runs import RUNS_TOPIC

SOURCE_TOPICS = "<each replicated topic>"
REMOTE_TOPICS = "<each remote topic>"
GROUPS = "<each synced group>"
PLACEHOLDERS = (SOURCE_TOPICS, REMOTE_TOPICS, GROUPS)
CLUSTER_NAME = "kafka-cluster"  # the one name a CLUSTER resource has
TIMEOUT_S = 15.0

TOPIC, GROUP, CLUSTER, TXN = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.BROKER,  # librdkafka's name for Kafka's CLUSTER resource
    ResourceType.TRANSACTIONAL_ID,
)
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
READ, WRITE, CREATE, DESCRIBE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)
# Operations whose grant also allows another (Kafka's AclEntry implied operations).
IMPLIES = {
    DESCRIBE: {READ, WRITE, AclOperation.DELETE, ALTER},
    DESCRIBE_CONFIGS: {ALTER_CONFIGS},
}

JOBS = (
    "replicate",
    "migrate",
    "refresh_topics",
    "sync_topic_configs",
    "sync_topic_acls",
    "checkpoints",
    "group_sync",
    "heartbeats",
    "failover",
    "verify",
)


@dataclass(frozen=True)
class Grant:
    """One ALLOW ACL for mirrorflow's principal: on which side of the flow, which resource
    (a name, a prefix or a placeholder) and operation, and why the job needs it."""

    side: str  # "source" or "target"
    resource: ResourceType
    name: str
    pattern: ResourcePatternType
    operation: AclOperation
    why: str


def _copy_grants(flow: FlowConfig) -> list[Grant]:
    syncs_side = "target" if flow.offset_syncs_cluster == flow.target else "source"
    out = [
        Grant("source", TOPIC, SOURCE_TOPICS, LITERAL, READ, "copy the records"),
        Grant(
            "source",
            TOPIC,
            SOURCE_TOPICS,
            LITERAL,
            DESCRIBE_CONFIGS,
            "create remote topics with their configs",
        ),
        Grant(
            "source",
            GROUP,
            f"mirrorflow-{flow.source}->{flow.target}",
            LITERAL,
            DESCRIBE,
            "copy consumer's group id",
        ),
        Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, CREATE, "create remote topics"),
        Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, WRITE, "write the copies"),
        Grant(
            "target",
            TOPIC,
            REMOTE_TOPICS,
            LITERAL,
            READ,
            "read the last copies of partitions with no progress, and the records of a transaction left open",
        ),
        Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, ALTER, "grow remote partition counts"),
        Grant(
            "target",
            TXN,
            transactional_id_prefix(flow.source, flow.target),
            PREFIXED,
            WRITE,
            "one transactional id per writer slot: 256 per flow, tasks.max for a micro-batch flow, in both delivery modes",
        ),
    ]
    for topic, what in ((flow.offset_storage_topic, "progress"), (RUNS_TOPIC, "run records")):
        out += [
            Grant("target", TOPIC, topic, LITERAL, CREATE, f"create the {what} topic"),
            Grant("target", TOPIC, topic, LITERAL, READ, f"read {what}"),
            Grant("target", TOPIC, topic, LITERAL, WRITE, f"write {what}"),
        ]
    out += [
        Grant(
            "target",
            GROUP,
            f"mirrorflow-progress-{flow.source}",
            LITERAL,
            DESCRIBE,
            "progress reader's group id",
        ),
        Grant("target", GROUP, "mirrorflow-reader", LITERAL, DESCRIBE, "run record reader's group id"),
    ]
    if flow.emit_offset_syncs_enabled:
        out += [
            Grant(
                syncs_side, TOPIC, flow.offset_syncs_topic, LITERAL, CREATE, "create the offset-syncs topic"
            ),
            Grant(syncs_side, TOPIC, flow.offset_syncs_topic, LITERAL, WRITE, "write offset-syncs"),
        ]
    return out


def _translation_grants(flow: FlowConfig) -> list[Grant]:
    """What reading source group offsets and translating them takes (checkpoints, group sync,
    failover from the live source)."""
    syncs_side = "target" if flow.offset_syncs_cluster == flow.target else "source"
    return [
        Grant("source", GROUP, GROUPS, LITERAL, DESCRIBE, "list the groups and read their committed offsets"),
        Grant("source", TOPIC, SOURCE_TOPICS, LITERAL, DESCRIBE, "read committed offsets of the topics"),
        Grant(syncs_side, TOPIC, flow.offset_syncs_topic, LITERAL, READ, "read offset-syncs"),
        Grant(syncs_side, GROUP, "mirrorflow-reader", LITERAL, DESCRIBE, "offset-syncs reader's group id"),
        Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, READ, "check copied records for exact translation"),
        Grant("target", GROUP, "mirrorflow-translate", LITERAL, DESCRIBE, "translation prober's group id"),
        Grant("target", TOPIC, flow.offset_storage_topic, LITERAL, READ, "read progress (what was copied)"),
        Grant(
            "target",
            GROUP,
            f"mirrorflow-progress-{flow.source}",
            LITERAL,
            DESCRIBE,
            "progress reader's group id",
        ),
    ]


def job_grants(flow: FlowConfig, job: str) -> list[Grant]:
    """The ACLs `job` of `flow` needs, with placeholders for data-dependent names."""
    if job in ("replicate", "migrate"):
        return _copy_grants(flow)
    if job == "refresh_topics":
        return [
            Grant(
                "source",
                TOPIC,
                SOURCE_TOPICS,
                LITERAL,
                DESCRIBE_CONFIGS,
                "create remote topics with their configs",
            ),
            Grant("source", TOPIC, SOURCE_TOPICS, LITERAL, DESCRIBE, "see the topics and partition counts"),
            Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, CREATE, "create remote topics"),
            Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, ALTER, "grow remote partition counts"),
        ]
    if job == "sync_topic_configs":
        return [
            Grant("source", TOPIC, SOURCE_TOPICS, LITERAL, DESCRIBE, "see the topics"),
            Grant("source", TOPIC, SOURCE_TOPICS, LITERAL, DESCRIBE_CONFIGS, "read source configs"),
            Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, DESCRIBE, "see which remote topics exist"),
            Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, ALTER_CONFIGS, "alter remote topic configs"),
        ]
    if job == "sync_topic_acls":
        return [
            Grant(
                "source", CLUSTER, CLUSTER_NAME, LITERAL, DESCRIBE, "read the source's ACLs (DescribeAcls)"
            ),
            Grant("target", CLUSTER, CLUSTER_NAME, LITERAL, ALTER, "create ACLs on the target (CreateAcls)"),
        ]
    if job == "checkpoints":
        topic = flow.checkpoints_topic
        return _translation_grants(flow) + [
            Grant("target", TOPIC, topic, LITERAL, CREATE, "create the checkpoints topic"),
            Grant("target", TOPIC, topic, LITERAL, READ, "read the last checkpoints"),
            Grant("target", TOPIC, topic, LITERAL, WRITE, "write checkpoints"),
            Grant("target", GROUP, "mirrorflow-reader", LITERAL, DESCRIBE, "checkpoints reader's group id"),
        ]
    if job == "group_sync":
        return _translation_grants(flow) + [
            Grant("target", GROUP, GROUPS, LITERAL, READ, "commit translated offsets"),
        ]
    if job == "heartbeats":
        topic = flow.heartbeats_topic
        return [
            Grant("target", TOPIC, topic, LITERAL, CREATE, "create the heartbeats topic"),
            Grant("target", TOPIC, topic, LITERAL, WRITE, "write heartbeats"),
        ]
    if job == "failover":
        return _translation_grants(flow) + [
            Grant("target", GROUP, GROUPS, LITERAL, READ, "commit the groups' offsets on the target"),
            Grant(
                "target", TOPIC, flow.checkpoints_topic, LITERAL, READ, "checkpoints, if the source is down"
            ),
            Grant("target", GROUP, "mirrorflow-reader", LITERAL, DESCRIBE, "checkpoints reader's group id"),
        ]
    if job == "verify":
        return [
            Grant("source", TOPIC, SOURCE_TOPICS, LITERAL, READ, "read the source records"),
            Grant(
                "source", TOPIC, SOURCE_TOPICS, LITERAL, DESCRIBE_CONFIGS, "see which topics are compacted"
            ),
            Grant(
                "source",
                GROUP,
                f"mirrorflow-{flow.source}->{flow.target}",
                LITERAL,
                DESCRIBE,
                "source reader's group id",
            ),
            Grant(
                "source",
                GROUP,
                GROUPS,
                LITERAL,
                DESCRIBE,
                "read the groups' committed offsets: the target must hold what they have not read",
            ),
            Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, READ, "read the copies"),
            Grant(
                "target", TOPIC, REMOTE_TOPICS, LITERAL, DESCRIBE_CONFIGS, "see which topics are compacted"
            ),
            Grant(
                "target", TOPIC, flow.offset_storage_topic, LITERAL, READ, "read progress (what was copied)"
            ),
            Grant(
                "target",
                GROUP,
                f"mirrorflow-progress-{flow.source}",
                LITERAL,
                DESCRIBE,
                "progress reader's group id",
            ),
            Grant("target", TOPIC, RUNS_TOPIC, LITERAL, CREATE, "create the run records topic"),
            Grant("target", TOPIC, RUNS_TOPIC, LITERAL, READ, "read the plan and reports"),
            Grant("target", TOPIC, RUNS_TOPIC, LITERAL, WRITE, "store the plan, report and summary"),
            Grant("target", GROUP, "mirrorflow-reader", LITERAL, DESCRIBE, "target reader's group id"),
        ]
    raise ValueError(f"unknown job {job!r}; jobs: {', '.join(JOBS)}")


@dataclass(frozen=True)
class Resolved:
    """A Grant with a real name, on a named cluster."""

    cluster: str
    grant: Grant
    name: str

    @property
    def resource_text(self) -> str:
        if self.grant.resource == CLUSTER:
            return "cluster"
        kind = self.grant.resource.name.lower().replace("_", "-")
        return f"{kind} {self.name}" + (" (prefix)" if self.grant.pattern == PREFIXED else "")


def grants(
    flow: FlowConfig, job: str, *, topics: Iterable[str] = (), groups: Iterable[str] = ()
) -> list[Resolved]:
    """`job_grants` for given source topics and groups (those the flow's filters keep), each on
    its cluster; the same ACL needed twice is listed once."""
    kept_topics = [t for t in topics if should_replicate_topic(flow, t)]
    kept_groups = [g for g in groups if should_replicate_group(flow, g)]
    out: dict[tuple, Resolved] = {}
    for grant in job_grants(flow, job):
        cluster = flow.source if grant.side == "source" else flow.target
        if grant.name == SOURCE_TOPICS:
            names = kept_topics
        elif grant.name == REMOTE_TOPICS:
            names = [remote_topic(flow, t) for t in kept_topics]
        elif grant.name == GROUPS:
            names = kept_groups
        else:
            names = [grant.name]
        for name in names:
            key = (cluster, grant.resource, name, grant.pattern, grant.operation)
            out.setdefault(key, Resolved(cluster, grant, name))
    return list(out.values())
