"""Entry file for spark-submit: ``spark-submit spark_jobs/submit.py run INPUT ... [spanning run options]``.

The master and resources come from spark-submit; the engine package is shipped to the executors. The
Spark engine is registered here directly, so that a checkout on ``PYTHONPATH`` works without an install
(the ``spanning`` command finds it through its entry point otherwise).
"""

import sys

import spark_jobs.plugin
from spanning.app.plugins import register_engine
from spanning.cli import main

if __name__ == "__main__":
    register_engine("spark", spark_jobs.plugin)
    sys.exit(main())
