"""The replication status page, its JSON and Prometheus metrics, as a FastAPI app.

The plugin in plugins/ mounts it in Airflow's api-server under /mirrorflow. Airflow tasks have
no shared store with the api-server, so everything shown is read from Kafka (heartbeat topics
and the run-records topic, see mirrorflow.control.mirror_client) and cached briefly, so a page
refresh or a scrape does not re-read every cluster. Per flow the page shows the last run, its
worst topics and failed partitions, and the last verification (its verdict and counts).

/status and /ui need an Airflow login (the api-server's own check); /metrics is for scrapers,
which cannot log in: set MIRRORFLOW_METRICS_TOKEN to require `Authorization: Bearer <token>`,
or keep the endpoint behind network controls.
"""

from __future__ import annotations

import hmac
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, Response

from mirrorflow import metrics
from mirrorflow.config import MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.mirror_client import MirrorStatus, mirror_status

CACHE_S = 15.0
READ_TIMEOUT_S = 5.0  # an unreachable cluster must not hold the page for long
TOKEN_ENV = "MIRRORFLOW_METRICS_TOKEN"


class StatusCache:
    """One status snapshot at a time, refreshed when older than `max_age_s`."""

    def __init__(
        self,
        load_config: Callable[[], MirrorConfig],
        connection_extra: ConnectionExtra | None,
        max_age_s: float = CACHE_S,
    ) -> None:
        self.load_config = load_config
        self.connection_extra = connection_extra
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._snapshot: tuple[float, MirrorStatus] | None = None

    def get(self) -> MirrorStatus:
        with self._lock:
            if self._snapshot is None or time.monotonic() - self._snapshot[0] > self.max_age_s:
                status = mirror_status(
                    self.load_config(), connection_extra=self.connection_extra, timeout_s=READ_TIMEOUT_S
                )
                self._snapshot = (time.monotonic(), status)
            return self._snapshot[1]


def create_app(
    load_config: Callable[[], MirrorConfig],
    *,
    connection_extra: ConnectionExtra | None = None,
    login_required: Callable[..., Any] | None = None,
    max_age_s: float = CACHE_S,
) -> FastAPI:
    """`login_required` is a FastAPI dependency (Airflow's requires_authenticated in the plugin)."""
    cache = StatusCache(load_config, connection_extra, max_age_s)
    guarded = [Depends(login_required)] if login_required is not None else []
    app = FastAPI(title="mirrorflow status", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/status", dependencies=guarded)
    def status() -> JSONResponse:
        return JSONResponse(cache.get().to_dict())

    @app.get("/metrics")
    def prometheus(authorization: str | None = Header(default=None)) -> Response:
        token = os.environ.get(TOKEN_ENV)
        if token and not hmac.compare_digest(authorization or "", f"Bearer {token}"):
            raise HTTPException(status_code=401, detail=f"send Authorization: Bearer <{TOKEN_ENV}>")
        return Response(metrics.render(cache.get()), media_type="text/plain; version=0.0.4")

    @app.get("/ui", dependencies=guarded)
    def ui() -> HTMLResponse:
        return HTMLResponse(PAGE)

    return app


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
</style></head>
<body><h1>mirrorflow replication status</h1><p id="when">loading…</p>
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
fetch("status").then(r=>r.json()).then(s=>{
  document.getElementById("when").textContent="as of "+new Date(s.generated_ms).toISOString();
  const flows=document.getElementById("flows"), topics=document.getElementById("topics"),
    failed=document.getElementById("failed");
  for(const f of s.flows){const r=flows.insertRow();cell(r,f.flow);
    if(f.error){cell(r,f.error,"bad");continue;}
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
    for(const [name,row] of rows){const tr=topics.insertRow();cell(tr,f.flow);cell(tr,name);
      cell(tr,row.partitions);cell(tr,row.records);cell(tr,row.failed,row.failed?"bad":"ok");
      cell(tr,row.lost_to_retention,row.lost_to_retention?"bad":"ok");
      cell(tr,row.lag_left===undefined?"-":row.lag_left);}
    more(topics,f.flow,(run.topics_count??Object.keys(run.topics||{}).length)-rows.length,
      "topic(s): the flow's row counts every one");
    const bad=(run.failed||[]).slice(0,ROWS);
    for(const p of bad){const tr=failed.insertRow();cell(tr,f.flow);cell(tr,p.topic+"-"+p.partition);
      cell(tr,p.error,"bad");}
    more(failed,f.flow,t.failed_partitions-bad.length,"failed partition(s): the run's report lists every one");}
  const checks=document.getElementById("verifications");
  const VERDICT={"verified":"ok","sample passed":"ok","incomplete":"warn","failed":"bad"};
  for(const f of s.flows){const r=checks.insertRow();cell(r,f.flow);const v=f.last_verification;
    if(!v){cell(r,f.error?"-":"never verified");continue;}
    cell(r,v.verdict,VERDICT[v.verdict]||"bad");
    cell(r,new Date(v.finished_ms??f.last_verification_ms).toISOString());cell(r,v.run_id);
    cell(r,v.matched);cell(r,v.wrong_total,v.wrong_total?"bad":"ok");cell(r,v.explained_total);
    cell(r,v.pending,v.pending?"warn":"ok");cell(r,v.failed_partitions,v.failed_partitions?"bad":"ok");
    const whole=v.sample===null||v.sample===undefined;
    cell(r,whole?"all records":Number((v.sample*100).toPrecision(6))+"%"+(v.confidence?": "+v.confidence:""));}
  const clusters=document.getElementById("clusters");
  for(const c of s.clusters){
    if(c.error){const r=clusters.insertRow();cell(r,c.alias);cell(r,c.error,"bad");continue;}
    if(!c.upstreams.length){const r=clusters.insertRow();cell(r,c.alias);cell(r,"no upstream clusters");}
    for(const u of c.upstreams){const r=clusters.insertRow();cell(r,c.alias);cell(r,u.alias);cell(r,u.hops);
      cell(r,u.age_s===null?"-":u.age_s.toFixed(1));cell(r,u.via||"-");}}
}).catch(e=>{document.getElementById("when").textContent="status unavailable: "+e;});
</script></body></html>
""".replace("PAGE_ROWS_VALUE", str(PAGE_ROWS))
