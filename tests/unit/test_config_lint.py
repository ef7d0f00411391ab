"""Config lint for files copied from blog posts: quotes and trailing comments (which Java's
Properties keeps in the value), globs where MM2 wants regexes, keys from other tools' docs,
durations written with a unit, no flow enabled, and files that are not properties at all."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mirrorflow.cli import main
from mirrorflow.config import Problem, load_config, parse_config, validate
from mirrorflow.config.problems import printable, warning
from mirrorflow.config.properties import key_lines, raw_values

TWO = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def _problems(text: str) -> dict[str, list[Problem]]:
    found: dict[str, list[Problem]] = {}
    for problem in validate(parse_config(text)):
        found.setdefault(problem.key, []).append(problem)
    return found


def _one(text: str, key: str) -> Problem:
    problems = _problems(text)[key]
    assert len(problems) == 1, problems
    return problems[0]


def test_quoted_value_with_a_trailing_comment_names_line_value_and_fix() -> None:
    problem = _one(TWO + 'topics = ".*" # Match all topics\n', "topics")
    assert not problem.is_error
    assert problem.message.startswith("line 5: ")
    assert "no end-of-line comments" in problem.message
    assert "quotes are part of the value" in problem.message
    assert "'\".*\" # Match all topics'" in problem.message  # what Java reads
    assert problem.fix.startswith("write topics = .* ")
    # the value really is what the warning says, so the filter selects nothing
    flow = load_config(TWO + 'topics = ".*" # Match all topics\n').flow("A", "B")
    assert not flow.topic_filter.should_replicate_topic("orders")


def test_quoted_list_of_globs_gets_the_regexes_to_write() -> None:
    problem = _one(TWO + 'topics.exclude="*.internal,__.*"\n', "topics.exclude")
    assert "line 5" in problem.message
    assert problem.fix.startswith("write topics.exclude = .*\\.internal, __.*")
    assert "is a glob, not a regex" in problem.fix


def test_comment_after_a_plain_value_and_bang_comments() -> None:
    problem = _one(TWO.replace("a:9092", "a:9092 # primary"), "A.bootstrap.servers")
    assert "line 2" in problem.message
    assert problem.fix.startswith("write A.bootstrap.servers = a:9092 and put the comment on a line")
    groups = _one(TWO + "A->B.groups = app-.* ! every app\n", "A->B.groups")
    assert "'! every app' is part of the value" in groups.message
    assert groups.fix.startswith("write A->B.groups = app-.* ")


def test_values_that_only_contain_hashes_or_quotes_inside_are_fine() -> None:
    text = TWO + "topics = orders#1, pay-.*\nA->B.source.consumer.client.id = a'b\n"
    assert "topics" not in _problems(text)
    assert "A->B.source.consumer.client.id" not in _problems(text)


def test_quoted_secret_is_reported_without_its_value() -> None:
    problem = _one(TWO + 'A.sasl.password = "s3cr3t-value"\n', "A.sasl.password")
    assert "s3cr3t" not in str(problem)
    assert "secret value not shown" in problem.message
    assert problem.fix == "write the value without the quotes"


def test_invalid_glob_is_an_error_with_the_regex_to_write() -> None:
    problem = _one(TWO + "topics.exclude = *.internal, __.*\n", "topics.exclude")
    assert problem.is_error
    assert "item '*.internal' is not a valid regular expression" in problem.message
    assert "glob" in problem.message
    assert problem.fix == "write .*\\.internal instead of *.internal"


def test_valid_regex_that_reads_like_a_glob_is_a_warning() -> None:
    problem = _one(TWO + "A->B.topics = orders-*, payments\n", "A->B.topics")
    assert not problem.is_error
    assert "'orders-*' reads as a glob but is a regex" in problem.message
    assert problem.fix == "write orders-.* in A->B.topics"
    assert "topics" not in _problems(TWO + "topics = orders.*, (pay|bill)-.*\n")


def test_key_from_another_tool_says_what_mm2_does_instead() -> None:
    problem = _one(TWO + "sync.topic.configs.strategy = incremental\n", "sync.topic.configs.strategy")
    assert "did you mean" not in problem.fix
    assert "there is no sync.topic.configs.strategy setting in MM2" in problem.message
    assert "config.properties.exclude" in problem.fix
    replicator = _one(TWO + "topic.rename.format = ${topic}.replica\n", "topic.rename.format")
    assert "replication.policy.class" in replicator.fix


def test_suggestions_only_for_typos_not_for_other_words() -> None:
    typo = _one(TWO + "sync.topic.config.enabled = false\n", "sync.topic.config.enabled")
    assert typo.fix == "did you mean sync.topic.configs.enabled?"
    other = _one(TWO + "sync.topic.configs.mode = all\n", "sync.topic.configs.mode")
    assert "did you mean" not in other.fix


def test_duration_with_a_unit_gets_the_seconds_key_and_the_number() -> None:
    cases = {
        "emit.checkpoints.interval = 1m": "emit.checkpoints.interval.seconds = 60",
        "refresh.topics.interval = 2h": "refresh.topics.interval.seconds = 7200",
        "sync.group.offsets.interval.ms = 30000": "sync.group.offsets.interval.seconds = 30",
        "emit.heartbeats.interval = 500ms": "emit.heartbeats.interval.seconds = 1",
        "A->B.emit.checkpoints.interval = 5 min": "A->B.emit.checkpoints.interval.seconds = 300",
    }
    for line, wanted in cases.items():
        key = line.split(" = ")[0]
        problem = _one(TWO + line + "\n", key)
        assert f"use {wanted}" in problem.fix, (line, problem)
    assert (
        "'1m' means 60 s"
        in _one(TWO + "emit.checkpoints.interval = 1m\n", "emit.checkpoints.interval").message
    )


def test_no_flow_enabled_is_an_error_in_validate_with_the_keys_to_add(tmp_path: Path) -> None:
    config = tmp_path / "aggregation.properties"
    config.write_text(
        "clusters = east, west, target\neast.bootstrap.servers = e:9092\nwest.bootstrap.servers = w:9092\n"
        "target.bootstrap.servers = t:9092\neast->target.topics = .*\nwest->target.topics = .*\n"
    )
    result = CliRunner().invoke(main, ["validate", str(config), "--output", "json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.output)
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert "nothing is replicated" in problem["problem"]
    assert problem["fix"].endswith("east->target.enabled = true; west->target.enabled = true")
    load_config(config)  # still usable for a one-off migrate, heartbeats or status


def test_binary_file_is_one_finding_and_no_raw_control_bytes(tmp_path: Path) -> None:
    binary = tmp_path / "mm2.properties"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 20 + b"\nkey=\x1b[31mvalue\n")
    result = CliRunner().invoke(main, ["validate", str(binary)])
    assert result.exit_code == 1
    assert "not a properties file" in result.output
    assert "unknown key" not in result.output
    assert not any(ord(c) < 32 and c not in "\n" for c in result.output)
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes(TWO.encode() + "# Größe\ntopics = caf\xe9.*\n".encode("iso-8859-1"))
    result = CliRunner().invoke(main, ["validate", str(latin1), "--output", "json"])
    assert result.exit_code == 0, result.output


def test_control_characters_are_escaped_in_every_finding() -> None:
    problem = warning("a\x1b[2Jb", "x\x00y\u202e", "z\x07")
    assert (problem.key, problem.message, problem.fix) == ("a\\x1b[2Jb", "x\\x00y\\u202e", "z\\x07")
    found = _problems(TWO + "tab\\u001bkey = 1\n")
    assert "tab\\x1bkey" in found
    assert printable("grüße, 東京") == "grüße, 東京"


def test_key_lines_follow_continuations_and_escapes() -> None:
    text = "# c\nlist = a, \\\n  b\n\nkey\\ with\\ space = 1\nA->B.enabled: true\nlast\n"
    assert key_lines(text) == {"list": 2, "key with space": 5, "A->B.enabled": 6, "last": 7}


def test_a_regex_backslash_java_drops_is_said_with_what_it_became_and_how_to_keep_it() -> None:
    problem = _one(TWO + "A->B.topics = trickle\\..*, orders\\\\.eu\n", "A->B.topics")
    assert not problem.is_error
    assert problem.message.startswith("line 5: Java's Properties drops a backslash")
    assert "(\\.)" in problem.message
    assert "reaches MM2 as A->B.topics = trickle..*, orders\\.eu" in problem.message
    assert problem.fix.startswith("write A->B.topics = trickle\\\\..*, orders\\\\.eu ")
    assert parse_config(TWO + "A->B.topics = trickle\\..*\n").flow("A", "B").topics == ("trickle..*",)
    assert "(\\d, \\.)" in _one(TWO + "topics.exclude = \\d+\\.tmp\n", "topics.exclude").message
    quiet = TWO + "topics = orders\\\\.eu, tab\\tx\nA.consumer.client.id = a\\.b\n"
    assert not {"topics", "A.consumer.client.id"} & set(_problems(quiet))


def test_raw_values_are_the_values_as_written() -> None:
    text = "a = x\\.y\nb: p\\\n   q\\d\nc   \\u0041\\.\na = last\\.\n"
    assert raw_values(text) == {"a": "last\\.", "b": "pq\\d", "c": "\\u0041\\."}
