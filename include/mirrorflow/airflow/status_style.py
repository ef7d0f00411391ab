"""The status page's look: Airflow 3.3's colour values and Chakra's semantic roles for both
colour modes (airflow/ui/src/theme.ts), the style sheet, the script that follows the UI's colour
mode, shows times in the browser's zone with their age and reloads the content, and the page
around the content."""

from __future__ import annotations

CSS_TOKENS = {
    # Airflow 3.3's palette (Tailwind 4 values, some darkened by Airflow), in oklch
    "gray-50": "oklch(0.985 0.004 253)",
    "gray-100": "oklch(0.955 0.006 253)",
    "gray-200": "oklch(0.915 0.01 253)",
    "gray-400": "oklch(0.75 0.025 252)",
    "gray-600": "oklch(0.45 0.055 251)",
    "gray-800": "oklch(0.28 0.035 251)",
    "gray-900": "oklch(0.18 0.03 251)",
    "gray-950": "oklch(0.11 0.025 251)",
    "black": "oklch(0.23185 0.0323 266.44)",
    "brand-600": "oklch(0.469 0.084 257.657)",
    "blue-300": "oklch(0.809 0.105 251.813)",
    "blue-600": "oklch(0.546 0.245 262.881)",
    "green-100": "oklch(0.962 0.044 156.743)",
    "green-300": "oklch(0.75 0.18 153.0)",
    "green-600": "oklch(0.47 0.20 149.0)",
    "green-900": "oklch(0.393 0.095 152.535)",
    "red-100": "oklch(0.936 0.032 17.717)",
    "red-200": "oklch(0.885 0.062 18.334)",
    "red-400": "oklch(0.704 0.191 22.216)",
    "red-500": "oklch(0.637 0.237 25.331)",
    "red-600": "oklch(0.577 0.245 27.325)",
    "red-800": "oklch(0.444 0.177 26.899)",
    "red-900": "oklch(0.396 0.141 25.723)",
    "amber-100": "oklch(0.962 0.059 95.617)",
    "amber-200": "oklch(0.924 0.12 95.746)",
    "amber-600": "oklch(0.666 0.179 58.318)",
    "amber-800": "oklch(0.473 0.137 46.201)",
    "amber-900": "oklch(0.414 0.112 45.904)",
    "cyan-600": "oklch(0.609 0.126 221.723)",
    "stone-600": "oklch(0.444 0.011 73.639)",
    "orange-600": "oklch(0.5902 0.198 35.93)",
    "yellow-600": "oklch(0.681 0.162 75.834)",
    "zinc-600": "oklch(0.442 0.017 285.786)",
}
# Chakra's semantic roles as Airflow resolves them: (light, dark)
CSS_ROLES = {
    "bg": ("var(--white)", "var(--black)"),
    "bg-subtle": ("var(--gray-50)", "var(--gray-950)"),
    "bg-muted": ("var(--gray-100)", "var(--gray-900)"),
    "fg": ("var(--black)", "var(--gray-50)"),
    "fg-muted": ("var(--gray-600)", "var(--gray-400)"),
    "border": ("var(--gray-200)", "var(--gray-800)"),
    "link": ("var(--blue-600)", "var(--blue-300)"),
    "ok-fg": ("var(--green-600)", "var(--green-300)"),
    "bad-fg": ("var(--red-500)", "var(--red-400)"),
    "error-subtle": ("var(--red-100)", "var(--red-900)"),
    "error-fg": ("var(--red-800)", "var(--red-200)"),
    "warning-subtle": ("var(--amber-100)", "var(--amber-900)"),
    "warning-fg": ("var(--amber-800)", "var(--amber-200)"),
}


def _css() -> str:
    tokens = "".join(f"--{k}:{v};" for k, v in CSS_TOKENS.items()) + "--white:#fff;"
    light = "".join(f"--{k}:{v[0]};" for k, v in CSS_ROLES.items())
    dark = "".join(f"--{k}:{v[1]};" for k, v in CSS_ROLES.items())
    return (
        f":root{{{tokens}{light}color-scheme:light}}"
        f':root[data-theme="dark"]{{{dark}color-scheme:dark}}'
        f'@media (prefers-color-scheme:dark){{:root:not([data-theme="light"]){{{dark}color-scheme:dark}}}}'
        + STYLE
    )


