"""The sync index keeps a partition's offset-syncs per topic incarnation, and a pass uses only
those of the topics as they are now (control/translation/sync_index.py, incarnations.py).

Syncs that name an incarnation only ever grow within it, so one below the last is a late arrival
(a zombie writer's), merged in order; syncs that name none (MM2's, an older mirrorflow's) are kept
as MM2's OffsetSyncStore keeps them, where a rewind starts the partition over."""

from __future__ import annotations

from mirrorflow.control.translation.incarnations import Recreated, current_syncs, fitted
from mirrorflow.control.translation.rule import PartitionView, Status, SyncRun, Translation, translate_by_runs
from mirrorflow.control.translation.sync_index import NO_SYNCS, SyncIndex
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.replicate.progress import Stored, incarnation

OLD = incarnation("S1", "R1")
NEW_REMOTE = incarnation("S1", "R2")
NEW_SOURCE = incarnation("S2", "R1")


def index_of(*syncs: tuple[int, int, str] | tuple[int, int, str, int]) -> SyncIndex:
    """Syncs of partition t-0 in the order they were read: (up, down, incarnation[, run])."""
    index = SyncIndex()
    for up, down, named, *run in syncs:
        index.add(OffsetSync("t", 0, up, down), run[0] if run else None, named)
    return index


def pairs(run: SyncRun) -> list[tuple[int, int]]:
    return list(zip(run.ups, run.downs, strict=True))


def test_syncs_that_name_no_incarnation_start_over_when_offsets_go_backwards() -> None:
    index = SyncIndex.of(
        [
            OffsetSync("t", 0, 10, 5),
            OffsetSync("t", 0, 20, 15),
            OffsetSync("t", 0, 20, 16),  # same upstream offset again: the later one wins
            OffsetSync("t", 1, 3, 3),
            OffsetSync("t", 0, 2, 30),  # upstream rewind: topic recreated on the source
            OffsetSync("t", 0, 8, 36),
        ]
    )
    assert index.run("t", 0).ups == (2, 8) and index.run("t", 0).downs == (30, 36)
    assert index.run("t", 1).ups == (3,)
    assert index.partitions() == [("t", 0), ("t", 1)]
    index.add(OffsetSync("t", 1, 9, 1))  # downstream went backwards: remote topic recreated
    assert index.run("t", 1).downs == (1,)


def test_syncs_that_name_no_incarnation_note_where_records_were_copied_a_second_time() -> None:
    index = SyncIndex.of([OffsetSync("t", 0, 0, 0), OffsetSync("t", 0, 59, 59), OffsetSync("t", 0, 59, 59)])
    assert index.run("t", 0).recopied is None, "a sync written twice is not a re-copy"
    index.add(OffsetSync("t", 0, 30, 60))  # at-least-once: 30.. copied again after 59
    assert index.run("t", 0).recopied == 60
    index.add(OffsetSync("t", 0, 99, 129))
    index.add(OffsetSync("t", 0, 99, 140))  # the same upstream offset again, further down
    assert index.run("t", 0).recopied == 140
    index.add(OffsetSync("t", 0, 0, 0))  # remote topic recreated: the twice-copied records are gone
    assert index.run("t", 0).recopied is None


def test_a_zombies_late_syncs_are_merged_in_order_not_read_as_a_rewind() -> None:
    """The writer that fenced the zombie wrote 200..299 first; the zombie's syncs for 100..199
    (and an earlier writer's for 0..99) arrive after it. Within one incarnation nothing rewinds."""
    index = index_of(
        (0, 0, OLD, 0),
        (99, 99, OLD, 99),
        (200, 202, OLD, 0),
        (299, 301, OLD, 99),
        (100, 100, OLD, 0),  # the zombie's, late
        (199, 200, OLD, 98),
        (199, 200, OLD, 98),  # written twice
    )
    run = index.run("t", 0, OLD)
    assert pairs(run) == [(0, 0), (99, 99), (100, 100), (199, 200), (200, 202), (299, 301)]
    assert run.runs == (0, 99, 0, 98, 0, 99) and run.recopied is None
    view = PartitionView(run, 299, 0, 302)
    # Every offset of the three runs by arithmetic, as if the syncs had come in order.
    assert translate_by_runs(150, view) == Translation(150, 151, Status.EXACT)
    assert translate_by_runs(250, view) == Translation(250, 252, Status.EXACT)
    assert translate_by_runs(300, view) == Translation(300, 302, Status.EXACT)


def test_the_same_late_syncs_without_an_incarnation_still_start_over() -> None:
    """What the index did with every sync before incarnations (and still does with MM2's): the
    zombie's sync reads as a rewind and the newer writer's syncs are dropped."""
    index = index_of((0, 0, ""), (200, 202, ""), (299, 301, ""), (100, 100, ""), (199, 200, ""))
    assert pairs(index.run("t", 0)) == [(100, 100), (199, 200)]


def test_an_at_least_once_re_copy_keeps_its_meaning_within_an_incarnation() -> None:
    index = index_of((0, 0, OLD), (59, 59, OLD), (30, 60, OLD), (80, 110, OLD))
    run = index.run("t", 0, OLD)
    assert pairs(run) == [(30, 60), (80, 110)] and run.recopied == 60


def test_a_late_sync_that_does_not_fit_is_left_out_and_marks_the_disorder() -> None:
    """Two at-least-once writers of one incarnation: 0..99 written twice (at 0 and at 100); the
    first writer's syncs come last. Its records lie before the others on the target with the
    same source offsets, so the order breaks up to the later copy's syncs."""
    index = index_of((0, 100, OLD), (99, 199, OLD), (0, 0, OLD), (99, 99, OLD))
    run = index.run("t", 0, OLD)
    assert pairs(run) == [(0, 100), (99, 199)]
    assert run.recopied == 199


