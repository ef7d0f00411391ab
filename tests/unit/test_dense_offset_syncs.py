from __future__ import annotations

from mirrorflow.replicate.offset_syncs import DenseSyncEmitter


def _feed(pairs, boundaries=()):
    emitter = DenseSyncEmitter()
    out = []
    for i, (up, down) in enumerate(pairs):
        emitter.record(up, down)
        if i in boundaries:
            emitter.boundary()
            out.extend(emitter.drain())
    emitter.boundary()
    out.extend(emitter.drain())
    return [(p.upstream, p.downstream) for p in out]


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
