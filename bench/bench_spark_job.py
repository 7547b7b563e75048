"""The Spark job against the Spark SQL query users would write instead (issue 3's benchmark).

Both start from the same prepared events (read and validated once, cached). The SQL query explodes
each call into the windows it overlaps and groups by key and window; the job sorts by key and end and
streams partitions through the engine. δ is longer than the longest call, series start "earliest",
so both must give identical windows, which the script checks before reporting times.

    python bench/bench_spark_job.py                     # 1,000,000 generated CDRs, β = 1m and 5m
    python bench/bench_spark_job.py --rows 100000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import functions as F

from spanning.cdr import generate_cdr
from spanning.jobspec import RunConfig
from spark_jobs.prepare import END, START, events, prepare, read_input
from spark_jobs.session import get_session
from spark_jobs.windowed import LATE_SEQ, window_job

AGGS = ["count", "sum:bytes", "max:duration"]


def sql_query(spark, view: str, cfg: RunConfig) -> str:
    w, s, o = cfg.range, cfg.slide, cfg.offset
    return f"""
        SELECT cell, k * {s} + {o} AS window_start, k * {s} + {o} + {w} AS window_end,
               count(*) AS count, sum(bytes) AS sum_bytes, max(duration) AS max_duration
        FROM (
            SELECT cell, bytes, duration,  -- a record with end = start is the point event [start, start + 1)
                   explode(sequence(
                       floor(({START} - {o} - {w}) / {s}) + 1,
                       floor((greatest({END}, {START} + 1) - 1 - {o}) / {s})
                   )) AS k
            FROM {view}
        )
        GROUP BY cell, k
    """


def timed(action, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default="bench/results/cdr_{rows}.csv")
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    path = Path(args.data.format(rows=args.rows))
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate_cdr(args.rows, seed=11, days=7).to_csv(path, index=False)
    spark = get_session(args.master)
    print(
        f"{args.rows:,} CDRs ({path}), Spark {spark.version} {spark.sparkContext.master},"
        f" {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    )
    probe = RunConfig(inputs=[str(path)], range=900, slide=60, start="start", end="end", keys=["cell"], ttp=0)
    longest = events(prepare(read_input(spark, probe.inputs, None), probe), "first").agg(
        F.max(F.col(END) - F.col(START))
    )
    ttp = int(longest.first()[0]) + 1  # δ longer than every call: nothing is late, as in the SQL query
    for slide in (60, 300):
        cfg = RunConfig(inputs=[str(path)], range=900, slide=slide, ttp=ttp, start="start", end="end",
                        keys=["cell"], aggregates=AGGS)  # fmt: skip
        prepared = prepare(read_input(spark, cfg.inputs, None), cfg)
        rows = events(prepared, "earliest").persist(StorageLevel.MEMORY_ONLY)
        rows.count()
        rows.createOrReplaceTempView("calls")
        job = window_job(rows, prepared, cfg, series_start=True).where(F.col(LATE_SEQ).isNull())
        job = job.where(F.col("__events") > 0).select("cell", "window_start", "window_end", "count", "sum_bytes",
                                                     "max_duration")  # fmt: skip
        sql = spark.sql(sql_query(spark, "calls", cfg))
        got = job.toPandas().sort_values(["cell", "window_start"]).reset_index(drop=True)
        want = sql.toPandas().sort_values(["cell", "window_start"]).reset_index(drop=True)
        numbers = ["window_start", "window_end", "count", "sum_bytes", "max_duration"]
        same = len(got) == len(want) and (got["cell"] == want["cell"]).all()
        same = same and (got[numbers].astype("int64").to_numpy() == want[numbers].astype("int64").to_numpy()).all()
        assert same, "the job and the SQL query disagree"
        t_job = timed(job.write.format("noop").mode("overwrite").save, args.repeat)
        t_sql = timed(sql.write.format("noop").mode("overwrite").save, args.repeat)
        print(
            f"ω=15m β={slide // 60}m δ={ttp}s: {len(got):,} windows, identical results;"
            f" job {min(t_job):.2f} s, SQL explode+group-by {min(t_sql):.2f} s"
            f" -> job is {min(t_sql) / min(t_job):.2f}x the SQL speed"
            f"   (runs job {', '.join(f'{t:.2f}' for t in t_job)}; sql {', '.join(f'{t:.2f}' for t in t_sql)})"
        )
        rows.unpersist()


if __name__ == "__main__":
    main()
