"""Issue 67, item 2, rows or partials: the bytes one micro-batch moves across the shuffle as rows (what the executors'
step moves: ``spark_jobs.stream.tasks``) and as partials per (key, window) formed before the shuffle.

    python bench/stream_shuffle_bytes.py [--rows-per-batch 100000] [--cells 10000] [--shapes 15m/5m,15m/1m,1h/1m]

The batch is the second file of ``bench/bench_stream.py``'s (1M generated CDRs over a day, 10k cells, cut by end time
into files of 100k rows: a batch spans 2.4 hours). It goes through ``spanning stream``'s reader contract
(``spark_jobs.stream.query.streaming_rows``, on ``local[2]``), and in its ``foreachBatch``:

- **rows**: the batch repartitioned by key group, as the executors' step does it: Spark's shuffle bytes (its
  ``UnsafeRow`` s, compressed with lz4, Spark's default) and the same rows as Arrow IPC;
- **partials**: each call exploded into the windows ``[k·β, k·β + ω)`` it overlaps and grouped by (cell, k) with
  count, sum of bytes and max of duration (the bench's aggregates), Spark's partial aggregation before the shuffle,
  as the batch job forms its map-side partials: Spark's shuffle bytes and records (the pairs), and the pairs as Arrow
  IPC (cell as text; and a lower bound: cell as an int32 code, k as int32).

Spark's map-side aggregation may write a pair more than once (when its hash map fills): its records then outnumber
the pairs. Arrow IPC is given uncompressed and with lz4 and zstd (``pyarrow.ipc.IpcWriteOptions``). Partials would
still leave the late rows to be sent as rows (they are written as read), and a key's clock before the batch decides
which of an event's windows are still open: neither is counted here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def ipc_bytes(table) -> dict[str, int]:
    """``table``'s bytes as an Arrow IPC stream, uncompressed and compressed."""
    import pyarrow as pa

    out = {}
    for codec in (None, "lz4", "zstd"):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as writer:
            writer.write_table(table)
        out[codec or "none"] = sink.getvalue().size
    return out


def shuffle_written(spark, after: int) -> tuple[int, int, int]:
    """The bytes and records written to the shuffle by the stages with an id above ``after``, and the last stage id
    (Spark's status store, as ``tests/test_stream_executors.py`` reads the task result sizes)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    gateway = spark.sparkContext._gateway
    none = gateway.jvm.java.util.ArrayList()
    stages = store.stageList(none, False, False, gateway.new_array(gateway.jvm.double, 0), none).iterator()
    written = records = 0
    last = after
    while stages.hasNext():
        stage = stages.next()
        last = max(last, stage.stageId())
        if stage.stageId() > after:
            written += stage.shuffleWriteBytes()
            records += stage.shuffleWriteRecords()
    return written, records, last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows-per-batch", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--shapes", default="15m/5m,15m/1m,1h/1m")
    args = parser.parse_args()
    import pyarrow as pa
    from bench_stream import make_files
    from pyspark.sql import functions as F
    from stream_floor_job import stream_config

    from spanning.app.jobspec import parse_duration as d
    from spanning.app.stream_command import StreamOptions
    from spark_jobs.sessions.session import get_session
    from spark_jobs.stream.buckets import BUCKET
    from spark_jobs.stream.query import streaming_rows

    work = Path(tempfile.mkdtemp(prefix="shuffle-bytes-"))
    try:
        make_files(work / "all", 10 * args.rows_per_batch, args.rows_per_batch, args.cells, "parquet")
        (work / "in").mkdir()
        shutil.copy(work / "all" / "cdr-0001.parquet", work / "in" / "cdr-0001.parquet")  # a steady batch
        spark = get_session("local[2]", throughput_gc=True)
        shapes = [tuple(d(x) for x in shape.split("/")) for shape in args.shapes.split(",")]
        results: dict = {}

        def each_batch(batch, batch_id):
            if batch_id:
                return
            batch = batch.where(F.col(BUCKET).isNotNull()).cache()  # the batch's rows (no control rows)
            n = batch.count()
            _, _, last = shuffle_written(spark, -1)
            batch.repartition(2, F.col(BUCKET)).write.format("noop").mode("overwrite").save()
            written, records, last = shuffle_written(spark, last)
            rows = batch.toArrow()
            results["rows"] = {"rows": n, "columns": rows.column_names, "spark_shuffle_bytes": written,
                               "spark_shuffle_records": records, "arrow": ipc_bytes(rows)}  # fmt: skip
            start, end = F.unix_timestamp(F.to_timestamp("start")), F.unix_timestamp(F.to_timestamp("end"))
            for range_, slide in shapes:
                first = F.floor((start - range_) / slide) + 1  # the first window [k·β, k·β + ω) after the start
                last_k = F.floor((F.greatest(end, start + 1) - 1) / slide)  # the last one starting before the end
                pairs = (batch.where(start.isNotNull() & end.isNotNull() & (end >= start))
                         .select("cell", "bytes", "duration", F.explode(F.sequence(first, last_k)).alias("k"))
                         .groupBy("cell", "k").agg(F.count(F.lit(1)).alias("count"), F.sum("bytes").alias("sum_bytes"),
                                                   F.max("duration").alias("max_duration")))  # fmt: skip
                pairs.write.format("noop").mode("overwrite").save()
                written, records, last = shuffle_written(spark, last)
                table = pairs.toArrow()
                codes = pa.table({"cell": pa.compute.dictionary_encode(table["cell"]).combine_chunks().indices,
                                  "k": table["k"].cast(pa.int32()), "count": table["count"],
                                  "sum_bytes": table["sum_bytes"], "max_duration": table["max_duration"]})  # fmt: skip
                results[f"{range_ // 60}m/{slide // 60}m"] = {
                    "pairs": table.num_rows, "pairs_per_row": round(table.num_rows / n, 2),
                    "spark_shuffle_bytes": written, "spark_shuffle_records": records,
                    "arrow": ipc_bytes(table), "arrow_int_codes": ipc_bytes(codes)}  # fmt: skip
            batch.unpersist()

        cfg = stream_config(work / "in", work / "out", ["count", "sum:bytes", "max:duration"])
        job = streaming_rows(spark, cfg, StreamOptions(str(work / "chk"), max_files_per_trigger=1))
        query = (job.rows.writeStream.foreachBatch(each_batch).option("checkpointLocation", str(work / "q"))
                 .trigger(availableNow=True).start())  # fmt: skip
        query.awaitTermination()
        print(json.dumps(results, indent=1))
        rows = results["rows"]
        print(f"\n{rows['rows']:,} rows a batch, {args.cells:,} cells; bytes a batch moves across the shuffle "
              f"(Spark: UnsafeRows, lz4; Arrow IPC: none / lz4 / zstd)")  # fmt: skip
        print("| what | pairs per row | Spark shuffle bytes (per row) | Arrow IPC none / lz4 / zstd |")
        print("|---|---|---|---|")

        def line(name: str, entry: dict, pairs: str) -> None:
            arrow = " / ".join(f"{v / 1e6:.1f}" for v in entry["arrow"].values())
            print(f"| {name} | {pairs} | {entry['spark_shuffle_bytes'] / 1e6:.2f} MB "
                  f"({entry['spark_shuffle_bytes'] / rows['rows']:.0f} B) | {arrow} MB |")  # fmt: skip

        line("rows", rows, "")
        for name, entry in results.items():
            if name != "rows":
                line(f"partials {name}", entry, f"{entry['pairs_per_row']} ({entry['pairs']:,})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