STYLE = """
body{margin:0;padding:1rem 1.5rem;background:var(--bg);color:var(--fg);
 font-family:Inter,-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;
 font-size:.875rem;line-height:1.25rem;-webkit-font-smoothing:antialiased}
h1{font-size:1.5rem;line-height:2rem;font-weight:600;margin:0}
h2{font-size:1.125rem;line-height:1.75rem;font-weight:600;margin:1.5rem 0 .5rem}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
.bar{display:flex;align-items:center;gap:1rem;flex-wrap:wrap;padding-bottom:.75rem;border-bottom:1px solid var(--border)}
.bar .tools{margin-left:auto;display:flex;align-items:center;gap:.75rem;color:var(--fg-muted)}
button{font:inherit;color:var(--fg);background:var(--bg);border:1px solid var(--border);border-radius:.375rem;
 padding:.25rem .75rem;cursor:pointer}button:hover{background:var(--bg-muted)}
.table-box{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;border:1px solid var(--border);border-radius:.375rem}
th,td{padding:.5rem .75rem;text-align:start;border-bottom:1px solid var(--border);vertical-align:top}
th{background:var(--bg-muted);font-weight:500;color:var(--fg);white-space:nowrap}
tbody tr:hover{background:var(--bg-subtle)}
td:first-child{white-space:nowrap}
.muted,.sub{color:var(--fg-muted)}.sub{font-size:.75rem;margin-top:.125rem}
.meta{color:var(--fg-muted);margin:.75rem 0}
.mono{font-family:SFMono-Regular,Menlo,Monaco,Consolas,"Liberation Mono","Courier New",monospace;font-size:.8125rem}
.fg-bad{color:var(--bad-fg);font-weight:600}.fg-ok{color:var(--ok-fg)}
.badge{display:inline-block;border-radius:9999px;padding:0 .5rem;font-size:.75rem;line-height:1.25rem;
 font-weight:500;color:#fff;background:var(--gray-600);white-space:nowrap}
.badge.ok,.state-success{background:var(--green-600)}.badge.warn{background:var(--amber-600)}
.badge.bad,.state-failed{background:var(--red-600)}.state-running{background:var(--cyan-600)}
.state-queued{background:var(--stone-600)}.state-upstream_failed{background:var(--orange-600)}
.state-up_for_retry{background:var(--yellow-600)}.state-scheduled{background:var(--zinc-600)}
.dot{display:inline-block;width:.5rem;height:.5rem;border-radius:9999px;margin-right:.375rem;background:var(--gray-400)}
.dot.ok{background:var(--green-600)}.dot.warn{background:var(--amber-600)}.dot.bad{background:var(--red-600)}
.banner,.hint{padding:.75rem 1rem;margin:.5rem 0;border-radius:.375rem}
.banner{background:var(--error-subtle);color:var(--error-fg)}
.banner .detail{font-size:.75rem;margin-top:.25rem;opacity:.85}
.hint{background:var(--warning-subtle);color:var(--warning-fg)}
.hint-inline{color:var(--warning-fg);font-weight:500}
tr.stale td{color:var(--fg-muted)}
svg.spark{vertical-align:middle;margin-left:.375rem}
svg.spark polyline{fill:none;stroke:var(--brand-600);stroke-width:1.5}
:root[data-theme="dark"] svg.spark polyline{stroke:var(--blue-300)}
svg.spark circle{fill:var(--link)}
.legend{color:var(--fg-muted);margin-top:1.5rem;font-size:.75rem}
"""

CSS = _css()

SCRIPT = """
(()=>{
const REFRESH=REFRESH_MS, root=document.documentElement, KEY="mirrorflow-status-paused";
const forced=new URLSearchParams(location.search).get("theme");
const media=matchMedia("(prefers-color-scheme: dark)");
// The UI sets class="dark"|"light" and color-scheme on its <html> (next-themes); same origin.
function parentMode(){try{if(window.parent===window)return null;const h=window.parent.document.documentElement;
  if(h.classList.contains("dark"))return "dark";if(h.classList.contains("light"))return "light";
  const s=h.style.colorScheme;return s==="dark"||s==="light"?s:null;}catch(e){return null;}}
function theme(){const m=(forced==="dark"||forced==="light")?forced:(parentMode()||(media.matches?"dark":"light"));
  if(root.dataset.theme!==m){root.dataset.theme=m;root.style.colorScheme=m;}}
theme();media.addEventListener("change",theme);
try{if(window.parent!==window)new MutationObserver(theme).observe(window.parent.document.documentElement,
  {attributes:true,attributeFilter:["class","style","data-theme"]});}catch(e){}
function ago(s){let w=Math.max(0,Math.floor(s));const d=Math.floor(w/86400);w%=86400;const h=Math.floor(w/3600);
  w%=3600;const m=Math.floor(w/60),x=w%60;const p=[[d,"d"],[h,"h"],[m,"min"],[x,"s"]].filter(a=>a[0]).slice(0,2)
  .map(a=>a[0]+" "+a[1]);return (p.length?p.join(" "):"0 s")+" ago";}
const fmt=new Intl.DateTimeFormat(undefined,{month:"short",day:"numeric",hour:"2-digit",
  minute:"2-digit",second:"2-digit"});
let paused=false,last=Date.now(),failure="",timer=null;
try{paused=localStorage.getItem(KEY)==="1";}catch(e){}
const button=document.getElementById("pause"),label=document.getElementById("updated");
function stamp(){const now=Date.now();
  for(const t of document.querySelectorAll("time[data-ms]")){const ms=+t.dataset.ms;
    t.textContent=fmt.format(new Date(ms))+" · "+ago((now-ms)/1000);}
  label.textContent=(failure?"update failed ("+failure+"); ":"")+"page updated "+ago((now-last)/1000)+
    (paused?", auto-refresh paused":", refreshes every "+Math.round(REFRESH/1000)+" s");
  button.textContent=paused?"Resume":"Pause";button.setAttribute("aria-pressed",String(paused));}
function plan(){clearTimeout(timer);if(paused)return;
  timer=setTimeout(load,document.querySelector("[data-collecting]")?3000:REFRESH);}
async function load(){try{const r=await fetch("ui?fragment=1",{credentials:"same-origin"});
    if(!r.ok)throw new Error("HTTP "+r.status);document.getElementById("content").innerHTML=await r.text();
    last=Date.now();failure="";}catch(e){failure=String(e.message||e);}
  stamp();plan();}
button.addEventListener("click",()=>{paused=!paused;try{localStorage.setItem(KEY,paused?"1":"0");}catch(e){}
  if(!paused)load();else{clearTimeout(timer);stamp();}});
stamp();plan();setInterval(stamp,1000);
})();
"""

PAGE = (
    """<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>mirrorflow replication status</title><style>/*CSS*/</style></head>
<body><div class="bar"><h1>Replication status</h1><div class="tools"><span id="updated" aria-live="polite"></span>
<button id="pause" type="button" aria-pressed="false">Pause</button></div></div>
<div id="content"><!--CONTENT--></div>
<script>"""
    + SCRIPT
    + """</script></body></html>
"""
)
