"""The copy engine's cheap per-record path: run-end feeding of offset-syncs and client defaults."""

from __future__ import annotations

import random

import pytest

from mirrorflow.replicate.copy import CopyJob, feed_runs, source_consumer_config
from mirrorflow.replicate.offset_syncs import DenseSyncEmitter


def _increasing(rng: random.Random, count: int, start: int, gap_chance: float) -> list[int]:
    out, value = [], start
    for _ in range(count):
        out.append(value)
        value += 1 if rng.random() > gap_chance else rng.randint(2, 5)
    return out


def _syncs(chunks: list[tuple[list[int], list[int]]], *, per_record: bool) -> list[tuple[int, int, int]]:
    emitter = DenseSyncEmitter()
    out = []
    for ups, downs in chunks:
        if per_record:
            for up, down in zip(ups, downs, strict=True):
                emitter.record(up, down)
        else:
            feed_runs(emitter, ups, downs)
        emitter.boundary()
        out.extend((p.upstream, p.downstream, p.run) for p in emitter.drain())
    return out


@pytest.mark.parametrize("seed", range(40))
def test_feeding_run_ends_gives_the_syncs_of_feeding_every_record(seed: int) -> None:
    rng = random.Random(seed)
    chunks = []
    up, down = rng.randint(0, 50), rng.randint(0, 50)
    for _ in range(rng.randint(1, 4)):
        count = rng.choice([0, 1, 2, 3, rng.randint(4, 60)])
        ups = _increasing(rng, count, up, rng.choice([0.0, 0.05, 0.4]))
        downs = _increasing(rng, count, down, rng.choice([0.0, 0.05, 0.4]))
        chunks.append((ups, downs))
        if count:
            # The next chunk starts after a commit marker on the target, maybe after a source gap.
            up, down = ups[-1] + rng.randint(1, 3), downs[-1] + 2
    assert _syncs(chunks, per_record=False) == _syncs(chunks, per_record=True)


def test_one_contiguous_chunk_takes_a_sync_at_each_end() -> None:
    assert _syncs([(list(range(100, 2100)), range(7, 2007))], per_record=False) == [
        (100, 7, 0),
        (2099, 2006, 1999),
    ]


def _job(source_consumer: dict[str, object]) -> CopyJob:
    return CopyJob(
        run_id="r",
        source="A",
        target="B",
        exactly_once=True,
        max_records=10,
        max_bytes=1000,
        provenance=True,
        progress_topic="mm2-offsets.A.internal",
        offset_syncs_topic=None,
        offset_syncs_on_target=False,
        source_consumer=source_consumer,
        target_producer={},
        target_consumer={},
        source_producer={},
    )


def test_the_copy_consumer_does_not_sit_out_librdkafkas_fetch_backoff() -> None:
    assert source_consumer_config(_job({"bootstrap.servers": "a:9092"}))["fetch.queue.backoff.ms"] == 10


def test_the_users_consumer_settings_win_over_the_copy_defaults() -> None:
    user = {
        "bootstrap.servers": "a:9092",
        "fetch.queue.backoff.ms": "250",
        "isolation.level": "read_uncommitted",
    }
    config = source_consumer_config(_job(user))
    assert (config["fetch.queue.backoff.ms"], config["isolation.level"]) == ("250", "read_uncommitted")
    assert (config["enable.auto.commit"], config["enable.partition.eof"]) == (False, True)
