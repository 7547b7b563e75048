"""The Spark job against the Spark SQL a user would write instead: explode each call into its windows, group by.

Generated CDRs (7 days, 200 cells) in Parquet; ω/β = 15m/5m, 15m/1m and 1h/1m; count + sum:bytes +
max:duration, and count + sum:bytes; δ longer than the longest call. In one Spark session, the job
(``spark_jobs.run.compute``, plan chosen by ``--plan auto``) and the SQL run interleaved (job, SQL, job,
SQL, ...), each writing Parquet; the results must be identical. Prints medians, spreads and ratios.

    python bench/bench_spark_job.py                          # 3,000,000 rows, 3 rounds
    python bench/bench_spark_job.py --rows 200000 --repeat 1 --sink noop
"""

from __future__ import annotations

import argparse
import os
import platform

from spark_jobs.peers import spark_vs_sql


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--sink", default="parquet", choices=["parquet", "noop"])
    args = parser.parse_args()
    records, agreement = spark_vs_sql(args.rows, args.repeat, lambda m: None, args.master, sink=args.sink)
    print(f"{args.rows:,} CDRs, {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"sink {args.sink}, {args.repeat} interleaved rounds")  # fmt: skip
    failed = [case for case, ok in agreement.items() if not ok]
    if failed:
        raise SystemExit(f"results differ: {failed}")
    print("| ω/β | aggregates | plan | job s (min-max) | SQL s (min-max) | SQL/job median | per-round ratios |")
    print("|---|---|---|---|---|---|---|")
    for job in (r for r in records if r["technique"].startswith("Spark job")):
        sql = next(r for r in records if r["technique"].startswith("Spark SQL") and r["range"] == job["range"]
                   and r["slide"] == job["slide"] and r["aggregates"] == job["aggregates"])  # fmt: skip
        ratios = ", ".join(f"{x:.2f}" for x in job["ratios"])
        print(f"| {job['range'] // 60}m/{job['slide'] // 60}m | {job['aggregates']} | {job['technique'][11:-1]} | "
              f"{job['seconds_median']:.2f} ({job['seconds_min']:.2f}-{job['seconds_max']:.2f}) | "
              f"{sql['seconds_median']:.2f} ({sql['seconds_min']:.2f}-{sql['seconds_max']:.2f}) | "
              f"**{sql['seconds_median'] / job['seconds_median']:.2f}×** | {ratios} |")  # fmt: skip


if __name__ == "__main__":
    main()
