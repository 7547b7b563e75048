#!/usr/bin/env bash
# Set up (scripts/setup.sh), lint, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
.venv/bin/ruff check spanning buckets sweeping spark_jobs tests bench
.venv/bin/python -m pytest --doctest-modules spanning tests "$@"
