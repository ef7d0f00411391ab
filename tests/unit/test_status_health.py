"""Health on the status page judged by what each flow does (no Kafka: statuses as mirror_status
returns them): a micro-batch flow by its window, a batch flow by its schedule, heartbeats by their
emit interval; the copy badge apart from the last verification's verdict; a heartbeat DAG run that
stopped shown, with what to do."""

from __future__ import annotations

import re

from mirrorflow.airflow.status_flows import PageView, flow_health
from mirrorflow.airflow.status_heartbeats import heartbeat_run_hints
from mirrorflow.airflow.status_links import HEARTBEATS_DAG_ID, AirflowFacts, DagRunFacts
from mirrorflow.airflow.status_metrics import HealthCollector
from mirrorflow.airflow.status_page import render_content
from mirrorflow.config import load_config
from mirrorflow.control.mirror_status import ClusterStatus, FlowStatus, MirrorStatus, UpstreamStatus
from mirrorflow.control.status_copy import copy_health, verification_health
from mirrorflow.control.status_health import (
    BAD,
    OK,
    UNKNOWN,
    WARN,
    Thresholds,
    heartbeat_expected_s,
    hop_delivery_s,
)
from mirrorflow.metrics import render

T0 = 1_700_000_000_000
MIN = 60_000
MICRO = "A->B.mirrorflow.replicate.mode = micro-batch\n"
SNAPSHOT = {"refresh_interval_s": 15.0, "refresh_error": None}


def config(extra: str = ""):
    return load_config(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\n" + extra
    )


def summary(**totals) -> dict:
    return {
        "run_id": "scheduled__2023-11-14T21:00:00+00:00",
        "mode": "replicate",
        "totals": {"records": 7, "failed_partitions": 0, "lag_left": 0, **totals},
        "topics": {},
        "failed": [],
    }


def window(at_ms: int) -> dict:
    return {
        "run_id": "scheduled__2023-11-14T22:00:00+00:00",
        "at_ms": at_ms,
        "tasks": 2,
        "partitions": 8,
        "records": 1_000,
        "lag_now_s": 0.3,
        "lag_recent_s": {"p50": 0.2, "p99": 0.4, "max": 0.5},
        "topics": {},
    }


def flow(**changes) -> FlowStatus:
    values = {"last_run": summary(), "last_run_ms": T0 - 2 * MIN, "lag": {"orders": 0}, "as_of_ms": T0}
    values.update(changes)
    return FlowStatus("A->B", "A", "B", **values)


def copy_of(current: FlowStatus, cfg, **kwargs):
    return copy_health(
        current,
        cfg.flow("A", "B"),
        failed_run=kwargs.get("failed_run"),
        now_ms=kwargs.get("now_ms", T0),
        thresholds=Thresholds(),
        read_ms=kwargs.get("read_ms", T0),
    )


def status(*flows: FlowStatus, upstreams=(), jobs=None) -> MirrorStatus:
    return MirrorStatus(
        T0,
        [
            ClusterStatus("A", "DefaultReplicationPolicy", heartbeat_jobs=jobs or {}, as_of_ms=T0),
            ClusterStatus("B", "DefaultReplicationPolicy", upstreams=list(upstreams), as_of_ms=T0),
        ],
        list(flows) or [flow()],
    )


def view(current: MirrorStatus, cfg, **changes) -> PageView:
    values = {"status": current, "snapshot": SNAPSHOT, "banners": [], "now_ms": T0, "config": cfg}
    values.update(changes)
    return PageView(**values)


