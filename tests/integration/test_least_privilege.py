"""Least privilege, enforced on real brokers: every job runs as a SCRAM principal that holds
exactly the ACLs mirrorflow.ops.acls lists for it, on clusters with Kafka's StandardAuthorizer.

One secured pair serves the module; the cases run in order and build on each other (the
migrate run creates the remote topic the later jobs work on). Each case first runs its job with
one needed ACL left out: the job must fail with one message naming the principal, the operation,
the resource and the kafka-acls command, and leave both clusters as they were. Then the ACL is
granted (the principal now holds exactly the table's ACLs for the job, nothing more) and the
same job must complete and do its work, so an ACL missing from the table fails here too.

Each job has a case (replicate two), each leaving out a different (resource type, operation)
where the jobs allow: topic CREATE (the progress topic; the heartbeats topic again, since the
heartbeats job needs nothing else that can be checked before its topic exists),
transactional-id WRITE, group DESCRIBE, topic ALTER, topic ALTER_CONFIGS, cluster ALTER, topic
READ on the source (offset-syncs) and on the target (remote topic), and group READ; cluster
DESCRIBE on the source is test_topic_sync's refused-ACL-sync case. A row the job needs but the
table lacks fails its full run; a row the table has that a run did not need (failover's
checkpoints READ while the source answers) is not caught here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from localkafka import LocalKafka, Security
from mirrorflow.clients import FlowClients
from mirrorflow.config import MirrorConfig, load_config
from mirrorflow.control import topic_sync
from mirrorflow.control.checkpoints import emit_checkpoints, read_checkpoints
from mirrorflow.control.group_sync import sync_group_offsets
from mirrorflow.control.heartbeats import emit_heartbeats
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.ops.acl_check import MissingAcl
from mirrorflow.ops.acl_words import acl_binding
from mirrorflow.ops.acls import JOBS, Resolved, grants
from mirrorflow.ops.failover import failover
from mirrorflow.replicate import run_reading
from mirrorflow.replicate.copy import copy_unit
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.runner import copy_job_for, store_report
from mirrorflow.replicate.service import plan_run, report_run

from ..conftest import cluster_pair
from .kafkatools import create_topics, produce, read_topic
from .mirror_setup import SINGLE_BROKER

pytestmark = pytest.mark.local_kafka

USER, PASSWORD = "mirror", "mirror-Secret-7"
PRINCIPAL = f"User:{USER}"
READER, READER_PASSWORD = "alice", "alice-Secret-8"  # gets ALL on the source topic: READ on its remote topic
TOPICS = ["orders"]
GROUPS = ["app", "fo"]
ANY_ACL = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


@dataclasses.dataclass
class Pair:
    a: LocalKafka
    b: LocalKafka
    admins: dict[str, AdminClient] = dataclasses.field(default_factory=dict)

    def kafka(self, alias: str) -> LocalKafka:
        return self.a if alias == "A" else self.b

    def admin(self, alias: str) -> AdminClient:
        """An admin on the PLAINTEXT listener, whose principal is a super user: the test's own hand
        (kept, as a future outlives neither its client nor a chained call's temporary)."""
        if alias not in self.admins:
            self.admins[alias] = AdminClient(
                {"bootstrap.servers": self.kafka(alias).bootstrap, "log_level": 3}
            )
        return self.admins[alias]

    def config(self, extra: str = "") -> MirrorConfig:
        lines = ["clusters = A, B", "A->B.enabled = true", "A->B.sync.group.offsets.enabled = true"]
        for alias in "AB":
            lines += [
                f"{alias}.bootstrap.servers = {self.kafka(alias).bootstrap_for('SASL_PLAINTEXT')}",
                f"{alias}.security.protocol = SASL_PLAINTEXT",
                f"{alias}.sasl.mechanism = SCRAM-SHA-512",
                f"{alias}.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule "
                f'required username="{USER}" password="{PASSWORD}";',
            ]
        return load_config("\n".join(lines) + "\n" + SINGLE_BROKER + extra)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    security = Security(
        listeners=("SASL_PLAINTEXT",), scram_users={USER: PASSWORD, READER: READER_PASSWORD}, authorizer=True
    )
    with cluster_pair(tmp_path_factory, security) as (a, b):
        create_topics(a.bootstrap, ("orders", 2, {"retention.ms": "86400000"}))
        produce(a.bootstrap, "orders", records(0, 30))
        commit(a.bootstrap, "app", {0: 5, 1: 7})
        commit(a.bootstrap, "fo", {0: 10, 1: 12})
        pair = Pair(a, b)
        for alias in "AB":
            pair.admin(alias)  # made with the module's clusters, not inside a test
        yield pair


def records(start: int, end: int) -> list[dict[str, Any]]:
    return [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(start, end)]


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit as an application does; a cluster just started may still be loading its group
    coordinator (COORDINATOR_LOAD_IN_PROGRESS, a retriable error): ask again, briefly."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition("orders", p, o) for p, o in offsets.items()], asynchronous=False
                )
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def committed(pair: Pair, alias: str, group: str) -> dict[tuple[str, int], int]:
    request = ConsumerGroupTopicPartitions(group)
    result = pair.admin(alias).list_consumer_group_offsets([request])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def snapshot(pair: Pair) -> dict[str, Any]:
    """What a job could change on either cluster: topics and their partition counts, every
    partition's end offset, the dynamic configs of topics, committed group offsets, and ACLs."""
    state: dict[str, Any] = {}
    for alias in "AB":
        admin = pair.admin(alias)
        # Kafka's own topics are left out: any group request creates __consumer_offsets.
        listed = admin.list_topics(timeout=30).topics.items()
        topics = {n: len(m.partitions) for n, m in listed if not n.startswith("__")}
        spec = [(n, p) for n, c in topics.items() for p in range(c)]
        # Asked again while a partition answers "ask again": a topic a job created a moment before
        # answered NOT_LEADER_FOR_PARTITION once in a suite run.
        ends = list_offsets(admin, spec, OffsetSpec.latest(), read_committed=False)
        user_topics = sorted(topics)
        configs = {}
        if user_topics:
            resources = [ConfigResource(ResourceType.TOPIC, t) for t in user_topics]
            for resource, future in admin.describe_configs(resources).items():
                configs[resource.name] = {
                    k: e.value
                    for k, e in future.result(30).items()
                    if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
                }
        groups = [g.group_id for g in admin.list_consumer_groups().result(30).valid]
        state[alias] = {
            "topics": topics,
            "ends": ends,
            "configs": configs,
            "groups": {g: committed(pair, alias, g) for g in sorted(groups)},
            "acls": sorted(map(str, admin.describe_acls(ANY_ACL).result(30))),
        }
    return state


