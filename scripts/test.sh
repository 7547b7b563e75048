#!/usr/bin/env bash
# Set up (scripts/setup.sh), lint, then run the whole test suite (SPANNING_TEST_DEPTH: tests/budget.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
.venv/bin/ruff check spanning buckets sweeping spark_jobs tests bench
# the documentation and its API reference (mkdocs.yml), strict: a broken link or reference fails the run
.venv/bin/mkdocs build --strict --quiet
# two workers: one holds the Spark session and its tests, the other the rest, the longest modules first, in the order
# tests/conftest.py gives (xdist's own reordering off); the slowest named
.venv/bin/python -m pytest --doctest-modules spanning spark_jobs tests -n 2 --dist loadgroup --no-loadscope-reorder --durations=8 "$@"
