"""Failover around a divergent tail: which records on the target the moving groups would read that
the reverse flow never copied back (ops/divergent_tail finds them), the refusal that asks the
operator to choose, and where each group's offset goes for the choice (replay or aside)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorflow.config import MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.groups import Committed
from mirrorflow.ops.divergent_tail import ASIDE, REPLAY, Tail, aside_topic, divergent_tails

if TYPE_CHECKING:
    from mirrorflow.ops.failover_rows import FailoverResult, FailoverRow

DIVERGENT_ROWS = 100
"""Divergent partitions a failover result lists (the largest first); the count says how many."""


def read_tails(
    config: MirrorConfig,
    result: FailoverResult,
    rows: list[FailoverRow],
    commits: dict[str, dict[tuple[str, int], Committed]],
    use_checkpoints: bool,
    connection_extra: ConnectionExtra | None,
) -> dict[tuple[str, int], Tail]:
    """The divergent tails of the partitions the moving groups will read on the target."""
    wanted = {where for offsets in commits.values() for where in offsets}
    if not wanted:
        return {}
    if use_checkpoints:
        if config.replication_enabled(result.target, result.source):
            result.warnings.append(
                f"records on {result.target} that {result.target}->{result.source} never copied are not looked "
                f"for: {result.source} is down and holds that flow's progress"
            )
        return {}
    tails = divergent_tails(
        config,
        result.source,
        result.target,
        {topic for topic, _ in wanted},
        connection_extra=connection_extra,
    )
    tails = {where: tail for where, tail in tails.items() if where in wanted}
    ordered = sorted(tails.values(), key=lambda t: (-t.offsets, t.topic, t.partition))
    result.divergent = [t.to_dict() for t in ordered[:DIVERGENT_ROWS]]
    result.divergent_count = len(ordered)
    if tails:
        result.warnings.append(
            f"{len(tails)} partition(s) the groups will read on {result.target} hold "
            f"{sum(t.offsets for t in tails.values()):,} offsets that {result.target}->{result.source} never "
            f"copied to {result.source} (the divergent tail)"
        )
    return tails


def divergent_message(result: FailoverResult, tails: dict[tuple[str, int], Tail]) -> str:
    lines = [
        f"the groups would read records on {result.target} that {result.target}->{result.source} never copied "
        f"to {result.source} (produced there after its last copy); nothing was changed. Choose what happens "
        "to them: `replay` (the groups read them in place, in order) or `aside` (they are copied to "
        f"<topic>{aside_topic('')} on {result.target} and the groups start after them):"
    ]
    for row in result.divergent[:20]:
        lines.append(
            f"  {row['topic']}-{row['partition']}: offsets {row['start']}..{row['end'] - 1} ({row['offsets']:,})"
        )
    if len(tails) > 20:
        lines.append(f"  ... and {len(tails) - 20} more partitions")
    return "\n".join(lines)


def place_around_tails(
    commits: dict[str, dict[tuple[str, int], Committed]],
    on_target: dict[str, dict[tuple[str, int], Committed]],
    tails: dict[tuple[str, int], Tail],
    choice: str | None,
    target: str,
) -> dict[tuple[str, str, int], tuple[int, str]]:
    """Move each group's offset in a partition with a divergent tail as the choice says (in
    place, in `commits`), and return the rows' new offsets with a note saying what the group
    will read. replay: the group reads the tail after what it read elsewhere; if it already read
    part of it on the target before it left (its offset there lies inside the tail), it keeps
    that offset. aside: the group starts after the tail. A dry run without a choice shows replay."""
    placed: dict[tuple[str, str, int], tuple[int, str]] = {}
    for group, offsets in commits.items():
        there = on_target.get(group, {})
        for where, wanted in list(offsets.items()):
            tail = tails.get(where)
            if tail is None:
                continue
            before = there.get(where)
            if choice == ASIDE:
                if before is not None and before.offset > tail.end:
                    continue  # read past the tail on the target: the ahead check refuses it
                offsets[where] = Committed(tail.end, wanted.metadata)
                placed[(group, *where)] = (
                    tail.end,
                    f"{tail.offsets:,} divergent offsets {tail.start}..{tail.end - 1} kept aside in "
                    f"{aside_topic(tail.topic)}, not read",
                )
                continue
            start = wanted.offset
            if before is not None and start < before.offset <= tail.end:
                offsets[where] = Committed(before.offset, before.metadata)
                start = before.offset
                already = f"keeps its offset {start} on {target} (read there before it left); "
            else:
                already = ""
            unread = max(0, tail.end - max(start, tail.start))
            placed[(group, *where)] = (
                start,
                f"{already}reads {unread:,} divergent offsets {max(start, tail.start)}..{tail.end - 1} "
                f"({REPLAY})",
            )
    return placed
