"""Which source topic ACLs MM2's ACL sync copies, and what they become on the target."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.config import load_config
from mirrorflow.control.topic_sync import is_security_disabled, target_acl_binding

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def flow(extra: str = ""):
    return load_config(BASE + extra).flow("A", "B")


def acl(name, operation, permission="ALLOW", pattern="LITERAL", restype="TOPIC", principal="User:alice"):
    return AclBinding(
        ResourceType[restype],
        name,
        ResourcePatternType[pattern],
        principal,
        "10.0.0.1",
        AclOperation[operation],
        AclPermissionType[permission],
    )


def test_read_describe_and_deny_are_copied_to_the_remote_name() -> None:
    f = flow()
    assert target_acl_binding(f, acl("orders", "READ")) == acl("A.orders", "READ")
    assert target_acl_binding(f, acl("orders", "DESCRIBE")) == acl("A.orders", "DESCRIBE")
    assert target_acl_binding(f, acl("orders", "WRITE", "DENY")) == acl("A.orders", "WRITE", "DENY")
    assert target_acl_binding(f, acl("orders", "ALL", "DENY")) == acl("A.orders", "ALL", "DENY")


def test_allow_write_is_dropped_and_allow_all_becomes_read() -> None:
    f = flow()
    assert target_acl_binding(f, acl("orders", "WRITE")) is None
    mapped = target_acl_binding(f, acl("orders", "ALL", principal="User:bob"))
    assert mapped == acl("A.orders", "READ", principal="User:bob")
    assert mapped.host == "10.0.0.1"


def test_only_literal_topic_acls_of_replicated_topics() -> None:
    f = flow("A->B.topics = orders.*\n")
    assert target_acl_binding(f, acl("orders", "READ", pattern="PREFIXED")) is None
    assert target_acl_binding(f, acl("g1", "READ", restype="GROUP")) is None
    assert target_acl_binding(f, acl("payments", "READ")) is None
    assert target_acl_binding(f, acl("__consumer_offsets", "READ")) is None
    # A topic that came from B is never sent back there (cycle), so neither is its ACL.
    assert target_acl_binding(flow(), acl("B.orders", "READ")) is None


def test_literal_wildcard_becomes_the_remote_name_of_star() -> None:
    assert target_acl_binding(flow(), acl("*", "READ")) == acl("A.*", "READ")
    assert target_acl_binding(flow("replication.policy.separator = _\n"), acl("*", "READ")) == acl(
        "A_*", "READ"
    )
    # `*` is filtered like a topic name: an include list that does not match it drops it.
    assert target_acl_binding(flow("A->B.topics = orders\n"), acl("*", "READ")) is None


def test_no_authorizer_is_recognised_by_its_error_code() -> None:
    assert is_security_disabled(KafkaException(KafkaError(KafkaError.SECURITY_DISABLED)))
    assert not is_security_disabled(KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)))
    assert not is_security_disabled(KafkaException("plain message"))


@pytest.mark.parametrize("operation", ["READ", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER", "DELETE", "CREATE"])
def test_other_allowed_operations_are_copied_unchanged(operation) -> None:
    assert target_acl_binding(flow(), acl("orders", operation)) == acl("A.orders", operation)
