"""validate(): every error and warning names the key, says what is wrong and how to fix it."""

from __future__ import annotations

import pytest

from mirrorflow.config import ConfigError, Problem, Severity, load_config, parse_config, validate

TWO = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
IDENTITY = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"


def _problems(text: str) -> list[Problem]:
    problems = validate(parse_config(text, env={}))
    for problem in problems:
        assert problem.key and problem.message and problem.fix, problem
    return problems


def _by_key(text: str, severity: Severity | None = None) -> dict[str, Problem]:
    return {p.key: p for p in _problems(text) if severity is None or p.severity is severity}


def test_a_clean_config_has_no_problems() -> None:
    assert _problems(TWO) == []


def test_missing_clusters() -> None:
    problem = _by_key("A.bootstrap.servers = a:1\n")["clusters"]
    assert problem.is_error
    assert "clusters = primary, backup" in problem.fix


def test_empty_alias_in_clusters() -> None:
    problem = _by_key(TWO.replace("clusters = A, B", "clusters = A, B,"))["clusters"]
    assert problem.is_error
    assert "stray comma" in problem.fix


def test_unknown_alias_in_flow_key_and_flow_to_itself() -> None:
    errors = _by_key(TWO + "A->C.enabled = true\nA->A.enabled = true\n", Severity.ERROR)
    assert "not listed in clusters: C" in errors["A->C.enabled"].message
    assert "itself" in errors["A->A.enabled"].message


def test_bad_regex_reports_the_joined_pattern() -> None:
    problem = _by_key(TWO + "A->B.topics = orders, (unclosed\n")["A->B.topics"]
    assert problem.is_error
    assert "'orders|(unclosed'" in problem.message


def test_comma_inside_a_quantifier_is_caught() -> None:
    problem = _by_key(TWO + "A->B.groups.exclude = tmp-[0-9]{1,3}\n")["A->B.groups.exclude"]
    assert problem.is_error
    assert "splits this list on commas" in problem.message


