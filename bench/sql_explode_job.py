"""What a user writes instead of ``spanning run``: a standalone PySpark script, explode into windows, group by.

    python bench/sql_explode_job.py CDR.parquet OUTPUT --range 900 --slide 60 [--max] [--no-key] [--floor]

Reads the Parquet CDRs (start and end timestamps, cell, bytes, duration), writes Parquet. Used by
``bench/bench_spark_job.py --processes`` to time whole processes against ``spanning run``. ``--no-key`` totals
all cells (one series); ``--floor`` is the least any job over the file costs: the same read, grouped by cell
only (no windows), and written. Like ``spanning run``, it does not stop Spark: the process exits and its JVM
follows, so both are timed the same way.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--range", type=int, required=True)
    parser.add_argument("--slide", type=int, required=True)
    parser.add_argument("--max", action="store_true", help="also max(duration)")
    parser.add_argument("--no-key", action="store_true", help="one series: all cells together")
    parser.add_argument("--floor", action="store_true", help="group by cell only: the read and the write")
    args = parser.parse_args()
    spark = SparkSession.builder.appName("explode").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(args.input).createOrReplaceTempView("cdr")
    w, s = args.range, args.slide
    longest = ", max(duration) AS max_duration" if args.max else ""
    cell = "" if args.no_key else "cell, "
    if args.floor:
        query = f"SELECT {cell}count(*) AS count, sum(bytes) AS sum_bytes{longest} FROM cdr"
        query += "" if args.no_key else " GROUP BY cell"
    else:
        query = f"""
            SELECT {cell}timestamp_seconds(k * {s}) AS window_start, timestamp_seconds(k * {s} + {w}) AS window_end,
                   count(*) AS count, sum(bytes) AS sum_bytes{longest}
            FROM (SELECT {cell}bytes, duration,
                         explode(sequence(floor((unix_seconds(start) - {w}) / {s}) + 1,
                                          floor((greatest(unix_seconds(end), unix_seconds(start) + 1) - 1) / {s}))) AS k
                  FROM cdr)
            GROUP BY {cell}k
        """
    spark.sql(query).write.mode("overwrite").parquet(args.output)


if __name__ == "__main__":
    main()
