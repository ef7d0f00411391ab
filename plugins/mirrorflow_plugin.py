"""Airflow plugin: mirrorflow's replication status page, JSON and Prometheus metrics.

Mounted in the api-server at /mirrorflow (/mirrorflow/ui, /mirrorflow/status, /mirrorflow/metrics)
and linked from the UI's Browse menu. See mirrorflow.airflow.status_app."""

from airflow.plugins_manager import AirflowPlugin

from mirrorflow.airflow.plugin import status_fastapi_app


class MirrorflowPlugin(AirflowPlugin):
    name = "mirrorflow"
    fastapi_apps = [{"app": status_fastapi_app(), "url_prefix": "/mirrorflow", "name": "mirrorflow status"}]
    external_views = [
        {
            "name": "Replication status",
            "href": "mirrorflow/ui",
            "url_route": "mirrorflow-status",
            "destination": "nav",
            "category": "browse",
        }
    ]
