"""Consumer groups on Kafka's classic protocol, and the committed offsets of every group.

Clients are strict about the group protocol: librdkafka, kafka-python and the Java consumer
each react to specific error codes, generations and states, so this module follows Apache
Kafka's group coordinator (ClassicGroup, GroupMetadataManager and OffsetMetadataManager)
step by step: the same state transitions, the same timers (initial rebalance delay,
rebalance timeout, session timeout, pending-sync expiry, new-member join timeout), the same
checks in the same order.

Everything runs on the broker's event loop, so there are no locks. JoinGroup and SyncGroup
return futures that the coordinator completes when the rebalance reaches the right phase;
the other calls answer at once.

Persistence follows what Kafka writes to __consumer_offsets: offset commits, pending
transactional offsets, transaction ends and group records at the same points (a new group,
a group turned Empty, an assignment stored, a static member replaced, a deletion). Members
themselves are not stored: after a restart a group that had members comes back Stable and
empty of members, the clients rejoin when the coordinator answers UNKNOWN_MEMBER_ID, and if
none does within the old session timeout the group becomes Empty, as Kafka's group would
once the members it loaded expired.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
CONSUMER_PROTOCOL_TYPE = "consumer"
CLASSIC_GROUP_TYPE = "classic"
# Kafka's group.classic.new.member.join.timeout: a new member parked in JoinGroup cannot
# heartbeat, so it is dropped if the rebalance takes longer than this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION = 4
JOIN_SKIP_ASSIGNMENT_VERSION = 9
OFFSET_COMMIT_GROUP_ID_NOT_FOUND_VERSION = 9

Protocols = list[tuple[str, bytes]]
TopicPartition = tuple[str, int]
# (topic, partition, offset, leader epoch, metadata) as the core passes TxnOffsetCommit entries.
OffsetEntry = tuple[str, int, int, int, str | None]


class GroupState(enum.Enum):
    """Kafka's classic group states, named as DescribeGroups and ListGroups report them.

    A deleted group is dropped at once, so Dead only describes groups that do not exist."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
}


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def java_length(text: str) -> int:
    """String.length() as Kafka computes it (UTF-16 code units), for offset.metadata.max.bytes."""
    return len(text.encode("utf-16-le")) // 2


@dataclasses.dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclasses.dataclass(slots=True)
class JoinResult:
    error_code: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[JoinedMember] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class SyncResult:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclasses.dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    api_version: int


@dataclasses.dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """Members parked in a rebalance count as alive, except new ones (they may be gone)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


@dataclasses.dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ts: int
    expire_ts: int | None
    # Order of the commit among all commits, as the record offset in __consumer_offsets is:
    # a committed transaction only replaces a plain commit that came before it.
    seq: int

    def fields(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "leader_epoch": self.leader_epoch,
            "metadata": self.metadata,
            "commit_ts": self.commit_ts,
            "expire_ts": self.expire_ts,
            "seq": self.seq,
        }

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> OffsetAndMetadata:
        return cls(
            offset=fields["offset"],
            leader_epoch=fields["leader_epoch"],
            metadata=fields["metadata"],
            commit_ts=fields["commit_ts"],
            expire_ts=fields.get("expire_ts"),
            seq=fields["seq"],
        )


@dataclasses.dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]


@dataclasses.dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclasses.dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: ErrorCode


def _resolve(future: asyncio.Future[Any] | None, value: Any) -> None:
    # The handler awaiting a future is cancelled when its connection closes; Kafka cannot see
    # that either and keeps the member parked, so a cancelled future is simply skipped.
    if future is not None and not future.done():
        future.set_result(value)


def decode_subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of a consumer-protocol subscription, read with the v0 prefix every version shares."""
    if len(metadata) < 2:
        raise ValueError("consumer protocol metadata shorter than its version field")
    subscription, _ = entity_reader(ConsumerProtocolSubscription)(metadata, 2)
    return set(subscription.topics)


