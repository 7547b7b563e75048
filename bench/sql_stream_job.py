"""What a Spark user writes instead of ``spanning stream``: a standalone PySpark streaming script.

    python bench/sql_stream_job.py FOLDER OUTPUT --range 900 --slide 300 --ttp 600 [--master local-cluster[2,1,2048]]

Reads the folder's Parquet CDRs one file per trigger (available-now), explodes each call into the windows
``[k·slide, k·slide + range)`` it overlaps, and counts them with ``withWatermark`` + ``groupBy(cell, window)``
in append mode: count, the sum of ``bytes`` and the max of ``duration``, written as Parquet. The watermark
trails the latest window start by ``range + ttp``, so a window is final about when ``spanning stream``
releases it. Rows behind the watermark are dropped without a word; the script writes their number, the rows
read and each trigger's seconds to ``OUTPUT/stats.json`` (the windows are in ``OUTPUT/windows``). Used by
``bench/bench_stream.py --processes`` to time whole processes against ``spanning stream``, with the settings of
spanning stream's session that are not the query's (one state partition per core, local files without Hadoop's
checksum files, task results in their status messages, the throughput collector). Like the command,
it does not stop Spark: the process exits and its JVM follows, so both are timed the same way.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def peer_query(spark, folder: str, range_: int, slide: int, ttp: int, keyed: bool = True):
    """The streaming windows of the calls in ``folder``: explode, watermark, group by (append mode); per cell, or
    over all calls (``keyed`` false)."""
    from pyspark.sql import functions as F

    schema = spark.read.parquet(folder).schema
    calls = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(folder)
    start, end = F.unix_timestamp(F.to_timestamp("start")), F.unix_timestamp(F.to_timestamp("end"))
    first = F.floor((start - range_) / slide) + 1  # the first window [k·slide, k·slide + range) after start
    last = F.floor((F.greatest(end, start + 1) - 1) / slide)  # the last one starting before the end
    windows = calls.where(start.isNotNull() & end.isNotNull() & (end >= start)).select(
        "cell", "bytes", "duration", F.explode(F.sequence(first, last)).alias("k"))
    windows = windows.withColumn("window_start", F.timestamp_seconds(F.col("k") * slide))
    return (windows.withWatermark("window_start", f"{range_ + ttp} seconds")
            .groupBy(*(["cell"] if keyed else []), "window_start")
            .agg(F.count(F.lit(1)).alias("count"), F.sum("bytes").alias("sum_bytes"),
                 F.max("duration").alias("max_duration")))  # fmt: skip


def main() -> None:
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("output")
    parser.add_argument("--range", type=int, required=True)
    parser.add_argument("--slide", type=int, required=True)
    parser.add_argument("--ttp", type=int, required=True)
    parser.add_argument("--no-key", action="store_true", help="windows over all calls, not per cell")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args()
    import pyspark

    from spark_jobs.sessions.session import (
        LOCAL_DIRECT_RESULTS,
        RAW_LOCAL_FILES,
        check_java,
        compiler_options,
        is_local,
        spark_defaults,
    )

    os.environ.setdefault("SPARK_HOME", str(Path(pyspark.__file__).parent))  # local-cluster starts executors from it
    builder = SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
    # as spanning stream's session: local files without checksum files, direct task results, the throughput collector
    # where the environment chooses none (with bench_stream's --archive on, PYSPARK_SUBMIT_ARGS carries it instead)
    collector = compiler_options(check_java(), False, True, os.environ, spark_defaults())
    if collector:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(collector))
    # the direct results on a local master only, as get_session gives them
    direct = LOCAL_DIRECT_RESULTS if is_local(args.master) else {}
    spark = builder.config(map={**RAW_LOCAL_FILES, **direct}).getOrCreate()
    # as spanning stream sets them: one state partition per core
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    windows = str(Path(args.output) / "windows")

    def each_batch(batch, batch_id):
        batch.write.mode("append").parquet(windows)

    windows_of = peer_query(spark, args.folder, args.range, args.slide, args.ttp, not args.no_key)
    query = (windows_of.writeStream.outputMode("append").foreachBatch(each_batch)
             .option("checkpointLocation", str(Path(args.output) / "checkpoint"))
             .trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    progress = query.recentProgress
    stats = {
        "rows": sum(p["numInputRows"] for p in progress),
        "dropped": sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p["stateOperators"]),
        "trigger_seconds": [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"]],
    }
    Path(args.output, "stats.json").write_text(json.dumps(stats))


if __name__ == "__main__":
    main()
