"""The migrate and verify trigger forms: the schema holds only what the widgets enforce (so
Airflow never refuses a trigger with a schema dump), and every value is read by the run's first
task, each problem one sentence naming the field by its title and saying what to write."""

from __future__ import annotations

import pytest
from airflow.sdk import Param

from mirrorflow.airflow.forms import (
    COPY_UNTIL,
    GROUPS,
    TOPICS,
    groups_regex,
    migrate_form,
    migrate_form_problems,
    verify_form,
    verify_form_problems,
)
from mirrorflow.config import load_config
from mirrorflow.policy.rules import should_replicate_topic
from mirrorflow.replicate.planner import with_topics
from mirrorflow.replicate.until import UntilError, parse_until, utc_text

CLUSTERS = ["primary", "backup"]
GOOD = {"source": "primary", "target": "backup", "topics": "orders|payments\\..*", "until": "now"}


@pytest.mark.parametrize(
    ("until", "expected"),
    [
        ("now", None),
        ("NOW", None),
        (" now ", None),
        ("", None),
        ("1795680000000", 1_795_680_000_000),
        ("2026-11-21", 1_795_219_200_000),
        ("2026-11-21T17:00", 1_795_280_400_000),
        ("2026-11-21 17:00", 1_795_280_400_000),
        ("2026-11-21T17:00:00Z", 1_795_280_400_000),
        ("2026-11-21t17:00:00z", 1_795_280_400_000),
        ("2026-11-21T18:00:00+01:00", 1_795_280_400_000),
        ("2026-11-21T12:00:00-0500", 1_795_280_400_000),
        ("2026-11-21T18:00+01", 1_795_280_400_000),
        ("2026-11-21 17:00:00.250+00:00", 1_795_280_400_250),
        ("2026-11-21T17:00:00.250123456Z", 1_795_280_400_250),
    ],
)
def test_every_time_the_help_text_promises_is_read(until: str, expected: int | None) -> None:
    assert parse_until(until) == expected
    assert migrate_form_problems(CLUSTERS, {**GOOD, "until": until}) == []


@pytest.mark.parametrize("until", ["yesterday 5pm", "21/11/2026", "2026-11-21T5pm", "-5", "2026-13-01"])
def test_what_is_not_a_time_is_one_sentence_naming_the_field(until: str) -> None:
    (problem,) = migrate_form_problems(CLUSTERS, {**GOOD, "until": until})
    assert problem.startswith(f"{COPY_UNTIL}: ") and problem.endswith(".")
    assert "2026-11-21T17:00:00Z" in problem and "Failed validating" not in problem


def test_epoch_seconds_are_refused_with_the_time_they_would_mean() -> None:
    with pytest.raises(UntilError) as refused:
        parse_until("1795680000")
    told = str(refused.value)
    assert "looks like epoch seconds (2026-11-26 08:00:00 UTC)" in told
    assert "1970-01-21" in told and "write 1795680000000" in told
    assert utc_text(1_795_680_000_123) == "2026-11-26 08:00:00.123 UTC"


def test_the_schema_leaves_every_value_to_the_first_task_and_allows_a_copy_only_migration() -> None:
    for form in (migrate_form(CLUSTERS), verify_form("primary")):
        for name, param in form.items():
            assert not {"pattern", "minLength", "exclusiveMinimum", "maximum"} & set(param.schema), name
    groups = migrate_form(CLUSTERS)["groups"]
    assert "null" in groups.schema["type"]  # Airflow's form marks a field required unless it allows null
    Param(None, **groups.schema).resolve(None)
    assert groups_regex({"groups": None}) is None and groups_regex({"groups": "  "}) is None
    assert groups_regex({"groups": "shop-.*"}) == "shop-.*"


def test_every_problem_names_its_field_and_the_fix() -> None:
    problems = migrate_form_problems(
        CLUSTERS,
        {
            "source": "backup",
            "target": "backup",
            "topics": "orders(",
            "until": "yesterday 5pm",
            "groups": "a[",
        },
    )
    assert len(problems) == 4
    assert (
        problems[0] == "Source cluster and Target cluster are both 'backup': choose two different clusters."
    )
    assert problems[1].startswith(f"{TOPICS}: 'orders(' is not a valid regular expression")
    assert problems[2].startswith(f"{GROUPS}: 'a[' is not a valid regular expression")
    assert problems[3].startswith(f"{COPY_UNTIL}: 'yesterday 5pm' is not a time mirrorflow reads")
    assert migrate_form_problems(CLUSTERS, {**GOOD, "source": "gone"}) == [
        "Source cluster: 'gone' is not a cluster of the config; choose one of primary, backup."
    ]


def test_the_verify_form_reads_its_sample_and_time() -> None:
    assert verify_form_problems({"topics": ".*", "until": "now", "sample": None}) == []
    problems = verify_form_problems({"topics": "orders(", "until": "1795680000", "sample": 2})
    assert [p.split(":")[0] for p in problems] == [TOPICS, "Verify up to", "Sample (fraction)"]


def test_a_migrations_topic_choice_is_all_it_copies() -> None:
    """Issue 23: a migration of `orders` also copied the heartbeats topic, which MM2 adds to every
    flow's topics; a regex that names it still gets it."""
    flow = load_config(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    ).flow("A", "B")
    names = ("orders", "orders-eu", "heartbeats", "billing")
    assert should_replicate_topic(flow, "heartbeats")
    assert [t for t in names if should_replicate_topic(with_topics(flow, "orders"), t)] == ["orders"]
    chosen = with_topics(flow, "orders|heartbeats")
    assert [t for t in names if should_replicate_topic(chosen, t)] == ["orders", "heartbeats"]


def test_the_migrate_form_names_no_topics_until_asked_and_refuses_to_run_without() -> None:
    """Its Topics field defaulted to .*: one click on Trigger migrated every topic of the source
    (issue 36). It starts empty, and a run left so stops at its check saying what to write."""
    defaults = {name: param.value for name, param in migrate_form(CLUSTERS).items()}
    assert defaults["topics"] == ""
    problems = migrate_form_problems(CLUSTERS, {**GOOD, "topics": defaults["topics"]})
    assert problems == [
        f"{TOPICS}: empty; name the topics to copy as a regular expression, such as "
        "orders|payments\\..* (.* for every topic)."
    ]