def test_incarnations_are_kept_apart_and_the_newest_is_the_default() -> None:
    index = index_of((0, 0, OLD), (99, 99, OLD), (0, 0, NEW_REMOTE), (9, 9, NEW_REMOTE))
    assert pairs(index.run("t", 0, OLD)) == [(0, 0), (99, 99)]
    assert pairs(index.run("t", 0, NEW_REMOTE)) == [(0, 0), (9, 9)]
    assert index.run("t", 0) == index.run("t", 0, NEW_REMOTE)
    assert index.incarnations("t", 0) == [OLD, NEW_REMOTE]
    assert index.run("t", 0, NEW_SOURCE) == NO_SYNCS


def test_a_remote_topic_recreated_and_not_copied_since_has_no_syncs_to_translate_with() -> None:
    index = index_of((0, 0, OLD), (99, 99, OLD))
    assert current_syncs(index, "t", 0, "S1", "R2", None) == Recreated.REMOTE
    assert current_syncs(index, "t", 0, "S1", "R2", Stored(99, OLD)) == Recreated.REMOTE
    assert current_syncs(index, "t", 0, "S2", "R1", Stored(99, OLD)) == Recreated.SOURCE
    # Once copied into the new topic, only its syncs are used.
    index.add(OffsetSync("t", 0, 0, 40), 0, NEW_REMOTE)
    assert pairs(current_syncs(index, "t", 0, "S1", "R2", Stored(0, NEW_REMOTE))) == [(0, 40)]


def test_progress_naming_another_topic_refuses_even_syncs_without_an_incarnation() -> None:
    """An older mirrorflow's syncs of the old remote topic, after it was recreated: progress
    still names the old topic, so the syncs are not taken for the new one's."""
    index = index_of((0, 0, ""), (99, 99, ""))
    assert current_syncs(index, "t", 0, "S1", "R2", Stored(99, OLD)) == Recreated.REMOTE
    assert pairs(current_syncs(index, "t", 0, "S1", "R1", Stored(99, OLD))) == [(0, 0), (99, 99)]
    # MM2's progress names nothing: nothing contradicts MM2's syncs.
    assert pairs(current_syncs(index, "t", 0, "S1", "R2", Stored(99))) == [(0, 0), (99, 99)]


def test_syncs_without_an_incarnation_that_a_copy_continued_are_used_with_its_own() -> None:
    """MM2 copied 0..199, mirrorflow went on from 200, MM2 took the flow back at 300."""
    index = index_of((0, 0, ""), (101, 101, ""), (199, 199, ""), (200, 201, OLD, 0), (299, 300, OLD, 99))
    index.add(OffsetSync("t", 0, 300, 302))
    run = current_syncs(index, "t", 0, "S1", "R1", Stored(300))
    assert pairs(run) == [(0, 0), (101, 101), (199, 199), (200, 201), (299, 300), (300, 302)]
    assert run.runs == (-1, -1, -1, 0, 99, -1)


def test_syncs_without_an_incarnation_from_before_a_rebuilt_topic_are_not_used() -> None:
    """An older mirrorflow copied 0..99 into the old remote topic; it was recreated empty and
    rebuilt from the source's start. The rebuild's first sync is not above the old syncs."""
    index = index_of((0, 0, ""), (99, 99, ""), (10, 0, NEW_REMOTE, 0), (59, 49, NEW_REMOTE, 49))
    run = current_syncs(index, "t", 0, "S1", "R2", Stored(59, NEW_REMOTE))
    assert pairs(run) == [(10, 0), (59, 49)]


def test_syncs_without_an_incarnation_below_the_floor_belong_to_an_earlier_source_topic() -> None:
    index = index_of((0, 0, ""), (99, 99, ""), (100, 100, ""))
    floored = Stored(100, incarnation("S1", "R1", floor=100))
    assert pairs(current_syncs(index, "t", 0, "S1", "R1", floored)) == [(100, 100)]


def test_progress_naming_the_current_topics_without_their_syncs_translates_by_provenance() -> None:
    """A copy into the new remote topic committed, and its source-side syncs were lost: the old
    topic's syncs are not used, and the pass still answers from the provenance headers."""
    index = index_of((0, 0, OLD), (99, 99, OLD))
    assert current_syncs(index, "t", 0, "S1", "R2", Stored(20, NEW_REMOTE)) == NO_SYNCS


def test_ids_that_could_not_be_read_contradict_nothing() -> None:
    index = index_of((0, 0, OLD), (0, 5, NEW_REMOTE))
    assert pairs(current_syncs(index, "t", 0, "", "", Stored(0, NEW_REMOTE))) == [(0, 5)]
    assert pairs(current_syncs(index, "t", 0, "S1", "", None)) == [(0, 5)]


def test_fitted_keeps_only_syncs_in_order_on_both_sides() -> None:
    ours = SyncRun((10, 20), (110, 120), (0, 0))
    legacy = SyncRun((5, 10, 15, 18, 25), (105, 110, 112, 125, 130), (-1,) * 5, recopied=105)
    merged = fitted(ours, legacy)
    # (10, 110) repeats one of ours; (18, 125) lies after (20, 120) on the target only.
    assert pairs(merged) == [(5, 105), (10, 110), (15, 112), (20, 120), (25, 130)]
    assert merged.runs == (-1, 0, -1, 0, -1) and merged.recopied == 105
