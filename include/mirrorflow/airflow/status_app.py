"""The replication status page, its JSON and Prometheus metrics, as a FastAPI app.

The plugin in plugins/ mounts it in Airflow's api-server under /mirrorflow. Airflow tasks have
no shared store with the api-server, so everything shown is read from Kafka (heartbeat topics
and the run-records topic, see mirrorflow.control.mirror_client). A daemon thread reads it every
`refresh_s` into a snapshot (mirrorflow.control.status_snapshots) and every request answers from
that snapshot at once: a page view or a scrape never waits on a cluster, a dead one included.
Per flow the page shows the last run, its worst topics and failed partitions, and the last
verification (its verdict and counts); during an outage it keeps showing them as last read,
greyed, under a banner per unreachable cluster that says since when and how old they are.

/status and /ui need an Airflow login (the api-server's own check); /metrics is for scrapers,
which cannot log in: set MIRRORFLOW_METRICS_TOKEN to require `Authorization: Bearer <token>`,
or keep the endpoint behind network controls.
"""

from __future__ import annotations

import hmac
import html
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, Response

from mirrorflow import metrics
from mirrorflow.config import MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.mirror_client import ClusterStatus, FlowStatus, MirrorStatus, mirror_status
from mirrorflow.control.status_snapshots import REFRESH_S, StatusSnapshots

READ_TIMEOUT_S = 5.0  # per Kafka call: an unreachable cluster holds a refresh for about this long
# Before the first snapshot exists a request waits this long for it, then says "collecting".
FIRST_SNAPSHOT_WAIT_S = 0.8
TOKEN_ENV = "MIRRORFLOW_METRICS_TOKEN"


