"""What a user writes instead of ``spanning run``: a standalone PySpark script, explode into windows, group by.

    python bench/sql_explode_job.py CDR.parquet OUTPUT --range 900 --slide 60 [--max] [--no-key] [--floor]
    python bench/sql_explode_job.py CDR.parquet OUTPUT --range 900 --slide 60 --max --floor-windows
    python bench/sql_explode_job.py CDR.parquet OUTPUT --range 900 --slide 60 --distinct sketch
    python bench/sql_explode_job.py CDR.parquet OUTPUT --range 900 --slide 60 --traffic
    python bench/sql_explode_job.py CDR.csv OUTPUT --range 900 --slide 60 --csv
    python bench/sql_explode_job.py CDR.parquet OUTPUT --range 900 --slide 60 --max --remote local[2]  # Connect

Reads the Parquet CDRs (start and end timestamps, cell, bytes, duration), writes Parquet. Used by
``bench/bench_spark_job.py --processes`` to time whole processes against ``spanning run``, and by
``bench/bench_distinct.py`` with ``--distinct FORM``: count(*) and the distinct subscribers of each window
written as ``FORM`` says (``DISTINCT_FORMS``; ``sketch`` adds the p95 of the durations). ``--no-key`` totals
all cells (one series); ``--floor`` is the least any job over the file costs: the same read, grouped by cell
only (no windows), the times read too, and written; ``--floor-windows`` groups by cell and the window each call
ends in (about as many rows written as the job's windows where the keys are many). ``--traffic``
(``bench/bench_traffic.py``): count(*), the seconds of the calls inside each window (each pair clipped with
``least``/``greatest``) and those over the range, in Erlangs. Like ``spanning run`` (whose exit stops Spark and
removes its temp folders), it stops Spark before it exits, and it runs with spanning run's settings (ANSI off, two
shuffle partitions per core, local files without Hadoop's checksum files), so both are timed the same way.
"""

from __future__ import annotations

import argparse
import os

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_jobs.sessions.session import LOCAL_DIRECT_RESULTS, RAW_LOCAL_FILES  # spanning's session's, not SQL's

