"""The group coordinator's state machine and offset store, driven directly (no sockets).

Each scenario runs on its own event loop with short session and rebalance timeouts, so the
timers (initial delay, rebalance timeout, session expiry, pending sync) really fire.
"""

from __future__ import annotations

import asyncio
import io
import struct
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from devbroker.configs import BrokerConfig
from devbroker.groups import GroupCoordinator, GroupState, JoinRequest, JoinResult
from devbroker.journal import Journal

GROUP = "g"


class Topics:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partition_count(self, name: str) -> int | None:
        return self.counts.get(name)


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def coordinator(
    journal: Path | None = None, clock: Clock | None = None, **overrides: object
) -> GroupCoordinator:
    values = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "10"}
    values.update({key: str(value) for key, value in overrides.items()})
    broker = types.SimpleNamespace(
        config=BrokerConfig(1, values), journal=Journal(journal), topics=Topics({"t": 3, "u": 2})
    )
    return GroupCoordinator(broker, clock=clock or Clock())


def subscription(*topics: str) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">h", 0))
    entity_writer(ConsumerProtocolSubscription)(
        out, ConsumerProtocolSubscription(topics=topics, user_data=None)
    )
    return out.getvalue()


def request(
    member_id: str = "",
    *,
    group: str = GROUP,
    instance: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
    session: int = 5000,
    rebalance: int = 5000,
    version: int = 9,
    client_id: str = "client",
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", subscription("t"))],
        api_version=version,
    )


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def new_member_id(coord: GroupCoordinator, **kw: Any) -> str:
    result = await coord.join_group(request(**kw))
    assert result.error_code == ErrorCode.member_id_required
    return result.member_id


async def rebalance(coord: GroupCoordinator, member_ids: list[str], **kw: Any) -> list[JoinResult]:
    """Every member (re)joins; the leader assigns each member its own id as assignment."""
    results = await asyncio.gather(*(coord.join_group(request(m, **kw)) for m in member_ids))
    assert all(r.error_code == ErrorCode.none for r in results), results
    leader = results[0].leader
    syncs = await asyncio.gather(
        *(
            coord.sync_group(
                GROUP,
                r.generation_id,
                r.member_id,
                None,
                "consumer",
                r.protocol_name,
                {m: m.encode() for m in member_ids} if r.member_id == leader else {},
            )
            for r in results
        )
    )
    assert [s.error_code for s in syncs] == [ErrorCode.none] * len(member_ids)
    assert [s.assignment for s in syncs] == [m.encode() for m in member_ids]
    return results


async def stable_group(coord: GroupCoordinator, size: int, **kw: Any) -> list[str]:
    members = [await new_member_id(coord, client_id=f"c{i}", **kw) for i in range(size)]
    await rebalance(coord, members, **kw)
    assert coord.groups[GROUP].state is GroupState.STABLE
    return members


# -- JoinGroup / SyncGroup ----------------------------------------------------------------


def test_first_join_asks_for_a_member_id_then_the_member_leads_generation_one() -> None:
    async def scenario() -> None:
        coord = coordinator()
        member = await new_member_id(coord, client_id="app")
        assert member.startswith("app-")
        assert coord.groups[GROUP].state is GroupState.EMPTY
        joined = await coord.join_group(request(member))
        assert (joined.error_code, joined.generation_id, joined.leader) == (ErrorCode.none, 1, member)
        assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
        assert [(m.member_id, m.metadata) for m in joined.members] == [(member, subscription("t"))]
        assert coord.groups[GROUP].state is GroupState.COMPLETING_REBALANCE
        synced = await coord.sync_group(GROUP, 1, member, None, "consumer", "range", {member: b"a"})
        assert (synced.error_code, synced.assignment, synced.protocol_name) == (ErrorCode.none, b"a", "range")
        assert coord.groups[GROUP].state is GroupState.STABLE
        coord.close()

    run(scenario)


def test_join_before_v4_gets_a_member_id_without_the_extra_round_trip() -> None:
    async def scenario() -> None:
        coord = coordinator()
        joined = await coord.join_group(request(version=3))
        assert joined.error_code == ErrorCode.none
        assert joined.member_id and joined.leader == joined.member_id
        coord.close()

    run(scenario)


