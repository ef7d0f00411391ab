"""Translation of records MirrorMaker 2 copied: MM2's own rule on MM2's sparse offset-syncs,
labelled as MM2's, never past the first record the group had not read.

MM2 writes a sync about every offset.lag.max records; between two syncs nothing on the target
says where a source offset landed, so the answer is one record past the sync at or below the
group's offset (mm2-semantics.md §6b). The real-MM2 test is tests/mm2/test_reads_what_mm2_wrote.py.
"""

from __future__ import annotations

from mirrorflow.control.translation.rule import (
    PartitionView,
    Status,
    SyncRun,
    Translation,
    translate_mm2_copy,
)

# MM2 copied offsets 0..999 of a source partition into an empty remote partition: B offset == A
# offset, syncs every 101 records and at the last record.
SYNCS = SyncRun(ups=(0, 101, 202, 999), downs=(0, 101, 202, 999))
VIEW = PartitionView(SYNCS, progress=999, start=0, end=1000)


def test_between_syncs_the_group_resumes_one_past_the_sync_below() -> None:
    assert translate_mm2_copy(150, VIEW) == Translation(150, 102, Status.MM2)
    assert translate_mm2_copy(998, VIEW) == Translation(998, 203, Status.MM2)


def test_at_a_sync_or_past_the_last_record_the_answer_is_exact_and_still_says_mm2() -> None:
    assert translate_mm2_copy(101, VIEW) == Translation(101, 101, Status.MM2)
    assert translate_mm2_copy(1000, VIEW) == Translation(1000, 1000, Status.MM2)


def test_never_skips_and_re_reads_less_than_the_sync_spacing() -> None:
    for upstream in range(0, 1001):
        downstream = translate_mm2_copy(upstream, VIEW).downstream_offset
        assert downstream <= upstream, "would skip records the group never read"
        if upstream <= 202:  # where MM2 synced every 101 records
            assert upstream - downstream < 101


def test_a_group_before_every_sync_is_not_placed() -> None:
    later = PartitionView(SyncRun(ups=(500, 601), downs=(0, 101)), progress=601, start=0, end=102)
    assert translate_mm2_copy(499, later) is None