@contextlib.contextmanager
def holding(
    pair: Pair,
    config: MirrorConfig,
    *jobs: str,
    without: Resolved | None,
    groups: list[str] = GROUPS,
) -> Iterator[None]:
    """The principal holds exactly the table's ACLs for `jobs` (but `without`) while inside."""
    needed = [r for job in jobs for r in grants(config.flow("A", "B"), job, topics=TOPICS, groups=groups)]
    assert without is None or without in needed
    # Jobs share grants (the same ACL, for another reason): each binding once.
    by_cluster: dict[str, dict[str, AclBinding]] = {"A": {}, "B": {}}
    for resolved in needed:
        if resolved != without:
            binding = acl_binding(resolved, PRINCIPAL)
            by_cluster[resolved.cluster][str(binding)] = binding
    mine = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        PRINCIPAL,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    try:
        for alias, bindings in by_cluster.items():
            if bindings:
                for future in pair.admin(alias).create_acls(list(bindings.values())).values():
                    future.result(30)
        wait_for_acls(pair, {alias: len(b) for alias, b in by_cluster.items()})
        yield
    finally:
        for alias in "AB":
            pair.admin(alias).delete_acls([mine])[mine].result(30)
        wait_for_acls(pair, {"A": 0, "B": 0})


def wait_for_acls(pair: Pair, counts: dict[str, int]) -> None:
    """ACL changes reach the broker's authorizer through the metadata log a moment after
    CreateAcls answers; wait until the broker shows the principal's ACLs as expected."""
    mine = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        PRINCIPAL,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deadline = time.monotonic() + 30
    while True:
        seen = {alias: len(pair.admin(alias).describe_acls(mine).result(30)) for alias in counts}
        if seen == counts:
            return
        assert time.monotonic() < deadline, f"ACLs of {PRINCIPAL}: {seen}, expected {counts}"
        time.sleep(0.1)


def copy_run(config: MirrorConfig, mode: str, run_id: str) -> dict[str, Any]:
    """One replicate or migrate run, as the DAG does it: plan, copy every unit, report."""
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    until = int(time.time() * 1000) if mode == "migrate" else None
    planned = plan_run(config, "A", "B", run_id=run_id, mode=mode, until=until)
    _, _, _, body = run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])
    plan = Plan.from_json(body)
    started = int(time.time() * 1000)
    job = copy_job_for(flow, clients, plan)
    store_report(clients, plan, [copy_unit(job, unit) for unit in plan.units()], started)
    return report_run(
        config,
        "A",
        "B",
        run_id=run_id,
        plan_offset=planned["plan_offset"],
        topic_errors=planned["topic_errors"],
    )


