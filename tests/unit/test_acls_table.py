"""The least-privilege table follows the flow's config: internal topic names, where offset-syncs
live, the delivery mode; and its grant commands are ones kafka-acls.sh accepts."""

from __future__ import annotations

from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from mirrorflow.config import load_config
from mirrorflow.ops.acl_words import kafka_acls_command, markdown_table, principal_of
from mirrorflow.ops.acls import JOBS, grants, job_grants

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def flow(extra: str = ""):
    return load_config(BASE + extra).flow("A", "B")


def on(cluster: str, job: str, extra: str = "") -> set[tuple[str, str, str]]:
    return {
        (r.grant.resource.name, r.name, r.grant.operation.name)
        for r in grants(flow(extra), job, topics=["orders", "__private", "x.internal"], groups=["app"])
        if r.cluster == cluster
    }


def test_names_come_from_the_config_and_the_filters() -> None:
    target = on("B", "replicate", "offset.storage.topic = my-progress\nreplication.policy.separator = _\n")
    assert ("TOPIC", "my-progress", "CREATE") in target
    assert ("TOPIC", "A_orders", "WRITE") in target
    # Internal topics are never replicated, so no ACL is asked for them.
    assert not {name for _, name, _ in target} & {"A___private", "A_x.internal"}
    assert ("TOPIC", "mm2-offset-syncs_B_internal", "WRITE") in on(
        "A", "replicate", "replication.policy.separator = _\n"
    )


def test_offset_syncs_on_the_target_leave_the_source_read_only() -> None:
    extra = "offset-syncs.topic.location = target\n"
    for job in JOBS:
        assert {op for _, _, op in on("A", job, extra)} <= {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}, job
    assert ("TOPIC", "mm2-offset-syncs.A.internal", "CREATE") in on("B", "replicate", extra)
    assert ("TOPIC", "mm2-offset-syncs.A.internal", "READ") in on("B", "checkpoints", extra)


def test_transactional_ids_in_both_delivery_modes() -> None:
    # At-least-once copies write progress through the partition's transactional producer too.
    for extra in ("", "mirrorflow.delivery = at-least-once\n"):
        assert ("TRANSACTIONAL_ID", "mirrorflow-A->B-", "WRITE") in on("B", "replicate", extra)


def test_grant_commands_name_principal_operation_resource_and_pattern() -> None:
    (txn,) = [r for r in grants(flow(), "replicate") if r.grant.resource == ResourceType.TRANSACTIONAL_ID]
    assert txn.grant.pattern == ResourcePatternType.PREFIXED
    assert kafka_acls_command(txn, "User:mm2", "b:9092") == (
        "kafka-acls.sh --bootstrap-server b:9092 --command-config <admin.properties> --add "
        "--allow-principal User:mm2 --operation Write --transactional-id 'mirrorflow-A->B-' "
        "--resource-pattern-type prefixed"
    )
    (cluster,) = [r for r in grants(flow(), "sync_topic_acls") if r.cluster == "A"]
    assert cluster.grant.operation == AclOperation.DESCRIBE
    assert kafka_acls_command(cluster, None, "a:9092").endswith(
        "--allow-principal <principal> --operation Describe --cluster"
    )
    configs = [r for r in grants(flow(), "sync_topic_configs", topics=["orders"]) if r.cluster == "B"]
    assert "--operation AlterConfigs --topic 'A.orders'" in kafka_acls_command(
        configs[-1], "User:m", "b:9092"
    )


def test_principal_is_known_for_plain_and_scram_only() -> None:
    sasl = {"security.protocol": "SASL_SSL", "sasl.username": "mm2"}
    assert principal_of({**sasl, "sasl.mechanism": "SCRAM-SHA-512"}) == "User:mm2"
    assert principal_of({**sasl, "sasl.mechanism": "PLAIN"}) == "User:mm2"
    assert principal_of({**sasl, "sasl.mechanism": "OAUTHBEARER"}) is None
    assert principal_of({"security.protocol": "SSL"}) is None


def test_the_table_has_a_row_per_grant_of_every_job() -> None:
    table = markdown_table(flow()).splitlines()
    assert len(table) == 2 + sum(len(job_grants(flow(), job)) for job in JOBS)
    assert "| sync_topic_acls | target (B) | CLUSTER | LITERAL | ALTER |" in "\n".join(table)


def test_the_docs_table_is_the_one_the_code_checks() -> None:
    """The least-privilege page's table is markdown_table's output for its example flow, made when
    the site is built, so a grant added to or dropped from the code shows up there."""
    from mirrorflow.config import load_config
    from mirrorflow.ops.acl_words import markdown_table
    from tests.unit.docs_hooks import DOCS, plain, references

    page = plain(references.expand((DOCS / "configuration" / "acls.md").read_text()))
    flow = load_config(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    )
    assert markdown_table(flow.flow("A", "B")).strip() in page
