"""The migrate trigger form: each field checked when the run is triggered (JSON schema), the
rest by the plan task before anything runs, every problem naming its field."""

from __future__ import annotations

import re

import pytest
from airflow.sdk import Param
from airflow.sdk.exceptions import ParamValidationError

from mirrorflow.airflow.forms import UNTIL_PATTERN, migrate_form_problems
from mirrorflow.replicate.service import parse_until

CLUSTERS = ["primary", "backup"]
GOOD = {"source": "primary", "target": "backup", "topics": "orders|payments\\..*", "until": "now"}


@pytest.mark.parametrize(
    "until",
    [
        "now",
        "NOW",
        " now ",
        "1763740800000",
        "2026-11-21",
        "2026-11-21T17:00",
        "2026-11-21T17:00:00Z",
        "2026-11-21 17:00:00.250+01:00",
        "2026-11-21T17:00:00-0500",
    ],
)
def test_what_the_form_accepts_the_plan_reads(until: str) -> None:
    Param("now", type="string", pattern=UNTIL_PATTERN).resolve(until)
    parse_until(until)
    assert migrate_form_problems(CLUSTERS, {**GOOD, "until": until}) == []


@pytest.mark.parametrize("until", ["yesterday 5pm", "", "21/11/2026", "2026-11-21T5pm", "-5"])
def test_the_form_refuses_what_the_plan_cannot_read(until: str) -> None:
    with pytest.raises(ParamValidationError):
        Param("now", type="string", pattern=UNTIL_PATTERN).resolve(until)


def test_every_problem_names_its_field_and_the_fix() -> None:
    problems = migrate_form_problems(
        CLUSTERS, {"source": "backup", "target": "backup", "topics": "orders(", "until": "yesterday 5pm"}
    )
    assert len(problems) == 3
    assert problems[0].startswith("Source cluster and Target cluster are both 'backup'")
    assert problems[1].startswith("Topics: 'orders(' is not a valid regular expression")
    assert re.match(
        r"Copy up to: 'yesterday 5pm' is not 'now', epoch milliseconds or an ISO-8601 time", problems[2]
    )
    assert migrate_form_problems(CLUSTERS, {**GOOD, "source": "gone"}) == [
        "Source cluster: 'gone' is not a cluster of the config; choose one of primary, backup"
    ]