def badges(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<span class="badge (ok|warn|bad|unknown)"[^>]*>([^<]*)</span>', page)


def heartbeats_section(page: str) -> str:
    return page[page.index("<h2>Heartbeats written") : page.index('class="legend"')]


def test_a_micro_batch_flows_heartbeat_is_judged_by_its_interval_not_a_schedule_it_does_not_run() -> None:
    micro = config(MICRO)
    # A's heartbeats reach B with the window's next batch (250 ms), not on */5 * * * *.
    assert hop_delivery_s(micro.flow("A", "B")) == 0.25
    assert heartbeat_expected_s(micro, "B", "A.heartbeats") == 1.25
    assert heartbeat_expected_s(config(), "B", "A.heartbeats") == 1 + 300, "a batch hop keeps its schedule"
    # The operator's page: backup's heartbeat from primary 14 min old, on a flow with 0.3 s lag.
    old = UpstreamStatus("A", 1, T0 - 14 * MIN, 14 * 60.0, "A.heartbeats")
    current = status(flow(window=window(T0 - 3_000)), upstreams=[old])
    page = render_content(view(current, micro))
    clusters = page[page.index("<h2>Clusters") : page.index("<h2>Heartbeats written")]
    assert badges(clusters) == [("bad", "late")], clusters
    assert "newest heartbeat 14 min ago; expected every 1.25 s" in clusters, "the cause, without hovering"
    # Younger than the thresholds (each a heartbeat run's start-up later): healthy.
    young = UpstreamStatus("A", 1, T0 - 20_000, 20.0, "A.heartbeats")
    page = render_content(view(status(flow(window=window(T0 - 3_000)), upstreams=[young]), micro))
    clusters = page[page.index("<h2>Clusters") : page.index("<h2>Heartbeats written")]
    assert badges(clusters) == [("ok", "healthy")]


def test_a_heartbeat_written_into_a_cluster_is_late_past_its_emit_interval_whatever_the_schedule() -> None:
    # B->A writes into A's `heartbeats` every second (MM2's default): 14 min old is red, even with
    # every replication flow on an hourly schedule; the heartbeat DAG's hourly runs do not count.
    cfg = config("A->B.mirrorflow.replicate.schedule = @hourly\n")
    current = status(jobs={"B->A": T0 - 14 * MIN})
    page = render_content(view(current, cfg))
    beats = heartbeats_section(page)
    # A -> B wrote nothing into B yet (grey); B -> A wrote into A 14 min ago (red).
    assert badges(beats) == [("unknown", "none yet"), ("bad", "late")]
    assert "newest heartbeat 14 min ago; expected every 1 s" in beats
    fresh = render_content(view(status(jobs={"B->A": T0 - 2_000}), cfg))
    assert badges(heartbeats_section(fresh)) == [("unknown", "none yet"), ("ok", "healthy")]


def test_a_micro_batch_flow_between_window_ends_is_copying() -> None:
    micro = config(MICRO)
    # The last window's summary is 50 min old (windows end hourly); its running window stored its
    # status 3 s before the page's read: copying, not late against a 5 min schedule.
    between = flow(last_run_ms=T0 - 50 * MIN, window=window(T0 - 3_000))
    health = copy_of(between, micro)
    assert (health.level, health.label) == (OK, "copying"), health
    assert health.cause == "window status 3 s ago; expected every 5 s"
    # Its window stopped storing status: late within a minute, whatever the hourly summary says.
    stopped = copy_of(flow(last_run_ms=T0 - 5 * MIN, window=window(T0 - 30_000)), micro)
    assert (stopped.level, stopped.label) == (WARN, "late")
    assert copy_of(flow(last_run_ms=T0 - 50 * MIN, window=window(T0 - 20 * MIN)), micro).level == BAD
    # Without a window to read, its last window's summary against the window's length (an hour).
    assert copy_of(flow(last_run_ms=T0 - 50 * MIN), micro).label == "copying"
    assert copy_of(flow(last_run_ms=T0 - 4 * 60 * MIN), micro).label == "late"
    # A first window still running (no summary yet) is copying, not "no run yet".
    first = copy_of(flow(last_run=None, last_run_ms=None, window=window(T0 - 2_000)), micro)
    assert first.label == "copying"


def test_a_batch_flow_keeps_its_schedule() -> None:
    batch = config()
    assert copy_of(flow(last_run_ms=T0 - 2 * MIN), batch).label == "copying"
    late = copy_of(flow(last_run_ms=T0 - 20 * MIN), batch)
    assert (late.level, late.label) == (WARN, "late")
    assert late.why == "last run: expected every 5 min; green under 15 min, amber under 50 min, red beyond"
    assert late.cause == "last run 20 min ago; expected every 5 min"
    assert copy_of(flow(last_run_ms=T0 - 60 * MIN), batch).level == BAD
    # A window record of an earlier micro-batch life does not stand in for the batch run.
    assert copy_of(flow(last_run_ms=T0 - 60 * MIN, window=window(T0 - 1_000)), batch).level == BAD
    hourly = config("A->B.mirrorflow.replicate.schedule = @hourly\n")
    assert copy_of(flow(last_run_ms=T0 - 60 * MIN), hourly).label == "copying"
    manual = copy_of(flow(), config("A->B.mirrorflow.replicate.schedule = @once\n"))
    assert (manual.level, manual.label) == (UNKNOWN, "no schedule")


def test_an_old_failed_verification_leaves_the_copy_alone_and_has_a_badge_of_its_own() -> None:
    cfg = config()
    verdict = {"run_id": "verify-1", "verdict": "failed", "matched": 20, "wrong_total": 3, "pending": 0}
    verified_long_ago = flow(last_verification=verdict, last_verification_ms=T0 - 3 * 86_400_000)
    health = copy_of(verified_long_ago, cfg)
    assert (health.level, health.label) == (OK, "copying")
    check = verification_health(verified_long_ago)
    assert (check.level, check.label, check.cause) == (BAD, "failed", "3 wrong, 20 equal")
    page = render_content(view(status(verified_long_ago), cfg))
    assert "<th>Copy</th><th>Verification</th>" in page
    row = re.search(r"<tbody><tr>(.*?)</tr>", page).group(1)
    assert badges(row)[:2] == [("ok", "copying"), ("bad", "failed")]
    assert '<div class="sub cause">3 wrong, 20 equal</div>' in row
    assert '<div class="sub cause">last run 2 min ago; expected every 5 min</div>' in row
    never = render_content(view(status(flow()), cfg))
    assert badges(re.search(r"<tbody><tr>(.*?)</tr>", never).group(1))[:2] == [
        ("ok", "copying"),
        ("unknown", "never verified"),
    ]
    # What does make the copy red says so under the badge.
    broken = flow(last_run=summary(failed_partitions=2))
    row = re.search(r"<tbody><tr>(.*?)</tr>", render_content(view(status(broken), cfg))).group(1)
    assert badges(row)[0] == ("bad", "failed") and "2 failed partition(s) in the last run" in row
    # The legend defines each badge once, "late" as too old and "failed" as something failed.
    legend = page[page.index('class="legend"') :]
    assert "<strong>Copy</strong>" in legend and "<strong>Verification</strong>" in legend
    assert "failing" not in page


def test_a_heartbeat_dag_run_that_stopped_is_on_the_page_with_what_to_do() -> None:
    cfg = config()
    stopped = DagRunFacts("scheduled__2023-11-14T22:00:00+00:00", "failed", T0 - 20 * MIN, T0 - 10 * MIN)
    facts = AirflowFacts(dags=frozenset([HEARTBEATS_DAG_ID]), last_run={HEARTBEATS_DAG_ID: stopped})
    (hint,) = heartbeat_run_hints(cfg, facts, T0)
    assert hint["text"] == (
        "the heartbeat DAG mirrorflow_heartbeats: no heartbeat run is emitting: its newest run "
        "scheduled__2023-11-14T22:00:00+00:00 failed at 2023-11-14 22:03:20 UTC; the next starts at the "
        "DAG's next slot (it runs every 60 min): trigger mirrorflow_heartbeats in Airflow to emit heartbeats now"
    )
    page = render_content(view(status(jobs={"B->A": T0 - 10 * MIN}), cfg, facts=facts, hints=[hint]))
    assert '<span class="badge state-failed">failed</span>' in heartbeats_section(page)
    assert page.count("no heartbeat run is emitting") == 2, "the hint at the top and the DAG's line"
    # A run that is emitting, one that just ended (the next is about to start), a paused DAG (its
    # own hint) or no Airflow to ask: nothing to say.
    running = DagRunFacts("scheduled__2023-11-14T23:00:00+00:00", "running", T0 - MIN)
    just_ended = DagRunFacts("scheduled__2023-11-14T22:00:00+00:00", "success", T0 - 3_601_000, T0 - 5_000)
    for quiet in (
        AirflowFacts(dags=frozenset([HEARTBEATS_DAG_ID]), last_run={HEARTBEATS_DAG_ID: running}),
        AirflowFacts(dags=frozenset([HEARTBEATS_DAG_ID]), last_run={HEARTBEATS_DAG_ID: just_ended}),
        AirflowFacts(
            dags=frozenset([HEARTBEATS_DAG_ID]),
            paused=frozenset([HEARTBEATS_DAG_ID]),
            last_run={HEARTBEATS_DAG_ID: stopped},
        ),
        AirflowFacts(),
    ):
        assert heartbeat_run_hints(cfg, quiet, T0) == []
    # A clean stop that Airflow recorded as success, with no run after it, is a stop all the same.
    ended = DagRunFacts("scheduled__2023-11-14T22:00:00+00:00", "success", T0 - 20 * MIN, T0 - 10 * MIN)
    (hint,) = heartbeat_run_hints(
        cfg, AirflowFacts(dags=frozenset([HEARTBEATS_DAG_ID]), last_run={HEARTBEATS_DAG_ID: ended}), T0
    )
    assert "ended at 2023-11-14 22:03:20 UTC (success) and no run followed" in hint["text"]


def test_metrics_carry_the_copy_state_and_the_intervals_the_page_judged_by() -> None:
    micro = config(MICRO)
    current = status(
        flow(last_run_ms=T0 - 50 * MIN, window=window(T0 - 3_000)),
        upstreams=[UpstreamStatus("A", 1, T0 - 14 * MIN, 14 * 60.0, "A.heartbeats")],
        jobs={"B->A": T0 - 2_000},
    )
    shown = view(current, micro)
    assert flow_health(shown, current.flows[0]).label == "copying"
    text = render(current, now_ms=T0, extra=[HealthCollector(shown)]).decode()
    for line in (
        'mirrorflow_flow_copy_state{flow="A->B",state="copying"} 1.0',
        'mirrorflow_flow_copy_state{flow="A->B",state="late"} 0.0',
        'mirrorflow_flow_copy_level{flow="A->B"} 0.0',
        'mirrorflow_flow_copy_age_seconds{flow="A->B"} 3.0',
        'mirrorflow_flow_copy_expected_seconds{flow="A->B"} 5.0',
        'mirrorflow_heartbeat_expected_seconds{cluster="B",upstream="A"} 1.25',
        'mirrorflow_heartbeat_job_age_seconds{cluster="A",source="B"} 2.0',
        'mirrorflow_heartbeat_job_expected_seconds{cluster="A",source="B"} 1.0',
    ):
        assert line in text, line