def remote_values(pair: Pair) -> list[bytes]:
    partitions = len(pair.admin("B").list_topics("A.orders", timeout=30).topics["A.orders"].partitions)
    return sorted(r.value for rs in read_topic(pair.b.bootstrap, "A.orders", partitions).values() for r in rs)


def topic_config(pair: Pair, alias: str, topic: str, name: str) -> str:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return pair.admin(alias).describe_configs([resource])[resource].result(30)[name].value


def before_replicate(pair: Pair) -> None:
    produce(pair.a.bootstrap, "orders", records(30, 40))


def before_refresh(pair: Pair) -> None:
    pair.admin("A").create_partitions([NewPartitions("orders", 3)])["orders"].result(30)


def before_config_sync(pair: Pair) -> None:
    resource = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    pair.admin("A").incremental_alter_configs([resource])[resource].result(30)


def before_acl_sync(pair: Pair) -> None:
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            f"User:{READER}",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
    ]
    for future in pair.admin("A").create_acls(bindings).values():
        future.result(30)


def nothing(_pair: Pair) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Case:
    """A job, what the test does on the clusters first, the ACL left out (side, resource type,
    name, operation), the job's run, and what it must have done once the ACL is granted."""

    job: str
    prepare: Callable[[Pair], None]
    left_out: tuple[str, str, str, str]
    run: Callable[[MirrorConfig], Any]
    done: Callable[[Pair, Any], None]

    def resolved(self, config: MirrorConfig) -> Resolved:
        side, restype, name, operation = self.left_out
        matches = [
            r
            for r in grants(config.flow("A", "B"), self.job, topics=TOPICS, groups=GROUPS)
            if (r.grant.side, r.grant.resource.name, r.name, r.grant.operation.name)
            == (side, restype, name, operation)
        ]
        assert len(matches) == 1, (self.left_out, matches)
        return matches[0]


def migrated(pair: Pair, summary: Any) -> None:
    assert remote_values(pair) == sorted(r["value"] for r in records(0, 30)), summary


def replicated(pair: Pair, summary: Any) -> None:
    assert remote_values(pair) == sorted(r["value"] for r in records(0, 40)), summary


def grown(pair: Pair, _summary: Any) -> None:
    assert len(pair.admin("B").list_topics("A.orders", timeout=30).topics["A.orders"].partitions) == 3


def configs_synced(pair: Pair, _summary: Any) -> None:
    assert topic_config(pair, "B", "A.orders", "retention.ms") == "3600000"


