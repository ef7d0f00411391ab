"""Whether a job's principal holds the ACLs the job needs (ops/acls.py lists them), asked of the
clusters before the job changes anything, without changing anything: the authorized operations
Kafka returns for the cluster, topics and groups (KIP-430), a validate-only CreateTopics for
topics still to be created, and an InitProducerId on an unused id of the copy's transactional
prefix (Kafka has no "may I" request for transactional ids). A principal that lacks some gets
MissingAcl, naming each with the command that grants it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka import NO_ANSWER_CODES, ClusterUnreachable, KafkaCallError, admin_client
from mirrorflow.ops.acl_words import kafka_acls_command, principal_of
from mirrorflow.ops.acls import (
    CLUSTER,
    CREATE,
    GROUP,
    GROUPS,
    IMPLIES,
    PREFIXED,
    REMOTE_TOPICS,
    SOURCE_TOPICS,
    TIMEOUT_S,
    TOPIC,
    TXN,
    Resolved,
    grants,
    job_grants,
)

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
        config = admin_configs[side]
        try:
            probe.load(here)
        except (FutureTimeout, KafkaException) as exc:
            if isinstance(exc, KafkaException) and _code(exc) not in NO_ANSWER_CODES:
                raise
            # A cluster that answered the run's first metadata request and then not this one (a
            # broker restarting, its coordinator moving): one sentence, not a bare TimeoutError.
            bootstrap = str(config.get("bootstrap.servers", "<bootstrap>"))
            why = str(exc) or "no answer"
            raise ClusterUnreachable(
                alias,
                bootstrap,
                timeout_s,
                why,
                message=f"cluster {alias} ({side} of {flow.name}) at {bootstrap} did not answer the ACL check of "
                f"the {job} job within {timeout_s:.0f}s ({why}): it is unreachable, or a broker of it is "
                "restarting; check that its brokers are up, then run again",
            ) from exc
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
