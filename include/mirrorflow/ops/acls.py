"""Least privilege: the ACLs mirrorflow's principal needs, per job and per cluster, and a check
that a job's principal holds them before the job changes anything.

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

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka import KafkaCallError, admin_client
from mirrorflow.policy import remote_topic, should_replicate_group, should_replicate_topic
from mirrorflow.replicate.copy import transactional_id_prefix
from mirrorflow.replicate.runs import RUNS_TOPIC

SOURCE_TOPICS = "<each replicated topic>"
REMOTE_TOPICS = "<each remote topic>"
GROUPS = "<each synced group>"
PLACEHOLDERS = (SOURCE_TOPICS, REMOTE_TOPICS, GROUPS)
CLUSTER_NAME = "kafka-cluster"  # the one name a CLUSTER resource has
TIMEOUT_S = 15.0
TXN_PROBE = "acl-check"  # suffix of the transactional id that tests the copy's prefix
# librdkafka does not mark these retriable on a group describe, though they only mean "ask again".
# A new cluster creates __consumer_offsets on its first group request; loading its coordinators
# can take half a minute on a busy machine.
COORDINATOR_WAIT_S = 60.0
COORDINATOR_NOT_READY = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)

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
        Grant("target", TOPIC, REMOTE_TOPICS, LITERAL, ALTER, "grow remote partition counts"),
        Grant(
            "target",
            TXN,
            transactional_id_prefix(flow.source, flow.target),
            PREFIXED,
            WRITE,
            "one transactional id per writer slot, 256 per flow, in both delivery modes",
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


def acl_binding(resolved: Resolved, principal: str) -> AclBinding:
    grant = resolved.grant
    return AclBinding(
        grant.resource,
        resolved.name,
        grant.pattern,
        principal,
        "*",
        grant.operation,
        AclPermissionType.ALLOW,
    )


def principal_of(client_config: Mapping[str, Any]) -> str | None:
    """The principal a SASL/PLAIN or SCRAM client authenticates as (Kafka's default mapping);
    None for other mechanisms and TLS, whose principal the broker derives itself."""
    username = client_config.get("sasl.username")
    protocol = str(client_config.get("security.protocol", "")).upper()
    mechanism = str(client_config.get("sasl.mechanism", "")).upper()
    if username and protocol.startswith("SASL") and (mechanism == "PLAIN" or mechanism.startswith("SCRAM")):
        return f"User:{username}"
    return None


_OPTION = {TOPIC: "--topic", GROUP: "--group", TXN: "--transactional-id", CLUSTER: "--cluster"}


def kafka_acls_command(resolved: Resolved, principal: str | None, bootstrap: str) -> str:
    """The kafka-acls.sh command that grants `resolved` (run by an admin of that cluster)."""
    grant = resolved.grant
    words = [
        "kafka-acls.sh",
        f"--bootstrap-server {bootstrap}",
        "--command-config <admin.properties>",
        "--add",
        f"--allow-principal {principal or '<principal>'}",
        f"--operation {_operation_word(grant.operation)}",
        _OPTION[grant.resource]
        if grant.resource == CLUSTER
        else f"{_OPTION[grant.resource]} '{resolved.name}'",
    ]
    if grant.pattern == PREFIXED:
        words.append("--resource-pattern-type prefixed")
    return " ".join(words)


def _operation_word(operation: AclOperation) -> str:
    return "".join(part.capitalize() for part in operation.name.split("_"))


class MissingAcl(KafkaCallError):
    """The job's principal lacks ACLs the job needs; nothing was changed. The message names,
    for each, the principal, the operation, the resource, the cluster and the command to grant it."""

    def __init__(self, flow: FlowConfig, job: str, missing: list[tuple[Resolved, str | None, str]]) -> None:
        lines = [
            f"{principal or 'mirrorflow principal on ' + r.cluster} may not {r.grant.operation.name} "
            f"{r.resource_text} on cluster {r.cluster} ({r.grant.why}); grant it: "
            f"{kafka_acls_command(r, principal, bootstrap)}"
            for r, principal, bootstrap in missing
        ]
        head = (
            f"{flow.name} {job}: mirrorflow's principal is missing {len(lines)} ACL(s), nothing was changed"
        )
        super().__init__(head + ":\n  " + "\n  ".join(lines))
        self.missing = [r for r, _, _ in missing]


def _code(exc: BaseException) -> int | None:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def _allowed(operation: AclOperation, authorized: Iterable[AclOperation] | None) -> bool:
    have = set(authorized or ())
    return bool({operation, AclOperation.ALL} & have) or bool(IMPLIES.get(operation, set()) & have)


def _no_coordinator(group: str, cause: BaseException) -> KafkaCallError:
    return KafkaCallError(
        f"checking the ACLs of group {group!r}: its group coordinator gave no answer within "
        f"{COORDINATOR_WAIT_S:.0f} s ({cause or 'timed out'}); a new cluster creates __consumer_offsets on its "
        "first group request and loads it before it answers: check the brokers' logs and run again"
    )


class _Probe:
    """Answers "may this principal do X" for one cluster without changing anything: the
    authorized operations Kafka returns for the cluster, topics and groups it may describe
    (KIP-430), and a validate-only CreateTopics for topics still to be created."""

    def __init__(
        self, admin: AdminClient, timeout_s: float, producer_config: Mapping[str, Any] | None = None
    ) -> None:
        self.admin, self.timeout_s, self.producer_config = admin, timeout_s, producer_config
        self.topics: dict[str, set[AclOperation] | None] = {}  # None: may not describe it
        self.missing_topics: set[str] = set()
        self.groups: dict[str, set[AclOperation] | None] = {}
        self.cluster: set[AclOperation] | None = None
        self.creatable: dict[str, bool] = {}

    def load(self, resolved: list[Resolved]) -> None:
        topics = sorted({r.name for r in resolved if r.grant.resource == TOPIC})
        groups = sorted({r.name for r in resolved if r.grant.resource == GROUP})
        if topics:
            futures = self.admin.describe_topics(
                TopicCollection(topics), include_authorized_operations=True, request_timeout=self.timeout_s
            )
            for name, future in futures.items():
                try:
                    self.topics[name] = set(future.result(self.timeout_s).authorized_operations or ())
                except KafkaException as exc:
                    if _code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        self.missing_topics.add(name)
                    elif _code(exc) == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        self.topics[name] = None
                    else:
                        raise
        if groups:
            self._describe_groups(groups)
        if any(r.grant.resource == CLUSTER for r in resolved):
            cluster = self.admin.describe_cluster(
                include_authorized_operations=True, request_timeout=self.timeout_s
            ).result(self.timeout_s)
            self.cluster = set(cluster.authorized_operations or ())
        to_create = sorted(
            {r.name for r in resolved if r.grant.operation == CREATE and r.name in self.missing_topics}
        )
        if to_create:
            futures = self.admin.create_topics(
                [NewTopic(name, 1) for name in to_create], validate_only=True, request_timeout=self.timeout_s
            )
            for name, future in futures.items():
                try:
                    future.result(self.timeout_s)
                except KafkaException as exc:
                    if _code(exc) in (
                        KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                    ):
                        self.creatable[name] = False
                        continue
                self.creatable[name] = True

    def _describe_groups(self, groups: list[str]) -> None:
        """Authorized operations per group. A cluster's first group request makes it create
        __consumer_offsets, and until its coordinators are loaded the answer is a retriable
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS: asked again until `timeout_s`."""
        deadline = time.monotonic() + max(self.timeout_s, COORDINATOR_WAIT_S)
        pending = list(groups)
        while pending:
            attempt = max(1.0, min(self.timeout_s, deadline - time.monotonic()))
            futures = self.admin.describe_consumer_groups(
                pending, include_authorized_operations=True, request_timeout=attempt
            )
            pending = []
            for name, future in futures.items():
                try:
                    self.groups[name] = set(future.result(attempt + 1).authorized_operations or ())
                except KafkaException as exc:
                    if _code(exc) == KafkaError.GROUP_AUTHORIZATION_FAILED:
                        self.groups[name] = None
                    elif _code(exc) in COORDINATOR_NOT_READY + (KafkaError._TIMED_OUT,) and (
                        time.monotonic() < deadline
                    ):
                        pending.append(name)
                    elif _code(exc) in COORDINATOR_NOT_READY + (KafkaError._TIMED_OUT,):
                        raise _no_coordinator(name, exc) from exc
                    else:
                        raise
                except FutureTimeout as exc:
                    if time.monotonic() >= deadline:
                        raise _no_coordinator(name, exc) from exc
                    pending.append(name)
            if pending:
                time.sleep(0.2)

    def allows(self, resolved: Resolved) -> bool | None:
        """True/False when known; None when it cannot be told before the job runs (an
        operation other than CREATE on a topic not created yet, CREATE on a topic that exists,
        a transactional id without a producer config)."""
        grant = resolved.grant
        if grant.resource == CLUSTER:
            return _allowed(grant.operation, self.cluster)
        if grant.resource == GROUP:
            return _allowed(grant.operation, self.groups.get(resolved.name))
        if grant.resource == TOPIC:
            if resolved.name in self.missing_topics:
                return self.creatable.get(resolved.name) if grant.operation == CREATE else None
            ops = self.topics.get(resolved.name)
            if grant.operation == CREATE:
                # An existing topic is not created again; with no DESCRIBE we cannot tell.
                return None
            return _allowed(grant.operation, ops)
        if grant.resource == TXN and grant.pattern == PREFIXED and self.producer_config is not None:
            return self._may_use_transactional_ids(resolved.name)
        return None

    def _may_use_transactional_ids(self, prefix: str) -> bool | None:
        """Kafka has no "may I" for transactional ids, so one is used: a producer with an id of
        the prefix that no copy has (a copy's ends in a partition number) initialises its
        transactions, which needs WRITE on it and changes nothing a copy reads."""
        producer = Producer({**self.producer_config, "transactional.id": f"{prefix}{TXN_PROBE}"})
        try:
            producer.init_transactions(self.timeout_s)
        except KafkaException as exc:
            return False if _code(exc) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED else None
        return True


def check_job_acls(
    flow: FlowConfig,
    job: str,
    admins: Mapping[str, AdminClient],
    admin_configs: Mapping[str, Mapping[str, Any]],
    *,
    topics: Iterable[str] = (),
    groups: Iterable[str] = (),
    producer_configs: Mapping[str, Mapping[str, Any]] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> None:
    """Raise MissingAcl, before the job does anything, if its principal lacks an ACL of the
    table that can be checked up front (see `_Probe.allows`). `admins` and `admin_configs` are
    keyed "source" / "target"; `topics` and `groups` are the source topics and groups the job
    will work on; `producer_configs` (by side) let it check transactional ids."""
    resolved = grants(flow, job, topics=topics, groups=groups)
    missing: list[tuple[Resolved, str | None, str]] = []
    for side, alias in (("source", flow.source), ("target", flow.target)):
        here = [r for r in resolved if r.cluster == alias and r.grant.side == side]
        if not here or side not in admins:
            continue
        probe = _Probe(admins[side], timeout_s, (producer_configs or {}).get(side))
        probe.load(here)
        config = admin_configs[side]
        for r in here:
            if probe.allows(r) is False:
                missing.append((r, principal_of(config), str(config.get("bootstrap.servers", "<bootstrap>"))))
    if missing:
        raise MissingAcl(flow, job, missing)


def require_job_acls(
    flow: FlowConfig,
    job: str,
    clients: FlowClients,
    *,
    sides: tuple[str, ...] = ("source", "target"),
    group_filter: Callable[[str], object] | None = None,
    listed: tuple[list[str], list[str]] | None = None,
) -> None:
    """check_job_acls with the flow's own clients, for the source topics and groups the
    principal can see (and the flow's filters keep): the first thing each job does after its
    reachability check, so a missing ACL fails the job before it changes anything.

    `listed`: the source's (topics, groups) when the caller has listed them already (the
    preflight checks several jobs of one flow), so they are not listed again per job."""
    configs = {side: {**clients.admin(side), "log_level": 0} for side in sides}
    admins = {side: admin_client(config) for side, config in configs.items()}
    needs = {g.name for g in job_grants(flow, job) if g.side in sides}
    topics: list[str] = []
    groups: list[str] = []
    # Topic and group names come from the source; without it (a failover from checkpoints while
    # the source is down) only the named resources are checked.
    if "source" in sides and needs & {SOURCE_TOPICS, REMOTE_TOPICS, GROUPS}:
        all_topics, all_groups = listed if listed is not None else source_names(admins["source"], needs)
        if needs & {SOURCE_TOPICS, REMOTE_TOPICS}:
            topics = all_topics
        if GROUPS in needs:
            groups = [g for g in all_groups if group_filter is None or group_filter(g)]
    producers = {"target": {**clients.target_producer, "log_level": 0}} if "target" in sides else {}
    check_job_acls(flow, job, admins, configs, topics=topics, groups=groups, producer_configs=producers)


def source_names(source: AdminClient, needs: set[str] | None = None) -> tuple[list[str], list[str]]:
    """(topics, groups) the principal can see on the source; each listed only if `needs` (the
    placeholder names of the grants to check) asks for it, both when None."""
    topics: list[str] = []
    groups: list[str] = []
    if needs is None or needs & {SOURCE_TOPICS, REMOTE_TOPICS}:
        metadata = source.list_topics(timeout=TIMEOUT_S).topics
        topics = [name for name, meta in metadata.items() if meta.error is None]
    if needs is None or GROUPS in needs:
        result = source.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        groups = [g.group_id for g in result.valid]
    return topics, groups


def markdown_table(flow: FlowConfig) -> str:
    """The least-privilege table (docs/configuration/acls.md): every job's ACLs on each side of `flow`."""
    rows = ["| Job | Cluster | Resource | Pattern | Operation | Why |", "|---|---|---|---|---|---|"]
    for job in JOBS:
        for grant in job_grants(flow, job):
            cluster = flow.source if grant.side == "source" else flow.target
            name = "" if grant.resource == CLUSTER else f" `{grant.name}`"
            kind = "CLUSTER" if grant.resource == CLUSTER else grant.resource.name
            rows.append(
                f"| {job} | {grant.side} ({cluster}) | {kind}{name} | {grant.pattern.name} | "
                f"{grant.operation.name} | {grant.why} |"
            )
    return "\n".join(rows)
