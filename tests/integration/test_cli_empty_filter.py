"""Topics that match nothing, from the command line on real clusters (issue 36): a migration that
asked for topics the source does not hold has moved nothing, so it is refused before anything is
planned or created, with the sentence the Airflow form's check gives; a replicate run of a flow
whose filter matches nothing is a scheduled no-op (a topic created later is copied by the next
run), as its DAG run is, and says why it copied nothing."""

from __future__ import annotations

import json

from click.testing import CliRunner
from confluent_kafka.admin import AdminClient

from mirrorflow.cli import main

from .kafkatools import create_topics
from .mirror_setup import mm2_text


def _run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_migration_of_topics_that_match_nothing_is_refused_and_a_replicate_run_is_a_no_op(
    kafka_clusters, unique, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    topic, nosuch = unique("orders"), unique("nosuch")
    create_topics(a.bootstrap, (topic, 1))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {nosuch}.*\n"))

    refused = _run("migrate", config, "--flow", "A->B", "--topics", f"{nosuch}.*")

    assert refused.exit_code == 1, refused.output
    sentence = (
        f"A->B migrate did not start: --topics: '{nosuch}.*' matches no topic of A that can be copied "
        f"(it has 1: {topic}); the expression must match whole names, as A calls them."
    )
    assert sentence in " ".join(refused.stderr.split()), refused.stderr
    assert "run done" not in refused.output
    on_b = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=30).topics
    assert not [t for t in on_b if not t.startswith("__")], "nothing is planned or created"

    as_json = _run("migrate", config, "--flow", "A->B", "--output", "json")
    assert as_json.exit_code == 1, as_json.output
    body = json.loads(as_json.stdout)
    assert body["ok"] is False
    assert body["error"].startswith(f"A->B migrate did not start: A->B.topics: '{nosuch}.*' matches no topic")

    replicated = _run("replicate", config, "--flow", "A->B")
    assert replicated.exit_code == 0, replicated.output
    assert "nothing to copy: no topic of A passes the flow's topic filter" in replicated.output
    assert "OK A->B replicate run done" in replicated.output
