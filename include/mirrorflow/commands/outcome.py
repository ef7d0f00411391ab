"""What a terminal run ends with: its outcome (RunOutcome) and the report that makes it
(finish_run), shared by a batch run (commands/replicate.py), a window (commands/window.py) and
their display (commands/run_display.py).

It imports no other module of commands/, so the three can import it and none imports another
that imports it back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.replicate import run_reading, service
from mirrorflow.replicate.plan import Plan


@dataclasses.dataclass
class RunOutcome:
    planned: dict[str, Any]
    plan: Plan
    summary: dict[str, Any]
    passes: int
    failure: str | None = None


def _stored_summary(clients: FlowClients, plan: Plan, plan_offset: int) -> dict[str, Any]:
    summaries = run_reading.wait_for_run_records(
        clients.target_consumer, plan.flow, plan.run_id, "summary", start=plan_offset
    )
    return summaries[-1]


def finish_run(
    config: MirrorConfig,
    flow: FlowConfig,
    clients: FlowClients,
    planned: dict[str, Any],
    plan: Plan,
    plan_offset: int,
    passes: int,
    failure: str | None = None,
) -> RunOutcome:
    """The run's outcome with its summary: the one report_run stores, or, when the report finds
    the run failed, the summary it stored anyway (`failure` first, else the report's reason)."""
    try:
        summary = service.report_run(
            config,
            flow.source,
            flow.target,
            run_id=plan.run_id,
            plan_offset=plan_offset,
            topic_errors=planned["topic_errors"],
            topic_errors_count=planned["topic_errors_count"],
        )
    except service.RunFailed as exc:
        return RunOutcome(
            planned, plan, _stored_summary(clients, plan, plan_offset), passes, failure or str(exc)
        )
    return RunOutcome(planned, plan, summary, passes, failure)
