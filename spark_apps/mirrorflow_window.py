"""spark-submit entry point for mirrorflow's micro-batch window (see mirrorflow.spark.window_job)."""

import sys

from mirrorflow.spark.window_job import main

if __name__ == "__main__":
    sys.exit(main())
