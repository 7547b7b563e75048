"""``spanning.spark.aggregate`` timed as a user times it: whole processes, interleaved, order alternating.

    python bench/bench_spark_api.py --rows 30000000 --repeat 2

Two comparisons on the hot-key integer CDRs (``spark_jobs.peers.integer_cdr_file``: 60 hours, 200 cells, one
with 38% of the calls), ω/β = 15m/1m (about 16 windows per event), count + sum:bytes + max:duration:

* **plain scan**: ``bench/spark_api_job.py`` (the call on ``spark.read.parquet(path)``) against ``spanning run``
  on the same file; the call should be within 10% of the command;
* **join**: the call on the calls joined with a table of cells (not a plain scan) against the explode script
  (``bench/sql_explode_job.py --join-cells``) on the same DataFrame; the call should be at least 1.5× faster.

Both sides of a pair run with the same settings: the driver heap ``spanning`` gives itself, no class archive,
and the command's shuffle partitions (2 per core) given to the scripts' sessions. Each pair's order alternates
(A, B, then B, A); windows are compared row for row in the first round. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import pandas as pd
from bench_spark_job import process_env, ratio_spread, spread, timed_command

from spark_jobs.peers import integer_cdr_file

HERE = Path(__file__).resolve().parent
AGGS = ["count", "sum:bytes", "max:duration"]


def commands(path: Path, out: Path, range_: int, slide: int, cells: int) -> dict[str, list[str]]:
    partitions = ["--partitions", str(2 * (os.cpu_count() or 2))]
    window = ["--range", str(range_), "--slide", str(slide)]
    return {
        "run": [sys.executable, "-m", "spanning.cli", "run", str(path), *window, "--ttp", "7d", "--start", "start",
                "--end", "end", "--key", "cell", *[x for a in AGGS for x in ("--agg", a)], "--output",
                str(out / "run"), "--overwrite"],
        "call": [sys.executable, str(HERE / "spark_api_job.py"), str(path), str(out / "call"), *window, *partitions],
        "call-join": [sys.executable, str(HERE / "spark_api_job.py"), str(path), str(out / "call-join"), *window,
                      *partitions, "--join-cells", str(cells)],
        "sql-join": [sys.executable, str(HERE / "sql_explode_job.py"), str(path), str(out / "sql-join"), *window,
                     "--max", *partitions, "--join-cells", str(cells)],
    }  # fmt: skip


def windows(folder: Path) -> pd.DataFrame:
    frame = pd.read_parquet(folder, columns=["cell", "window_start", "count", "sum_bytes", "max_duration"])
    frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True).astype("datetime64[us, UTC]")
    return frame.sort_values(["cell", "window_start"]).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=30_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--range", type=int, default=900)
    parser.add_argument("--slide", type=int, default=60)
    parser.add_argument("--out", default="/tmp/spanning-bench-api")
    args = parser.parse_args()
    path = integer_cdr_file(args.rows, "hot", hours=60)
    out = Path(args.out)
    env = process_env(archive=False)
    argv = commands(path, out, args.range, args.slide, cells=200)
    times: dict[str, list[float]] = {name: [] for name in argv}
    for pair in (("call", "run"), ("call-join", "sql-join")):
        for round_ in range(args.repeat):
            for name in pair if round_ % 2 == 0 else reversed(pair):
                times[name].append(timed_command(argv[name], env))
                print(f"{name}: {times[name][-1]:.1f} s", file=sys.stderr, flush=True)
    reference = windows(out / "run" / "windows")
    for name in ("call/windows", "call-join/windows", "sql-join"):
        pd.testing.assert_frame_equal(windows(out / name), reference, check_dtype=False)
    print(f"{args.rows:,} rows, hot key, {args.range}/{args.slide}, {args.repeat} interleaved pairs, order"
          f" alternating; identical windows ({len(reference):,})\n")
    print("| comparison | ours (s) | theirs (s) | theirs / ours |\n|---|---|---|---|")
    print(f"| call on spark.read.parquet vs spanning run | {spread(times['call'])} | {spread(times['run'])} |"
          f" {ratio_spread(times['call'], times['run'])} |")
    print(f"| call on a join vs explode script on the join | {spread(times['call-join'])} |"
          f" {spread(times['sql-join'])} | {ratio_spread(times['call-join'], times['sql-join'])} |")
    ratio = statistics.median(c / r for c, r in zip(times["call"], times["run"], strict=True))
    print(f"\ncall / spanning run: {ratio:.2f} (target ≤ 1.10)")


if __name__ == "__main__":
    main()
