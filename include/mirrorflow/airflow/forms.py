"""The migrate and verify trigger forms, and what is checked of them before anything runs.

Airflow checks a form against its JSON schema when the run is triggered, and tells a value it
refuses as a schema dump (`'x' does not match '^...' Failed validating 'pattern' in schema ...`)
after the button was pressed. So the schemas here hold only what the widgets themselves enforce
(types, drop-downs, switches, an empty "groups" allowed), and every value is read by the run's
first task, which fails alone, at once and without retries, with one sentence per problem
naming the field by the title the form shows: a retry cannot fix a form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Param

from mirrorflow.replicate.until import EXAMPLE_ISO, UntilError, parse_until

TOPICS = "Topics (regex, full match)"
GROUPS = "Consumer groups to move (regex)"
COPY_UNTIL = "Copy up to"
VERIFY_UNTIL = "Verify up to"
SAMPLE = "Sample (fraction)"
UNTIL_HELP = (
    f"'now', epoch milliseconds such as 1795680000000, or an ISO-8601 date or time such as {EXAMPLE_ISO}, "
    "2026-11-21 17:00 or 2026-11-21T18:00:00+01:00 (UTC when no zone is given)"
)


def migrate_form(clusters: list[str]) -> dict[str, Param]:
    return {
        "source": Param(
            clusters[0],
            enum=clusters,
            title="Source cluster",
            description="The cluster to copy from (an alias of the config's clusters).",
        ),
        "target": Param(
            clusters[-1],
            enum=clusters,
            title="Target cluster",
            description="The cluster to copy to; it must differ from the source. Topics get the "
            "replication policy's remote names there (source.topic by default).",
        ),
        "topics": Param(
            # Empty: a migration names what it moves. With .* here, one click on Trigger migrated
            # every topic of the source.
            "",
            type="string",
            title=TOPICS,
            description="Required: which source topics to copy, as one regular expression that must match "
            "the whole name, e.g. orders|payments\\..* (.* for every topic); internal topics are never "
            "copied, heartbeat topics only when the expression names them. It must match at least one "
            "topic of the source.",
        ),
        "until": Param(
            "now",
            type="string",
            title=COPY_UNTIL,
            description=f"{UNTIL_HELP}. 'now' is each partition's end when the run starts; for a time, each "
            "partition is copied up to its first offset at or after that time. Epoch seconds are refused.",
        ),
        "delivery": Param(
            "exactly-once",
            enum=["exactly-once", "at-least-once"],
            title="Delivery guarantee",
            description="exactly-once: each range and its progress commit in one transaction (the "
            "default); at-least-once: plain writes, a retried range may be written twice.",
        ),
        "verify": Param(
            True,
            type="boolean",
            title="Verify the copy",
            description="Compare every copied record with its source (key, value, headers, timestamp, "
            "order) up to exactly where the copy stopped; any verdict but verified stops the cut-over.",
        ),
        "groups": Param(
            None,
            type=["null", "string"],
            title=GROUPS,
            description="Groups to fail over from source to target after the copy, as one regular "
            "expression matching whole names, e.g. orders-.* ; empty: move no group (copy only). A group "
            "whose partitions were not copied and verified up to its committed offsets is not moved.",
        ),
        "approval": Param(
            True,
            type="boolean",
            title="Ask for approval",
            description="Before moving groups, wait for a person to approve in Airflow (Required "
            "actions), shown what was copied and verified and every group's translated offsets. Reject "
            "changes nothing.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run of the cut-over",
            description="Walk the whole path (verify, approval, cut-over) without committing any offset: "
            "the cut-over shows what it would commit.",
        ),
    }


def verify_form(source: str) -> dict[str, Param]:
    return {
        "topics": Param(
            ".*",
            type="string",
            title=TOPICS,
            description=f"Which of {source}'s topics to verify, as one regular expression that must match "
            "the whole name, e.g. orders|payments\\..* ; .* (the default) means the flow's own topics "
            "(its topics and topics.exclude settings). Internal topics are never verified.",
        ),
        "until": Param(
            "now",
            type="string",
            title=VERIFY_UNTIL,
            description=f"{UNTIL_HELP}. 'now' is each partition's last stable offset when the run starts; "
            "for a time, each partition is verified up to its first offset at or after that time. Offsets "
            "the flow has not copied yet are reported as pending, and the verdict is then incomplete.",
        ),
        "sample": Param(
            None,
            type=["null", "number"],
            title=SAMPLE,
            description="Empty: compare every record. A fraction above 0 and at most 1, such as 0.05: "
            "compare random stretches of 1,000 consecutive offsets covering that share of each partition, "
            "every record of a stretch exactly; the summary states what the sample proves.",
        ),
    }


def groups_regex(params: Mapping[str, Any]) -> str | None:
    """The form's groups regex, None for a copy-only migration (the field left empty)."""
    value = params.get("groups")
    return value if isinstance(value, str) and value.strip() else None


def migrate_form_problems(clusters: Sequence[str], params: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a migrate form that needs no cluster to tell, each a sentence
    naming its field and the fix."""
    problems = []
    source, target = params.get("source"), params.get("target")
    for field, title in (("source", "Source cluster"), ("target", "Target cluster")):
        if params.get(field) not in clusters:
            problems.append(
                f"{title}: {params.get(field)!r} is not a cluster of the config; choose one of "
                f"{', '.join(clusters)}."
            )
    if source == target:
        problems.append(
            f"Source cluster and Target cluster are both {source!r}: choose two different clusters."
        )
    problems += _regex_problems(params.get("topics"), TOPICS, required=True)
    problems += _regex_problems(groups_regex(params), GROUPS, required=False)
    return problems + _until_problems(params.get("until"), COPY_UNTIL)


def verify_form_problems(params: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a verify form, each a sentence naming its field and the fix."""
    problems = _regex_problems(params.get("topics"), TOPICS, required=True)
    problems += _until_problems(params.get("until"), VERIFY_UNTIL)
    try:
        sample_fraction(params.get("sample"))
    except ValueError:
        problems.append(
            f"{SAMPLE}: {params.get('sample')!r} is not a fraction above 0 and at most 1 such as 0.1; "
            "leave it empty to verify every record."
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


def _regex_problems(value: Any, title: str, *, required: bool) -> list[str]:
    if value is None or (isinstance(value, str) and not value.strip()):
        return (
            [
                f"{title}: empty; name the topics to copy as a regular expression, such as orders|payments\\..* (.* for every topic)."
            ]
            if required
            else []
        )
    if not isinstance(value, str):
        return [f"{title}: {value!r} is not text; write a regular expression such as orders-.*."]
    try:
        re.compile(value)
    except re.error as exc:
        return [f"{title}: {value!r} is not a valid regular expression ({exc})."]
    return []


def _until_problems(value: Any, title: str) -> list[str]:
    try:
        parse_until(value)
    except UntilError as exc:
        return [f"{title}: {exc}."]
    return []
