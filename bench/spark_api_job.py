"""A user's PySpark script that calls ``spanning.spark.aggregate`` on a DataFrame and writes its three outputs.

    python bench/spark_api_job.py CDR.parquet OUTPUT --range 900 --slide 60 [--join-cells N] [--partitions N]
    python bench/spark_api_job.py CDR.parquet OUTPUT --range 900 --slide 60 --remote local[2]   # on Spark Connect

The session is the user's own (``SparkSession.builder``, Spark's settings but for ``--partitions``); the calls are
``spark.read.parquet(CDR)`` (a plain scan: the read-side path) or, with ``--join-cells``, that read joined with a
table of cells and filtered on it, as ``bench/sql_explode_job.py --join-cells`` reads them. ``--remote URL``: a
Spark Connect session (``SparkSession.builder.remote``; ``local[2]`` starts a local server in the process).
count, sum:bytes and max:duration per cell, δ = 7 days. It stops Spark at the end, as ``spanning run``'s exit and
the script do.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

import spanning.spark


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--range", type=int, required=True)
    parser.add_argument("--slide", type=int, required=True)
    parser.add_argument("--join-cells", type=int, default=0, metavar="N")
    parser.add_argument("--partitions", type=int, help="spark.sql.shuffle.partitions (default: Spark's)")
    parser.add_argument("--remote", help="a Spark Connect session: sc://host:port, or local[N] for a local server")
    args = parser.parse_args()
    builder = SparkSession.builder.remote(args.remote) if args.remote else SparkSession.builder
    builder = builder.appName("spanning-api").config("spark.ui.enabled", "false")
    if args.partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(args.partitions))
    spark = builder.getOrCreate()
    if not args.remote:
        spark.sparkContext.setLogLevel("ERROR")
    calls = spark.read.parquet(args.input)
    if args.join_cells:
        calls = calls.join(spark.range(args.join_cells).selectExpr("id AS cell", "id % 7 AS region"), "cell")
        calls = calls.where("region >= 0").drop("region")
    result = spanning.spark.aggregate(calls, range=args.range, slide=args.slide, ttp="7d", start="start", end="end",
                                      key="cell", aggregates=["count", "sum:bytes", "max:duration"])  # fmt: skip
    for name in ("windows", "late", "rejected"):
        getattr(result, name).write.mode("overwrite").parquet(f"{args.output}/{name}")
    print(result.plans[0], result.counts)
    spark.stop()  # as spanning run's exit does


if __name__ == "__main__":
    main()