def test_request_validation_errors() -> None:
    async def scenario() -> None:
        coord = coordinator(**{"group.max.session.timeout.ms": 10_000})
        assert (await coord.join_group(request(group=""))).error_code == ErrorCode.invalid_group_id
        assert (await coord.join_group(request(session=5))).error_code == ErrorCode.invalid_session_timeout
        assert (
            await coord.join_group(request(session=10_001))
        ).error_code == ErrorCode.invalid_session_timeout
        unknown = await coord.join_group(request("ghost", group="nope"))
        assert unknown.error_code == ErrorCode.unknown_member_id
        assert "nope" not in coord.groups
        no_type = await coord.join_group(request(protocol_type=""))
        assert no_type.error_code == ErrorCode.inconsistent_group_protocol
        coord.close()

    run(scenario)


def test_second_member_triggers_a_rebalance_that_the_first_must_join() -> None:
    async def scenario() -> None:
        coord = coordinator()
        (first,) = await stable_group(coord, 1)
        second = await new_member_id(coord, client_id="c1")
        second_join = coord.join_group(request(second))
        await eventually(lambda: coord.groups[GROUP].state is GroupState.PREPARING_REBALANCE)
        assert coord.heartbeat(GROUP, 1, first, None) == ErrorCode.rebalance_in_progress
        stale_sync = await coord.sync_group(GROUP, 1, first, None, None, None, {})
        assert stale_sync.error_code == ErrorCode.rebalance_in_progress
        assert not second_join.done()
        first_join = await coord.join_group(request(first))
        second_result = await second_join
        assert first_join.generation_id == second_result.generation_id == 2
        assert first_join.leader == second_result.leader == first
        assert {m.member_id for m in first_join.members} == {first, second}
        assert second_result.members == []
        follower_sync = coord.sync_group(GROUP, 2, second, None, "consumer", "range", {})
        await asyncio.sleep(0)
        assert not follower_sync.done()
        leader_sync = await coord.sync_group(
            GROUP, 2, first, None, "consumer", "range", {first: b"1", second: b"2"}
        )
        assert leader_sync.assignment == b"1"
        assert (await follower_sync).assignment == b"2"
        coord.close()

    run(scenario)


def test_protocol_is_chosen_by_the_members_votes_among_common_ones() -> None:
    async def scenario() -> None:
        coord = coordinator()
        meta = subscription("t")
        prefs = [
            [("range", meta), ("roundrobin", meta), ("sticky", meta)],
            [("roundrobin", meta), ("range", meta)],
            [("roundrobin", meta), ("range", meta)],
        ]
        ids = [await new_member_id(coord, client_id=f"m{i}", protocols=p) for i, p in enumerate(prefs)]
        results = await asyncio.gather(
            *(coord.join_group(request(m, protocols=p)) for m, p in zip(ids, prefs, strict=True))
        )
        assert {r.protocol_name for r in results} == {"roundrobin"}
        leader = next(r for r in results if r.members)
        assert {m.metadata for m in leader.members} == {meta}
        only_sticky = await coord.join_group(request(protocols=[("sticky", meta)]))
        assert only_sticky.error_code == ErrorCode.inconsistent_group_protocol
        other_type = await coord.join_group(request(protocol_type="connect", protocols=prefs[0]))
        assert other_type.error_code == ErrorCode.inconsistent_group_protocol
        coord.close()

    run(scenario)


def test_initial_rebalance_delay_gathers_members_into_one_generation() -> None:
    async def scenario() -> None:
        coord = coordinator(**{"group.initial.rebalance.delay.ms": 200})
        a, b = await new_member_id(coord, client_id="a"), await new_member_id(coord, client_id="b")
        join_a = coord.join_group(request(a))
        await asyncio.sleep(0.05)
        assert not join_a.done()
        join_b = coord.join_group(request(b))
        result_a, result_b = await asyncio.gather(join_a, join_b)
        assert result_a.generation_id == result_b.generation_id == 1
        assert {m.member_id for m in result_a.members} == {a, b}
        coord.close()

    run(scenario)


