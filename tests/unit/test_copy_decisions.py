"""The copy engine's decisions that need no cluster: what an error means, where a span starts,
whether a plan still holds, how long a settle may wait."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorflow.kafka import ClusterWatch
from mirrorflow.replicate.copy import CopyJob, SharedClients, StalePlan
from mirrorflow.replicate.copy.calls import COPY_LINGER_MS, is_fencing, producer_config
from mirrorflow.replicate.copy.job import SETTLE_MARGIN_S
from mirrorflow.replicate.copy.resume import check_live, moves_progress, resume_offset
from mirrorflow.replicate.copy.writer import SlotWriter
from mirrorflow.replicate.plan import PartitionSpan
from mirrorflow.replicate.progress import ProgressReader, Stored, incarnation

S1, S2, R1, R2 = "c291cmNlLW9uZQ", "c291cmNlLXR3bw", "cmVtb3RlLW9uZQ", "cmVtb3RlLXR3bw"


def raised(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


@pytest.mark.parametrize(
    "code", [KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH]
)
def test_every_way_a_broker_or_librdkafka_says_fenced_is_fencing(code: int) -> None:
    assert is_fencing(raised(code))


def test_a_fatal_error_is_fencing_when_what_made_it_fatal_was() -> None:
    """After a fatal error librdkafka answers every call with _FATAL ("Local: Fatal error"); the
    error its callback reported first says why (a loser of a concurrent run reported _FATAL for
    9 of 43 partitions, then fenced the winner back)."""
    fatal = raised(KafkaError._FATAL)
    assert is_fencing(fatal, KafkaError(KafkaError.PRODUCER_FENCED, fatal=True))
    assert not is_fencing(fatal, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, fatal=True))
    assert not is_fencing(fatal)
    assert not is_fencing(raised(KafkaError._TIMED_OUT))
    assert not is_fencing(RuntimeError("not Kafka's"))


def span(start: int, end: int, **fields: object) -> PartitionSpan:
    return PartitionSpan("orders", 0, "A.orders", start, end, **fields)  # type: ignore[arg-type]


def test_progress_of_the_spans_own_topics_moves_the_start_on() -> None:
    planned = span(
        1000, 2000, progress=999, incarnation=incarnation(S1, R1), progress_incarnation=incarnation(S1, R1)
    )
    assert resume_offset(planned, Stored(999, incarnation(S1, R1))) == 1000
    assert resume_offset(planned, Stored(1499, incarnation(S1, R1))) == 1500
    assert resume_offset(planned, None) == 1000


def test_progress_of_other_topic_incarnations_than_the_plans_stops_the_span() -> None:
    """Planned before the source topic was recreated, the span would have taken the new topic's
    offsets 1000-1999 for the old one's (and the next plan would never copy 0-999 of it); planned
    after, it would have resumed at 2000 from progress the stale run wrote."""
    stale = span(
        1000, 2000, progress=999, incarnation=incarnation(S1, R1), progress_incarnation=incarnation(S1, R1)
    )
    with pytest.raises(StalePlan, match="other topic incarnations"):
        resume_offset(stale, Stored(2999, incarnation(S2, R1)))
    restarted = span(
        0,
        3000,
        progress=999,
        incarnation=incarnation(S2, R1, 1001),
        progress_incarnation=incarnation(S1, R1),
        restarted="why",
    )
    assert resume_offset(restarted, Stored(999, incarnation(S1, R1))) == 0, "as planned: starts over"
    with pytest.raises(StalePlan):
        resume_offset(restarted, Stored(1999, incarnation(S1, R1)))
    assert resume_offset(restarted, Stored(1499, incarnation(S2, R1, 1001))) == 1500


def test_progress_without_topic_ids_is_compared_by_offset_as_before() -> None:
    planned = span(100, 200, progress=99)
    assert resume_offset(planned, Stored(149)) == 150
    assert resume_offset(span(100, 200, progress=99, incarnation=incarnation(S1, R1)), Stored(149)) == 150


def test_a_span_whose_topics_were_recreated_since_the_plan_is_stale() -> None:
    planned = span(0, 10, incarnation=incarnation(S1, R1))
    check_live(planned, {"orders": S1}, {"A.orders": R1})
    check_live(span(0, 10), {}, {})  # the plan knew no ids: nothing to compare
    # A topic missing now (deleted, or being created again) fails closed, on either side.
    with pytest.raises(StalePlan, match="source topic orders is not there now"):
        check_live(planned, {}, {"A.orders": R1})
    with pytest.raises(StalePlan, match="remote topic A.orders is not there now"):
        check_live(planned, {"orders": S1}, {})
    with pytest.raises(StalePlan, match="source topic orders was deleted and created again"):
        check_live(planned, {"orders": S2}, {"A.orders": R1})
    with pytest.raises(StalePlan, match="remote topic A.orders was deleted and created again"):
        check_live(planned, {"orders": S1}, {"A.orders": R2})


def test_only_a_span_as_planned_moves_its_progress_to_its_end() -> None:
    empty = span(
        50, 50, progress=9, progress_incarnation=incarnation(S1, R1), incarnation=incarnation(S1, R1)
    )
    assert moves_progress(empty, Stored(9, incarnation(S1, R1)))
    assert not moves_progress(empty, Stored(49, incarnation(S1, R1))), "someone moved it since"


def job(**target: object) -> CopyJob:
    local = {"bootstrap.servers": "127.0.0.1:9"}
    return CopyJob(
        run_id="r",
        source="A",
        target="B",
        exactly_once=True,
        max_records=1000,
        max_bytes=1 << 20,
        provenance=True,
        progress_topic="mm2-offsets.A.internal",
        offset_syncs_topic=None,
        offset_syncs_on_target=False,
        source_consumer=local,
        target_producer={**local, **target},
        target_consumer=local,
        source_producer=local,
    )


@pytest.mark.parametrize("timeout_ms", [60_000, 200_000, 900_000])
def test_a_settle_waits_longer_than_any_live_transaction_of_the_flow_can_stay_open(timeout_ms: int) -> None:
    """A sibling copy's transaction may stay open up to transaction.timeout.ms; only past that
    (and the broker's check for timed-out transactions) is a transaction hanging."""
    with SharedClients(job(**{"transaction.timeout.ms": timeout_ms})) as shared:
        shared.writer(7, SlotWriter)
        assert shared.progress.timeout_s >= timeout_ms / 1000 + SETTLE_MARGIN_S


def copy_producer(**target: object) -> dict[str, object]:
    config = producer_config(job(**target), ClusterWatch("B", "127.0.0.1:9", 15.0), "mirrorflow-B-1")
    Producer(config)  # librdkafka accepts it (linger.ms must stay below message.timeout.ms)
    return config


def test_the_copy_producer_lingers_unless_the_user_says_otherwise() -> None:
    """A transactional producer whose queue runs ahead spins its broker thread on every record
    older than linger.ms while five requests are out (calls.COPY_LINGER_MS); the user's own
    setting, under either of librdkafka's names, is kept as given."""
    assert COPY_LINGER_MS >= 100
    assert copy_producer()["linger.ms"] == COPY_LINGER_MS
    assert copy_producer(**{"linger.ms": 5})["linger.ms"] == 5
    given = copy_producer(**{"queue.buffering.max.ms": 7})
    assert given["queue.buffering.max.ms"] == 7 and "linger.ms" not in given
    short = copy_producer(**{"message.timeout.ms": 400})
    assert 0 < short["linger.ms"] < 400


def test_a_failed_check_ahead_fails_the_slots_with_its_cause_and_never_escapes_the_copy(monkeypatch) -> None:
    """copy() never raises: whatever the copy call's one topic-id check meets is handed to each
    slot, which handles it where its own check used to meet it."""
    from mirrorflow.replicate.copy import CopyWorker

    def broken(self, sources, remotes):
        raise RuntimeError("the describe call broke")

    monkeypatch.setattr(SharedClients, "_ask_topic_ids", broken)
    # Nor does it read progress ahead of the writers' opening when the clusters did not answer
    # that check: the read waited its whole limit on a cluster that is not there (30 s here).
    read_ahead: list[object] = []
    monkeypatch.setattr(ProgressReader, "read_ahead", lambda self, only, **kw: read_ahead.append(list(only)))
    spans = [PartitionSpan("t", p, "A.t", 0, 5, progress=-1) for p in range(3)]
    with CopyWorker(job()) as worker:
        results = worker.copy(spans)
    assert [r.ok for r in results] == [False, False, False]
    assert all("the describe call broke" in (r.error or "") for r in results), [r.error for r in results]
    assert read_ahead == []