def test_missing_bootstrap_servers() -> None:
    text = "clusters = A, B, C\nA.bootstrap.servers = a:1\nA->B.enabled = true\nemit.heartbeats.enabled = false\n"
    errors = _by_key(text, Severity.ERROR)
    assert set(errors) == {"B.bootstrap.servers"}  # C is used by no flow
    assert "used by flow A->B" in errors["B.bootstrap.servers"].message
    assert _by_key(text + "bootstrap.servers = shared:9092\n", Severity.ERROR) == {}
    assert _by_key(text + "B.airflow.connection.id = b_conn\n", Severity.ERROR) == {}
    # with heartbeats on (the default) every listed cluster is in a heartbeat flow
    with_heartbeats = _by_key(
        "clusters = A, B, C\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    )
    assert with_heartbeats["C.bootstrap.servers"].is_error


def test_replication_policy_classes() -> None:
    problem = _by_key(TWO + "replication.policy.class = com.acme.FancyPolicy\n")["replication.policy.class"]
    assert problem.is_error
    assert "cannot import module 'com.acme'" in problem.message
    for name in (
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "org.apache.kafka.mirror.LegacyReplicationPolicy",
    ):
        assert _by_key(TWO + f"replication.policy.class = {name}\n", Severity.ERROR) == {}


def test_identity_cycle_needs_provenance_headers() -> None:
    cycle = TWO + "B->A.enabled = true\n" + IDENTITY
    assert _by_key(cycle, Severity.ERROR) == {}  # provenance headers are on by default
    errors = _by_key(cycle + "mirrorflow.provenance.headers.enabled = false\n", Severity.ERROR)
    problem = errors["mirrorflow.provenance.headers.enabled"]
    assert "loop forever" in problem.message
    one_way = _by_key(cycle + "B->A.mirrorflow.provenance.headers.enabled = false\n", Severity.ERROR)
    assert set(one_way) == {"B->A.mirrorflow.provenance.headers.enabled"}
    default_names = TWO + "B->A.enabled = true\nmirrorflow.provenance.headers.enabled = false\n"
    assert _by_key(default_names, Severity.ERROR) == {}


def test_three_cluster_identity_cycle() -> None:
    text = (
        "clusters = A, B, C\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nC.bootstrap.servers = c:1\n"
        "A->B.enabled = true\nB->C.enabled = true\nC->A.enabled = true\n"
        + IDENTITY
        + "B->C.mirrorflow.provenance.headers.enabled = false\n"
    )
    assert set(_by_key(text, Severity.ERROR)) == {"B->C.mirrorflow.provenance.headers.enabled"}


@pytest.mark.parametrize(
    ("line", "key", "message", "fix"),
    [
        (
            "emit.checkpoints.interval.seconds = 1m",
            "emit.checkpoints.interval.seconds",
            "not an integer number of seconds",
            "write 60",
        ),
        (
            "A->B.refresh.topics.interval.seconds = 10 minutes",
            "A->B.refresh.topics.interval.seconds",
            "not an integer number of seconds",
            "write 600",
        ),
        (
            "admin.timeout.ms = 30s",
            "admin.timeout.ms",
            "not an integer number of milliseconds",
            "write 30000",
        ),
        (
            "offset-syncs.topic.location = both",
            "offset-syncs.topic.location",
            "not one of source, target",
            "write source or target",
        ),
        (
            "mirrorflow.delivery = maybe",
            "mirrorflow.delivery",
            "not a delivery mode",
            "exactly-once or at-least-once",
        ),
        (
            "A->B.mirrorflow.replicate.schedule = every 5 minutes",
            "A->B.mirrorflow.replicate.schedule",
            "not a cron expression",
            "*/5 * * * *",
        ),
        (
            "sync.group.offsets.enabled = yes",
            "sync.group.offsets.enabled",
            "not true or false",
            "true or false",
        ),
        ("replication.factor = 0", "replication.factor", "not a replication factor", "-1"),
        (
            "checkpoints.topic.replication.factor = 40000",
            "checkpoints.topic.replication.factor",
            "does not fit a Java short",
            "-32768..32767",
        ),
        ("mirrorflow.range.max.bytes = 0", "mirrorflow.range.max.bytes", "not positive", "at least 1"),
        (
            "mirrorflow.replicate.mode = streaming",
            "mirrorflow.replicate.mode",
            "not a replication mode",
            "micro-batch",
        ),
        (
            "A->B.mirrorflow.microbatch.interval.ms = 1s",
            "A->B.mirrorflow.microbatch.interval.ms",
            "not an integer number of milliseconds",
            "write 1000",
        ),
        (
            "mirrorflow.microbatch.interval.ms = 5",
            "mirrorflow.microbatch.interval.ms",
            "shorter than 10 ms",
            "at least 10",
        ),
        (
            "mirrorflow.microbatch.window.seconds = 0",
            "mirrorflow.microbatch.window.seconds",
            "not positive",
            "3600",
        ),
        (
            "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.window.seconds = 30\n"
            "mirrorflow.microbatch.interval.ms = 30000",
            "mirrorflow.microbatch.interval.ms",
            "window of 30 s is not longer than one interval (30000 ms)",
            "shorter than the window",
        ),
        (
            "A->B.exactly.once.support = always",
            "A->B.exactly.once.support",
            "not one of requested, required",
            "requested or required",
        ),
        (
            "topic.filter.class = com.acme.MyTopicFilter",
            "topic.filter.class",
            "default filter",
            "topics.exclude",
        ),
        ("A.airflow.connection.id = ", "A.airflow.connection.id", "connection id is empty", "type kafka"),
        (
            "A.ssl.truststore.location = /missing/ts.jks",
            "A.ssl.truststore.location",
            "cannot read /missing/ts.jks",
            "check the path",
        ),
    ],
)
def test_invalid_values(line: str, key: str, message: str, fix: str) -> None:
    problem = _by_key(TWO + line + "\n")[key]
    assert problem.is_error
    assert message in problem.message
    assert fix in problem.fix


def test_valid_schedules() -> None:
    for schedule in ("@continuous", "@hourly", "@once", "0 */2 * * *"):
        assert _by_key(TWO + f"mirrorflow.replicate.schedule = {schedule}\n", Severity.ERROR) == {}


@pytest.mark.parametrize(
    ("line", "key", "fragment"),
    [
        (
            "emit.checkpoints.interval = 10",
            "emit.checkpoints.interval",
            "did you mean emit.checkpoints.interval.seconds?",
        ),
        (
            "sync.topic.configs.strategy = incremental",
            "sync.topic.configs.strategy",
            "config.properties.exclude",
        ),
        (
            "A->B.sync.group.offset.enabled = true",
            "A->B.sync.group.offset.enabled",
            "did you mean sync.group.offsets.enabled?",
        ),
        ("A.topics = orders", "A.topics", "write A->B.topics"),
        (
            "A.consumer.poll.timeout.ms = 500",
            "A.consumer.poll.timeout.ms",
            "write A->B.consumer.poll.timeout.ms",
        ),
        (
            "B.emit.heartbeats.enabled = false",
            "B.emit.heartbeats.enabled",
            "B-><target>.emit.heartbeats.enabled",
        ),
        ("use.defaults.from = source", "use.defaults.from", "write A->B.use.defaults.from"),
        ("exactly.once.support = required", "exactly.once.support", "write A->B.exactly.once.support"),
        ("consumer.max.poll.records = 500", "consumer.max.poll.records", "<alias>.consumer"),
        ("request.timeout.ms = 1000", "request.timeout.ms", "per cluster"),
        ("A.request.timeout.ms = 1000", "A.request.timeout.ms", "A.consumer.request.timeout.ms"),
        ("A->B.security.protocol = SSL", "A->B.security.protocol", "A.security.protocol"),
        ("C.bootstrap.servers = c:1", "C.bootstrap.servers", "add C to clusters"),
        ("topics.blacklist = tmp.*", "topics.blacklist", "rename it to topics.exclude"),
        ("A->B.use.defaults.from = sauce", "A->B.use.defaults.from", "write source or target"),
        ("replication.policy.separator = _ ", "replication.policy.separator", "remove the whitespace"),
        (
            "A->B.emit.offset-syncs.enabled = false",
            "A->B.emit.offset-syncs.enabled",
            "emit.checkpoints.enabled=false",
        ),
        (
            "A.consumer.key.deserializer = org.apache.kafka.common.serialization.StringDeserializer",
            "A.consumer.key.deserializer",
            "remove it",
        ),
        ("A.mirrorflow.delivery = at-least-once", "A.mirrorflow.delivery", "A->B.mirrorflow.delivery"),
        ("clusters = A, B", "clusters", "keep a single clusters line"),
        (
            "A->B.mirrorflow.replicate.mode = micro-batch\nmirrorflow.replicate.schedule = @hourly",
            "mirrorflow.replicate.schedule",
            "mirrorflow.replicate.mode = batch",
        ),
    ],
)
def test_warnings(line: str, key: str, fragment: str) -> None:
    problems = _by_key(TWO + line + "\n")
    assert key in problems, problems
    assert problems[key].severity is Severity.WARNING
    assert fragment in problems[key].fix


def test_known_keys_raise_no_warnings() -> None:
    text = TWO + (
        "tasks.max = 4\nB.exactly.once.source.support = enabled\nB.offset.flush.interval.ms = 10000\n"
        "offset.storage.replication.factor = 1\nA.producer.linger.ms = 5\nA->B.source.consumer.fetch.min.bytes = 1\n"
        "A->B.target.admin.request.timeout.ms = 1\nA->B.producer.override.acks = all\nA->B.transaction.boundary = poll\n"
        "dedicated.mode.enable.internal.rest = true\nkey.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n"
        "security.protocol = PLAINTEXT\nA.ssl.ca.location = /ca.pem\nA->B.name = my-connector\n"
    )
    assert _problems(text) == []


def test_load_config_raises_one_error_with_every_problem() -> None:
    with pytest.raises(ConfigError) as info:
        load_config("A->C.enabled = true\nemit.checkpoints.interval.seconds = 1m\n")
    keys = {p.key for p in info.value.problems if p.is_error}
    assert keys == {"clusters", "A->C.enabled"}
    message = str(info.value)
    assert "clusters is missing" in message and "A->C.enabled" in message


def test_warnings_are_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="mirrorflow.config"):
        config = load_config(TWO + "emit.checkpoints.interval = 10\n")
    assert [p.key for p in config.warnings] == ["emit.checkpoints.interval"]
    assert "emit.checkpoints.interval" in caplog.text