def acls_synced(pair: Pair, summary: Any) -> None:
    assert summary["errors"] == {} and len(summary["synced"]) == 1, summary
    (binding,) = [
        b for b in pair.admin("B").describe_acls(ANY_ACL).result(30) if b.principal == f"User:{READER}"
    ]
    # ALLOW ALL on the source topic becomes ALLOW READ on its remote topic.
    assert (binding.name, binding.operation, binding.permission_type) == (
        "A.orders",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


def checkpointed(pair: Pair, summary: Any) -> None:
    flow = pair.config().flow("A", "B")
    found = read_checkpoints({"bootstrap.servers": pair.b.bootstrap}, flow.checkpoints_topic)
    assert set(found) >= {
        ("app", "A.orders", 0),
        ("app", "A.orders", 1),
    }, summary


def group_synced(pair: Pair, summary: Any) -> None:
    assert committed(pair, "B", "app") == {("A.orders", 0): 5, ("A.orders", 1): 7}, summary


def heartbeat_written(pair: Pair, summary: Any) -> None:
    assert sum(len(rs) for rs in read_topic(pair.b.bootstrap, "heartbeats", 1).values()) >= 1, summary


def failed_over(pair: Pair, summary: Any) -> None:
    assert committed(pair, "B", "fo") == {("A.orders", 0): 10, ("A.orders", 1): 12}, summary


CASES = [
    Case(
        "migrate",
        nothing,
        ("target", "TOPIC", "mm2-offsets.A.internal", "CREATE"),
        lambda config: copy_run(config, "migrate", "lp-migrate"),
        migrated,
    ),
    Case(
        "replicate",
        nothing,
        ("target", "TRANSACTIONAL_ID", "mirrorflow-A->B-", "WRITE"),
        lambda config: copy_run(config, "replicate", "lp-replicate-0"),
        migrated,
    ),
    Case(
        "replicate",
        before_replicate,
        ("source", "GROUP", "mirrorflow-A->B", "DESCRIBE"),
        lambda config: copy_run(config, "replicate", "lp-replicate"),
        replicated,
    ),
    Case(
        "refresh_topics",
        before_refresh,
        ("target", "TOPIC", "A.orders", "ALTER"),
        lambda config: topic_sync.run_refresh_topics(config.flow("A", "B")),
        grown,
    ),
    Case(
        "sync_topic_configs",
        before_config_sync,
        ("target", "TOPIC", "A.orders", "ALTER_CONFIGS"),
        lambda config: topic_sync.run_sync_topic_configs(config.flow("A", "B")),
        configs_synced,
    ),
    Case(
        "sync_topic_acls",
        before_acl_sync,
        ("target", "BROKER", "kafka-cluster", "ALTER"),
        lambda config: topic_sync.run_sync_topic_acls(config.flow("A", "B")),
        acls_synced,
    ),
    Case(
        "checkpoints",
        nothing,
        ("source", "TOPIC", "mm2-offset-syncs.B.internal", "READ"),
        lambda config: emit_checkpoints(config, "A", "B"),
        checkpointed,
    ),
    Case(
        "group_sync",
        nothing,
        ("target", "GROUP", "app", "READ"),
        lambda config: sync_group_offsets(config, "A", "B"),
        group_synced,
    ),
    Case(
        "heartbeats",
        nothing,
        ("target", "TOPIC", "heartbeats", "CREATE"),
        lambda config: emit_heartbeats([config.flow("A", "B")]),
        heartbeat_written,
    ),
    Case(
        "failover",
        nothing,
        ("target", "TOPIC", "A.orders", "READ"),
        lambda config: failover(config, "A", "B", "fo").to_dict(),
        failed_over,
    ),
]


def case_id(case: Case) -> str:
    return f"{case.job}-{case.left_out[3].lower()}-{case.left_out[1].lower()}"


def check_case(pair: Pair, case: Case) -> None:
    config = pair.config()
    case.prepare(pair)
    left_out = case.resolved(config)
    before = snapshot(pair)
    with holding(pair, config, case.job, without=left_out), pytest.raises(MissingAcl) as refused:
        case.run(config)
    message = str(refused.value)
    operation, resource = left_out.grant.operation.name, left_out.resource_text
    assert f"{PRINCIPAL} may not {operation} {resource} on cluster {left_out.cluster}" in message
    assert "kafka-acls.sh" in message and "missing 1 ACL(s)" in message, message
    assert snapshot(pair) == before, "a job refused for a missing ACL changed a cluster"

    with holding(pair, config, case.job, without=None):
        summary = case.run(config)
    case.done(pair, summary)


def test_each_job_needs_exactly_its_acls_and_names_a_missing_one(pair: Pair, subtests) -> None:
    """The cases build on each other (the replicate case copies what the migrate case left, the
    checkpoint case reads the offset-syncs the copies wrote, the enforcement and read-only checks
    follow the ACL sync and copies), so they run in order in one test: pytest-xdist spreads a
    module's tests over its workers, each with its own cluster pair, and split ones failed."""
    for case in CASES:
        with subtests.test(msg=case_id(case)):
            check_case(pair, case)
    with subtests.test(msg="synced ACLs are enforced"):
        synced_acls_are_what_the_target_authorizer_enforces(pair)
    with subtests.test(msg="read-only source"):
        a_read_only_source_is_never_written_and_needs_only_read_and_describe_there(pair)


def as_reader(pair: Pair, alias: str) -> dict[str, Any]:
    """librdkafka settings of the reader on `alias`'s SCRAM listener."""
    return {
        "bootstrap.servers": pair.kafka(alias).bootstrap_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": READER,
        "sasl.password": READER_PASSWORD,
    }


def synced_acls_are_what_the_target_authorizer_enforces(pair: Pair) -> None:
    """After the ACL sync case: the reader, who may do ALL on `orders` on A, may read `A.orders`
    on B (ALLOW ALL became ALLOW READ) but not write it (only the replication flow writes)."""
    settings = as_reader(pair, "B")
    consumer = Consumer({**settings, "group.id": f"User:{READER}-probe", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("A.orders", 0, 0)])
        # librdkafka looks up the group's coordinator even for assigned reads; the reader has no
        # ACL on its group, so that lookup's error may come first: it is not the read's answer.
        deadline = time.monotonic() + 20
        message = None
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and (
                message.error() is None or message.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED
            ):
                break
        assert message is not None and message.error() is None, message and message.error()
    finally:
        consumer.close()
    producer = Producer({**settings, "message.timeout.ms": 10000})
    errors: list[KafkaError] = []
    producer.produce("A.orders", b"not allowed", on_delivery=lambda error, _m: errors.append(error))
    producer.flush(20)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def a_read_only_source_is_never_written_and_needs_only_read_and_describe_there(pair: Pair) -> None:
    """offset-syncs.topic.location = target: no job writes, creates or alters anything on the
    source, and the table asks for nothing there but READ, DESCRIBE and DESCRIBE_CONFIGS (and
    DESCRIBE on the cluster, for the ACL sync). Replicate and checkpoints then run with exactly
    those ACLs, and the source is left exactly as it was."""
    config = pair.config("offset-syncs.topic.location = target\n")
    flow = config.flow("A", "B")
    on_source = {
        (r.grant.resource, r.grant.operation)
        for job in JOBS
        for r in grants(flow, job, topics=TOPICS, groups=GROUPS)
        if r.cluster == "A"
    }
    assert {op for _, op in on_source} == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
    }
    assert (ResourceType.BROKER, AclOperation.DESCRIBE) in on_source

    produce(pair.a.bootstrap, "orders", records(40, 50))
    commit(pair.a.bootstrap, "ro", {0: 22, 1: 23})
    before = snapshot(pair)["A"]
    with holding(pair, config, "replicate", without=None):
        summary = copy_run(config, "replicate", "lp-read-only")
    assert remote_values(pair) == sorted(r["value"] for r in records(0, 50)), summary
    with holding(pair, config, "checkpoints", without=None, groups=["ro"]):
        emit_checkpoints(config, "A", "B")
    found = read_checkpoints({"bootstrap.servers": pair.b.bootstrap}, flow.checkpoints_topic)
    assert {key for key in found if key[0] == "ro"} == {("ro", "A.orders", 0), ("ro", "A.orders", 1)}
    assert flow.offset_syncs_topic in pair.admin("B").list_topics(timeout=30).topics
    assert snapshot(pair)["A"] == before