def test_session_timeout_removes_a_silent_member_and_rebalances() -> None:
    async def scenario() -> None:
        coord = coordinator()
        alive, silent = await stable_group(coord, 2, session=150)
        group = coord.groups[GROUP]
        while silent in group.members:
            assert coord.heartbeat(GROUP, 1, alive, None) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
            await asyncio.sleep(0.02)
        assert group.state is GroupState.PREPARING_REBALANCE
        assert coord.heartbeat(GROUP, 1, alive, None) == ErrorCode.rebalance_in_progress
        rejoined = await coord.join_group(request(alive, session=150))
        assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (2, [alive])
        assert coord.heartbeat(GROUP, 1, silent, None) == ErrorCode.unknown_member_id
        coord.close()

    run(scenario)


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def scenario() -> None:
        coord = coordinator()
        first, lagging = await stable_group(coord, 2, rebalance=200)
        newcomer = await new_member_id(coord, client_id="new")
        newcomer_join = coord.join_group(request(newcomer, rebalance=200))
        await eventually(lambda: coord.groups[GROUP].state is GroupState.PREPARING_REBALANCE)
        first_join = coord.join_group(request(first, rebalance=200))
        # `lagging` keeps heartbeating but never rejoins: it is dropped after the rebalance timeout.
        while not first_join.done():
            coord.heartbeat(GROUP, 1, lagging, None)
            await asyncio.sleep(0.02)
        result = first_join.result()
        assert result.generation_id == 2
        assert {m.member_id for m in result.members} == {first, newcomer}
        assert (await newcomer_join).generation_id == 2
        assert coord.heartbeat(GROUP, 1, lagging, None) == ErrorCode.unknown_member_id
        coord.close()

    run(scenario)


def test_a_follower_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    async def scenario() -> None:
        coord = coordinator()
        a, b = await new_member_id(coord, client_id="a"), await new_member_id(coord, client_id="b")
        results = await asyncio.gather(
            coord.join_group(request(a, rebalance=300)), coord.join_group(request(b, rebalance=300))
        )
        leader = results[0].leader
        follower = b if leader == a else a
        await coord.sync_group(GROUP, 1, leader, None, None, None, {a: b"x", b: b"y"})
        await eventually(lambda: follower not in coord.groups[GROUP].members)
        assert coord.heartbeat(GROUP, 1, leader, None) == ErrorCode.rebalance_in_progress
        rejoined = await coord.join_group(request(leader, rebalance=300))
        assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (2, [leader])
        coord.close()

    run(scenario)


def test_sync_group_errors() -> None:
    async def scenario() -> None:
        coord = coordinator()
        (member,) = await stable_group(coord, 1)

        async def sync(
            group: str = GROUP,
            generation: int = 1,
            member_id: str = member,
            protocol_type: str | None = "consumer",
            protocol_name: str | None = "range",
        ) -> ErrorCode:
            result = await coord.sync_group(
                group, generation, member_id, None, protocol_type, protocol_name, {}
            )
            return result.error_code

        assert await sync() == ErrorCode.none
        assert await sync(group="missing") == ErrorCode.unknown_member_id
        assert await sync(group="") == ErrorCode.invalid_group_id
        assert await sync(member_id="ghost") == ErrorCode.unknown_member_id
        assert await sync(generation=0) == ErrorCode.illegal_generation
        assert await sync(protocol_name="roundrobin") == ErrorCode.inconsistent_group_protocol
        assert await sync(protocol_type="connect") == ErrorCode.inconsistent_group_protocol
        assert await sync(protocol_type=None, protocol_name=None) == ErrorCode.none
        coord.close()

    run(scenario)


def test_heartbeat_errors() -> None:
    async def scenario() -> None:
        coord = coordinator()
        (member,) = await stable_group(coord, 1)
        assert coord.heartbeat(GROUP, 1, member, None) == ErrorCode.none
        assert coord.heartbeat("", 1, member, None) == ErrorCode.invalid_group_id
        assert coord.heartbeat("missing", 1, member, None) == ErrorCode.unknown_member_id
        assert coord.heartbeat(GROUP, 1, "ghost", None) == ErrorCode.unknown_member_id
        assert coord.heartbeat(GROUP, 7, member, None) == ErrorCode.illegal_generation
        assert coord.heartbeat(GROUP, 1, member, "not-static") == ErrorCode.unknown_member_id
        coord.close()

    run(scenario)


def test_group_max_size_refuses_extra_members() -> None:
    async def scenario() -> None:
        coord = coordinator(**{"group.max.size": 1})
        await stable_group(coord, 1)
        refused = await coord.join_group(request(version=3))
        assert (refused.error_code, refused.member_id) == (ErrorCode.group_max_size_reached, "")
        coord.close()

    run(scenario)


