"""Topic, partition, config and ACL sync against real Kafka clusters, with MM2's rules."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from localkafka import Security
from mirrorflow.cli import main
from mirrorflow.control.topic_sync import (
    ANY_TOPIC_ACL,
    NO_AUTHORIZER,
    TopicSyncFailed,
    run_refresh_topics,
    run_sync_topic_acls,
    run_sync_topic_configs,
)
from mirrorflow.kafka import topic_ids
from mirrorflow.ops.acl_check import MissingAcl
from mirrorflow.policy.provenance import RECORD_HEADROOM
from mirrorflow.replicate.topics import sync_remote_topics

from ..conftest import WITH_AUTHORIZER, Cluster
from .kafkatools import create_topics
from .mirror_setup import mm2_config, mm2_text


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def configs(cluster, topic: str) -> dict[str, tuple[str, str]]:
    """name -> (value, source) of a topic's configs as the broker describes them."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    client = admin(cluster)
    entries = client.describe_configs([resource])[resource].result()
    return {name: (e.value, ConfigSource(e.source).name) for name, e in entries.items()}


def overrides(cluster, topic: str) -> dict[str, str]:
    return {k: v for k, (v, source) in configs(cluster, topic).items() if source == "DYNAMIC_TOPIC_CONFIG"}


def partition_counts(cluster) -> dict[str, int]:
    topics = admin(cluster).list_topics(timeout=10).topics
    return {name: len(meta.partitions) for name, meta in topics.items()}


def test_refresh_creates_new_topics_and_grows_partitions(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    flow = config.flow("A", "B")
    create_topics(
        a.bootstrap,
        ("orders", 2, {"retention.ms": "1234567", "min.insync.replicas": "1"}),
        ("app.internal", 1),
        ("__private", 1),
    )
    first = run_refresh_topics(flow)
    assert first["created"] == ["A.orders"] and first["errors"] == {}
    assert partition_counts(b)["A.orders"] == 2
    # Only the source's non-default, non-excluded configs go along (min.insync.replicas is
    # excluded), and the record limit that leaves room for mirrorflow's provenance header.
    assert overrides(b, "A.orders") == {
        "retention.ms": "1234567",
        "max.message.bytes": str(1048588 + RECORD_HEADROOM),
    }
    assert "A.app.internal" not in partition_counts(b) and "A.__private" not in partition_counts(b)

    create_topics(a.bootstrap, ("payments", 3))
    source_admin = admin(a)
    source_admin.create_partitions([NewPartitions("orders", 5)])["orders"].result()
    second = run_refresh_topics(flow)
    assert second["created"] == ["A.payments"]
    assert second["grown"] == {"A.orders": [2, 5]}
    assert partition_counts(b)["A.orders"] == 5 and partition_counts(b)["A.payments"] == 3

    third = run_refresh_topics(flow)
    assert (third["created"], third["grown"]) == ([], {})


def test_refresh_never_shrinks_a_larger_remote_topic(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 2))
    create_topics(b.bootstrap, ("A.orders", 4))
    result = run_refresh_topics(mm2_config([a, b], ["A->B"]).flow("A", "B"))
    assert (result["created"], result["grown"], result["errors"]) == ([], {}, {})
    assert partition_counts(b)["A.orders"] == 4


def test_refresh_reports_topics_it_cannot_create(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1))
    flow = mm2_config([a, b], ["A->B"], "A->B.replication.factor = 3\n").flow("A", "B")
    with pytest.raises(TopicSyncFailed) as failed:
        run_refresh_topics(flow)
    assert "replication.factor is 3" in str(failed.value)
    assert failed.value.result["errors"].keys() == {"orders"}


@pytest.fixture
def config_pair(local_kafka):
    """A source whose broker sets retention.ms statically, and a plain target."""
    source = local_kafka(overrides={"log.retention.ms": "5000"})
    target = local_kafka()
    return Cluster("A", source.bootstrap, source), Cluster("B", target.bootstrap, target)