def test_validate_connect_names_every_missing_acl_of_the_enabled_jobs_at_once(pair) -> None:
    """The preflight asks what each enabled job's own check would: with no ACL granted, every
    job of the flow is named with the grants it lacks, in one pass, and nothing is changed."""
    from mirrorflow.ops.preflight import preflight

    before = snapshot(pair)
    problems = preflight(pair.config(), timeout_s=10)

    errors = {p.key: p.message for p in problems if p.is_error}
    # Topic refresh and config sync need ACLs only on topics, which a principal without any
    # cannot even see (Kafka leaves them out of its listings), so they have nothing to name.
    for job in ("replicate", "checkpoints", "group_sync", "sync_topic_acls", "heartbeats"):
        assert f"A->B {job}" in errors, sorted(errors)
        assert f"{PRINCIPAL} may not" in errors[f"A->B {job}"] and "kafka-acls.sh" in errors[f"A->B {job}"]
    assert "TRANSACTIONAL_ID" in errors["A->B replicate"] or "transactional-id" in errors["A->B replicate"]
    assert snapshot(pair) == before


def test_validate_connect_with_exactly_the_tables_acls_is_clean(pair) -> None:
    """A read-only source (offset-syncs on the target, no heartbeats written into it) and the
    principal holding exactly the table's ACLs of every enabled job: the preflight names no
    missing ACL and no setting it could not read; what the ACLs do not let it see (the
    durability settings of the topics the flow writes, which need DescribeConfigs) is said once,
    calmly, with the grant that would let it check them."""
    from mirrorflow.ops.preflight import preflight

    config = pair.config("offset-syncs.topic.location = target\nB->A.emit.heartbeats.enabled = false\n")
    scheduled = [job for job in JOBS if job not in ("migrate", "failover", "verify")]  # run by hand
    # The table grants DESCRIBE on the groups the flow translates: every group on the source (the
    # flow's default filter), including those tests before this one in the module committed.
    groups = sorted(g.group_id for g in pair.admin("A").list_consumer_groups().result(30).valid)
    with holding(pair, config, *scheduled, without=None, groups=groups):
        problems = preflight(config, timeout_s=10)
    told = [str(p) for p in problems]
    assert not [p for p in problems if p.is_error], told
    unread = [t for t in told if "could not be read" in t or "AUTHORIZATION_FAILED" in t]
    assert not unread, told
    (unchecked,) = [t for t in told if "DescribeConfigs" in t]
    assert unchecked.startswith("note: ") and "were not checked" in unchecked and "kafka-acls.sh" in unchecked