# -- static membership --------------------------------------------------------------------


def test_static_member_restart_takes_over_without_a_rebalance() -> None:
    async def scenario() -> None:
        coord = coordinator()
        first = await coord.join_group(request(instance="pod-0", client_id="pod"))
        assert first.member_id.startswith("pod-0-")
        await coord.sync_group(GROUP, 1, first.member_id, "pod-0", None, None, {first.member_id: b"P"})
        replacement = await coord.join_group(request(instance="pod-0", version=5))
        assert replacement.error_code == ErrorCode.none
        assert replacement.member_id != first.member_id
        assert replacement.generation_id == 1
        assert replacement.leader == first.member_id  # before v9 the old leader id is reported
        group = coord.groups[GROUP]
        assert group.state is GroupState.STABLE and list(group.members) == [replacement.member_id]
        synced = await coord.sync_group(GROUP, 1, replacement.member_id, "pod-0", None, None, {})
        assert synced.assignment == b"P"
        assert coord.heartbeat(GROUP, 1, first.member_id, "pod-0") == ErrorCode.fenced_instance_id
        commit = coord.commit_offsets(GROUP, 1, first.member_id, "pod-0", -1, [("t", 0, 5, -1, "")], 9)
        assert commit == [ErrorCode.fenced_instance_id]
        leave_error, member_errors = coord.leave_group(GROUP, [(first.member_id, "pod-0")])
        assert (leave_error, member_errors) == (ErrorCode.none, [ErrorCode.fenced_instance_id])
        v9 = await coord.join_group(request(instance="pod-0", version=9))
        assert (v9.leader, v9.skip_assignment) == (v9.member_id, True)
        assert [m.member_id for m in v9.members] == [v9.member_id]
        coord.close()

    run(scenario)


def test_a_parked_static_member_is_fenced_by_its_replacement() -> None:
    async def scenario() -> None:
        coord = coordinator()
        dynamic = await new_member_id(coord, client_id="d")
        static, _ = await asyncio.gather(
            coord.join_group(request(instance="pod-0")), coord.join_group(request(dynamic))
        )
        assert static.leader == static.member_id
        await asyncio.gather(
            coord.sync_group(GROUP, 1, static.member_id, "pod-0", None, None, {}),
            coord.sync_group(GROUP, 1, dynamic, None, None, None, {}),
        )
        newcomer = await new_member_id(coord, client_id="n")
        newcomer_join = coord.join_group(request(newcomer))
        await eventually(lambda: coord.groups[GROUP].state is GroupState.PREPARING_REBALANCE)
        parked = coord.join_group(request(static.member_id, instance="pod-0"))
        replacement = coord.join_group(request(instance="pod-0"))
        assert (await parked).error_code == ErrorCode.fenced_instance_id
        assert not replacement.done()
        results = await asyncio.gather(replacement, newcomer_join, coord.join_group(request(dynamic)))
        assert {r.generation_id for r in results} == {2}
        members = {m.member_id for r in results for m in r.members}
        assert members == {results[0].member_id, newcomer, dynamic}
        coord.close()

    run(scenario)


def test_leave_group_by_member_id_instance_id_and_pending_id() -> None:
    async def scenario() -> None:
        coord = coordinator()
        assert coord.leave_group("missing", [("x", None)]) == (ErrorCode.none, [ErrorCode.unknown_member_id])
        static = await coord.join_group(request(instance="pod-0"))
        await coord.sync_group(GROUP, 1, static.member_id, "pod-0", None, None, {})
        pending = await new_member_id(coord, client_id="p")
        error, errors = coord.leave_group(
            GROUP, [("", "pod-0"), (pending, None), ("ghost", None), ("", "nobody")]
        )
        assert error == ErrorCode.none
        assert errors == [
            ErrorCode.none,
            ErrorCode.none,
            ErrorCode.unknown_member_id,
            ErrorCode.unknown_member_id,
        ]
        group = coord.groups[GROUP]
        await eventually(lambda: group.state is GroupState.EMPTY)
        assert group.generation_id == 2 and not group.pending_join_members
        assert coord.leave_group("", [("x", None)]) == (ErrorCode.invalid_group_id, [])
        coord.close()

    run(scenario)


# -- offsets ------------------------------------------------------------------------------