def test_config_sync_sets_non_defaults_deletes_defaults_and_leaves_the_rest(config_pair) -> None:
    a, b = config_pair
    create_topics(a.bootstrap, ("orders", 1, {"cleanup.policy": "compact", "max.message.bytes": "2000000"}))
    create_topics(
        b.bootstrap,
        (
            "A.orders",
            1,
            {
                "max.message.bytes": "5000",  # SET to the source's plus RECORD_HEADROOM
                "segment.ms": "999999",  # default on the source: DELETE (the target default applies)
                "message.timestamp.type": "LogAppendTime",  # excluded key: target-only, untouched
                "retention.ms": "777",  # static broker config on the source: never synced
            },
        ),
    )
    flow = mm2_config([a, b], ["A->B"]).flow("A", "B")
    result = run_sync_topic_configs(flow)
    ops = result["topics"]["A.orders"]
    assert ops["set"] == {"cleanup.policy": "compact", "max.message.bytes": str(2000000 + RECORD_HEADROOM)}
    assert "segment.ms" in ops["deleted"] and "retention.ms" not in ops["deleted"]
    assert "message.timestamp.type" not in ops["deleted"] and "message.timestamp.type" not in ops["set"]
    assert overrides(b, "A.orders") == {
        "cleanup.policy": "compact",
        "max.message.bytes": str(2000000 + RECORD_HEADROOM),
        "message.timestamp.type": "LogAppendTime",
        "retention.ms": "777",
    }
    assert configs(b, "A.orders")["segment.ms"][1] == "DEFAULT_CONFIG"


def test_config_sync_with_defaults_from_the_source_sets_them(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1))
    create_topics(b.bootstrap, ("A.orders", 1, {"segment.ms": "999999"}))
    flow = mm2_config([a, b], ["A->B"], "A->B.use.defaults.from = source\n").flow("A", "B")
    run_sync_topic_configs(flow)
    source_default = configs(a, "orders")["segment.ms"][0]
    assert configs(b, "A.orders")["segment.ms"] == (source_default, "DYNAMIC_TOPIC_CONFIG")


def test_config_sync_only_touches_remote_topics_that_exist(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1, {"retention.ms": "1234"}), ("payments", 1))
    result = run_sync_topic_configs(mm2_config([a, b], ["A->B"]).flow("A", "B"))
    assert result["topics"] == {} and "A.orders" not in partition_counts(b)


def acl(name, operation, permission="ALLOW", pattern="LITERAL", principal="User:alice", restype="TOPIC"):
    return AclBinding(
        ResourceType[restype],
        name,
        ResourcePatternType[pattern],
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType[permission],
    )


def create_acls(cluster, *bindings: AclBinding) -> None:
    client = admin(cluster)
    for future in client.create_acls(list(bindings)).values():
        future.result()


def target_acls(cluster) -> set[AclBinding]:
    client = admin(cluster)
    return set(client.describe_acls(ANY_TOPIC_ACL).result())


