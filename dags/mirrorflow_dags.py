"""Airflow DAG file: every mirrorflow DAG (replicate per enabled flow, migrate, ...) from the
MM2 properties file named by MIRRORFLOW_CONFIG. See mirrorflow.airflow.dags."""

from mirrorflow.airflow.dags import build_dags

globals().update(build_dags())
