"""How a mirrorflow task fails: the cause first, in words, then Airflow's traceback.

Airflow logs a failed task as "Task failed with exception" and a traceback of its own runner's
frames, the error's text coming last, as one long line the log viewer cuts. So a failing step
logs its error at ERROR first, one line per line of the message, and keeps it in the task's XCom
under ERROR_KEY, where a later step (the migration's final report) reads why a step failed
without opening its log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import NoReturn

log = logging.getLogger("mirrorflow.airflow")

ERROR_KEY = "error"
ERROR_CHARS = 2000  # of an error kept in XCom; the log has all of it


def told(exc: BaseException) -> str:
    """An error's own words: its message, or its type where it has none."""
    return str(exc).strip() or type(exc).__name__


def record_error(message: str) -> None:
    """Log `message` at ERROR, line by line, and keep it in this task's XCom under ERROR_KEY."""
    from airflow.sdk import get_current_context

    for line in message.splitlines() or [message]:
        log.error("%s", line)
    try:
        get_current_context()["ti"].xcom_push(key=ERROR_KEY, value=message[:ERROR_CHARS])
    except Exception as exc:  # noqa: BLE001 - the log line above is what matters; XCom is a courtesy
        log.warning("the error could not be kept in XCom: %s", exc)


@contextmanager
def failing_at_once(*also: type[Exception]) -> Iterator[None]:
    """Fail the task without retries, with the error's message alone, where retrying cannot help.
    A cluster that did not answer has had its whole wait (mirrorflow.cluster.unreachable.timeout.ms)
    already: the task fails at once with that one message instead of being retried into minutes
    of the same wait; the next run is the retry. A missing ACL is not granted by waiting either,
    nor is anything in `also` (errors only a change of config or request fixes). Any other error
    is told first too, then raised as it is (Airflow may retry it)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from mirrorflow.kafka import ClusterUnreachable
    from mirrorflow.ops.acl_check import MissingAcl

    try:
        yield
    except AirflowSkipException:
        raise
    except AirflowFailException as exc:
        record_error(told(exc))
        raise
    except (ClusterUnreachable, MissingAcl, *also) as exc:
        record_error(told(exc))
        raise AirflowFailException(told(exc)) from None
    except Exception as exc:
        record_error(f"{type(exc).__name__}: {told(exc)}")
        raise


def stop_the_run(message: str, *, keep: Iterable[str]) -> NoReturn:
    """Fail this task with `message` and mark every task after it skipped but those in `keep`
    (the run's final report, which then tells the outcome).

    A failed first task would otherwise leave every later task upstream_failed: a column of
    failures under the one that matters, in the grid and in any summary of the run. Steps that
    never started because the request was refused are not failures; they did not run. Airflow's
    SkipMixin skips downstream tasks only from a task that then succeeds, so this sends the same
    request to the task's supervisor (SkipDownstreamTasks, Airflow 3.3's execution API) and
    fails."""
    from airflow.sdk import get_current_context
    from airflow.sdk.exceptions import AirflowFailException

    kept = set(keep)
    skip_tasks(sorted(get_current_context()["task"].get_flat_relative_ids(upstream=False) - kept))
    raise AirflowFailException(message)


def skip_tasks(task_ids: list[str]) -> None:
    """Ask this task's supervisor to mark `task_ids` of this run skipped (SkipDownstreamTasks,
    Airflow 3.3's execution API), whatever this task then ends as. SkipMixin does the same only
    for a task that then succeeds."""
    from airflow.sdk.execution_time.comms import SkipDownstreamTasks
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    if task_ids:
        SUPERVISOR_COMMS.send(msg=SkipDownstreamTasks(tasks=task_ids))
