"""spark-submit entry point for mirrorflow's copy job (see mirrorflow.spark.copy_job)."""

import sys

from mirrorflow.spark.copy_job import main

if __name__ == "__main__":
    sys.exit(main())
