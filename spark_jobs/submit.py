"""Entry file for spark-submit: ``spark-submit spark_jobs/submit.py run INPUT ... [spanning run options]``.

The master and resources come from spark-submit; the engine package is shipped to the executors.
"""

import sys

from spanning.cli import main

if __name__ == "__main__":
    sys.exit(main())