def test_offset_commit_checks_membership_generation_and_partitions() -> None:
    async def scenario() -> None:
        coord = coordinator(**{"offset.metadata.max.bytes": 8})
        entry = [("t", 0, 10, 3, "meta")]
        assert coord.commit_offsets("simple", -1, "", None, -1, entry, 9) == [ErrorCode.none]
        assert (
            coord.groups["simple"].state is GroupState.EMPTY and coord.groups["simple"].protocol_type is None
        )
        assert coord.commit_offsets("nobody", 4, "m", None, -1, entry, 8) == [ErrorCode.illegal_generation]
        assert coord.commit_offsets("nobody", 4, "m", None, -1, entry, 9) == [ErrorCode.group_id_not_found]
        mixed = [
            ("t", 0, 1, -1, None),
            ("t", 3, 1, -1, None),
            ("missing", 0, 1, -1, None),
            ("t", 1, 1, -1, "x" * 9),
        ]
        assert coord.commit_offsets("simple", -1, "", None, -1, mixed, 9) == [
            ErrorCode.none,
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.offset_metadata_too_large,
        ]
        (member,) = await stable_group(coord, 1)
        assert coord.commit_offsets(GROUP, 1, member, None, -1, entry, 9) == [ErrorCode.none]
        assert coord.commit_offsets(GROUP, -1, "", None, -1, entry, 9) == [ErrorCode.unknown_member_id]
        assert coord.commit_offsets(GROUP, 0, member, None, -1, entry, 9) == [ErrorCode.illegal_generation]
        assert coord.commit_offsets(GROUP, 1, "ghost", None, -1, entry, 9) == [ErrorCode.unknown_member_id]
        newcomer = await new_member_id(coord, client_id="n")
        joining = [coord.join_group(request(newcomer)), coord.join_group(request(member))]
        await asyncio.gather(*joining)
        assert coord.groups[GROUP].state is GroupState.COMPLETING_REBALANCE
        assert coord.commit_offsets(GROUP, 2, member, None, -1, entry, 9) == [ErrorCode.rebalance_in_progress]
        error, topics = coord.fetch_offsets(GROUP, [("t", [0, 1])], require_stable=False)
        assert error == ErrorCode.none
        assert [(f.partition, f.offset, f.leader_epoch, f.metadata) for f in topics[0][1]] == [
            (0, 10, 3, "meta"),
            (1, -1, -1, ""),
        ]
        coord.close()

    run(scenario)


def test_offset_fetch_all_partitions_and_unknown_groups() -> None:
    async def scenario() -> None:
        coord = coordinator()
        coord.commit_offsets("g1", -1, "", None, -1, [("t", 2, 7, -1, None), ("u", 0, 1, -1, None)], 9)
        _, everything = coord.fetch_offsets("g1", None, require_stable=False)
        assert sorted((name, f.partition, f.offset) for name, fs in everything for f in fs) == [
            ("t", 2, 7),
            ("u", 0, 1),
        ]
        assert coord.fetch_offsets("nobody", None, require_stable=True) == (ErrorCode.none, [])
        _, missing = coord.fetch_offsets("nobody", [("t", [0])], require_stable=False)
        assert missing[0][1][0].offset == -1
        coord.close()

    run(scenario)


def test_transactional_offsets_stay_pending_until_the_transaction_ends() -> None:
    async def scenario() -> None:
        coord = coordinator()
        assert coord.stage_txn_offsets("tg", 42, 0, [("t", 0, 100, -1, "txn"), ("nope", 0, 1, -1, None)]) == [
            int(ErrorCode.none),
            int(ErrorCode.unknown_topic_or_partition),
        ]
        _, plain = coord.fetch_offsets("tg", [("t", [0])], require_stable=False)
        assert plain[0][1][0].offset == -1
        _, stable = coord.fetch_offsets("tg", [("t", [0])], require_stable=True)
        assert stable[0][1][0].error_code == ErrorCode.unstable_offset_commit
        coord.complete_txn("tg", 42, commit=True)
        _, committed = coord.fetch_offsets("tg", [("t", [0])], require_stable=True)
        assert (committed[0][1][0].offset, committed[0][1][0].metadata) == (100, "txn")

        coord.stage_txn_offsets("tg", 43, 0, [("t", 0, 200, -1, None)])
        coord.complete_txn("tg", 43, commit=False)
        _, aborted = coord.fetch_offsets("tg", [("t", [0])], require_stable=True)
        assert aborted[0][1][0].offset == 100

        coord.stage_txn_offsets("tg", 44, 0, [("t", 0, 300, -1, None)])
        coord.commit_offsets("tg", -1, "", None, -1, [("t", 0, 400, -1, None)], 9)
        coord.complete_txn("tg", 44, commit=True)
        _, later_plain_wins = coord.fetch_offsets("tg", [("t", [0])], require_stable=True)
        assert later_plain_wins[0][1][0].offset == 400
        coord.close()

    run(scenario)


