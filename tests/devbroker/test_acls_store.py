"""AclStore: Kafka's binding validation and AclBindingFilter matching, and its journal."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from devbroker.acls import (
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourceType,
)
from devbroker.journal import Journal

Res, Pat, Op, Perm = ResourceType, PatternType, AclOperation, AclPermissionType


def store(path: Path | None = None) -> AclStore:
    return AclStore(types.SimpleNamespace(journal=Journal(path)))


def binding(
    rtype: Res = Res.TOPIC,
    name: str = "orders",
    ptype: Pat = Pat.LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    op: Op = Op.READ,
    perm: Perm = Perm.ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, ptype, principal, host, op, perm)


def match(
    rtype: Res = Res.ANY,
    name: str | None = None,
    ptype: Pat = Pat.ANY,
    principal: str | None = None,
    host: str | None = None,
    op: Op = Op.ANY,
    perm: Perm = Perm.ANY,
) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, ptype, principal, host, op, perm)


LITERAL_ORDERS = binding()
WILDCARD = binding(name="*")
PREFIX_ORD = binding(name="ord", ptype=Pat.PREFIXED)
PREFIX_OTHER = binding(name="pay", ptype=Pat.PREFIXED)
GROUP_ORDERS = binding(rtype=Res.GROUP)
BOB_WRITE_DENY = binding(principal="User:bob", host="10.0.0.1", op=Op.WRITE, perm=Perm.DENY)
ALL = [LITERAL_ORDERS, WILDCARD, PREFIX_ORD, PREFIX_OTHER, GROUP_ORDERS, BOB_WRITE_DENY]


@pytest.fixture
def filled() -> AclStore:
    acls = store()
    assert acls.create(ALL) == [None] * len(ALL)
    return acls


@pytest.mark.parametrize(
    ("acl_filter", "expected"),
    [
        (match(), ALL),
        (match(rtype=Res.GROUP), [GROUP_ORDERS]),
        (match(name="orders"), [LITERAL_ORDERS, GROUP_ORDERS, BOB_WRITE_DENY]),
        (match(rtype=Res.TOPIC, name="orders", ptype=Pat.LITERAL), [LITERAL_ORDERS, BOB_WRITE_DENY]),
        (match(ptype=Pat.LITERAL), [LITERAL_ORDERS, WILDCARD, GROUP_ORDERS, BOB_WRITE_DENY]),
        (match(ptype=Pat.PREFIXED), [PREFIX_ORD, PREFIX_OTHER]),
        (match(name="ord", ptype=Pat.PREFIXED), [PREFIX_ORD]),
        (match(name="ord", ptype=Pat.ANY), [PREFIX_ORD]),
        # MATCH: literal equal, the literal wildcard, and prefixes of the name.
        (
            match(rtype=Res.TOPIC, name="orders", ptype=Pat.MATCH),
            [LITERAL_ORDERS, WILDCARD, PREFIX_ORD, BOB_WRITE_DENY],
        ),
        (match(rtype=Res.TOPIC, name="payments", ptype=Pat.MATCH), [WILDCARD, PREFIX_OTHER]),
        (match(ptype=Pat.MATCH), ALL),
        (match(principal="User:bob"), [BOB_WRITE_DENY]),
        (match(host="10.0.0.1"), [BOB_WRITE_DENY]),
        (match(op=Op.WRITE), [BOB_WRITE_DENY]),
        (match(perm=Perm.DENY), [BOB_WRITE_DENY]),
        (match(perm=Perm.ALLOW, op=Op.READ, principal="User:alice", host="*", rtype=Res.TOPIC), ALL[:4]),
        (match(name="nothing"), []),
    ],
)
def test_describe_filters_match_like_kafka(
    filled: AclStore, acl_filter: AclBindingFilter, expected: list
) -> None:
    assert filled.describe(acl_filter) == expected


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (binding(rtype=Res.ANY), "Invalid resourceType ANY"),
        (binding(rtype=Res.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (binding(ptype=Pat.MATCH), "Invalid patternType MATCH"),
        (binding(ptype=Pat.ANY), "Invalid patternType ANY"),
        (binding(op=Op.ANY), "Invalid operation ANY"),
        (binding(op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (binding(perm=Perm.ANY), "Invalid permissionType ANY"),
        (binding(name=""), "Invalid empty resource name"),
        (
            binding(rtype=Res.CLUSTER, name="mine"),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (binding(principal="alice"), "expected principalType:principalName"),
        (AclBinding.from_codes(2, "t", 3, "User:a", "*", 99, 3), "Invalid operation UNKNOWN"),
    ],
)
def test_invalid_bindings_are_refused_with_invalid_request(bad: AclBinding, message: str) -> None:
    acls = store()
    (error,) = acls.create([bad])
    assert isinstance(error, AclError)
    assert error.code == ErrorCode.invalid_request
    assert message in error.message
    assert len(acls) == 0


def test_creating_an_existing_binding_succeeds_without_a_duplicate(filled: AclStore) -> None:
    assert filled.create([LITERAL_ORDERS, binding(rtype=Res.CLUSTER, name="kafka-cluster")]) == [None, None]
    assert len(filled) == len(ALL) + 1


def test_filters_with_unknown_elements_are_refused(filled: AclStore) -> None:
    with pytest.raises(AclError, match="UNKNOWN operation"):
        filled.describe(AclBindingFilter.from_codes(1, None, 1, None, None, 0, 1))
    (result,) = filled.delete([AclBindingFilter.from_codes(1, None, 77, None, None, 1, 1)])
    assert isinstance(result, AclError) and "UNKNOWN pattern type" in result.message
    assert len(filled) == len(ALL)


def test_delete_reports_matches_per_filter_against_the_bindings_before_deletion(filled: AclStore) -> None:
    results = filled.delete([match(rtype=Res.TOPIC, name="orders", ptype=Pat.MATCH), match(perm=Perm.DENY)])
    assert results == [[LITERAL_ORDERS, WILDCARD, PREFIX_ORD, BOB_WRITE_DENY], [BOB_WRITE_DENY]]
    assert filled.describe(match()) == [PREFIX_OTHER, GROUP_ORDERS]


def test_bindings_survive_a_journal_replay_and_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    first = store(path)
    first.create(ALL)
    first.delete([match(rtype=Res.GROUP)])
    first.broker.journal.close()
    second = store(path)
    for kind, fields in Journal(path).replay():
        second.apply_journal(kind, fields)
    assert second.describe(match()) == [b for b in ALL if b is not GROUP_ORDERS]
    third = store()
    for kind, fields in second.snapshot():
        third.apply_journal(kind, fields)
    assert third.describe(match()) == second.describe(match())