# the ways a user writes distinct subscribers (and their p95 duration) per window, named by their functions
DISTINCT_FORMS = {
    "collect_set": "size(collect_set(subscriber)) AS subs",
    "count_distinct": "count(DISTINCT subscriber) AS subs",
    "sketch": "hll_sketch_estimate(hll_sketch_agg(subscriber)) AS subs,"
              " kll_sketch_get_quantile_double(kll_sketch_agg_double(duration), 0.95) AS p95",
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--range", type=int, required=True)
    parser.add_argument("--slide", type=int, required=True)
    parser.add_argument("--max", action="store_true", help="also max(duration)")
    parser.add_argument("--no-key", action="store_true", help="one series: all cells together")
    parser.add_argument("--floor", action="store_true", help="group by cell only: the read and the write")
    parser.add_argument("--floor-windows", action="store_true", help="the floor grouped by cell and each call's last"
                        " window (one window a call, no explode): the read, a shuffle of every row, and a write of"
                        " about as many rows as windows")  # fmt: skip
    parser.add_argument("--distinct", choices=sorted(DISTINCT_FORMS), help="count and distinct subscribers")
    parser.add_argument("--traffic", action="store_true", help="count, occupancy and Erlangs (clipped explode)")
    parser.add_argument("--join-cells", type=int, default=0, metavar="N",
                        help="read the calls joined with a table of N cells (ids 0..N-1) and filtered on it")
    parser.add_argument("--csv", action="store_true", help="the input is CSV (cell, start, end as epoch seconds,"
                        " bytes, duration), read by Spark's reader with a schema")  # fmt: skip
    parser.add_argument("--partitions", type=int, help="spark.sql.shuffle.partitions (default: 2 per core, as"
                        " spanning run)")  # fmt: skip
    parser.add_argument("--remote", help="a Spark Connect session: sc://host:port, or local[N] for a local server")
    args = parser.parse_args()
    # spanning run's settings: ANSI off, two shuffle partitions per core (or --partitions); the same on both sides
    builder = SparkSession.builder.remote(args.remote) if args.remote else SparkSession.builder
    builder = builder.appName("explode").config("spark.ui.enabled", "false")
    builder = builder.config("spark.sql.ansi.enabled", "false")
    # as spanning's session on a local master: local files without Hadoop's checksum files, task results of up to
    # 128 MiB in their status messages (the benches run local)
    builder = builder.config(map={**RAW_LOCAL_FILES, **LOCAL_DIRECT_RESULTS})
    spark = builder.getOrCreate()
    cores = os.cpu_count() if args.remote else spark.sparkContext.defaultParallelism  # a local server: this machine's
    spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions or 2 * cores))
    if not args.remote:
        spark.sparkContext.setLogLevel("ERROR")
    if args.csv:  # CDRs as a switch exports them (spark_jobs.peers.integer_cdr_csv): epoch seconds, read with a schema
        calls = spark.read.schema("cell long, start long, `end` long, bytes long, duration double")
        calls = calls.option("header", True).csv(args.input)
        calls = calls.withColumns({c: F.timestamp_seconds(c) for c in ("start", "end")})
    else:
        calls = spark.read.parquet(args.input)
    if args.join_cells:  # not a plain scan: each call joined with a table of cells (bench/bench_spark_api.py)
        calls = calls.join(spark.range(args.join_cells).selectExpr("id AS cell", "id % 7 AS region"), "cell")
        calls = calls.where("region >= 0").drop("region")
    calls.createOrReplaceTempView("cdr")
    w, s = args.range, args.slide
    longest = ", max(duration) AS max_duration" if args.max else ""
    aggregates, columns = "count(*) AS count, sum(bytes) AS sum_bytes", "bytes, duration"
    if args.distinct:
        aggregates, columns = f"count(*) AS count, {DISTINCT_FORMS[args.distinct]}", "subscriber, duration"
    if args.traffic:  # each (call, window) pair's seconds inside the window
        inside = f"least(e, k * {s} + {w}) - greatest(b, k * {s})"
        aggregates = f"count(*) AS count, sum({inside}) AS occupancy, sum({inside}) / {w} AS erlang"
        columns = "unix_seconds(start) AS b, greatest(unix_seconds(end), unix_seconds(start) + 1) AS e"
    cell = "" if args.no_key else "cell, "
    if args.floor:  # every column the job reads, the times included
        query = (f"SELECT {cell}count(*) AS count, sum(bytes) AS sum_bytes{longest}, min(start) AS first_start,"
                 f" max(end) AS last_end FROM cdr")  # fmt: skip
        query += "" if args.no_key else " GROUP BY cell"
    elif args.floor_windows:  # as many groups as (cell, window) pairs a call ends in, each written
        query = (f"SELECT {cell}floor((unix_seconds(end) - 1) / {s}) AS k, count(*) AS count, sum(bytes) AS sum_bytes"
                 f"{longest}, min(start) AS first_start, max(end) AS last_end FROM cdr GROUP BY {cell}k")  # fmt: skip
    else:
        query = f"""
            SELECT {cell}timestamp_seconds(k * {s}) AS window_start, timestamp_seconds(k * {s} + {w}) AS window_end,
                   {aggregates}{longest}
            FROM (SELECT {cell}{columns},
                         explode(sequence(floor((unix_seconds(start) - {w}) / {s}) + 1,
                                          floor((greatest(unix_seconds(end), unix_seconds(start) + 1) - 1) / {s}))) AS k
                  FROM cdr)
            GROUP BY {cell}k
        """
    spark.sql(query).write.mode("overwrite").parquet(args.output)
    spark.stop()  # as spanning run's exit does: both sides stop Spark inside the timed process


if __name__ == "__main__":
    main()