class ClassicGroup:
    """One group's membership state machine (Kafka's ClassicGroup)."""

    def __init__(self, group_id: str, state_timestamp: int | None) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.DEAD
        self.state_timestamp = state_timestamp
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: collections.Counter[str] = collections.Counter()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        # The group record as last written to the journal (None: never written).
        self.record: dict[str, Any] | None = None
        # Session timeout of the members a restart dropped; 0 when there were none.
        self.restored_session_timeout_ms = 0

    # -- state ----------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id} cannot move from {self.state.value} to {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- membership -----------------------------------------------------------------------
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending_member(self, member_id: str) -> None:
        self.pending_join_members.add(member_id)

    def add(self, member: Member, future: asyncio.Future[JoinResult] | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_future = future
        if member.awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            # A parked request of a removed member must still be answered; Kafka leaves it
            # to the client's request timeout, the answer it would get on retry comes sooner.
            _resolve(member.join_future, JoinResult(ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID))
            _resolve(member.sync_future, SyncResult(ErrorCode.unknown_member_id))
            member.join_future = None
            member.sync_future = None
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        future: asyncio.Future[JoinResult] | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif future is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        if member.join_future is not None and member.join_future is not future:
            _resolve(member.join_future, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        member.join_future = future

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        removed = self.members.pop(old_member_id)
        fenced = JoinResult(ErrorCode.fenced_instance_id, old_member_id)
        self.complete_join_future(removed, fenced)
        self.complete_sync_future(removed, SyncResult(ErrorCode.fenced_instance_id))
        member = Member(
            member_id=new_member_id,
            group_instance_id=removed.group_instance_id,
            client_id=removed.client_id,
            client_host=removed.client_host,
            rebalance_timeout_ms=removed.rebalance_timeout_ms,
            session_timeout_ms=removed.session_timeout_ms,
            protocol_type=removed.protocol_type,
            protocols=removed.protocols,
            assignment=removed.assignment,
        )
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    def complete_join_future(self, member: Member, result: JoinResult) -> bool:
        if not member.awaiting_join:
            return False
        _resolve(member.join_future, result)
        member.join_future = None
        self.num_awaiting_join -= 1
        return True

    def complete_sync_future(self, member: Member, result: SyncResult) -> bool:
        if not member.awaiting_sync:
            return False
        _resolve(member.sync_future, result)
        member.sync_future = None
        return True

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else hand leadership to a member that did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def max_session_timeout_ms(self) -> int:
        return max((m.session_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int, *, transactional: bool
    ) -> ErrorCode | None:
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return None  # an admin client or a consumer that manages partitions itself
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.illegal_generation
        elif not transactional and self.state is not GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return None

    # -- protocols ------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        return {name for name, count in self.supported_protocols.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in protocol_names
        )

    def select_protocol(self) -> str:
        """The protocol with most first-choice votes among those all members support."""
        candidates = self.candidate_protocols()
        votes: collections.Counter[str] = collections.Counter(
            member.vote(candidates) for member in self.members.values()
        )
        return votes.most_common(1)[0][0]

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, or None when the coordinator cannot know."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= decode_subscribed_topics(member.metadata(self.protocol_name))
        except Exception:
            log.warning(
                "group %s: cannot decode the consumer protocol metadata of protocol %s; "
                "its subscribed topics are unknown",
                self.group_id,
                self.protocol_name,
            )
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def init_next_generation(self, now: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now)
        self.pending_sync_members.clear()

    def current_members(self) -> list[JoinedMember]:
        """What the leader gets in its JoinGroup response to run the assignment."""
        return [
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def join_result(self, member_id: str, *, with_members: bool, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            error_code=ErrorCode.none,
            member_id=member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            skip_assignment=skip_assignment,
            members=self.current_members() if with_members else [],
        )

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    # -- offsets retention ----------------------------------------------------------------
    def expiration_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """When an offset's retention period starts, or None if this group's never expire."""
        if self.protocol_type is None:
            return lambda offset: offset.commit_ts
        if self.state is GroupState.EMPTY:
            since = self.state_timestamp
            return lambda offset: offset.commit_ts if since is None else since
        if (
            self.uses_consumer_protocol()
            and self.subscribed_topics is not None
            and self.state is GroupState.STABLE
        ):
            return lambda offset: offset.commit_ts
        return None

    # -- describe -------------------------------------------------------------------------
    def describe(self) -> GroupDescription:
        stable = self.state is GroupState.STABLE
        members = [
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(self.protocol_name) if stable else b"",
                assignment=m.assignment,
            )
            for m in self.members.values()
        ]
        return GroupDescription(
            group_id=self.group_id,
            state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol_data=(self.protocol_name or "") if stable else "",
            members=members,
        )


class GroupCoordinator:
    """All groups of the broker and their offsets; `broker.groups`."""

    def __init__(self, broker: Any, *, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.broker = broker
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # producer id -> group id -> partition -> offset staged by TxnOffsetCommit
        self.pending_txn_offsets: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        self.open_txns_by_group: dict[str, set[int]] = {}
        self._seq = 0
        self._timers: dict[tuple[str, ...], asyncio.TimerHandle] = {}
        self._unknown_entries: list[tuple[str, dict[str, Any]]] = []

    # -- config, timers, journal ----------------------------------------------------------
    def _config(self, key: str) -> int:
        return int(self.broker.config.get(key))

    def _schedule(self, key: tuple[str, ...], delay_ms: int, callback: Callable[[], None]) -> None:
        self._cancel(key)
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, callback)

    def _fire(self, key: tuple[str, ...], callback: Callable[[], None]) -> None:
        self._timers.pop(key, None)
        try:
            callback()
        except Exception:
            log.exception("group coordinator timer %s failed", key)

    def _cancel(self, key: tuple[str, ...]) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def start(self) -> None:
        """Start the timers a restarted broker needs: offset expiry and restored groups' expiry."""
        self._schedule(("cleanup",), self._config("offsets.retention.check.interval.ms"), self._cleanup_tick)
        for group in self.groups.values():
            if group.restored_session_timeout_ms and not group.members:
                self._schedule(
                    ("restored", group.group_id),
                    group.restored_session_timeout_ms,
                    functools.partial(self._expire_restored_group, group.group_id),
                )

    def _journal(self, kind: str, **fields: Any) -> None:
        self.broker.journal.append(kind, **fields)

    def _persist_group(self, group: ClassicGroup, *, empty: bool = False) -> None:
        """Write the group record Kafka writes at this point (`empty`: the new-group record)."""
        record = {
            "group": group.group_id,
            "protocol_type": group.protocol_type or "",
            "protocol": None if empty else group.protocol_name,
            "generation": 0 if empty else group.generation_id,
            "leader": None if empty else group.leader_id,
            "state_ts": group.state_timestamp,
            "members": 0 if empty else len(group.members),
            "session_timeout_ms": 0 if empty else group.max_session_timeout_ms(),
        }
        self._journal("group.meta", **record)
        group.record = record

    def _get_or_create_group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.clock())
        return group

    def _partition_exists(self, topic: str, partition: int) -> bool:
        count = self.broker.topics.partition_count(topic)
        return count is not None and 0 <= partition < count

    # -- timers' keys ---------------------------------------------------------------------
    @staticmethod
    def _heartbeat_key(group_id: str, member_id: str) -> tuple[str, ...]:
        return ("heartbeat", group_id, member_id)

    @staticmethod
    def _join_key(group_id: str) -> tuple[str, ...]:
        return ("join", group_id)

    @staticmethod
    def _sync_key(group_id: str) -> tuple[str, ...]:
        return ("sync", group_id)

    # -- JoinGroup ------------------------------------------------------------------------
    def join_group(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if not request.group_id:
            _resolve(future, JoinResult(ErrorCode.invalid_group_id, request.member_id))
            return future
        if not (
            self._config("group.min.session.timeout.ms")
            <= request.session_timeout_ms
            <= self._config("group.max.session.timeout.ms")
        ):
            _resolve(future, JoinResult(ErrorCode.invalid_session_timeout, request.member_id))
            return future
        is_unknown_member = request.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(request.group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown_member:
                _resolve(future, JoinResult(ErrorCode.unknown_member_id, request.member_id))
                return future
            group = self._get_or_create_group(request.group_id)
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            _resolve(future, JoinResult(ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID))
        elif is_unknown_member:
            self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)
        if is_new_group and group.record is None:
            self._persist_group(group, empty=True)
        return future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self._config("group.max.size")
        if group.is_in(GroupState.EMPTY):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(
        self, group: ClassicGroup, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            _resolve(future, JoinResult(ErrorCode.inconsistent_group_protocol, UNKNOWN_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        if request.group_instance_id is not None:
            existing = group.static_members.get(request.group_instance_id)
            if existing is not None:
                self._update_static_member_and_rebalance(group, request, existing, new_member_id, future)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, future)
        elif request.api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
            group.add_pending_member(new_member_id)
            group_id = group.group_id
            self._schedule(
                self._heartbeat_key(group_id, new_member_id),
                request.session_timeout_ms,
                lambda: self._expire_heartbeat(group_id, new_member_id),
            )
            _resolve(future, JoinResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, future)

    def _join_existing_member(
        self, group: ClassicGroup, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member_id = request.member_id
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            _resolve(future, JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if group.is_pending(member_id):
            if request.group_instance_id is not None:
                # Pending members are dynamic by construction; Kafka fails such a request too.
                _resolve(future, JoinResult(ErrorCode.unknown_server_error, member_id))
                return
            self._add_member_and_rebalance(group, request, member_id, future)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not None:
            _resolve(future, JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # The member lost the JoinGroup response: send the current generation again.
                _resolve(future, group.join_result(member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, request, future)
        elif group.is_leader(member_id) or not member.matches(request.protocols):
            # Stable: a rejoining leader asks for a new assignment (e.g. topic metadata changed).
            self._update_member_and_rebalance(group, member, request, future)
        else:
            _resolve(future, group.join_result(member_id, with_members=False))

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        member_id: str,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, future)
        self._reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, future
        )
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member_and_rebalance(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        future: asyncio.Future[JoinResult],
    ) -> None:
        assert request.group_instance_id is not None
        current_leader = group.leader_id or ""
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        self._cancel(self._heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member)
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, future
        )
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # Same protocol: the replacement keeps the old member's assignment, no rebalance.
                self._persist_group(group)
                if request.api_version >= JOIN_SKIP_ASSIGNMENT_VERSION:
                    is_leader = group.is_leader(new_member_id)
                    result = group.join_result(
                        new_member_id, with_members=is_leader, skip_assignment=is_leader
                    )
                else:
                    result = group.join_result(new_member_id, with_members=False)
                    result.leader = current_leader
                group.complete_join_future(member, result)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already have assigned partitions to the old member id.
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self._config("group.initial.rebalance.delay.ms")
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group_id = group.group_id
            self._schedule(
                self._join_key(group_id),
                delay,
                lambda: self._try_complete_initial_rebalance(group_id, delay, remaining),
            )
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock())
        log.info(
            "preparing to rebalance group %s with old generation %d", group.group_id, group.generation_id
        )
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            group_id = group.group_id
            self._schedule(
                self._join_key(group_id),
                group.rebalance_timeout_ms(),
                lambda: self._complete_join_by_id(group_id),
            )

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            # Members are still arriving: wait another delay, within the rebalance timeout.
            group.new_member_added = False
            new_delay = min(self._config("group.initial.rebalance.delay.ms"), remaining)
            new_remaining = max(remaining - delay, 0)
            self._schedule(
                self._join_key(group_id),
                new_delay,
                lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining),
            )
        else:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.previous_state is GroupState.EMPTY:
            return  # the initial rebalance completes on its delay timer
        if group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self._cancel(self._join_key(group.group_id))
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for member in [
            m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None
        ]:
            group.remove(member.member_id)
            self._cancel(self._heartbeat_key(group.group_id, member.member_id))
            log.info(
                "group %s removed member %s: it did not rejoin in time", group.group_id, member.member_id
            )
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for the session timeouts to remove the silent members.
            group_id = group.group_id
            self._schedule(
                self._join_key(group_id),
                group.rebalance_timeout_ms(),
                lambda: self._complete_join_by_id(group_id),
            )
            return
        group.init_next_generation(self.clock())
        if group.is_in(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            self._persist_group(group)
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            len(group.members),
        )
        for member in list(group.members.values()):
            result = group.join_result(member.member_id, with_members=group.is_leader(member.member_id))
            group.complete_join_future(member, result)
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group_id, generation = group.group_id, group.generation_id
        self._schedule(
            self._sync_key(group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group_id, generation),
        )

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                group.remove(member_id)
                self._cancel(self._heartbeat_key(group_id, member_id))
            log.info("group %s removed members that sent no SyncGroup in time", group_id)
            self._prepare_rebalance(group)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._cancel(self._sync_key(group.group_id))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if (
            not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            or not group.pending_sync_members
        ):
            self._cancel(self._sync_key(group.group_id))

    # -- heartbeats and removal -----------------------------------------------------------
    def _reschedule_heartbeat(
        self, group: ClassicGroup, member: Member, timeout_ms: int | None = None
    ) -> None:
        group_id, member_id = group.group_id, member.member_id
        self._schedule(
            self._heartbeat_key(group_id, member_id),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._expire_heartbeat(group_id, member_id),
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.is_pending(member_id):
            log.info("group %s: pending member %s expired before it rejoined", group_id, member_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("group %s: member %s failed its session timeout; removing it", group_id, member_id)
            self._remove_member_and_update(group, member)

    def _remove_member_and_update(self, group: ClassicGroup, member: Member) -> None:
        group.complete_join_future(member, JoinResult(ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        self._cancel(self._heartbeat_key(group.group_id, member_id))
        group.complete_join_future(member, JoinResult(ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    def _expire_restored_group(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        group.restored_session_timeout_ms = 0
        if group.is_in(GroupState.STABLE) and not group.members:
            log.info("group %s: no member rejoined after the restart; it becomes empty", group_id)
            self._prepare_rebalance(group)

    # -- SyncGroup ------------------------------------------------------------------------
    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if not group_id:
            _resolve(future, SyncResult(ErrorCode.invalid_group_id))
            return future
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.EMPTY):
            _resolve(future, SyncResult(ErrorCode.unknown_member_id))
            return future
        error = self._validate_sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
        )
        if error is not None:
            _resolve(future, SyncResult(error))
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            _resolve(future, SyncResult(ErrorCode.rebalance_in_progress))
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            member = group.members[member_id]
            if member.sync_future is not None:
                _resolve(member.sync_future, SyncResult(ErrorCode.rebalance_in_progress))
            member.sync_future = future
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info(
                    "assignment received from leader %s of group %s for generation %d",
                    member_id,
                    group_id,
                    group.generation_id,
                )
                for member in group.members.values():
                    member.assignment = assignments.get(member.member_id, b"")
                group.transition_to(GroupState.STABLE, self.clock())
                self._persist_group(group)
                self._propagate_assignment(group, ErrorCode.none)
        elif group.is_in(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            _resolve(
                future,
                SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment),
            )
        return future

    def _validate_sync(
        self,
        group: ClassicGroup,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode | None:
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return None

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.complete_sync_future(member, result):
                self._reschedule_heartbeat(group, member)

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Top-level error and one error per (member id, group instance id) leaving."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                # Admin tools remove static members by instance id alone.
                if instance_id is not None and instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[instance_id])
                    errors.append(ErrorCode.none)
                else:
                    errors.append(ErrorCode.unknown_member_id)
            elif group.is_pending(member_id):
                group.remove(member_id)
                self._cancel(self._heartbeat_key(group_id, member_id))
                errors.append(ErrorCode.none)
            else:
                error = group.validate_member(member_id, instance_id)
                if error is None:
                    self._remove_current_member(group, member_id)
                    errors.append(ErrorCode.none)
                else:
                    errors.append(error)
        if ErrorCode.none in errors:
            log.info("group %s: %d member(s) left", group_id, errors.count(ErrorCode.none))
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return ErrorCode.none, errors

    # -- ListGroups, DescribeGroups, DeleteGroups -----------------------------------------
    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        if types and CLASSIC_GROUP_TYPE not in types:
            return []
        return [
            ListedGroup(group.group_id, group.protocol_type or "", group.state.value, CLASSIC_GROUP_TYPE)
            for group in self.groups.values()
            if not states or group.state.value.lower() in states
        ]

    def describe_group(self, group_id: str) -> GroupDescription | None:
        group = self.groups.get(group_id)
        return None if group is None else group.describe()

    def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, ErrorCode]]:
        results = []
        for group_id in dict.fromkeys(group_ids):
            group = self.groups.get(group_id)
            if group is None:
                results.append((group_id, ErrorCode.group_id_not_found))
            elif not group.is_in(GroupState.EMPTY):
                results.append((group_id, ErrorCode.non_empty_group))
            else:
                self._journal("group.delete", group=group_id)
                self._drop_group(group_id)
                log.info("group %s deleted with its offsets", group_id)
                results.append((group_id, ErrorCode.none))
        return results

    def _drop_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in list(group.members) + list(group.pending_join_members):
                self._cancel(self._heartbeat_key(group_id, member_id))
            for key in (self._join_key(group_id), self._sync_key(group_id), ("restored", group_id)):
                self._cancel(key)
        self.offsets.pop(group_id, None)
        for producer_id in self.open_txns_by_group.pop(group_id, set()):
            by_group = self.pending_txn_offsets.get(producer_id, {})
            by_group.pop(group_id, None)
            if not by_group:
                self.pending_txn_offsets.pop(producer_id, None)

    # -- OffsetCommit ---------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        retention_ms: int,
        offsets: Sequence[OffsetEntry],
        api_version: int,
    ) -> list[ErrorCode]:
        """One error per entry of `offsets`, in order."""
        errors: list[ErrorCode | None] = [
            None if self._partition_exists(topic, partition) else ErrorCode.unknown_topic_or_partition
            for topic, partition, *_ in offsets
        ]
        valid = [i for i, error in enumerate(errors) if error is None]
        if not valid:
            return [error or ErrorCode.none for error in errors]
        group_error = self._validate_offset_commit(
            group_id, generation_id, member_id, group_instance_id, api_version
        )
        now = self.clock()
        expire_ts = None if retention_ms == -1 else now + retention_ms
        max_metadata = self._config("offset.metadata.max.bytes")
        if group_error is None:
            group = self.groups[group_id]
            if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
                # Commits keep a classic member's session alive, as heartbeats do.
                self._reschedule_heartbeat(group, group.members[member_id])
        for i in valid:
            topic, partition, offset, leader_epoch, metadata = offsets[i]
            if group_error is not None:
                errors[i] = group_error
            elif metadata is not None and java_length(metadata) > max_metadata:
                errors[i] = ErrorCode.offset_metadata_too_large
            else:
                self._seq += 1
                committed = OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire_ts, self._seq)
                self._journal(
                    "offset.commit", group=group_id, topic=topic, partition=partition, **committed.fields()
                )
                self.offsets.setdefault(group_id, {})[(topic, partition)] = committed
                errors[i] = ErrorCode.none
        return [error or ErrorCode.none for error in errors]

    def _validate_offset_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        api_version: int,
    ) -> ErrorCode | None:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # A so-called simple group: offsets stored for a consumer without membership.
                self._get_or_create_group(group_id)
                return None
            if api_version >= OFFSET_COMMIT_GROUP_ID_NOT_FOUND_VERSION:
                return ErrorCode.group_id_not_found
            return ErrorCode.illegal_generation
        return group.validate_offset_commit(member_id, group_instance_id, generation_id, transactional=False)

    # -- transactional offsets (called by the transaction coordinator) --------------------
    def stage_txn_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, offsets: Sequence[OffsetEntry]
    ) -> list[int]:
        """TxnOffsetCommit: offsets wait for the transaction's end; Kafka error codes per entry."""
        errors: list[ErrorCode | None] = [
            None if self._partition_exists(topic, partition) else ErrorCode.unknown_topic_or_partition
            for topic, partition, *_ in offsets
        ]
        group_error: ErrorCode | None = None
        if not group_id:
            group_error = ErrorCode.invalid_group_id
        else:
            group = self.groups.get(group_id)
            if group is None:
                self._get_or_create_group(group_id)
            else:
                group_error = group.validate_offset_commit(UNKNOWN_MEMBER_ID, None, -1, transactional=True)
        now = self.clock()
        max_metadata = self._config("offset.metadata.max.bytes")
        for i, (topic, partition, offset, leader_epoch, metadata) in enumerate(offsets):
            if errors[i] is not None:
                continue
            if group_error is not None:
                errors[i] = group_error
            elif metadata is not None and java_length(metadata) > max_metadata:
                errors[i] = ErrorCode.offset_metadata_too_large
            else:
                self._seq += 1
                staged = OffsetAndMetadata(offset, leader_epoch, metadata or "", now, None, self._seq)
                self._journal(
                    "offset.txn",
                    group=group_id,
                    producer_id=producer_id,
                    topic=topic,
                    partition=partition,
                    **staged.fields(),
                )
                self._stage(group_id, producer_id, (topic, partition), staged)
                errors[i] = ErrorCode.none
        return [int(error or ErrorCode.none) for error in errors]

    def _stage(self, group_id: str, producer_id: int, tp: TopicPartition, staged: OffsetAndMetadata) -> None:
        self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = staged
        self.open_txns_by_group.setdefault(group_id, set()).add(producer_id)

    def complete_txn(self, group_id: str, producer_id: int, commit: bool) -> None:
        """Commit (make visible) or abort the offsets `producer_id` staged for `group_id`."""
        if group_id not in self.pending_txn_offsets.get(producer_id, {}):
            return
        self._journal("offset.txn_end", group=group_id, producer_id=producer_id, commit=commit)
        self._end_txn(group_id, producer_id, commit)

    def _end_txn(self, group_id: str, producer_id: int, commit: bool) -> None:
        by_group = self.pending_txn_offsets.get(producer_id, {})
        staged = by_group.pop(group_id, {})
        if not by_group:
            self.pending_txn_offsets.pop(producer_id, None)
        open_txns = self.open_txns_by_group.get(group_id)
        if open_txns is not None:
            open_txns.discard(producer_id)
            if not open_txns:
                del self.open_txns_by_group[group_id]
        if not commit:
            return
        self._get_or_create_group(group_id)
        committed = self.offsets.setdefault(group_id, {})
        for tp, offset in staged.items():
            existing = committed.get(tp)
            # A plain commit made after the transactional one wins, as in Kafka.
            if existing is None or offset.seq > existing.seq:
                committed[tp] = offset

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        for producer_id in self.open_txns_by_group.get(group_id, ()):
            if (topic, partition) in self.pending_txn_offsets.get(producer_id, {}).get(group_id, {}):
                return True
        return False

    # -- OffsetFetch ----------------------------------------------------------------------
    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        *,
        require_stable: bool,
    ) -> tuple[ErrorCode, list[tuple[str, list[FetchedOffset]]]]:
        """Committed offsets of the given partitions, or of all partitions when `topics` is None."""
        group = self.groups.get(group_id)
        committed = self.offsets.get(group_id, {}) if group is not None else {}
        if topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in committed:
                by_topic.setdefault(topic, []).append(partition)
            topics = list(by_topic.items())
        result = []
        for topic, partitions in topics:
            fetched = []
            for partition in partitions:
                if require_stable and self.has_pending_txn_offset(group_id, topic, partition):
                    fetched.append(FetchedOffset(partition, -1, -1, "", ErrorCode.unstable_offset_commit))
                    continue
                offset = committed.get((topic, partition))
                if offset is None:
                    fetched.append(FetchedOffset(partition, -1, -1, "", ErrorCode.none))
                else:
                    fetched.append(
                        FetchedOffset(
                            partition, offset.offset, offset.leader_epoch, offset.metadata, ErrorCode.none
                        )
                    )
            result.append((topic, fetched))
        return ErrorCode.none, result

    # -- OffsetDelete ---------------------------------------------------------------------
    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        """Top-level error and, per topic, each partition's error."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, []
        if (
            group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
            and not group.uses_consumer_protocol()
        ):
            return ErrorCode.non_empty_group, []
        result = []
        for topic, partitions in topics:
            errors = []
            for partition in partitions:
                if not self._partition_exists(topic, partition):
                    errors.append((partition, ErrorCode.unknown_topic_or_partition))
                elif group.is_subscribed_to_topic(topic):
                    errors.append((partition, ErrorCode.group_subscribed_to_topic))
                else:
                    self._delete_offset(group_id, topic, partition)
                    errors.append((partition, ErrorCode.none))
            result.append((topic, errors))
        return ErrorCode.none, result

    def _delete_offset(self, group_id: str, topic: str, partition: int) -> None:
        """Kafka's offset tombstone: drops the committed offset and any staged one."""
        tp = (topic, partition)
        if tp in self.offsets.get(group_id, {}) or self.has_pending_txn_offset(group_id, topic, partition):
            self._journal("offset.delete", group=group_id, topic=topic, partition=partition)
            self._apply_offset_delete(group_id, tp)

    def _apply_offset_delete(self, group_id: str, tp: TopicPartition) -> None:
        committed = self.offsets.get(group_id)
        if committed is not None:
            committed.pop(tp, None)
            if not committed:
                del self.offsets[group_id]
        for producer_id in self.open_txns_by_group.get(group_id, ()):
            self.pending_txn_offsets.get(producer_id, {}).get(group_id, {}).pop(tp, None)

    def on_topic_deleted(self, topic: str) -> None:
        """Drop every group's committed and staged offsets of a deleted topic."""
        doomed: set[tuple[str, TopicPartition]] = {
            (group_id, tp)
            for group_id, committed in self.offsets.items()
            for tp in committed
            if tp[0] == topic
        }
        for by_group in self.pending_txn_offsets.values():
            for group_id, staged in by_group.items():
                doomed.update((group_id, tp) for tp in staged if tp[0] == topic)
        for group_id, (name, partition) in sorted(doomed):
            self._journal("offset.delete", group=group_id, topic=name, partition=partition)
            self._apply_offset_delete(group_id, (name, partition))

    # -- offsets retention ----------------------------------------------------------------
    def _cleanup_tick(self) -> None:
        try:
            self.expire_offsets()
        finally:
            self._schedule(
                ("cleanup",), self._config("offsets.retention.check.interval.ms"), self._cleanup_tick
            )

    def expire_offsets(self) -> int:
        """Remove offsets past offsets.retention.minutes and empty groups left without any.

        Returns how many offsets were removed."""
        now = self.clock()
        retention_ms = self._config("offsets.retention.minutes") * 60_000
        removed = 0
        for group_id, group in list(self.groups.items()):
            count, all_expired = self._expire_group_offsets(group, now, retention_ms)
            removed += count
            if all_expired and group.is_in(GroupState.EMPTY):
                self._journal("group.delete", group=group_id)
                self._drop_group(group_id)
                log.info("group %s removed: empty and without offsets", group_id)
        return removed

    def _expire_group_offsets(self, group: ClassicGroup, now: int, retention_ms: int) -> tuple[int, bool]:
        committed = self.offsets.get(group.group_id)
        if not committed:
            return 0, True
        base = group.expiration_base()
        if base is None:
            return 0, False
        removed = 0
        all_expired = True
        for (topic, partition), offset in list(committed.items()):
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            if offset.expire_ts is not None:
                expired = now >= offset.expire_ts
            else:
                expired = now - base(offset) >= retention_ms
            if expired and not self.has_pending_txn_offset(group.group_id, topic, partition):
                self._delete_offset(group.group_id, topic, partition)
                removed += 1
            else:
                all_expired = False
        return removed, all_expired and group.group_id not in self.open_txns_by_group

    # -- journal --------------------------------------------------------------------------
    def apply_journal(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "group.meta":
            self._apply_group_record(fields)
        elif kind == "group.delete":
            self._drop_group(fields["group"])
        elif kind == "offset.commit":
            group_id = fields["group"]
            self._get_or_create_group(group_id)
            offset = OffsetAndMetadata.from_fields(fields)
            self._seq = max(self._seq, offset.seq)
            self.offsets.setdefault(group_id, {})[(fields["topic"], fields["partition"])] = offset
        elif kind == "offset.delete":
            self._apply_offset_delete(fields["group"], (fields["topic"], fields["partition"]))
        elif kind == "offset.txn":
            group_id = fields["group"]
            self._get_or_create_group(group_id)
            offset = OffsetAndMetadata.from_fields(fields)
            self._seq = max(self._seq, offset.seq)
            self._stage(group_id, fields["producer_id"], (fields["topic"], fields["partition"]), offset)
        elif kind == "offset.txn_end":
            self._end_txn(fields["group"], fields["producer_id"], fields["commit"])
        else:
            log.warning("journal entry %s is not known to this broker version; keeping it as is", kind)
            self._unknown_entries.append((kind, fields))

    def _apply_group_record(self, record: dict[str, Any]) -> None:
        group = ClassicGroup(record["group"], record["state_ts"])
        group.generation_id = record["generation"]
        group.protocol_type = record["protocol_type"] or None
        group.protocol_name = record["protocol"]
        group.record = dict(record)
        if record["members"]:
            # Kafka loads a group with members as Stable; ours come back without them.
            group.state = GroupState.STABLE
            group.restored_session_timeout_ms = record["session_timeout_ms"]
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[record["group"]] = group

    def snapshot(self) -> Iterable[tuple[str, dict[str, Any]]]:
        for group in self.groups.values():
            if group.record is not None:
                yield "group.meta", dict(group.record)
        for group_id, committed in self.offsets.items():
            for (topic, partition), offset in committed.items():
                yield (
                    "offset.commit",
                    {"group": group_id, "topic": topic, "partition": partition, **offset.fields()},
                )
        for producer_id, by_group in self.pending_txn_offsets.items():
            for group_id, staged in by_group.items():
                for (topic, partition), offset in staged.items():
                    yield (
                        "offset.txn",
                        {
                            "group": group_id,
                            "producer_id": producer_id,
                            "topic": topic,
                            "partition": partition,
                            **offset.fields(),
                        },
                    )
        yield from self._unknown_entries


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
