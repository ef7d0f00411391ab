"""copy/failures.py: a failed Kafka call beside the copy's clients (the run-records look a window's
writer makes before it writes, RunsTailBehind) is retried with its message, never an unexpected
failure with a traceback (a target killed mid-window once printed one)."""

from __future__ import annotations

from types import SimpleNamespace

from mirrorflow.replicate.copy.failures import retry_or_error
from mirrorflow.replicate.window.channel import RunsTailBehind


def test_a_run_records_look_that_failed_is_retried_without_a_traceback(caplog) -> None:
    copy = SimpleNamespace(result=SimpleNamespace(attempts=1), span=SimpleNamespace(topic="t", partition=0))
    retry, error = retry_or_error(
        copy, RunsTailBehind("the end of mirrorflow-runs.internal could not be read")
    )
    assert (retry, error) == (True, None)
    assert copy.result.attempts == 2
    assert "unexpectedly" not in caplog.text
