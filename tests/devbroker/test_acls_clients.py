"""ACL storage through the AdminClients of confluent-kafka and kafka-python, and across a restart.

Tests that change bindings start their own broker, so that filters like "everything" see only
that test's bindings; the describe tests share one broker that nobody changes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from raw_protocol import RawClient

from devbroker.launcher import DevBroker

pytestmark = pytest.mark.devbroker_only

INVALID_REQUEST = 42

T, G, B, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER, ResourceType.TRANSACTIONAL_ID
LIT, PRE, MATCH, ANY = (
    ResourcePatternType.LITERAL,
    ResourcePatternType.PREFIXED,
    ResourcePatternType.MATCH,
    ResourcePatternType.ANY,
)
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

ORDERS = AclBinding(T, "orders", LIT, "User:alice", "*", AclOperation.READ, ALLOW)
ALL_TOPICS = AclBinding(T, "*", LIT, "User:alice", "*", AclOperation.DESCRIBE, ALLOW)
ORD_PREFIX = AclBinding(T, "ord", PRE, "User:bob", "*", AclOperation.WRITE, DENY)
APP_GROUPS = AclBinding(G, "app-", PRE, "User:alice", "*", AclOperation.READ, ALLOW)
CLUSTER = AclBinding(B, "kafka-cluster", LIT, "User:admin", "*", AclOperation.ALTER, ALLOW)
TXN = AclBinding(X, "tx", LIT, "User:bob", "10.0.0.1", AclOperation.WRITE, ALLOW)
BINDINGS = [ORDERS, ALL_TOPICS, ORD_PREFIX, APP_GROUPS, CLUSTER, TXN]


def key(binding: AclBinding) -> tuple:
    return (
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


def everything_but(*excluded: AclBinding) -> set[tuple]:
    return {key(b) for b in BINDINGS if b not in excluded}


def acl_filter(
    restype: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: ResourcePatternType = ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: AclOperation = AclOperation.ANY,
    permission: AclPermissionType = AclPermissionType.ANY,
) -> AclBindingFilter:
    return AclBindingFilter(restype, name, pattern, principal, host, operation, permission)


def create_all(admin: AdminClient) -> None:
    for future in admin.create_acls(BINDINGS).values():
        assert future.result(15) is None


def described(admin: AdminClient, flt: AclBindingFilter) -> set[tuple]:
    return {key(b) for b in admin.describe_acls(flt).result(15)}


@pytest.fixture(scope="module")
def filled_admin() -> Iterator[AdminClient]:
    """One broker holding BINDINGS, shared by the read-only describe tests."""
    with DevBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        create_all(admin)
        yield admin


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (acl_filter(), set(map(key, BINDINGS))),
        (acl_filter(G), {key(APP_GROUPS)}),
        (acl_filter(pattern=LIT), {key(ORDERS), key(ALL_TOPICS), key(CLUSTER), key(TXN)}),
        (acl_filter(pattern=PRE), {key(ORD_PREFIX), key(APP_GROUPS)}),
        (acl_filter(T, "orders", MATCH), {key(ORDERS), key(ALL_TOPICS), key(ORD_PREFIX)}),
        (acl_filter(G, "app-payments", MATCH), {key(APP_GROUPS)}),
        (acl_filter(T, "ord", ANY), {key(ORD_PREFIX)}),
        (acl_filter(T, "orders", LIT), {key(ORDERS)}),
        (acl_filter(principal="User:bob"), {key(ORD_PREFIX), key(TXN)}),
        (acl_filter(host="10.0.0.1"), {key(TXN)}),
        (acl_filter(operation=AclOperation.WRITE), {key(ORD_PREFIX), key(TXN)}),
        (acl_filter(permission=DENY), {key(ORD_PREFIX)}),
        (acl_filter(T, "payments", MATCH, permission=DENY), set()),
    ],
)
def test_describe_acls_with_every_filter_kind(
    devbroker_factory, flt: AclBindingFilter, expected: set
) -> None:
    admin = AdminClient({"bootstrap.servers": devbroker_factory().bootstrap})
    create_all(admin)
    assert described(admin, flt) == expected


def test_create_is_idempotent_and_invalid_bindings_are_refused(devbroker_factory) -> None:
    admin = AdminClient({"bootstrap.servers": devbroker_factory().bootstrap})
    create_all(admin)
    create_all(admin)  # creating existing bindings succeeds and adds nothing
    assert len(admin.describe_acls(acl_filter()).result(15)) == len(BINDINGS)
    bad = [
        AclBinding(B, "not-the-cluster", LIT, "User:a", "*", AclOperation.ALTER, ALLOW),
        AclBinding(T, "t", LIT, "alice-without-type", "*", AclOperation.READ, ALLOW),
    ]
    for binding, future in admin.create_acls(bad).items():
        with pytest.raises(KafkaException) as refused:
            future.result(15)
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST, binding
    assert len(admin.describe_acls(acl_filter()).result(15)) == len(BINDINGS)


def test_delete_acls_returns_the_matches_of_each_filter(devbroker_factory) -> None:
    admin = AdminClient({"bootstrap.servers": devbroker_factory().bootstrap})
    create_all(admin)
    by_match, by_principal = acl_filter(T, "orders", MATCH), acl_filter(principal="User:bob")
    results = admin.delete_acls([by_match, by_principal])
    assert {key(b) for b in results[by_match].result(15)} == {key(ORDERS), key(ALL_TOPICS), key(ORD_PREFIX)}
    assert {key(b) for b in results[by_principal].result(15)} == {key(ORD_PREFIX), key(TXN)}
    assert described(admin, acl_filter()) == {key(APP_GROUPS), key(CLUSTER)}
    assert admin.delete_acls([by_principal])[by_principal].result(15) == []


def test_kafka_python_admin_acls(devbroker_factory) -> None:
    admin = KafkaAdminClient(bootstrap_servers=devbroker_factory().bootstrap)
    try:
        topic_acl = ACL(
            "User:carol",
            "*",
            ACLOperation.READ,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.TOPIC, "metrics", ACLResourcePatternType.PREFIXED),
        )
        group_acl = ACL(
            "User:carol",
            "*",
            ACLOperation.READ,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.GROUP, "reporting", ACLResourcePatternType.LITERAL),
        )
        created = admin.create_acls([topic_acl, group_acl])
        assert (len(created["succeeded"]), created["failed"]) == (2, [])
        match = ACLFilter(
            "User:carol",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.TOPIC, "metrics.cpu", ACLResourcePatternType.MATCH),
        )
        acls, error = admin.describe_acls(match)
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in acls] == [
            ("metrics", ACLResourcePatternType.PREFIXED)
        ]
        everything = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        ((_, deleted, error),) = admin.delete_acls([everything])
        assert error.errno == 0 and len(deleted) == 2
        assert admin.describe_acls(everything)[0] == []
    finally:
        admin.close()


def test_acls_survive_a_broker_crash(devbroker_factory) -> None:
    broker = devbroker_factory(data_dir=True)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_all(admin)
    flt = acl_filter(principal="User:bob")
    assert len(admin.delete_acls([flt])[flt].result(15)) == 2
    broker.kill()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert described(admin, acl_filter()) == everything_but(ORD_PREFIX, TXN)


def test_unknown_enum_codes_on_the_wire_get_invalid_request(devbroker_factory) -> None:
    """Clients refuse to send UNKNOWN (0) themselves; a raw request gets an error naming the field."""
    creation = {
        "resource_type": 2,
        "resource_name": "t",
        "resource_pattern_type": 3,
        "principal": "User:a",
        "host": "*",
        "operation": 0,
        "permission_type": 3,
    }
    flt = {
        "resource_type_filter": 0,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    with RawClient(devbroker_factory().bootstrap) as client:
        (created,) = client.request(30, 3, {"creations": [creation]}).results
        assert (created.error_code, created.error_message) == (
            INVALID_REQUEST,
            "Invalid operation UNKNOWN: name one operation (ALL for every one)",
        )
        described = client.request(29, 3, flt)
        assert (described.error_code, described.resources) == (INVALID_REQUEST, ())
        assert "UNKNOWN resource type" in described.error_message
        (deleted,) = client.request(31, 3, {"filters": [flt]}).filter_results
        assert (deleted.error_code, deleted.matching_acls) == (INVALID_REQUEST, ())
