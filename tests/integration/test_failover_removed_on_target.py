"""`mirrorflow failover` and copies the target removed (issue 36): a group whose next records'
copies the target's retention or a DeleteRecords removed lands on the first copy still there and
skips them. The translation is right about what the target holds, and the row said `exact`; now
it says `removed`, names the source offsets the group skips, and the failover warns."""

from __future__ import annotations

from mirrorflow.ops.failover import failover

from .test_verify_removed_on_target import copied_then_removed


def test_a_group_that_would_skip_removed_copies_is_said_removed_not_exact(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic, behind, past = unique("fo-rm"), unique("behind"), unique("past")
    config = copied_then_removed(a, b, unique("copy"), topic, {behind: 100, past: 160}, 150)

    dry = failover(config, "A", "B", f"{behind}|{past}", dry_run=True)
    rows = {row.group: row for row in dry.rows}
    assert rows[behind].status == "removed", rows[behind]
    assert "skips source offsets 100 to 149: their copies were removed on B" in rows[behind].note
    assert rows[past].status == "exact" and "skips" not in rows[past].note
    (warning,) = [w for w in dry.warnings if "removed before the group read them" in w]
    assert warning.startswith(f"1 partition(s) of 1 group(s) ({behind})"), warning

    # The failover itself says the same of the group it moved (a disaster moves it anyway: the
    # records are not on the target, and the operator reads which ones).
    done = failover(config, "A", "B", f"{behind}|{past}")
    moved = {row.group: row for row in done.rows}
    assert sorted(done.committed) == sorted([behind, past])
    assert moved[behind].status == "removed" and moved[behind].action == "committed"