def test_acl_sync_maps_literal_topic_acls_and_never_deletes(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    create_acls(
        a,
        acl("orders", "READ"),
        acl("orders", "WRITE"),  # dropped: only replication writes remote topics
        acl("orders", "ALL", principal="User:bob"),  # becomes READ
        acl("orders", "WRITE", "DENY", principal="User:eve"),  # copied as is
        acl("*", "DESCRIBE", principal="User:ops"),  # literal wildcard: A.*
        acl("ord", "READ", pattern="PREFIXED"),  # prefixed: ignored
        acl("cache.internal", "READ"),  # not replicated: ignored
        acl("g1", "READ", restype="GROUP"),  # not a topic ACL
    )
    create_acls(b, acl("A.orders", "READ", principal="User:target-only"))
    flow = mm2_config([a, b], ["A->B"]).flow("A", "B")
    result = run_sync_topic_acls(flow)
    expected = {
        acl("A.orders", "READ"),
        acl("A.orders", "READ", principal="User:bob"),
        acl("A.orders", "WRITE", "DENY", principal="User:eve"),
        acl("A.*", "DESCRIBE", principal="User:ops"),
    }
    assert result["skipped"] is None and result["errors"] == {}
    assert len(result["synced"]) == 4
    assert target_acls(b) == expected | {acl("A.orders", "READ", principal="User:target-only")}

    # Removing an ACL on the source never removes it on the target.
    source_admin = admin(a)
    for future in source_admin.delete_acls([ANY_TOPIC_ACL]).values():
        future.result()
    again = run_sync_topic_acls(flow)
    assert again["synced"] == []
    assert target_acls(b) == expected | {acl("A.orders", "READ", principal="User:target-only")}


def test_acl_sync_on_a_source_without_an_authorizer_says_so_and_changes_nothing(
    local_kafka, kafka_clusters
) -> None:
    plain = local_kafka()  # no authorizer: DescribeAcls answers SECURITY_DISABLED
    _, b = kafka_clusters(2)
    a = Cluster("A", plain.bootstrap, plain)
    create_topics(a.bootstrap, ("orders", 1))
    result = run_sync_topic_acls(mm2_config([a, b], ["A->B"]).flow("A", "B"))
    assert result["skipped"] == NO_AUTHORIZER and result["synced"] == [] and result["errors"] == {}
    assert target_acls(b) == set()


def test_acl_sync_refused_by_the_source_names_the_grant_and_is_never_a_silent_empty_sync(
    local_kafka, kafka_clusters
) -> None:
    # librdkafka reports a refused DescribeAcls as an empty list; the job must not believe it.
    secured = local_kafka(
        security=Security(
            listeners=("SASL_PLAINTEXT",), scram_users={"mirror": "mirror-secret"}, authorizer=True
        )
    )
    _, b = kafka_clusters(2)
    create_acls(Cluster("A", secured.bootstrap), acl("orders", "READ"))
    a = Cluster("A", secured.bootstrap_for("SASL_PLAINTEXT"), secured)
    sasl = (
        "A.security.protocol = SASL_PLAINTEXT\n"
        "A.sasl.mechanism = SCRAM-SHA-512\n"
        "A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mirror" password="mirror-secret";\n'
    )
    with pytest.raises(MissingAcl, match="User:mirror may not DESCRIBE cluster on cluster A") as refused:
        run_sync_topic_acls(mm2_config([a, b], ["A->B"], sasl).flow("A", "B"))
    assert "--allow-principal User:mirror --operation Describe --cluster" in str(refused.value)
    assert target_acls(b) == set()


def test_cli_runs_a_job_for_the_named_flow_and_explains_bad_choices(kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1))
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], "A->B.sync.topic.acls.enabled = false\n"))
    runner = CliRunner()

    done = runner.invoke(main, ["refresh-topics", str(path), "--flow", "A->B"])
    assert done.exit_code == 0, done.output
    assert "A.orders" in done.output and "created" in done.output

    configs_run = runner.invoke(main, ["sync-topic-configs", str(path)])
    assert configs_run.exit_code == 0, configs_run.output
    assert "A.orders" in configs_run.output

    off = runner.invoke(main, ["sync-topic-acls", str(path), "--flow", "A->B"])
    assert off.exit_code == 2
    assert "sync.topic.acls.enabled" in off.output
    nothing = runner.invoke(main, ["sync-topic-acls", str(path)])
    assert nothing.exit_code == 0 and "No replication flow has sync_topic_acls on" in nothing.output

    bad = runner.invoke(main, ["refresh-topics", str(path), "--flow", "A-B"])
    assert bad.exit_code == 2 and "SOURCE->TARGET" in bad.output

    # B->A exists only for heartbeats: it replicates nothing, so it has no topic jobs.
    reverse = runner.invoke(main, ["refresh-topics", str(path), "--flow", "B->A"])
    assert reverse.exit_code == 2 and "refresh_topics is off for B->A" in reverse.output


