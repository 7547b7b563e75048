#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main Spark job over the bundled sample CDRs:
# per cell, every 5 minutes, the calls active in the last 15 minutes, their bytes and the longest call.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
.venv/bin/spanning run data/sample_cdr.csv \
    --range 15m --slide 5m --ttp 2h \
    --start start --end end --key cell \
    --agg count --agg sum:bytes --agg max:duration \
    --output output/main-job --overwrite "$@"
