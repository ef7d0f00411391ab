from __future__ import annotations

from mirrorflow.replicate.offset_syncs import (
    INCARNATION_HEADER,
    RUN_HEADER,
    DenseSyncEmitter,
    SyncPoint,
    incarnation_of,
    run_of,
)


def _emitted(pairs, boundaries=()) -> list[SyncPoint]:
    emitter = DenseSyncEmitter()
    out = []
    for i, (up, down) in enumerate(pairs):
        emitter.record(up, down)
        if i in boundaries:
            emitter.boundary()
            out.extend(emitter.drain())
    emitter.boundary()
    out.extend(emitter.drain())
    return out


def _feed(pairs, boundaries=()):
    return [(p.upstream, p.downstream) for p in _emitted(pairs, boundaries)]


def test_contiguous_run_gets_a_sync_at_each_end() -> None:
    assert _feed([(100 + i, 40 + i) for i in range(50)]) == [(100, 40), (149, 89)]


def test_source_gap_closes_the_run_and_opens_another() -> None:
    pairs = [(0, 0), (1, 1), (2, 2), (7, 3), (8, 4)]  # offsets 3..6 compacted away at the source
    assert _feed(pairs) == [(0, 0), (2, 2), (7, 3), (8, 4)]


def test_target_gap_from_a_commit_marker_closes_the_run() -> None:
    pairs = [(0, 10), (1, 11), (2, 13), (3, 14)]  # offset 12 on the target is a commit marker
    assert _feed(pairs, boundaries={1}) == [(0, 10), (1, 11), (2, 13), (3, 14)]


def test_single_record_runs_are_written_once() -> None:
    assert _feed([(5, 1), (9, 2), (20, 3)]) == [(5, 1), (9, 2), (20, 3)]


def test_every_replicated_offset_is_exactly_derivable_from_the_syncs() -> None:
    ups = [0, 1, 2, 5, 6, 9, 10, 11, 12]
    downs = [0, 1, 2, 3, 4, 6, 7, 8, 9]
    pairs = list(zip(ups, downs, strict=True))
    syncs = _feed(pairs, boundaries={4})
    for up, down in pairs:
        if (up, down) in syncs:
            continue
        below = max(s for s in syncs if s[0] < up)
        above = min(s for s in syncs if s[0] > up)
        # The record lies inside a run bounded by two syncs that are contiguous on both sides.
        assert above[0] - below[0] == above[1] - below[1]
        assert down == below[1] + (up - below[0])


def _points(pairs, boundaries=()):
    return [(p.upstream, p.downstream, p.run) for p in _emitted(pairs, boundaries)]


def test_each_sync_says_how_many_records_of_its_run_came_before_it() -> None:
    pairs = [(0, 0), (1, 1), (2, 2), (7, 3), (8, 4), (9, 6)]
    assert _points(pairs) == [(0, 0, 0), (2, 2, 2), (7, 3, 0), (8, 4, 1), (9, 6, 0)]


def test_a_run_that_goes_on_past_a_boundary_counts_from_its_start() -> None:
    # At-least-once writes no commit markers: the next chunk continues the run on both clusters.
    pairs = [(10 + i, 20 + i) for i in range(8)]
    assert _points(pairs, boundaries={3}) == [(10, 20, 0), (13, 23, 3), (17, 27, 7)]


def test_the_run_header_round_trips_and_rejects_what_it_cannot_read() -> None:
    point = SyncPoint(500, 700, 41)
    assert run_of(point.headers()) == 41
    assert run_of([("other", b"x"), *point.headers()]) == 41
    assert run_of(None) is None
    assert run_of([(RUN_HEADER, b"\x00")]) is None
    assert run_of([(RUN_HEADER, None)]) is None
    assert run_of(SyncPoint(1, 1, -1).headers()) is None


def test_the_incarnation_header_round_trips_and_reads_as_none_when_it_cannot_be_read() -> None:
    point = SyncPoint(500, 700, 41)
    assert point.headers() == [(RUN_HEADER, point.headers()[0][1])], "no incarnation, no header"
    named = point.headers("AAAAAAAAAAAAAAAAAAAAAA,+/+/AAAAAAAAAAAAAAAAAA")
    assert run_of(named) == 41
    assert incarnation_of(named) == "AAAAAAAAAAAAAAAAAAAAAA,+/+/AAAAAAAAAAAAAAAAAA"
    assert incarnation_of(point.headers()) == "" and incarnation_of(None) == ""
    assert incarnation_of([(INCARNATION_HEADER, b"\xff\xfe")]) == ""
    assert incarnation_of([(INCARNATION_HEADER, None)]) == ""
    assert incarnation_of([(INCARNATION_HEADER, b"no-comma")]) == ""
    assert incarnation_of([(INCARNATION_HEADER, b",")]) == ""
    assert incarnation_of([(INCARNATION_HEADER, b"S,R,1000")]) == "S,R", "a floor is progress's alone"