def test_remote_topics_are_created_and_grown_in_requests_under_kafkas_partition_limit(
    kafka_clusters, monkeypatch
) -> None:
    """Kafka refuses a CreateTopics or CreatePartitions request of more than 10,000 partitions:
    a first run over 2,000 topics of 10 partitions failed for every topic. Requests are cut;
    here the cut is lowered to 5 records (a topic, its 3 partitions and the one config it is
    created with) so a few topics take several real requests."""
    from mirrorflow import admin_batches
    from mirrorflow.kafka import await_topics
    from mirrorflow.replicate import topics as remote_topics

    a, b = kafka_clusters(2)
    monkeypatch.setattr(admin_batches, "RECORDS_PER_REQUEST", 5)
    create_topics(a.bootstrap, *((f"t{i}", 3) for i in range(5)))
    seen: list[int] = []
    cut = remote_topics.request_batches

    def recording(items, records):
        for batch in cut(items, records):
            seen.append(sum(records(item) for item in batch))
            yield batch

    monkeypatch.setattr(remote_topics, "request_batches", recording)
    flow = mm2_config([a, b], ["A->B"]).flow("A", "B")

    created = run_refresh_topics(flow)
    assert sorted(created["created"]) == [f"A.t{i}" for i in range(5)] and created["errors"] == {}
    assert seen == [5, 5, 5, 5, 5], "one topic of 3 partitions per request under a limit of 5 records"

    source = admin(a)
    for future in source.create_partitions([NewPartitions(f"t{i}", 5) for i in range(5)]).values():
        future.result(30)
    await_topics(source, {f"t{i}": 5 for i in range(5)})
    seen.clear()
    grown = run_refresh_topics(flow)
    assert grown["grown"] == {f"A.t{i}": [3, 5] for i in range(5)}
    assert seen == [4, 4, 2], "2 new partitions per topic, at most 4 per request"
    assert all(partition_counts(b)[f"A.t{i}"] == 5 for i in range(5))


class _RacedAdmin:
    """The target's admin client, with a rival create of the same topics (another run of the
    flow, on its own connection) sent just before each create of ours, so ours may lose."""

    def __init__(self, admin: AdminClient, rival: AdminClient) -> None:
        self.admin, self.rival = admin, rival
        self.rival_futures: dict = {}
        rival.list_topics(timeout=10)  # connected, so its create leaves first

    def create_topics(self, new_topics, **kwargs):
        self.rival_futures = self.rival.create_topics(
            [NewTopic(t.topic, t.num_partitions, t.replication_factor) for t in new_topics]
        )
        return self.admin.create_topics(new_topics, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.admin, name)


def test_a_create_that_lost_a_race_returns_once_the_topic_and_its_id_are_served(kafka_clusters) -> None:
    """Another run (or refresh_topics) creates the remote topic at the same moment as this run,
    whose create then fails with TOPIC_ALREADY_EXISTS. That answer can come before the brokers
    serve the topic; sync_remote_topics must not return before they do, or the plan that reads
    the remote topic's ID next stores progress without it."""
    a, b = kafka_clusters(2)
    flow = mm2_config([a, b], ["A->B"]).flow("A", "B")
    lost = 0
    for attempt in range(12):
        create_topics(a.bootstrap, (f"raced{attempt}", 3))
        target = _RacedAdmin(admin(b), admin(b))
        topics = sync_remote_topics(flow, admin(a), target)
        remote = f"A.raced{attempt}"
        assert topics.errors == {}
        if remote not in topics.created:
            lost += 1
            assert remote in topic_ids(target.admin, [remote]), "returned before the brokers served the topic"
        target.rival_futures[remote].exception(30)  # the rival's answer, before its client goes
        if lost >= 3:
            break
    assert lost, "the rival create never won the race in 12 tries"


# Copied by MM2's default config.properties.exclude: each is a record of the topic's creation.
EIGHT_CONFIGS = {
    "retention.ms": "86400000",
    "retention.bytes": "1073741824",
    "segment.bytes": "104857600",
    "segment.ms": "3600000",
    "cleanup.policy": "delete",
    "compression.type": "lz4",
    "delete.retention.ms": "3600000",
    "max.message.bytes": "1048588",
}


