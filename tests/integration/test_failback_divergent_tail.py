"""Failback without losing the divergent tail (issue 11, item 4), on real clusters.

A has `T`; A->B copies it to `A.T` on B and B->A copies B's own `T` to `B.T` on A. After one copy,
A takes 20 more records that A->B never copies (the divergent tail), and g2 reads half of them on
A. Both groups fail over to A->B's copies on B, read everything there and what producers wrote to
B's `T` meanwhile; B->A copies that to A. Then the groups fail back to A, and each group's next
reads on A are checked record by record, for both choices of what happens to the tail.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mirrorflow.cli import main
from mirrorflow.ops.divergent_tail import aside_topic
from mirrorflow.ops.failover import FailoverError, failover
from mirrorflow.policy.provenance import read_provenance

from .kafkatools import create_topics, read_all
from .mirror_setup import mm2_config, mm2_text, replicate_once
from .test_failover_helpers import commit_at, committed, consume_rest, produce_numbered


@pytest.mark.parametrize("choice", ["replay", "aside"])
def test_failback_reads_or_keeps_aside_exactly_the_records_never_copied(
    shared_clusters, unique, choice, tmp_path
) -> None:
    a, b, _ = shared_clusters
    topic = unique("dt")
    g1, g2 = unique("g1"), unique("g2")
    config = mm2_config([a, b], ["A->B", "B->A"], f"topics = {topic}\ntasks.max = 1\n")
    create_topics(a.bootstrap, (topic, 1))
    create_topics(b.bootstrap, (topic, 1))
    history = produce_numbered(a.bootstrap, topic, 1, 100)
    replicate_once(config, "A", "B", unique("ab"))
    tail = produce_numbered(a.bootstrap, topic, 1, 20, start=100)
    commit_at(a.bootstrap, g1, {(topic, 0): 40})
    commit_at(a.bootstrap, g2, {(topic, 0): 110})  # read half the tail on A before the failover

    moved = failover(config, "A", "B", f"{g1}|{g2}")
    assert sorted(moved.committed) == sorted([g1, g2]) and moved.divergent == []
    on_b = produce_numbered(b.bootstrap, topic, 1, 10, start=1000)
    read_g1 = consume_rest(b.bootstrap, g1, [f"A.{topic}", topic])
    read_g2 = consume_rest(b.bootstrap, g2, [f"A.{topic}", topic])
    assert sorted(r.payload for r in read_g1) == sorted(history[40:] + on_b)
    assert sorted(r.payload for r in read_g2) == sorted(on_b)  # g2 was ahead: nothing left on A.T
    replicate_once(config, "B", "A", unique("ba"))

    shown = failover(config, "B", "A", f"{g1}|{g2}", dry_run=True)
    assert shown.divergent == [{"topic": topic, "partition": 0, "start": 100, "end": 120, "offsets": 20}]
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B", "B->A"], f"topics = {topic}\n"))
    cli = CliRunner().invoke(
        main, ["failover", str(path), "--from", "B", "--to", "A", "--groups", f"{g1}|{g2}", "--dry-run"]
    )
    assert cli.exit_code == 0, cli.output
    assert "divergent tail on A: never copied to B (not chosen); 1 partition(s)" in cli.output
    assert "100..119" in cli.output
    with pytest.raises(FailoverError, match=rf"{topic}-0: offsets 100\.\.119 \(20\)"):
        failover(config, "B", "A", f"{g1}|{g2}")
    assert committed(a.bootstrap, g1, [(topic, 0)]) == {(topic, 0): 40}  # nothing changed

    back = failover(config, "B", "A", f"{g1}|{g2}", divergent=choice)
    assert sorted(back.committed) == sorted([g1, g2]) and back.divergent_choice == choice
    notes = {r.group: r.note for r in back.rows if r.topic == topic}
    if choice == "replay":
        assert "reads 20 divergent offsets 100..119" in notes[g1]
        assert "keeps its offset 110" in notes[g2] and "reads 10 divergent offsets 110..119" in notes[g2]
    else:
        assert all(f"kept aside in {aside_topic(topic)}" in note for note in notes.values())

    after_g1 = consume_rest(a.bootstrap, g1, [topic, f"B.{topic}"])
    after_g2 = consume_rest(a.bootstrap, g2, [topic, f"B.{topic}"])
    if choice == "replay":
        # Each group reads exactly the tail records it has not read anywhere, in order.
        assert [r.payload for r in after_g1] == tail
        assert [r.payload for r in after_g2] == tail[10:]
        assert committed(a.bootstrap, g2, [(topic, 0)]) == {(topic, 0): 120}
    else:
        assert after_g1 == [] and after_g2 == []
        kept = read_all(a.bootstrap, aside_topic(topic), 0)
        assert [r.value.decode() for r in kept] == tail
        assert [read_provenance(r.headers).source_offset for r in kept] == list(range(100, 120))
        assert back.aside_copied == {aside_topic(topic): 20}
        # Idempotent: a second failback copies nothing again.
        again = failover(config, "B", "A", f"{g1}|{g2}", divergent=choice)
        assert again.aside_copied == {}
        assert len(read_all(a.bootstrap, aside_topic(topic), 0)) == 20
