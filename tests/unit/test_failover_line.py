"""The log's line on a failover says what it was (issue 36): a migration's preview and the fresh
preview its cut-over holds the approval against are logged just above the commit, and read as a
cut-over "(live)" that committed 0 groups."""

from __future__ import annotations

from mirrorflow.ops.failover import (
    CHECKPOINTS,
    COMMITTED,
    LIVE,
    REFUSED,
    WOULD_COMMIT,
    FailoverResult,
    FailoverRow,
    outcome_line,
)


def _row(group: str, partition: int, action: str) -> FailoverRow:
    return FailoverRow(group, "A.orders", partition, "orders", 5, 5, 0, "exact", action)


def test_a_preview_says_it_committed_nothing_and_how_many_groups_would_move() -> None:
    result = FailoverResult("A", "B", ".*", True, LIVE, refused={"busy": "group busy has active members"})
    result.rows = [_row("g1", 0, WOULD_COMMIT), _row("g1", 1, WOULD_COMMIT), _row("g2", 0, WOULD_COMMIT)]
    result.rows.append(_row("busy", 0, REFUSED))

    line = outcome_line(result)

    assert line == (
        "preview (dry run) of failover A -> B, offsets translated from A: nothing committed; "
        "2 group(s) would move, 1 refused"
    )
    assert "live" not in line and "0 groups committed" not in line


def test_the_cut_over_says_what_it_committed_where_and_from_which_offsets() -> None:
    result = FailoverResult("A", "B", ".*", False, LIVE, committed=["g1", "g2"])
    result.rows = [_row("g1", 0, COMMITTED), _row("g2", 0, COMMITTED)]
    assert outcome_line(result) == (
        "failover A -> B, offsets translated from A: 2 group(s) committed on B, 0 refused"
    )
    result.mode = CHECKPOINTS
    assert outcome_line(result).startswith("failover A -> B, offsets from the checkpoints on B: 2 group(s)")


def test_a_dry_run_that_refused_a_group_counts_the_groups_it_would_have_moved() -> None:
    from mirrorflow.airflow.failover import refused_message

    result = FailoverResult("A", "B", ".*", True, LIVE, refused={"busy": "group busy has active members"})
    result.rows = [_row("g1", 0, WOULD_COMMIT), _row("g2", 0, WOULD_COMMIT), _row("busy", 0, REFUSED)]
    assert (
        refused_message(result) == "1 group(s) not moved (2 would have moved): group busy has active members."
    )