def test_delete_groups_and_offsets() -> None:
    async def scenario() -> None:
        coord = coordinator()
        (member,) = await stable_group(coord, 1, protocols=[("range", subscription("t"))])
        coord.commit_offsets(GROUP, 1, member, None, -1, [("t", 0, 1, -1, None), ("u", 0, 2, -1, None)], 9)
        assert coord.delete_groups([GROUP, "missing"]) == [
            (GROUP, ErrorCode.non_empty_group),
            ("missing", ErrorCode.group_id_not_found),
        ]
        error, topics = coord.delete_offsets(GROUP, [("t", [0]), ("u", [0, 5])])
        assert error == ErrorCode.none
        assert topics == [
            ("t", [(0, ErrorCode.group_subscribed_to_topic)]),
            ("u", [(0, ErrorCode.none), (5, ErrorCode.unknown_topic_or_partition)]),
        ]
        assert coord.delete_offsets("missing", [("t", [0])]) == (ErrorCode.group_id_not_found, [])
        connect = await coord.join_group(request(group="workers", protocol_type="connect", version=3))
        await coord.sync_group("workers", 1, connect.member_id, None, None, None, {})
        assert coord.delete_offsets("workers", [("t", [0])]) == (ErrorCode.non_empty_group, [])
        coord.leave_group(GROUP, [(member, None)])
        assert coord.delete_groups([GROUP]) == [(GROUP, ErrorCode.none)]
        assert GROUP not in coord.groups
        assert coord.fetch_offsets(GROUP, None, require_stable=False) == (ErrorCode.none, [])
        coord.close()

    run(scenario)


def test_topic_deletion_drops_committed_and_staged_offsets() -> None:
    async def scenario() -> None:
        coord = coordinator()
        coord.commit_offsets("g1", -1, "", None, -1, [("t", 0, 1, -1, None), ("u", 0, 1, -1, None)], 9)
        coord.stage_txn_offsets("g2", 7, 0, [("t", 1, 5, -1, None)])
        coord.on_topic_deleted("t")
        _, left = coord.fetch_offsets("g1", None, require_stable=False)
        assert [name for name, _ in left] == ["u"]
        assert not coord.has_pending_txn_offset("g2", "t", 1)
        coord.close()

    run(scenario)


def test_list_and_describe_groups() -> None:
    async def scenario() -> None:
        coord = coordinator()
        (member,) = await stable_group(coord, 1)
        coord.commit_offsets("simple", -1, "", None, -1, [("t", 0, 1, -1, None)], 9)
        listed = {g.group_id: (g.state, g.protocol_type, g.group_type) for g in coord.list_groups()}
        assert listed == {GROUP: ("Stable", "consumer", "classic"), "simple": ("Empty", "", "classic")}
        assert [g.group_id for g in coord.list_groups(["stable"])] == [GROUP]
        assert [g.group_id for g in coord.list_groups([" EMPTY "])] == ["simple"]
        assert [g.group_id for g in coord.list_groups(types_filter=["Consumer"])] == []
        assert len(coord.list_groups(types_filter=["classic"])) == 2
        described = coord.describe_group(GROUP)
        assert described is not None
        assert (described.state, described.protocol_type, described.protocol_data) == (
            "Stable",
            "consumer",
            "range",
        )
        (m,) = described.members
        assert (m.member_id, m.client_id, m.client_host, m.metadata, m.assignment) == (
            member,
            "client",
            "/127.0.0.1",
            subscription("t"),
            member.encode(),
        )
        assert coord.describe_group("missing") is None
        coord.close()

    run(scenario)


