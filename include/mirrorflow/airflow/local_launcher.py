"""`scripts/airflow-local` (`make airflow`): Airflow 3 on 127.0.0.1 for this project, and with
`--local-clusters` the two Kafka clusters of the demo's config as well.

A first-time user has no clusters: `--local-clusters` starts two real Apache Kafka clusters
(localkafka, kept in the Airflow home, so a restart finds their topics again on the same ports)
and runs Airflow on include/config/demo.properties pointed at them, then unpauses the DAGs that
make the status page come alive (the heartbeats and the replication of primary -> backup): a
sandbox, where nothing else reads those clusters. With a config of one's own nothing is
unpaused; the launcher names the DAGs to unpause instead. Ctrl-C or SIGTERM stops every
component, every task (a running task is asked to stop first, while the api-server still takes
its last report) and the clusters it started.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mirrorflow.airflow.local import (
    DEFAULT_HOME,
    DEFAULT_PORT,
    DEFAULT_USER,
    AirflowHome,
    AirflowServer,
    ComponentExited,
    free_port,
    port_is_free,
)
from mirrorflow.airflow.settings import CONFIG_ENV, PROJECT_ROOT

DEMO_CONFIG = PROJECT_ROOT / "include" / "config" / "demo.properties"
DEMO_ADDRESSES = {"primary": "MIRRORFLOW_DEMO_PRIMARY", "backup": "MIRRORFLOW_DEMO_BACKUP"}
LOCAL_CLUSTERS_ENV = "MIRRORFLOW_LOCAL_CLUSTERS"
DAGS_PARSED_S = 180.0


class _Stop(Exception):
    pass


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def _config_problem() -> str | None:
    """Why the DAGs would not load from the environment's MIRRORFLOW_CONFIG, said before Airflow
    starts instead of as an import error in the UI."""
    from mirrorflow.config import load_config

    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        return (
            f"{CONFIG_ENV} is not set: export it with the path of your MM2 properties file, or run "
            "`make airflow` (scripts/airflow-local --local-clusters) to start two local Kafka clusters "
            f"with the demo's config. For the demo's config with clusters of your own: "
            f"{CONFIG_ENV}=include/config/demo.properties with MIRRORFLOW_DEMO_PRIMARY and "
            "MIRRORFLOW_DEMO_BACKUP set to the two clusters' bootstrap servers (host:port)."
        )
    if not Path(raw).is_file():
        return f"{CONFIG_ENV}={raw} is not a file."
    try:
        load_config(raw)
    except Exception as err:  # every config error, reported as the CLI reports it
        return f"{CONFIG_ENV}={raw} does not load: {err}"
    return None


def _pick_port(asked: str | None) -> int:
    if asked:
        return int(asked)
    return DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port()


@contextlib.contextmanager
def local_clusters(where: Path) -> Iterator[dict[str, str]]:
    """The demo config's two clusters, started side by side in `where` (kept: a restart finds
    them again, on the same ports), stopped when the block ends; the environment the demo's
    config reads their addresses from."""
    from localkafka import QUICK_CLUSTER, LocalKafka

    clusters = {alias: LocalKafka(where / alias, overrides=QUICK_CLUSTER) for alias in DEMO_ADDRESSES}
    try:
        for kafka in clusters.values():
            kafka.launch()
        env = {DEMO_ADDRESSES[alias]: kafka.start().bootstrap for alias, kafka in clusters.items()}
        env[CONFIG_ENV] = str(DEMO_CONFIG)
        yield env
    finally:
        for kafka in clusters.values():
            kafka.stop()


def first_dags(config_path: str, env: dict[str, str]) -> list[str]:
    """The DAGs a first look needs running: the heartbeats (upstreams and their age on the status
    page) and every flow's replication (its runs, lag and figures). `env` is what the components
    run with (the demo's config reads its clusters' addresses from it)."""
    from mirrorflow.airflow.maintenance import HEARTBEATS_DAG_ID
    from mirrorflow.airflow.replicate import replicate_dag_id
    from mirrorflow.config import load_config

    config = load_config(config_path, env={**os.environ, **env})
    dags = [HEARTBEATS_DAG_ID] if config.heartbeat_flows else []
    return dags + [replicate_dag_id(f.source, f.target) for f in config.replication_flows]


def unpause(server: AirflowServer, dags: list[str]) -> None:
    """Unpause `dags` once the dag-processor has stored them."""
    deadline = time.monotonic() + DAGS_PARSED_S
    while True:
        known = {d["dag_id"] for d in server.api("/api/v2/dags?limit=1000")["dags"]}
        if set(dags) <= known:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the DAGs {', '.join(sorted(set(dags) - known))} were not parsed in time")
        time.sleep(2)
    for dag in dags:
        server.api(f"/api/v2/dags/{dag}", method="PATCH", body={"is_paused": False})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="airflow-local",
        description="Run Airflow 3 on 127.0.0.1 for this project: mirrorflow's DAGs and its status "
        "plugin, Spark in local mode, the simple auth manager with one admin user. Ctrl-C (or "
        "SIGTERM) stops every component.",
    )
    parser.add_argument(
        "--home",
        default=os.environ.get("MIRRORFLOW_AIRFLOW_HOME", str(DEFAULT_HOME)),
        help="AIRFLOW_HOME: metadata DB, logs, passwords file (env MIRRORFLOW_AIRFLOW_HOME; default .airflow/)",
    )
    parser.add_argument(
        "--port",
        default=os.environ.get("MIRRORFLOW_AIRFLOW_PORT"),
        help=f"the api-server's port (env MIRRORFLOW_AIRFLOW_PORT; default {DEFAULT_PORT}, or a free one when taken)",
    )
    parser.add_argument(
        "--user", default=DEFAULT_USER, help=f"the admin user's name (default {DEFAULT_USER})"
    )
    parser.add_argument(
        "--local-clusters",
        action="store_true",
        default=os.environ.get(LOCAL_CLUSTERS_ENV) == "1",
        help="start the demo config's two Kafka clusters (primary, backup) in <home>/kafka and run on "
        "them, with the heartbeat and replication DAGs unpaused (env MIRRORFLOW_LOCAL_CLUSTERS=1; "
        f"instead of {CONFIG_ENV})",
    )
    args = parser.parse_args(argv)

    if args.local_clusters and os.environ.get(CONFIG_ENV):
        print(
            f"airflow-local: --local-clusters runs the demo's config; unset {CONFIG_ENV} "
            f"({os.environ[CONFIG_ENV]}) or leave out --local-clusters",
            file=sys.stderr,
        )
        return 1
    if not args.local_clusters and (problem := _config_problem()):
        print(f"airflow-local: {problem}", file=sys.stderr)
        return 1
    home = AirflowHome(Path(args.home).resolve())
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    # `kill -USR1 <pid>` prints where every thread of the launcher is, for a launcher that does
    # not answer Ctrl-C.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        with contextlib.ExitStack() as stack:
            if args.local_clusters:
                print(f"airflow-local: starting two Kafka clusters in {home.home / 'kafka'} ...", flush=True)
                extra = stack.enter_context(local_clusters(home.home / "kafka"))
                print(
                    "airflow-local: Kafka primary at {MIRRORFLOW_DEMO_PRIMARY}, backup at "
                    "{MIRRORFLOW_DEMO_BACKUP}".format(**extra),
                    flush=True,
                )
            else:
                # The components run in the Airflow home: a relative config path is the caller's.
                extra = {CONFIG_ENV: str(Path(os.environ[CONFIG_ENV]).resolve())}
            # A spark_default the user exported (e.g. a bigger local[N,F] or a cluster) wins over local[2,3].
            extra.update({k: os.environ[k] for k in ("AIRFLOW_CONN_SPARK_DEFAULT",) if k in os.environ})
            server = AirflowServer(home, _pick_port(args.port), user=args.user, env=extra)
            return serve(server, args.user, extra, unpausing=args.local_clusters)
    except _Stop:
        return 0
    except (ComponentExited, TimeoutError, RuntimeError, ValueError, OSError) as err:
        # Each said in words (a config that does not load, an API call refused), not as a traceback.
        print(f"airflow-local: {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def serve(server: AirflowServer, user: str, env: dict[str, str], *, unpausing: bool) -> int:
    """Run `server` until a component exits (1) or a signal stops it (0), then stop it."""
    home = server.home
    code = 0
    try:
        print(f"airflow-local: starting Airflow in {home.home} on {server.url} ...", flush=True)
        server.start()
        server.wait_healthy()
        print(
            f"airflow-local: Airflow is ready at {server.url}\n"
            f"  log in as {user}; the password is in {home.passwords_file}\n"
            f"  status page: Browse -> Replication status ({server.url}/mirrorflow/ui)\n"
            f"  component logs: {server.logs}/<component>.log\n"
            "  Ctrl-C stops it.",
            flush=True,
        )
        dags = first_dags(env[CONFIG_ENV], env)
        if unpausing:
            unpause(server, dags)
            print(f"airflow-local: unpaused {', '.join(dags)}", flush=True)
        else:
            print(
                f"airflow-local: DAGs start paused; unpause {', '.join(dags)} in the UI to replicate and "
                "to see heartbeats on the status page",
                flush=True,
            )
        while not (gone := server.exited()):
            server.pids()
            time.sleep(1)
        name, rc = next(iter(gone.items()))
        print(
            f"airflow-local: airflow {name} exited with code {rc}:\n{server.log_tail(name)}", file=sys.stderr
        )
        code = 1
    except _Stop:
        print("airflow-local: stopping ...", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        started = time.monotonic()
        killed = server.stop()
        forced = f"; {len(killed)} process(es) did not stop and were killed" if killed else ""
        idle = server.idle_workers_ended
        if idle:
            forced += (
                f"; {len(idle)} idle LocalExecutor worker(s) the scheduler waited on with every task "
                "ended were stopped (SIGKILL; they ran nothing)"
            )
        phases = ", ".join(f"{name} {took:.1f}s" for name, took in server.stop_phases.items())
        print(f"airflow-local: stopped in {time.monotonic() - started:.1f}s ({phases}){forced}", flush=True)
        # Which ones, so a slow stop can be told apart (mirrorflow puts no secret in a command line).
        for line in killed:
            print(f"  killed: {line[:160]}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
