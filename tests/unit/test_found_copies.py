"""The refusal a plan gives when remote partitions hold records no progress accounts for
(tests/integration/test_progress_lost.py makes it on Kafka): bounded at any partition count."""

from __future__ import annotations

from mirrorflow.replicate.found_copies import NAMED, Candidate, _refusal


def test_the_refusal_of_20000_partitions_names_the_first_and_counts_the_rest() -> None:
    candidates = {(f"t{i:05d}", 0): Candidate(f"t{i:05d}", 0, f"A.t{i:05d}", 0, 7) for i in range(20_000)}
    refused = {where: "its last committed record could not be read in time" for where in candidates}

    text = _refusal("A", candidates, refused, "mm2-offsets.A.internal")

    assert text.startswith("nothing was planned: 20,000 remote partition(s) already hold records")
    assert "A.t00000-0 (offsets 0 to 6): its last committed record could not be read in time" in text
    assert f"A.t{NAMED - 1:05d}-0" in text and f"A.t{NAMED:05d}-0" not in text
    assert f"... and {20_000 - NAMED:,} more" in text
    assert "restore it" in text and "empty its remote partition first" in text
    assert len(text) < 4_000