def test_offsets_expire_after_retention_and_empty_groups_go_with_them() -> None:
    async def scenario() -> None:
        clock = Clock()
        coord = coordinator(clock=clock, **{"offsets.retention.minutes": 1})
        coord.commit_offsets("simple", -1, "", None, -1, [("t", 0, 1, -1, None)], 9)
        (member,) = await stable_group(coord, 1)
        coord.commit_offsets(GROUP, 1, member, None, -1, [("t", 0, 1, -1, None), ("u", 0, 1, -1, None)], 9)
        clock.now += 59_999
        assert coord.expire_offsets() == 0
        clock.now += 1
        # simple group: by commit time; stable consumer group: only unsubscribed topics.
        assert coord.expire_offsets() == 2
        assert "simple" not in coord.groups
        _, kept = coord.fetch_offsets(GROUP, None, require_stable=False)
        assert [name for name, _ in kept] == ["t"]
        coord.leave_group(GROUP, [(member, None)])
        assert coord.groups[GROUP].state is GroupState.EMPTY
        clock.now += 59_999
        assert coord.expire_offsets() == 0  # an empty group's offsets count from when it emptied
        clock.now += 1
        assert coord.expire_offsets() == 1
        assert GROUP not in coord.groups
        coord.close()

    run(scenario)


def test_v2_retention_time_sets_an_explicit_expiry() -> None:
    async def scenario() -> None:
        clock = Clock()
        coord = coordinator(clock=clock)
        coord.commit_offsets("old", -1, "", None, 1000, [("t", 0, 1, -1, None)], 2)
        clock.now += 1000
        assert coord.expire_offsets() == 1
        coord.close()

    run(scenario)


# -- persistence --------------------------------------------------------------------------


def test_journal_replay_restores_offsets_groups_and_pending_transactions(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"

    async def before() -> None:
        coord = coordinator(path)
        (member,) = await stable_group(coord, 1, session=80)
        coord.commit_offsets(GROUP, 1, member, None, -1, [("t", 0, 11, 2, "m")], 9)
        coord.commit_offsets("simple", -1, "", None, -1, [("u", 1, 5, -1, None)], 9)
        coord.stage_txn_offsets("simple", 9, 0, [("u", 1, 6, -1, None)])
        await coord.join_group(request(group="only-pending"))
        coord.commit_offsets("gone", -1, "", None, -1, [("t", 0, 1, -1, None)], 9)
        assert coord.delete_groups(["gone"]) == [("gone", ErrorCode.none)]
        coord.broker.journal.close()
        coord.close()

    async def after() -> None:
        coord = coordinator(path)
        journal = Journal(path)
        for kind, fields in journal.replay():
            coord.apply_journal(kind, fields)
        journal.rewrite(coord.snapshot())
        restarted = coordinator(path)
        for kind, fields in Journal(path).replay():
            restarted.apply_journal(kind, fields)
        for c in (coord, restarted):
            assert set(c.groups) == {GROUP, "simple", "only-pending"}
            group = c.groups[GROUP]
            assert (group.state, group.generation_id, group.protocol_name, group.members) == (
                GroupState.STABLE,
                1,
                "range",
                {},
            )
            assert c.groups["only-pending"].state is GroupState.EMPTY
            _, fetched = c.fetch_offsets(GROUP, [("t", [0])], require_stable=False)
            assert (fetched[0][1][0].offset, fetched[0][1][0].leader_epoch, fetched[0][1][0].metadata) == (
                11,
                2,
                "m",
            )
            _, pending = c.fetch_offsets("simple", [("u", [1])], require_stable=True)
            assert pending[0][1][0].error_code == ErrorCode.unstable_offset_commit
        assert (
            await restarted.join_group(request("old-member-id"))
        ).error_code == ErrorCode.unknown_member_id
        restarted.complete_txn("simple", 9, commit=True)
        _, done = restarted.fetch_offsets("simple", [("u", [1])], require_stable=True)
        assert done[0][1][0].offset == 6
        restarted.start()
        group = restarted.groups[GROUP]
        await eventually(lambda: group.state is GroupState.EMPTY)
        assert group.generation_id == 2
        coord.close()
        restarted.close()

    run(before)
    run(after)


def test_unknown_journal_kinds_are_kept_through_a_snapshot() -> None:
    coord = coordinator()
    coord.apply_journal("group.future-kind", {"x": 1})
    assert list(coord.snapshot()) == [("group.future-kind", {"x": 1})]
