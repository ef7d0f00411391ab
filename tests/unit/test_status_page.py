"""The status page's rendering (no Kafka: statuses as mirror_status returns them): Airflow's
colour tokens in both modes, times, health thresholds, links into Airflow's UI, sparklines, paused
DAG hints and a page bounded in size at 20,000 partitions."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from mirrorflow.airflow import status_links
from mirrorflow.airflow.status_cells import sparkline, time_html
from mirrorflow.airflow.status_flows import PageView
from mirrorflow.airflow.status_links import (
    AirflowFacts,
    DagRunFacts,
    dag_url,
    paused_hints,
    run_url,
    task_url,
)
from mirrorflow.airflow.status_page import render_content, render_page
from mirrorflow.airflow.status_tables import PAGE_ROWS, topic_rows
from mirrorflow.config import load_config
from mirrorflow.control.mirror_status import ClusterStatus, FlowStatus, MirrorStatus, UpstreamStatus
from mirrorflow.control.status_health import (
    BAD,
    OK,
    UNKNOWN,
    WARN,
    Thresholds,
    heartbeat_expected_s,
    schedule_period_s,
    span,
)
from mirrorflow.control.status_snapshots import LagHistory

T0 = 1_700_000_000_000
RUN = "scheduled__2023-11-14T22:10:00+00:00"
SNAPSHOT = {"refresh_interval_s": 15.0, "refresh_error": None}


def config(extra: str = ""):
    return load_config(
        "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "C.bootstrap.servers = c:9092\nA->B.enabled = true\nB->C.enabled = true\n" + extra
    )


def flow(**changes) -> FlowStatus:
    values = {
        "last_run": {
            "run_id": RUN,
            "mode": "replicate",
            "totals": {"records": 7, "failed_partitions": 0, "lag_left": 0},
            "topics": {"orders": {"partitions": 2, "records": 7, "failed": 0, "lost_to_retention": 0}},
            "topics_count": 1,
            "failed": [],
        },
        "last_run_ms": T0 - 60_000,
        "lag": {"orders": 3},
        "as_of_ms": T0,
    }
    values.update(changes)
    return FlowStatus("A->B", "A", "B", **values)


def status(*flows: FlowStatus, upstreams: list[UpstreamStatus] | None = None) -> MirrorStatus:
    return MirrorStatus(
        T0,
        [
            ClusterStatus("A", "DefaultReplicationPolicy", as_of_ms=T0),
            ClusterStatus("B", "DefaultReplicationPolicy", upstreams=upstreams or [], as_of_ms=T0),
        ],
        list(flows) or [flow()],
    )


def view(current: MirrorStatus, **changes) -> PageView:
    values = {"status": current, "snapshot": SNAPSHOT, "banners": [], "now_ms": T0, "config": config()}
    values.update(changes)
    return PageView(**values)


def test_both_colour_modes_use_airflows_tokens_and_follow_the_parent_ui() -> None:
    page = render_page(view(status()), refresh_s=15, theme=None)
    css = page[page.index("<style>") : page.index("</style>")]
    # Airflow 3.3's own values: its navy "black", its gray and its success green (oklch)
    for token in ("oklch(0.23185 0.0323 266.44)", "oklch(0.955 0.006 253)", "oklch(0.47 0.20 149.0)"):
        assert token in css, token
    light = re.search(r":root\{([^}]*)\}", css).group(1)
    dark = re.search(r':root\[data-theme="dark"\]\{([^}]*)\}', css).group(1)
    assert "--bg:var(--white)" in light and "--bg:var(--black)" in dark
    assert "--fg:var(--black)" in light and "--fg:var(--gray-50)" in dark
    assert "prefers-color-scheme:dark" in css
    assert 'font-family:Inter,-apple-system,BlinkMacSystemFont,"Segoe UI"' in css
    script = page[page.index("<script>") :]
    # The UI marks its mode as class dark/light on <html>: read it, and watch it change.
    assert 'classList.contains("dark")' in script and "new MutationObserver(theme)" in script
    assert "<html>" in page, "no mode forced without ?theme"
    forced = render_page(view(status()), refresh_s=15, theme="dark")
    assert '<html data-theme="dark" style="color-scheme:dark">' in forced
    assert "<html>" in render_page(view(status()), refresh_s=15, theme="bogus")


def test_auto_refresh_reloads_the_fragment_and_can_be_paused() -> None:
    page = render_page(view(status()), refresh_s=30, theme=None)
    assert "const REFRESH=30000," in page and 'fetch("ui?fragment=1"' in page
    assert '<button id="pause"' in page and 'id="updated"' in page
    assert "const REFRESH=5000," in render_page(view(status()), refresh_s=1, theme=None)
    collecting = render_content(view(None, snapshot={**SNAPSHOT, "refresh_error": "boom"}))
    assert "data-collecting" in collecting and "boom" in collecting


def test_times_show_their_age_and_the_exact_utc_time_on_hover() -> None:
    shown = time_html(T0 - 125_500, T0)
    assert 'title="2023-11-14 22:11:14 UTC"' in shown and 'data-ms="1699999874500"' in shown
    assert 'datetime="2023-11-14T22:11:14Z"' in shown
    assert "2 min 5 s ago" in shown
    assert ".500" not in shown and ".000" not in shown, "no milliseconds"
    assert "never" in time_html(None, T0)
    script = render_page(view(status()), refresh_s=15, theme=None)
    # the browser rewrites each time in its own zone, to the second, and keeps the age current
    assert 'second:"2-digit"' in script and "millisecond" not in script.lower()
    assert "setInterval(stamp,1000)" in script


def test_thresholds_are_multiples_of_the_schedules() -> None:
    limits = Thresholds()
    assert schedule_period_s("*/5 * * * *") == 300
    assert schedule_period_s("0 9 * * 1-5") == 3 * 86_400, "the longest gap: Friday to Monday"
    assert schedule_period_s("@hourly") == 3_600 and schedule_period_s("@once") is None
    assert limits.grade(899, 300, "last run").level == OK
    assert limits.grade(900, 300, "last run").level == WARN
    assert limits.grade(3_000, 300, "last run").level == BAD
    assert limits.grade(None, 300, "last run").level == BAD
    assert limits.grade(10, None, "last run").level == UNKNOWN
    assert limits.grade(1, 300, "last run").why == (
        "last run: expected every 5 min; green under 15 min, amber under 50 min, red beyond"
    )
    assert [span(s) for s in (45, 300, 9_000, 3 * 86_400)] == ["45 s", "5 min", "2 h 30 min", "3 d"]

    # A heartbeat reaches C from A through B: A's emit interval (1 s, MM2's default) plus the
    # schedules of A->B (5 min, the default) and B->C (an hour here).
    cfg = config("B->C.mirrorflow.replicate.schedule = @hourly\n")
    assert heartbeat_expected_s(cfg, "C", "B.A.heartbeats") == 1 + 300 + 3_600
    assert heartbeat_expected_s(cfg, "B", "A.heartbeats") == 1 + 300
    assert heartbeat_expected_s(cfg, "B", None) is None


def test_thresholds_from_the_environment() -> None:
    assert Thresholds.from_env({}) == Thresholds(3.0, 10.0)
    assert Thresholds.from_env(
        {"MIRRORFLOW_STATUS_AMBER_FACTOR": "2", "MIRRORFLOW_STATUS_RED_FACTOR": "4"}
    ) == (Thresholds(2.0, 4.0))
    for bad in ({"MIRRORFLOW_STATUS_AMBER_FACTOR": "soon"}, {"MIRRORFLOW_STATUS_RED_FACTOR": "2"}):
        with pytest.raises(ValueError, match="MIRRORFLOW_STATUS_"):
            Thresholds.from_env(bad)


def badges(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<span class="badge (ok|warn|bad|unknown)"[^>]*>([^<]*)</span>', page)


def test_health_colours_of_flows_and_heartbeats() -> None:
    young = upstream(200_000)
    page = render_content(view(status(flow(), upstreams=[young])))
    # the flow's copy, its verification (none yet), B's upstream A
    assert badges(page)[:3] == [("ok", "copying"), ("unknown", "never verified"), ("ok", "healthy")]

    failed = flow(last_run_ms=T0 - 60_000)
    failed.last_run = {**failed.last_run, "totals": {"records": 7, "failed_partitions": 2}}
    assert badges(render_content(view(status(failed))))[0] == ("bad", "failed")
    stale_run = flow(last_run_ms=T0 - 20 * 60_000)  # 20 min against a 5 min schedule: amber
    assert badges(render_content(view(status(stale_run))))[0] == ("warn", "late")
    # A failed verification is the verification badge's, not the copy's.
    verdict = flow(last_verification={"run_id": "v", "verdict": "failed"}, last_verification_ms=T0)
    assert badges(render_content(view(status(verdict))))[:2] == [("ok", "copying"), ("bad", "failed")]
    never = flow(last_run=None, last_run_ms=None)
    assert badges(render_content(view(status(never))))[0] == ("unknown", "no run yet")
    old_beat = render_content(view(status(flow(), upstreams=[upstream(4_000_000)])))
    clusters = old_beat[old_beat.index("<h2>Clusters") : old_beat.index("<h2>Heartbeats written")]
    assert badges(clusters) == [("bad", "late")], "66 min against 301 s x 10"
    assert 'title="newest heartbeat: expected every 5 min; green under 15 min, amber under 50 min' in old_beat


def upstream(age_ms: int) -> UpstreamStatus:
    return UpstreamStatus("A", 1, T0 - age_ms, age_ms / 1000, "A.heartbeats")


def test_links_to_dags_runs_and_task_logs() -> None:
    assert dag_url("mirrorflow__A__B__replicate") == "../dags/mirrorflow__A__B__replicate"
    assert run_url("d", RUN) == "../dags/d/runs/scheduled__2023-11-14T22%3A10%3A00%2B00%3A00"
    assert task_url("d", "r 1", "copy") == "../dags/d/runs/r%201/tasks/copy"

    failing = flow()
    failing.last_run = {
        **failing.last_run,
        "totals": {"records": 7, "failed_partitions": 1},
        "failed": [{"topic": "orders", "partition": 1, "error": "boom"}],
    }
    page = render_content(view(status(failing)))
    run = run_url("mirrorflow__A__B__replicate", RUN)
    assert '<a href="../dags/mirrorflow__A__B__replicate" target="_top"' in page
    assert f'<a href="{run}" target="_top"' in page
    assert f'<a href="{run}/tasks/report" target="_top"' in page
    assert f'<a href="{run}/tasks/copy" target="_top"' in page

    # With Airflow to ask: a migration's figures link to the migration DAG's run; the flow's
    # last run is its replication DAG's newest, with its state and every step's log; a run
    # Airflow never had (started from the CLI) is plain text.
    migrated = flow()
    migrated.last_run = {**migrated.last_run, "mode": "migrate"}
    newest = DagRunFacts("scheduled__2023-11-14T22:15:00+00:00", "success", T0 - 30_000, T0 - 20_000)
    facts = AirflowFacts(
        dags=frozenset(),
        runs={("mirrorflow_migrate", RUN): "success"},
        last_run={"mirrorflow__A__B__replicate": newest},
        last_success={"mirrorflow__A__B__replicate": newest},
    )
    page = render_content(view(status(migrated), facts=facts))
    assert f'href="{run_url("mirrorflow_migrate", RUN)}"' in page
    assert '<span class="badge state-success">success</span>' in page
    replicated = run_url("mirrorflow__A__B__replicate", newest.run_id)
    for step in ("plan", "copy", "report"):
        assert f'<a href="{replicated}/tasks/{step}" target="_top"' in page
    cli = render_content(view(status(flow()), facts=AirflowFacts(dags=frozenset())))
    assert "/runs/" not in cli and "not an Airflow run" in cli


def test_dag_ids_match_the_dag_builders() -> None:
    pytest.importorskip("airflow.sdk")
    from mirrorflow.airflow.maintenance import HEARTBEATS_DAG_ID
    from mirrorflow.airflow.migrate import MIGRATE_DAG_ID
    from mirrorflow.airflow.replicate import replicate_dag_id
    from mirrorflow.airflow.verify import verify_dag_id

    assert status_links.replicate_dag_id("A", "B") == replicate_dag_id("A", "B")
    assert status_links.HEARTBEATS_DAG_ID == HEARTBEATS_DAG_ID
    assert status_links.verify_dag_id("A", "B") == verify_dag_id("A", "B")
    assert status_links.MIGRATE_DAG_ID == MIGRATE_DAG_ID


def test_sparkline_of_a_history() -> None:
    points = [(T0 + i * 15_000, lag) for i, lag in enumerate((10, 40, 25, 0))]
    svg = ET.fromstring(sparkline(points, "lag now"))
    line = svg.find("polyline").get("points").split()
    assert len(line) == 4
    xs = [float(p.split(",")[0]) for p in line]
    ys = [float(p.split(",")[1]) for p in line]
    assert xs == sorted(xs) and xs[0] == 2.0 and xs[-1] == 94.0
    assert ys.index(min(ys)) == 1 and ys.index(max(ys)) == 3, "highest lag at the top, 0 at the bottom"
    assert svg.find("title").text == "lag now over the last 4 reads (45 s): min 0, max 40, now 0"
    assert sparkline(points[:1], "lag now") == ""


def test_history_is_bounded_in_points_and_topics() -> None:
    history = LagHistory(points=5, topics=3, kept=4)
    for i in range(8):
        lag = {f"t{n}": (n * 10 if i < 4 else 100 - n) for n in range(10)}
        history.record(MirrorStatus(T0 + i, [], [FlowStatus("A->B", "A", "B", lag=lag)]))
    assert [v for _, v in history.flow("A->B")][-1] == sum(100 - n for n in range(10))
    assert len(history.flow("A->B")) == 5
    assert history.tracked_topics("A->B") == 4
    assert [v for _, v in history.topic("A->B", "t0")] == [100, 100, 100, 100]
    # a stale snapshot adds nothing; a flow gone from the config is forgotten
    history.record(MirrorStatus(T0 + 9, [], [FlowStatus("A->B", "A", "B", lag={"t0": 1}, stale=True)]))
    assert history.flow("A->B")[-1][0] == T0 + 7
    history.record(MirrorStatus(T0 + 10, [], []))
    assert history.flow("A->B") == [] and history.tracked_topics("A->B") == 0


def test_paused_heartbeat_dags_are_named_where_upstreams_are_missing() -> None:
    cfg = config()
    facts = AirflowFacts(
        dags=frozenset({"mirrorflow_heartbeats", "mirrorflow__A__B__replicate"}),
        paused=frozenset({"mirrorflow_heartbeats", "mirrorflow__A__B__replicate"}),
    )
    current = status(flow())
    hints = paused_hints(current, cfg, facts)
    assert [h["text"] for h in hints] == [
        "A->B: the replication DAG mirrorflow__A__B__replicate is paused: unpause it in Airflow",
        "upstreams of B: the heartbeat DAG mirrorflow_heartbeats is paused: unpause it in Airflow",
    ]
    page = render_content(view(current, facts=facts, hints=hints))
    row = re.search(r"<tr><td>B</td><td>(.*?)</td>", page).group(1)
    assert "no upstream clusters" in row
    assert "the heartbeat DAG mirrorflow_heartbeats is paused: unpause it in Airflow" in row
    assert paused_hints(current, cfg, AirflowFacts()) == []


def test_a_20000_partition_flow_shows_its_worst_topics_in_a_bounded_page() -> None:
    lag = {f"topic-{n:05d}": n % 1000 for n in range(20_000)}
    big = flow(lag=lag)
    big.last_run = {**big.last_run, "topics": {"topic-00007": {"partitions": 1, "records": 1, "failed": 1}}}
    big.last_run["topics_count"] = 20_000
    shown, total = topic_rows(big)
    assert total == 20_000 and len(shown) == PAGE_ROWS
    assert shown[0]["topic"] == "topic-00007", "failed partitions first"
    assert [r["lag"] for r in shown[1:4]] == [999, 999, 999]
    history = LagHistory()
    for i in range(60):
        history.record(MirrorStatus(T0 + i * 15_000, [], [FlowStatus("A->B", "A", "B", lag=lag)]))
    page = render_page(view(status(big), history=history), refresh_s=15, theme=None)
    assert "… and 19,950 more topic(s)" in page
    assert page.count('<svg class="spark"') <= PAGE_ROWS + 1
    assert len(page) < 150_000, len(page)


def test_airflow_is_asked_once_per_interval_and_a_failure_costs_only_the_links() -> None:
    from mirrorflow.airflow.status_app import FactsCache

    asked: list[tuple[list[str], list[tuple[str, str]]]] = []

    def reader(dags, runs) -> AirflowFacts:
        asked.append((list(dags), list(runs)))
        return AirflowFacts(dags=frozenset(dags), paused=frozenset(dags))

    cache = FactsCache(reader, ttl_s=60)
    current = status(flow())
    first = cache.get(current, config())
    assert cache.get(current, config()) is first and len(asked) == 1
    dags, runs = asked[0]
    assert dags == [
        "mirrorflow__A__B__replicate",
        "mirrorflow__A__B__verify",
        "mirrorflow_heartbeats",
        "mirrorflow_migrate",
    ]
    assert runs == sorted([("mirrorflow__A__B__replicate", RUN), ("mirrorflow_migrate", RUN)])

    def broken(dags, runs) -> AirflowFacts:
        raise RuntimeError("database is locked")

    assert FactsCache(broken, ttl_s=60).get(current, config()) == AirflowFacts()
    assert FactsCache(None, ttl_s=60).get(current, config()) == AirflowFacts()


def test_a_failed_last_run_is_red_beside_the_last_success_and_counted_in_metrics() -> None:
    from mirrorflow.airflow.status_metrics import AirflowRunsCollector
    from mirrorflow.metrics import render

    dag = "mirrorflow__A__B__replicate"
    failed = DagRunFacts("manual__2023-11-14T22:12:00+00:00", "failed", T0 - 50_000, T0 - 40_000)
    good = DagRunFacts(RUN, "success", T0 - 200_000, T0 - 190_000)
    facts = AirflowFacts(
        dags=frozenset([dag]),
        last_run={dag: failed},
        last_finished={dag: failed},
        last_success={dag: good},
        failed_runs={dag: 3},
    )
    current = status(flow())
    page = render_content(view(current, facts=facts))
    # The summary in Kafka is a good one (the failed run wrote none): the flow is red all the same.
    assert badges(page)[0] == ("bad", "failed")
    assert '<span class="badge state-failed">failed</span>' in page
    assert "last success <time" in page and f'href="{run_url(dag, failed.run_id)}/tasks/plan"' in page
    # The next run under way does not clear the red: the last one that ended failed.
    retrying = DagRunFacts("scheduled__2023-11-14T22:15:00+00:00", "running", T0 - 5_000)
    never = AirflowFacts(
        dags=frozenset([dag]), last_run={dag: retrying}, last_finished={dag: failed}, failed_runs={dag: 1}
    )
    again = render_content(view(current, facts=never))
    assert badges(again)[0] == ("bad", "failed") and "no successful run yet" in again
    assert '<span class="badge state-running">running</span>' in again
    retried = render(current, now_ms=T0, extra=[AirflowRunsCollector(current, never)]).decode()
    assert 'mirrorflow_flow_last_run_failed{flow="A->B"} 1.0' in retried
    assert f'mirrorflow_dag_last_run_state{{dag_id="{dag}",flow="A->B",state="running"}} 1.0' in retried

    text = render(current, now_ms=T0, extra=[AirflowRunsCollector(current, facts)]).decode()
    labels = f'dag_id="{dag}",flow="A->B"'
    assert f"mirrorflow_dag_runs_failed_total{{{labels}}} 3.0" in text
    assert f'mirrorflow_dag_last_run_state{{{labels},state="failed"}} 1.0' in text
    assert f'mirrorflow_dag_last_run_state{{{labels},state="success"}} 0.0' in text
    (success,) = [
        line for line in text.splitlines() if line.startswith("mirrorflow_dag_last_success_timestamp")
    ]
    assert float(success.split()[-1]) == (T0 - 190_000) / 1000
    assert 'mirrorflow_flow_last_run_failed{flow="A->B"} 1.0' in text
    # Without Airflow to ask (the CLI, a test client) there are no such series.
    assert (
        "mirrorflow_dag_"
        not in render(current, now_ms=T0, extra=[AirflowRunsCollector(current, AirflowFacts())]).decode()
    )


def test_a_heartbeat_read_before_its_cluster_stopped_answering_is_stale_not_healthy() -> None:
    current = status(flow(), upstreams=[upstream(60_000)])
    down = current.cluster("B")
    down.stale, down.error, down.unreachable_since_ms = True, "cluster B did not answer", T0 - 30_000
    page = render_content(view(current))
    clusters = page[page.index("<h2>Clusters") : page.index("<h2>Heartbeats written")]
    assert badges(clusters) == [("warn", "stale")]
    assert "B does not answer since" in clusters


def test_migrations_and_verifications_are_listed_with_their_verdicts_and_logs() -> None:
    history = [
        {
            "kind": "verification",
            "at_ms": T0 - 10_000,
            "run_id": "v2",
            "verdict": "incomplete",
            "matched": 300,
            "wrong_total": 0,
            "pending": 50,
            "sample": None,
        },
        {
            "kind": "migration",
            "at_ms": T0 - 20_000,
            "run_id": "m2",
            "outcome": "The cut-over was rejected: ...",
            "done": False,
            "approval": "rejected",
            "records": 0,
            "verdict": None,
            "groups_moved": 0,
            "groups_blocked": 0,
        },
        {
            "kind": "migration",
            "at_ms": T0 - 30_000,
            "run_id": "m1",
            "outcome": "The migration is done: ...",
            "done": True,
            "approval": "approved",
            "records": 200,
            "verdict": "verified",
            "groups_moved": 1,
            "groups_blocked": 1,
        },
    ]
    facts = AirflowFacts(
        dags=frozenset(),
        runs={
            ("mirrorflow__A__B__verify", "v2"): "failed",
            ("mirrorflow_migrate", "m2"): "failed",
            ("mirrorflow_migrate", "m1"): "success",
        },
    )
    page = render_content(view(status(flow(history=history)), facts=facts))
    table = page[page.index("Migrations and verifications") :]
    assert [b for b in badges(table)][:3] == [("warn", "incomplete"), ("warn", "rejected"), ("ok", "done")]
    assert f'href="{run_url("mirrorflow_migrate", "m1")}/tasks/final_report"' in table
    assert f'href="{run_url("mirrorflow__A__B__verify", "v2")}/tasks/report"' in table
    # Offsets not copied yet are work to do: never in red.
    assert "50 not copied yet" in table and 'class="fg-bad">50' not in table
    assert "200 record(s) copied; verification verified; 1 group(s) moved, 1 blocked" in table


def test_the_flow_shows_its_configured_cap_and_the_rate_its_last_run_reached() -> None:
    from mirrorflow.metrics import render

    run = {**flow().last_run, "seconds": 4.0, "totals": {"records": 7, "bytes": 6 * 1024 * 1024}}
    capped = flow(last_run=run, max_bytes_per_second=2 * 1024 * 1024)
    page = render_content(view(status(capped)))
    assert "<th>Byte rate</th>" in page
    assert "1.5 MiB/s" in page and "cap 2.0 MiB/s" in page
    text = render(status(capped), now_ms=T0).decode()
    assert 'mirrorflow_flow_last_run_bytes_per_second{flow="A->B"} 1.572864e+06' in text
    assert 'mirrorflow_flow_max_bytes_per_second{flow="A->B"} 2.097152e+06' in text
    # No cap is 0, and a summary without the copy's time has no achieved rate to show.
    uncapped = status(flow())
    assert "no cap" in render_content(view(uncapped))
    text = render(uncapped, now_ms=T0).decode()
    assert 'mirrorflow_flow_max_bytes_per_second{flow="A->B"} 0.0' in text
    assert "mirrorflow_flow_last_run_bytes_per_second{" not in text


def test_the_status_read_takes_each_flows_cap_from_the_config() -> None:
    from mirrorflow.control.mirror_status import flow_status

    flows = config("A->B.mirrorflow.replicate.max.bytes.per.second = 1048576\n").flows
    rows = {
        f.name: flow_status(f, {f.target: "down"}, connection_extra=None, timeout_s=1, now_ms=T0)
        for f in flows
    }
    assert rows["A->B"].max_bytes_per_second == 1048576 and rows["B->C"].max_bytes_per_second == 0


def test_a_topic_that_left_the_flow_leaves_the_topics_table() -> None:
    """The last run's summary (a micro-batch window's comes only at its end) still named a topic
    removed from the flow, and the page kept showing it (issue 36). The lag now, measured over the
    flow's topics as they are, decides which topics the flow has."""
    left = flow(lag={"orders": 3})
    left.last_run = {
        **left.last_run,
        "topics": {"orders": {"partitions": 1, "records": 5}, "retired": {"partitions": 1, "records": 9}},
        "topics_count": 2,
    }
    shown, total = topic_rows(left)
    assert [row["topic"] for row in shown] == ["orders"] and total == 1
    unmeasured = flow(lag=None)
    unmeasured.last_run = left.last_run
    assert {row["topic"] for row in topic_rows(unmeasured)[0]} == {"orders", "retired"}


def test_a_running_window_shows_its_figures_so_far_not_the_last_summary() -> None:
    """During a window the row showed the previous run's figures ("Last copy 4 min 43 s ago")
    while hundreds of records a second were copied: a window's summary comes only at its end
    (issue 36). A window whose tasks stored figures after the newest summary stands for the flow."""
    window = {
        "run_id": "window-7",
        "at_ms": T0 - 5_000,
        "tasks": 2,
        "partitions": 8,
        "records": 98_997,
        "lag_now_s": 0.3,
        "lag_recent_s": {"p50": 0.2, "p99": 0.4, "max": 0.5},
        "topics": {},
    }
    page = render_content(view(status(flow(window=window))))
    row = re.search(r"<tr><td>.*?A-&gt;B.*?</tr>", page, re.S).group(0)
    assert "the running window" in row and "98,997" in row and "window-7" in row
    assert "record(s) by the running window" in row
    ended = render_content(view(status(flow(window={**window, "at_ms": T0 - 120_000}))))
    row = re.search(r"<tr><td>.*?A-&gt;B.*?</tr>", ended, re.S).group(0)
    assert "the running window" not in row, "a window older than the newest summary is over"