def create_app(
    load_config: Callable[[], MirrorConfig],
    *,
    connection_extra: ConnectionExtra | None = None,
    login_required: Callable[..., Any] | None = None,
    refresh_s: float = REFRESH_S,
    timeout_s: float = READ_TIMEOUT_S,
) -> FastAPI:
    """`login_required` is a FastAPI dependency (Airflow's requires_authenticated in the plugin).
    The config is loaded at every refresh, so edits show without a restart.

    The refresh thread starts with the first request (a mounted app gets no startup event) and
    stops with the app's lifespan where it has one; it is a daemon either way. The snapshots are
    `app.state.status_snapshots`."""
    snapshots = StatusSnapshots(
        lambda: mirror_status(load_config(), connection_extra=connection_extra, timeout_s=timeout_s),
        interval_s=refresh_s,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            snapshots.stop()

    guarded = [Depends(login_required)] if login_required is not None else []
    app = FastAPI(
        title="mirrorflow status", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.state.status_snapshots = snapshots

    @app.get("/status", dependencies=guarded)
    def status() -> JSONResponse:
        return JSONResponse(status_document(snapshots, int(time.time() * 1000)))

    @app.get("/metrics")
    def prometheus(authorization: str | None = Header(default=None)) -> Response:
        token = os.environ.get(TOKEN_ENV)
        if token and not hmac.compare_digest(authorization or "", f"Bearer {token}"):
            raise HTTPException(status_code=401, detail=f"send Authorization: Bearer <{TOKEN_ENV}>")
        current = snapshots.current(FIRST_SNAPSHOT_WAIT_S)
        return Response(metrics.render(current), media_type="text/plain; version=0.0.4")

    @app.get("/ui", dependencies=guarded)
    def ui() -> HTMLResponse:
        current = snapshots.current(FIRST_SNAPSHOT_WAIT_S)
        shown = outage_banners(current, int(time.time() * 1000)) if current is not None else []
        return HTMLResponse(PAGE.replace("<!--BANNERS-->", "".join(banner_html(b) for b in shown)))

    return app


def status_document(snapshots: StatusSnapshots, now_ms: int) -> dict[str, Any]:
    """The /status JSON: the snapshot (what `mirrorflow status --json` prints, with stale marks),
    `snapshot` (its state and age) and `banners` (one per unreachable cluster or unread flow).
    While the first snapshot is collected: state "collecting", no clusters and no flows."""
    current = snapshots.current(FIRST_SNAPSHOT_WAIT_S)
    if current is None:
        body: dict[str, Any] = {"generated_ms": None, "clusters": [], "flows": []}
    else:
        body = current.to_dict()
    body["snapshot"] = snapshots.describe(now_ms)
    body["banners"] = [] if current is None else outage_banners(current, now_ms)
    return body


def when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def ago(seconds: float) -> str:
    """`35 s ago`, `2 min 5 s ago`, `3 h 4 min ago`, `2 d 1 h ago`."""
    whole = int(max(0, seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n][:2] or ["0 s"]
    return " ".join(shown) + " ago"


def outage_banners(status: MirrorStatus, now_ms: int) -> list[dict[str, Any]]:
    """One banner per cluster that did not answer the last refresh (naming the flows it is the
    source or target of) and per flow that could not be read for another reason: since when,
    and how old the values still shown are."""
    banners: list[dict[str, Any]] = []
    down = set()
    for cluster in status.clusters:
        if cluster.error is None:
            continue
        down.add(cluster.alias)
        roles = [f"target of {f.flow}" for f in status.flows if f.target == cluster.alias]
        roles += [f"source of {f.flow}" for f in status.flows if f.source == cluster.alias]
        subject = f"{cluster.alias} ({', '.join(roles)})" if roles else cluster.alias
        banners.append(_banner("cluster", cluster.alias, subject, "unreachable", cluster, status, now_ms))
    for flow in status.flows:
        if flow.error is not None and not {flow.source, flow.target} & down:
            banners.append(
                _banner("flow", flow.flow, f"flow {flow.flow}", "unreadable", flow, status, now_ms)
            )
    return banners


def _banner(
    kind: str,
    name: str,
    subject: str,
    what: str,
    row: ClusterStatus | FlowStatus,
    status: MirrorStatus,
    now_ms: int,
) -> dict[str, Any]:
    since = row.unreachable_since_ms or status.generated_ms
    shown = (
        f"showing values as of {when(row.as_of_ms)}"
        if row.as_of_ms is not None
        else "no values read since the status page started"
    )
    return {
        "kind": kind,
        "name": name,
        "since_ms": since,
        "as_of_ms": row.as_of_ms,
        "text": f"{subject} {what} since {when(since)} ({ago((now_ms - since) / 1000)}); {shown}",
        "error": row.error,
    }


def banner_html(banner: dict[str, Any]) -> str:
    return (
        f'<div class="banner"><strong>{html.escape(banner["text"])}</strong>'
        f'<div class="detail">{html.escape(banner["error"] or "")}</div></div>'
    )


# Rows of each table per flow: a summary written now holds at most 50 topics and 50 failed
# partitions, but one written before summaries were bounded may hold every topic.
PAGE_ROWS = 50

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mirrorflow replication status</title>
<style>
 body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1b1f24}
 table{border-collapse:collapse;margin:.5rem 0 1.5rem}
 th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;font-size:.9rem}
 th{background:#f6f8fa} .bad{color:#b42318;font-weight:600} .ok{color:#067647} .more{color:#57606a}
 .warn{color:#b54708;font-weight:600}
 .banner{background:#fef3f2;border:1px solid #fda29b;color:#912018;padding:.5rem .8rem;margin:.4rem 0;
  border-radius:4px} .banner .detail{font-size:.8rem;color:#57606a;margin-top:.2rem}
 tr.stale td{color:#8c959f;font-weight:normal}
</style></head>
<body><h1>mirrorflow replication status</h1><div id="banners"><!--BANNERS--></div><p id="when">loading…</p>
<h2>Flows</h2><table id="flows"><tr><th>flow</th><th>lag now</th><th>last run</th><th>finished</th>
<th>records</th><th>failed partitions</th><th>lag left</th><th>lost to retention</th>
<th>copied again from the start (topic recreated)</th></tr></table>
<h2>Last verification per flow</h2><table id="verifications"><tr><th>flow</th><th>verdict</th>
<th>finished</th><th>verification</th><th>matched</th><th>wrong</th><th>explained</th><th>pending</th>
<th>partitions not read</th><th>sample</th></tr></table>
<h2>Topics of the last runs, the worst first</h2><table id="topics"><tr><th>flow</th><th>topic</th>
<th>partitions copied</th><th>records</th><th>failed partitions</th><th>lost to retention</th>
<th>lag left</th></tr></table>
<h2>Failed partitions of the last runs</h2><table id="failed"><tr><th>flow</th><th>partition</th>
<th>error</th></tr></table>
<h2>Clusters</h2><table id="clusters"><tr><th>cluster</th><th>upstream</th><th>hops</th>
<th>newest heartbeat age (s)</th><th>via</th></tr></table>
<script>
const ROWS=PAGE_ROWS_VALUE;
function cell(row, text, cls){const td=row.insertCell();td.textContent=text;if(cls)td.className=cls;}
function more(table, flow, count, what){if(count>0){const r=table.insertRow();cell(r,flow);
  const td=r.insertCell();td.colSpan=table.rows[0].cells.length-1;td.className="more";
  td.textContent="… and "+count+" more "+what;}}
const sum=o=>Object.values(o||{}).reduce((a,b)=>a+b,0);
const iso=ms=>new Date(ms).toISOString();
// A row of a flow or cluster whose values are the last known ones, not this refresh's: greyed.
function rowOf(table, x){const r=table.insertRow();if(x.stale){r.className="stale";
  r.title="values as of "+(x.as_of_ms?iso(x.as_of_ms):"never")+(x.error?": "+x.error:"");}return r;}
function showBanners(list){const box=document.getElementById("banners");box.textContent="";
  for(const b of list){const d=document.createElement("div");d.className="banner";
    const t=document.createElement("strong");t.textContent=b.text;d.appendChild(t);
    if(b.error){const e=document.createElement("div");e.className="detail";e.textContent=b.error;
      d.appendChild(e);}
    box.appendChild(d);}}
fetch("status").then(r=>r.json()).then(s=>{
  const snap=s.snapshot, head=document.getElementById("when");
  showBanners(s.banners);
  if(snap.state==="collecting"){head.textContent="collecting the first status snapshot"+
    (snap.refresh_error?" (the last attempt failed: "+snap.refresh_error+")":"")+"; this page reloads in 3 s";
    setTimeout(()=>location.reload(),3000);return;}
  head.textContent="as of "+iso(s.generated_ms)+" (read every "+snap.refresh_interval_s+" s"+
    (snap.refresh_error?"; the last refresh failed: "+snap.refresh_error+", this is the one before":"")+")";
  const flows=document.getElementById("flows"), topics=document.getElementById("topics"),
    failed=document.getElementById("failed");
  for(const f of s.flows){const r=rowOf(flows,f);cell(r,f.flow+(f.stale?" (last known)":""));
    if(f.error&&!f.last_run&&!f.lag&&!f.last_verification){cell(r,f.error,"bad");continue;}
    const now=f.lag===null?"-":sum(f.lag);cell(r,now,now===0?"ok":"");
    if(!f.last_run){cell(r,"no mirrorflow run");continue;}
    const run=f.last_run, t=run.totals;
    const lag=run.lag_unknown?"unknown":(t.lag_left??sum(run.lag_left));
    cell(r,run.run_id);cell(r,new Date(f.last_run_ms).toISOString());cell(r,t.records);
    cell(r,t.failed_partitions,t.failed_partitions?"bad":"ok");cell(r,lag,lag===0?"ok":"");
    const lost=run.lost_to_retention||0;cell(r,lost,lost?"bad":"ok");
    const again=run.restarted_count||0;
    cell(r,again?again+" partition(s): "+Object.entries(run.restarted||{}).slice(0,3)
      .map(([p,why])=>p+": "+why).join("; "):"0",again?"bad":"ok");
    const rows=Object.entries(run.topics||{}).sort(([a,x],[b,y])=>(y.failed-x.failed)||
      (y.lost_to_retention-x.lost_to_retention)||((y.lag_left||0)-(x.lag_left||0))||(a<b?-1:1)).slice(0,ROWS);
    for(const [name,row] of rows){const tr=rowOf(topics,f);cell(tr,f.flow);cell(tr,name);
      cell(tr,row.partitions);cell(tr,row.records);cell(tr,row.failed,row.failed?"bad":"ok");
      cell(tr,row.lost_to_retention,row.lost_to_retention?"bad":"ok");
      cell(tr,row.lag_left===undefined?"-":row.lag_left);}
    more(topics,f.flow,(run.topics_count??Object.keys(run.topics||{}).length)-rows.length,
      "topic(s): the flow's row counts every one");
    const bad=(run.failed||[]).slice(0,ROWS);
    for(const p of bad){const tr=rowOf(failed,f);cell(tr,f.flow);cell(tr,p.topic+"-"+p.partition);
      cell(tr,p.error,"bad");}
    more(failed,f.flow,t.failed_partitions-bad.length,"failed partition(s): the run's report lists every one");}
  const checks=document.getElementById("verifications");
  const VERDICT={"verified":"ok","sample passed":"ok","incomplete":"warn","failed":"bad"};
  for(const f of s.flows){const r=rowOf(checks,f);cell(r,f.flow);const v=f.last_verification;
    if(!v){cell(r,f.error?"-":"never verified");continue;}
    cell(r,v.verdict,VERDICT[v.verdict]||"bad");
    cell(r,new Date(v.finished_ms??f.last_verification_ms).toISOString());cell(r,v.run_id);
    cell(r,v.matched);cell(r,v.wrong_total,v.wrong_total?"bad":"ok");cell(r,v.explained_total);
    cell(r,v.pending,v.pending?"warn":"ok");cell(r,v.failed_partitions,v.failed_partitions?"bad":"ok");
    const whole=v.sample===null||v.sample===undefined;
    cell(r,whole?"all records":Number((v.sample*100).toPrecision(6))+"%"+(v.confidence?": "+v.confidence:""));}
  const clusters=document.getElementById("clusters");
  for(const c of s.clusters){const alias=c.alias+(c.stale?" (last known)":"");
    if(c.error&&!c.as_of_ms){const r=rowOf(clusters,c);cell(r,alias);cell(r,c.error,"bad");continue;}
    if(!c.upstreams.length){const r=rowOf(clusters,c);cell(r,alias);cell(r,"no upstream clusters");}
    for(const u of c.upstreams){const r=rowOf(clusters,c);cell(r,alias);cell(r,u.alias);cell(r,u.hops);
      cell(r,u.age_s===null?"-":u.age_s.toFixed(1));cell(r,u.via||"-");}}
}).catch(e=>{document.getElementById("when").textContent="status unavailable: "+e;});
</script></body></html>
""".replace("PAGE_ROWS_VALUE", str(PAGE_ROWS))
