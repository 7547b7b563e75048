"""The Spark job against the Spark SQL query users would write instead (issue 3's benchmark).

Generated CDRs (7 days, 200 cells), ω = 15 min with β = 1 min and 5 min, δ longer than the longest
call; both queries start from the same cached, validated events and must give identical windows.

    python bench/bench_spark_job.py                     # 1,000,000 rows, best of 3
    python bench/bench_spark_job.py --rows 100000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import platform

from spark_jobs.peers import spark_vs_sql


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    records, agreement = spark_vs_sql(args.rows, args.repeat, lambda m: None, args.master)
    print(f"{args.rows:,} CDRs, {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}")
    assert all(agreement.values()), agreement
    for slide in (60, 300):
        job, sql = (next(r for r in records if r["slide"] == slide and r["technique"].startswith(t)) for t in
                    ("Spark job", "Spark SQL"))  # fmt: skip
        print(
            f"ω=15m β={slide // 60}m: {job['windows']:,} windows, identical results; job {job['seconds_median']:.2f} s"
            f" (spread {job['seconds_min']:.2f}-{job['seconds_max']:.2f}), SQL {sql['seconds_median']:.2f} s"
            f" -> job is {sql['seconds_median'] / job['seconds_median']:.2f}x the SQL speed"
        )


if __name__ == "__main__":
    main()
