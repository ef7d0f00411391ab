"""How a Spark job of mirrorflow tells the Airflow task that ran it that a cluster was lost.

A job whose copy found the source or the target unreachable exits with LOST_EXIT after one
ERROR line that starts with LOST_MARK and holds the sentence a plan says for a cluster that does
not answer (mirrorflow.clients.lost_cluster). The task (airflow/operators.py) fails with that
sentence alone and without retries: the copy waited out mirrorflow.cluster.unreachable.timeout.ms
already, and the next scheduled run is the retry. This module imports nothing of Spark or
Airflow: both sides read it.
"""

from __future__ import annotations

LOST_MARK = "mirrorflow lost a cluster: "
LOST_EXIT = 3


def lost_line(sentence: str) -> str:
    return LOST_MARK + " ".join(sentence.split())


def lost_sentence(line: str) -> str | None:
    """The sentence of a job's LOST_MARK line (as logged, with any prefix), or None."""
    at = line.find(LOST_MARK)
    return None if at < 0 else line[at + len(LOST_MARK) :].strip()
