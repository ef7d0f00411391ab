"""Which of a partition's offset-syncs describe its source and remote topics as they are now.

A topic deleted and created again keeps its name and starts its offsets over. Syncs written for
the old remote topic point at target offsets that now hold other records (with identity names,
records produced locally to the new topic), and arithmetic or MM2's rule on them would place a
group there: it would skip records or read them again after a failover. So a pass reads the
topics' IDs (one call per cluster) and uses only the syncs written for those IDs. When there are
none yet (the topic was recreated and not copied since), the partition is not translated: a
replicate run copies into the new topic first, and its syncs and progress then name it.

Syncs that name no incarnation (MirrorMaker 2's, an older mirrorflow's) are used where nothing
contradicts them: the stored progress names these very topics (or nothing, as MM2's does), and a
copy into the current incarnation continued them rather than starting the topic over (see
SyncIndex.legacy); those below the floor progress records (where the current source topic's copy
began) belong to an earlier source topic. Where a copy of this incarnation wrote syncs too, a
sync without an incarnation is kept only where it fits between them on both sides.
"""

from __future__ import annotations

from bisect import bisect_left
from enum import StrEnum

from mirrorflow.control.translation.rule import SyncRun
from mirrorflow.control.translation.sync_index import NO_SYNCS, SyncIndex
from mirrorflow.replicate.progress import Stored, split_incarnation


class Recreated(StrEnum):
    """Which topic was deleted and created again since the flow last copied the partition."""

    SOURCE = "source"
    REMOTE = "remote"


def recreated(incarnation: str, source_id: str, remote_id: str) -> Recreated | None:
    """Which of the topics an incarnation names is not the current one; IDs not known on either
    side ("") contradict nothing."""
    was_source, was_remote, _ = split_incarnation(incarnation)
    if was_source and source_id and was_source != source_id:
        return Recreated.SOURCE
    if was_remote and remote_id and was_remote != remote_id:
        return Recreated.REMOTE
    return None


def current_syncs(
    index: SyncIndex, topic: str, partition: int, source_id: str, remote_id: str, stored: Stored | None
) -> SyncRun | Recreated:
    """The partition's syncs for the topics with these IDs ("" where not known), or which topic
    was recreated since the flow last copied the partition (nothing to translate with yet).
    Having no syncs at all is no contradiction: the provenance headers still answer."""
    if stored is not None and (changed := recreated(stored.incarnation, source_id, remote_id)):
        return changed
    named = index.incarnations(topic, partition)
    matching = [i for i in named if recreated(i, source_id, remote_id) is None]
    current = matching[-1] if matching else ""
    ours = index.run(topic, partition, current) if current else NO_SYNCS
    legacy = index.legacy(topic, partition, continued_by=current)
    if legacy and stored is not None and stored.floor:
        legacy = legacy[bisect_left(legacy.downs, stored.floor) :]
    if ours and legacy:
        return fitted(ours, legacy)
    if ours or legacy:
        return ours or legacy
    if named and (stored is None or not stored.incarnation):
        return recreated(named[-1], source_id, remote_id) or NO_SYNCS
    # Progress names these topics: a copy wrote into them, and its syncs were lost (written to
    # the source after its commit, by a writer that died before).
    return NO_SYNCS


def fitted(ours: SyncRun, legacy: SyncRun) -> SyncRun:
    """`ours` with each of the `legacy` syncs that lies strictly between its neighbours on both
    sides; one that does not fit (or repeats one of ours) is left out."""
    ups: list[int] = []
    downs: list[int] = []
    runs: list[int] = []
    i, n = 0, len(ours)
    for k in range(len(legacy)):
        up, down = legacy.ups[k], legacy.downs[k]
        while i < n and ours.downs[i] <= down:
            ups.append(ours.ups[i])
            downs.append(ours.downs[i])
            runs.append(ours.runs[i])
            i += 1
        after_previous = not ups or (ups[-1] < up and downs[-1] < down)
        before_next = i == n or (up < ours.ups[i] and down < ours.downs[i])
        if after_previous and before_next:
            ups.append(up)
            downs.append(down)
            runs.append(legacy.runs[k])
    ups.extend(ours.ups[i:])
    downs.extend(ours.downs[i:])
    runs.extend(ours.runs[i:])
    marks = [m for m in (ours.recopied, legacy.recopied) if m is not None]
    return SyncRun(tuple(ups), tuple(downs), tuple(runs), max(marks) if marks else None)
