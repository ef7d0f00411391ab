"""Airflow adapters: DAG builders and operators over mirrorflow's functions (Airflow imports stay here)."""
