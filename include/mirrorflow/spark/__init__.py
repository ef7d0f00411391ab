"""Spark adapters: the driver programs spark_apps/ runs. pyspark is imported only here."""