def test_many_small_topics_with_configs_are_created_and_synced_in_requests_kafkas_controller_takes(
    local_kafka,
) -> None:
    """1,300 one-partition topics with eight configs each: 1,300 partitions, under the
    controller's 10,000-partition bound, but 13,000 metadata records, over its bound of 10,000
    records a request. One request was refused for every topic (POLICY_VIOLATION, "excessively
    large batch operation"), on every run, as MirrorMaker 2's remote topics are (KAFKA-19327).
    Then eight configs of each change on the source: 10,400 changes for the config sync."""
    from mirrorflow.kafka import await_topics
    from mirrorflow.replicate.topics import RemoteTopics

    # Clusters of its own: 2,200 topics would outlast the shared clusters' emptying after a test.
    a, b = (
        Cluster(alias, kafka.bootstrap, kafka)
        for alias, kafka in (("A", local_kafka()), ("B", local_kafka()))
    )
    names = [f"small-{i:04d}" for i in range(1_300)]
    source = admin(a)
    for first in range(0, len(names), 400):  # the source's own requests under the bound too
        made = source.create_topics(
            [NewTopic(n, 1, 1, config=EIGHT_CONFIGS) for n in names[first : first + 400]]
        )
        for future in made.values():
            future.result(60)
    await_topics(source, dict.fromkeys(names, 1))
    flow = mm2_config([a, b], ["A->B"], "topics = small-.*\n").flow("A", "B")

    out: RemoteTopics = sync_remote_topics(flow, admin(a), admin(b))

    assert out.errors == {}, list(out.errors.values())[:3]
    assert sorted(out.created) == [f"A.{n}" for n in names]
    target = admin(b)  # kept: a client collected mid-call ends its calls
    described = target.describe_configs([ConfigResource(ResourceType.TOPIC, "A.small-0777")])
    (configs,) = (future.result(30) for future in described.values())
    assert configs["compression.type"].value == "lz4" and configs["retention.ms"].value == "86400000"

    changed = {**{key: str(int(value) * 2) for key, value in EIGHT_CONFIGS.items() if value.isdigit()}}
    changed |= {"cleanup.policy": "compact", "compression.type": "zstd"}
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changed.items()]
    resources = [ConfigResource(ResourceType.TOPIC, n, incremental_configs=ops) for n in names]
    for first in range(0, len(resources), 400):
        for future in source.incremental_alter_configs(resources[first : first + 400]).values():
            future.result(60)

    synced = run_sync_topic_configs(flow)

    assert synced["errors"] == {} and len(synced["topics"]) == len(names)
    described = target.describe_configs([ConfigResource(ResourceType.TOPIC, "A.small-1234")])
    (configs,) = (future.result(30) for future in described.values())
    assert configs["compression.type"].value == "zstd" and configs["retention.ms"].value == "172800000"


def test_more_acls_than_kafkas_controller_takes_in_a_request_are_synced_in_several(local_kafka) -> None:
    """10,400 topic ACLs (a principal each): one CreateAcls of all of them is 10,400 new ACLs,
    over the controller's bound of 10,000 records a request, and was refused for every ACL."""
    from mirrorflow.admin_batches import request_batches

    # Clusters of their own: the shared ones are emptied with one DeleteAcls, which the same bound
    # refuses past 10,000.
    a, b = (
        Cluster(alias, kafka.bootstrap, kafka)
        for alias, kafka in (
            ("A", local_kafka(security=WITH_AUTHORIZER)),
            ("B", local_kafka(security=WITH_AUTHORIZER)),
        )
    )
    create_topics(a.bootstrap, ("orders", 1))
    source = admin(a)
    wanted = [acl("orders", "READ", principal=f"User:reader-{i:05d}") for i in range(10_400)]
    for batch in request_batches(wanted, lambda _: 1):
        for future in source.create_acls(batch).values():
            future.result(60)

    result = run_sync_topic_acls(mm2_config([a, b], ["A->B"]).flow("A", "B"))

    assert result["errors"] == {}, list(result["errors"].items())[:3]
    assert len(result["synced"]) == 10_400
    assert len(target_acls(b)) == 10_400
