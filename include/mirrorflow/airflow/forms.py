"""Checks of the migrate and verify trigger forms, so a bad choice fails at once, naming its field.

The form's JSON schema checks each field alone when the run is triggered (the "Copy up to" and
"Verify up to" fields against UNTIL_PATTERN); what it cannot check (two fields together, a
regular expression that must compile, a run conf that skipped the form) is checked by the plan
task before anything runs, and a failure there is final: retrying a form the user filled in
wrongly only delays the message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# What parse_until reads, in the ECMAScript syntax of JSON schema patterns.
UNTIL_PATTERN = (
    r"^\s*([Nn][Oo][Ww]|[0-9]+|[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?)\s*$"
)


def migrate_form_problems(clusters: Sequence[str], params: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a migrate form, each naming its field and the fix."""
    problems = []
    source, target = params.get("source"), params.get("target")
    for field, title in (("source", "Source cluster"), ("target", "Target cluster")):
        if params.get(field) not in clusters:
            problems.append(
                f"{title}: {params.get(field)!r} is not a cluster of the config; choose one of {', '.join(clusters)}"
            )
    if source == target:
        problems.append(
            f"Source cluster and Target cluster are both {source!r}: choose two different clusters"
        )
    groups = params.get("groups")
    if groups:
        try:
            re.compile(groups)
        except re.error as exc:
            problems.append(f"Consumer groups to move: {groups!r} is not a valid regular expression ({exc})")
    return problems + _topics_and_until_problems(params, "Copy up to")


def verify_form_problems(params: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a verify form, each naming its field and the fix."""
    problems = _topics_and_until_problems(params, "Verify up to")
    try:
        sample_fraction(params.get("sample"))
    except ValueError:
        problems.append(
            f"Sample: {params.get('sample')!r} is not a fraction in (0, 1] such as 0.1; leave it empty to "
            "verify every record"
        )
    return problems


def sample_fraction(value: Any) -> float | None:
    """The form's sample as the fraction to verify: None (every record) when left empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(value)
    fraction = float(value)
    if not 0 < fraction <= 1:
        raise ValueError(value)
    return fraction


def _topics_and_until_problems(params: Mapping[str, Any], until_title: str) -> list[str]:
    from mirrorflow.replicate.service import parse_until  # Kafka clients: not at DAG parse time

    problems = []
    try:
        re.compile(str(params.get("topics") or ""))
    except re.error as exc:
        problems.append(f"Topics: {params.get('topics')!r} is not a valid regular expression ({exc})")
    try:
        parse_until(params.get("until"))
    except ValueError:
        problems.append(
            f"{until_title}: {params.get('until')!r} is not 'now', epoch milliseconds or an ISO-8601 time "
            "such as 2026-11-21T17:00:00Z (UTC when no zone is given)"
        )
    return problems
