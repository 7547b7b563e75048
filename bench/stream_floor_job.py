"""The floor of any stream over a folder of CDRs, as a whole process: ``spanning stream``'s session and reader.

    python bench/stream_floor_job.py FOLDER WORK [--no-key]

Each file that lands in ``FOLDER`` (one per trigger, available-now) is read and validated as ``spanning stream``
reads it (the reader contract: parsed times, checked values, rejected rows with their reasons), on the session
``spanning stream`` makes (``spark_jobs.sessions.session.get_session``, one state partition per core), into a
``foreachBatch`` that only counts the rows, accepted and rejected, and takes their largest end. No windows, no
state, no output beyond ``WORK/floor.json`` (rows, rejected rows, each trigger's seconds). What a stream does
above this is its own work. ``bench/bench_stream.py --floor`` runs it in its session (``floor_query``), and, with
``--processes``, as this whole process beside ``spanning stream`` and the hand-written stream.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def stream_config(folder: Path, output: Path, aggregates: list[str], query: tuple[int, int, int] = (900, 300, 600),
                  keyed: bool = True, partitions: int | None = None):
    """A stream's query over ``folder`` as ``spanning stream`` takes it: ``query`` is (ω, β, TTP) in seconds, keyed
    by cell or not, each key's series from its first arriving call. The floor's (``count`` only, 15m/5m) reads the
    same columns whatever the windows, so they do not matter to it."""
    from spanning.app.jobspec import EventFields, InputFiles, OutputOptions, RunConfig, SparkOptions, WindowQuery

    return RunConfig(
        inputs=InputFiles([str(folder)]),
        events=EventFields("start", "end", keys=["cell"] if keyed else []),
        query=WindowQuery(*query, aggregates, series_start="first"),
        output=OutputOptions(str(output)),
        spark=SparkOptions("local[2]", partitions),
    )


def floor_query(spark, folder: Path, work: Path, keyed: bool = True) -> dict:
    """Stream ``folder``'s files through the reader contract into a count; each trigger's seconds, as Spark times
    them (``triggerExecution``), and the rows."""
    from pyspark.sql import functions as F

    from spanning.app.stream_command import StreamOptions
    from spark_jobs.reading.prepare import END, REASON
    from spark_jobs.stream.query import streaming_rows

    cfg = stream_config(folder, work / "out", ["count"], keyed=keyed)
    job = streaming_rows(spark, cfg, StreamOptions(str(work / "chk"), max_files_per_trigger=1))
    counted = []

    def each_batch(batch, batch_id):
        rows, rejected, _ = batch.agg(F.count(F.lit(1)), F.count(REASON), F.max(END)).first()
        counted.append((rows, rejected))

    query = (job.prepared.rows.writeStream.foreachBatch(each_batch)
             .option("checkpointLocation", str(work / "chk" / "query")).trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    return {"rows": sum(r for r, _ in counted), "rejected": sum(r for _, r in counted),
            "trigger_seconds": [p["durationMs"]["triggerExecution"] / 1000 for p in progress],
            "trigger_rows": [p["numInputRows"] for p in progress]}  # fmt: skip


def main() -> None:
    from spark_jobs.sessions.session import get_session

    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("work")
    parser.add_argument("--no-key", action="store_true", help="the query has no key (only the columns read differ)")
    args = parser.parse_args()
    began = time.perf_counter()
    spark = get_session("local[2]", throughput_gc=True)  # the JVM that spanning stream starts
    # as spanning stream sets them: one state partition per core
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    result = floor_query(spark, Path(args.folder), work, keyed=not args.no_key)
    result["seconds_in_process"] = round(time.perf_counter() - began, 2)
    (work / "floor.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
