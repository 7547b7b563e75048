"""``spanning run --engine local`` against DuckDB, both reading the same CSV file, as whole processes.

    python bench/bench_local_csv.py --rows 30000000 --pairs 3           # issue 66's row: one 30M-row CSV file
    python bench/bench_local_csv.py --rows 3000000 --slide 300 --keys uniform

Each pair starts ``spanning run --engine local`` and a Python process that runs DuckDB's SQL over the same file
(``DUCKDB_SQL``: the explode a user writes: each call into its windows with ``generate_series``, grouped by cell and
window, written as Parquet), in turn, the order turning each pair. The last pair's windows are compared row for row.
Reported: each side's wall time and peak resident memory (``wait4``'s ``ru_maxrss``), and DuckDB s / spanning s,
the median over the pairs. The file is ``spark_jobs.peers.integer_cdr_csv``'s (integer CDRs, epoch seconds, hot
key: 200 cells, one with 38% of the calls; or 10,000 even cells), cached in the temp folder. The TTP (7 days) is
longer than any call, so that no event is late and both give the same windows.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from spark_jobs.peers import integer_cdr_csv

RANGE = 900
DUCKDB_SQL = """
COPY (
  SELECT cell, k * {slide} AS window_start, k * {slide} + {range} AS window_end, count(*) AS "count",
         sum(bytes) AS sum_bytes, max(duration) AS max_duration
  FROM (SELECT cell, bytes, duration,
               unnest(generate_series(CAST(floor((start - {range}) / {slide}) + 1 AS BIGINT),
                      CAST(floor((greatest("end", start + 1) - 1) / {slide}) AS BIGINT))) AS k
        FROM read_csv('{path}', header = true,
                      columns = {{'cell': 'BIGINT', 'start': 'BIGINT', 'end': 'BIGINT', 'bytes': 'BIGINT',
                                 'duration': 'BIGINT'}}))
  GROUP BY cell, k
) TO '{out}' (FORMAT parquet)
"""  # a record with end = start is the point event [start, start + 1), as spanning has it


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident GiB of one process."""
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - began
    if status != 0:
        raise SystemExit(f"{command[:4]} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=30_000_000)
    parser.add_argument("--keys", default="hot", choices=("hot", "uniform"))
    parser.add_argument("--slide", type=int, default=60, help="β in seconds (ω is 15 minutes)")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    path = integer_cdr_csv(args.rows, args.keys)
    work = Path(tempfile.mkdtemp(prefix="spanning-bench-local-"))
    ours = [sys.executable, "-m", "spanning.cli", "run", str(path), "--engine", "local", "--range", str(RANGE),
            "--slide", str(args.slide), "--ttp", "7d", "--start", "start", "--end", "end", "--key", "cell",
            "--agg", "count", "--agg", "sum:bytes", "--agg", "max:duration", "--format", "parquet",
            "--output", str(work / "ours"), "--overwrite"]  # fmt: skip
    sql = DUCKDB_SQL.format(slide=args.slide, range=RANGE, path=path, out=work / "duck.parquet")
    theirs = [sys.executable, "-c", f"import duckdb; duckdb.connect().execute({sql!r})"]
    mine, duck = [], []
    for pair in range(args.pairs):
        order = [("ours", ours), ("duck", theirs)] if pair % 2 == 0 else [("duck", theirs), ("ours", ours)]
        for side, command in order:
            (mine if side == "ours" else duck).append(timed(command))
    # compared after the timings: a child's peak memory counts its parent's at the fork, and the comparison makes
    # this process as large as the windows
    got = pd.read_parquet(work / "ours" / "windows").sort_values(["cell", "window_start"])
    want = pd.read_parquet(work / "duck.parquet").sort_values(["cell", "window_start"])
    columns = ["cell", "window_start", "window_end", "count", "sum_bytes", "max_duration"]
    if not got[columns].reset_index(drop=True).astype("int64").equals(
            want[columns].reset_index(drop=True).astype("int64")):  # fmt: skip
        raise SystemExit("spanning run --engine local and DuckDB differ in their windows")
    ratios = sorted(d[0] / m[0] for m, d in zip(mine, duck, strict=True))

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"

    print(f"{args.rows:,} CDRs, one CSV file ({path.stat().st_size / 2**30:.2f} GiB), {args.keys} key, ω/β 15m/"
          f"{args.slide // 60}m, count + sum:bytes + max:duration; {args.pairs} interleaved pairs of whole processes; "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print("| spanning --engine local s | peak GiB | DuckDB s | peak GiB | DuckDB s / spanning s |")
    print("|---|---|---|---|---|")
    print(f"| {spread([m[0] for m in mine])} | {max(m[1] for m in mine):.2f} | {spread([d[0] for d in duck])} | "
          f"{max(d[1] for d in duck):.2f} | **{statistics.median(ratios):.2f}×** ({ratios[0]:.2f}-{ratios[-1]:.2f}) |")


if __name__ == "__main__":
    main()
