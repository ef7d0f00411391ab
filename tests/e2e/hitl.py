"""Answer an Airflow human-in-the-loop task from outside its run, as a person in the UI does.

`airflow dags test` keeps a run alive while a task waits in AWAITING_INPUT and never answers it
itself; the Required Actions UI (the core API's HITL route) records the answer in the metadata
DB and resumes the task. This does the same against the test's SQLite DB, in a separate process
with the run's Airflow environment."""

from __future__ import annotations

import subprocess
import sys
import time

from mirrorflow.airflow.local import AirflowHome

_ANSWER = r"""
import sys
from sqlalchemy import select
from airflow._shared.timezones import timezone
from airflow.models.hitl import HITLDetail, HITLUser
from airflow.models.taskinstance import TaskInstance
from airflow.models.trigger import handle_event_submit
from airflow.triggers.base import TriggerEvent
from airflow.utils.session import create_session
from airflow.utils.state import TaskInstanceState

dag_id, task_id, option = sys.argv[1:4]
with create_session() as session:
    ti = session.scalars(
        select(TaskInstance).where(
            TaskInstance.dag_id == dag_id,
            TaskInstance.task_id == task_id,
            TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
        )
    ).first()
    if ti is None:
        print("waiting")
        sys.exit(0)
    detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
    print("body:", detail.body)
    detail.responded_by = HITLUser(id="tester", name="tester")
    detail.responded_at = timezone.utcnow()
    detail.chosen_options = [option]
    detail.params_input = {}
    session.add(detail)
    handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)
    print("answered")
"""


def answer(
    home: AirflowHome, env: dict[str, str], dag_id: str, task_id: str, option: str, timeout_s: float
) -> str:
    """Wait until `task_id` of `dag_id` awaits input, choose `option`; returns the body it showed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        proc = subprocess.run(
            [sys.executable, "-c", _ANSWER, dag_id, task_id, option],
            env=home.env(env),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode == 0 and "answered" in proc.stdout:
            return proc.stdout
        time.sleep(2)
    raise AssertionError(f"{dag_id}.{task_id} never waited for input within {timeout_s:.0f}s")
