"""ACL bindings: what CreateAcls stores, DescribeAcls lists and DeleteAcls removes.

Only storage for now (no authentication, nothing is enforced), but held to Kafka's rules so
that tools syncing ACLs between clusters (MirrorMaker 2's ACL sync, mirrorflow's) see what a
Kafka cluster would show them: bindings form a set, creations are validated as Kafka's
controller validates them, and filters match exactly as Kafka's AclBindingFilter does,
including the MATCH pattern type that also finds wildcard and prefixed bindings.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

log = logging.getLogger(__name__)

WILDCARD_RESOURCE = "*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=enum.IntEnum)


def _from_code(enum_type: type[E], code: int) -> E:
    """Kafka's fromCode: codes this version does not know read as UNKNOWN."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type(0)


class AclError(Exception):
    """A binding or filter Kafka would reject, with the error code it would answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclasses.dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission_type: int,
    ) -> AclBinding:
        return cls(
            _from_code(ResourceType, resource_type),
            resource_name,
            _from_code(PatternType, pattern_type),
            principal,
            host,
            _from_code(AclOperation, operation),
            _from_code(AclPermissionType, permission_type),
        )

    def fields(self) -> dict[str, Any]:
        return {
            "resource_type": int(self.resource_type),
            "resource_name": self.resource_name,
            "pattern_type": int(self.pattern_type),
            "principal": self.principal,
            "host": self.host,
            "operation": int(self.operation),
            "permission_type": int(self.permission_type),
        }

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> AclBinding:
        return cls.from_codes(
            fields["resource_type"],
            fields["resource_name"],
            fields["pattern_type"],
            fields["principal"],
            fields["host"],
            fields["operation"],
            fields["permission_type"],
        )

    def validate(self) -> None:
        """Raise AclError for a binding Kafka refuses to create."""
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_RESOURCE_NAME:
            raise AclError(
                ErrorCode.invalid_request,
                f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}",
            )
        if not self.resource_name:
            raise AclError(ErrorCode.invalid_request, "Invalid empty resource name")
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError(
                ErrorCode.invalid_request,
                f"Invalid resourceType {self.resource_type.name}: use TOPIC, GROUP, CLUSTER, "
                "TRANSACTIONAL_ID, DELEGATION_TOKEN or USER",
            )
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(
                ErrorCode.invalid_request,
                f"Invalid patternType {self.pattern_type.name}: a binding is LITERAL or PREFIXED",
            )
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclError(
                ErrorCode.invalid_request,
                f"Invalid operation {self.operation.name}: name one operation (ALL for every one)",
            )
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise AclError(
                ErrorCode.invalid_request,
                f"Invalid permissionType {self.permission_type.name}: use ALLOW or DENY",
            )
        if ":" not in self.principal:
            raise AclError(
                ErrorCode.invalid_request,
                f"Could not parse principal {self.principal!r}: expected principalType:principalName, "
                "e.g. User:alice",
            )


@dataclasses.dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None and ANY match everything, MATCH also finds wildcard and
    prefixed bindings that apply to the named resource."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission_type: int,
    ) -> AclBindingFilter:
        return cls(
            _from_code(ResourceType, resource_type),
            resource_name,
            _from_code(PatternType, pattern_type),
            principal,
            host,
            _from_code(AclOperation, operation),
            _from_code(AclPermissionType, permission_type),
        )

    def validate(self) -> None:
        """Raise AclError if an element is UNKNOWN (a code Kafka does not define)."""
        unknown = [
            name
            for name, value in (
                ("resource type", self.resource_type),
                ("pattern type", self.pattern_type),
                ("operation", self.operation),
                ("permission type", self.permission_type),
            )
            if value == 0
        ]
        if unknown:
            raise AclError(
                ErrorCode.invalid_request,
                f"Filter has UNKNOWN {', '.join(unknown)}: use a defined code (ANY matches every value)",
            )

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type is not binding.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type is not binding.pattern_type
        ):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type is binding.pattern_type:
            return self.resource_name == binding.resource_name
        if binding.pattern_type is PatternType.LITERAL:
            return self.resource_name == binding.resource_name or binding.resource_name == WILDCARD_RESOURCE
        if binding.pattern_type is PatternType.PREFIXED:
            return self.resource_name.startswith(binding.resource_name)
        return False

    def _matches_entry(self, binding: AclBinding) -> bool:
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not binding.operation:
            return False
        return (
            self.permission_type is AclPermissionType.ANY or self.permission_type is binding.permission_type
        )


class AclStore:
    """The broker's ACL bindings (`broker.acls`), a set kept in creation order."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._bindings: dict[AclBinding, None] = {}
        self._unknown_entries: list[tuple[str, dict[str, Any]]] = []

    def __len__(self) -> int:
        return len(self._bindings)

    def create(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        """Store each valid binding (an existing one is a success); None or the error per binding."""
        results: list[AclError | None] = []
        for binding in bindings:
            try:
                binding.validate()
            except AclError as exc:
                results.append(exc)
                continue
            if binding not in self._bindings:
                self.broker.journal.append("acl.create", **binding.fields())
                self._bindings[binding] = None
                log.info("ACL created: %s", binding)
            results.append(None)
        return results

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        acl_filter.validate()
        return [binding for binding in self._bindings if acl_filter.matches(binding)]

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding] | AclError]:
        """Per filter, the bindings it matched (all filters see the bindings as they were) or
        its error; every matched binding is then removed once."""
        results: list[list[AclBinding] | AclError] = []
        doomed: dict[AclBinding, None] = {}
        for acl_filter in filters:
            try:
                acl_filter.validate()
            except AclError as exc:
                results.append(exc)
                continue
            matched = [binding for binding in self._bindings if acl_filter.matches(binding)]
            doomed.update(dict.fromkeys(matched))
            results.append(matched)
        for binding in doomed:
            self.broker.journal.append("acl.delete", **binding.fields())
            del self._bindings[binding]
            log.info("ACL deleted: %s", binding)
        return results

    def apply_journal(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "acl.create":
            self._bindings[AclBinding.from_fields(fields)] = None
        elif kind == "acl.delete":
            self._bindings.pop(AclBinding.from_fields(fields), None)
        else:
            log.warning("journal entry %s is not known to this broker version; keeping it as is", kind)
            self._unknown_entries.append((kind, fields))

    def snapshot(self) -> Iterable[tuple[str, dict[str, Any]]]:
        for binding in self._bindings:
            yield "acl.create", binding.fields()
        yield from self._unknown_entries
