"""The command's adapter: ``spanning run --engine spark`` and ``spanning stream`` over the batch job and the stream.

``run_spark`` checks the inputs before Spark starts, starts the session, and takes the way of
``spanning.spark.aggregate`` (``batch.compute.computed``) over the files as read, then writes the outputs
(``batch.outputs``); ``run_stream`` builds the stream's query over the input folder (``stream.query``) and runs it
with its writer (``stream.writer``) until its trigger ends it or Ctrl-C.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from spanning.app.files import check_plain_columns, input_files
from spanning.app.jobspec import RunConfig, UsageError
from spanning.app.progress import Progress
from spanning.app.stream_command import StreamOptions, stream_output
from spark_jobs.batch.compute import computed, daemon_modules, release, warm_vector_workers
from spark_jobs.batch.csv_read import KindsChanged, csv_merge_is_small
from spark_jobs.batch.outputs import write_outputs
from spark_jobs.batch.plans import jvm_merge_is_small
from spark_jobs.reading.prepare import read_input, small_local_input
from spark_jobs.sessions import session_kind
from spark_jobs.sessions.session import (
    connect_session,
    get_session,
    release_connect_session,
    starting,
    warm_python_workers,
)


def run_spark(cfg: RunConfig, verbose: bool = False) -> dict:
    """Run the job and write its outputs; returns the summary."""
    began = time.perf_counter()
    inputs = input_files(cfg.inputs.paths, cfg.inputs.format, cfg.inputs.delimiter)  # mistakes before Spark starts
    check_plain_columns(cfg, inputs)
    # the JVM's quick compiler alone where the JVM's share of the work is small: a small input, or Parquet or CSV
    # that vector's tasks read themselves into few partials (the JVM only merges them, and the Python workers write
    # the windows; docs/BENCHMARKS.md)
    small_merge = jvm_merge_is_small(cfg, inputs) or (
        cfg.spark.remote is None and csv_merge_is_small(cfg, inputs, cfg.spark.master))
    quick = small_local_input(inputs) or small_merge
    with Progress(quiet_off_terminal=True) as progress:  # on a terminal: what the seconds before the result go to
        if cfg.spark.remote is not None:  # --remote, SPARK_REMOTE: a client of a Spark Connect server
            progress(f"connecting to the Spark Connect server at {cfg.spark.remote}")
            spark = connect_session(cfg.spark.remote, cfg.events.timezone, verbose, cfg.spark.partitions)
        else:
            progress(starting(cfg.spark.master))
            spark = get_session(cfg.spark.master, cfg.events.timezone, verbose, cfg.spark.partitions,
                                quick_compiler=quick,
                                worker_modules=daemon_modules(cfg, inputs, cfg.spark.master or "local[*]"))
        try:
            return _run_job(spark, cfg, inputs, began, progress, small_merge)
        finally:
            if cfg.spark.remote is not None:
                release_connect_session(spark, cfg.spark.remote)


def _run_job(spark: Any, cfg: RunConfig, inputs: Any, began: float, progress: Any, small_merge: bool) -> dict:
    warming = warm_vector_workers(spark, cfg, inputs)
    progress("reading the input and planning the windows")
    job = computed(spark, read_input(spark, inputs), cfg, inputs, warming, side_outputs=True)  # mistakes show here
    progress("computing and writing the windows, the rejected and the late rows")
    try:
        return write_outputs(spark, cfg, job, began, few_windows=small_merge)
    except KindsChanged as changed:  # CSV columns whose first records misled: planned again, on the true counts
        progress("a column's kind differs from its first records': computing the windows again")
        release(job)
        job = computed(spark, read_input(spark, inputs), cfg, inputs, True, True, changed.stats)
        return write_outputs(spark, cfg, job, began, few_windows=small_merge)
    finally:
        release(job)


def series_start_line(series_start: str) -> str:
    """What the stream says of its series start, which differs from ``spanning run``'s default (earliest)."""
    if series_start == "first":
        return ("series start: first (each key's windows start at its first arriving event); `spanning run"
                " --series-start first` gives the same windows on the same files, run's default is earliest")
    return f"series start: {series_start} (every key's windows start there, as with spanning run --series-start)"


def quick_compiler(options: StreamOptions, there: Any) -> bool:
    """Whether the stream's JVM keeps to its quick compiler (C1), as ``spanning run`` does below
    ``QUICK_JIT_INPUT``: only an available-now run, whose input is the local files there at its start (a stream
    that runs on takes both compilers). An 8,000-row drained stream of 4 CSV files (640 kB): 27.0-28.0 s
    against 36.1-37.5 s, whole processes, three interleaved pairs. At 600k rows (14 MB of Parquet, 6 files)
    two pairs showed no difference either way (58.1 and 54.6 s against 55.1 and 64.2 s): run's threshold."""
    return options.trigger == "available-now" and there is not None and small_local_input(there)


def run_stream(cfg: RunConfig, options: StreamOptions, verbose: bool = False, progress: Any = print) -> dict:
    """Run ``spanning stream`` until its trigger ends it (available-now) or Ctrl-C; returns the summary."""
    # imported here: ``spanning run`` loads no module of the stream
    from spark_jobs.stream.buckets import warm_up_in_background
    from spark_jobs.stream.query import count_kinds_ahead, saved_kinds, start_query, streaming_rows
    from spark_jobs.stream.writer import BatchWriter, batch_function

    stream_output(cfg, options, create=False)  # a harmful --output fails before Spark starts
    progress(series_start_line(str(cfg.query.series_start)))
    try:
        there = input_files(cfg.inputs.paths, cfg.inputs.format, cfg.inputs.delimiter)
    except UsageError:
        there = None  # no file there yet, or one of another kind: files_there says which, once Spark is up
    if there is not None:
        check_plain_columns(cfg, there)  # a mistyped column fails before Spark starts
        if saved_kinds(options) is None:  # a new stream: its column kinds are counted while its JVM starts
            count_kinds_ahead(cfg, there)
    waits = Progress(quiet_off_terminal=True)  # on a terminal: the seconds before the first batch's line

    def said(line: str) -> None:  # a batch's line takes the place of the wait's
        waits.done()
        progress(line)

    waits(starting(cfg.spark.master))
    spark = get_session(cfg.spark.master, cfg.events.timezone, verbose, cfg.spark.partitions,
                        quick_compiler=quick_compiler(options, there), throughput_gc=True)
    options = options.resolved(session_kind.master(spark))  # auto: where the master's executors are
    executors = options.reduce_on == "executors"
    csv = there is None or there.format == "csv"  # CSV files are parsed by the batch job's reader, in Python
    if executors or csv:  # the executors' Python workers started, with their imports and the compiled kernel (the
        # stateful step's, stream.tasks), while the driver plans the stream
        warm_python_workers(spark, ("pyarrow", *(["spanning.app.csv_records"] if csv else []),
                                    *(["spark_jobs.stream.tasks"] if executors else [])))  # fmt: skip
    if not executors:
        warm_up_in_background()  # the driver's kernel, which reduces each batch (stream_buckets), while it plans
    job = streaming_rows(spark, cfg, options)
    # on the driver, batches overlap (BatchWriter) unless --no-overlap or --idle-flush, whose control file each
    # batch's watermark decides for the next batch: that must wait for the batch's record
    writer = BatchWriter(job, stream_output(cfg, options), said,
                         overlap=options.overlap and options.idle_flush is None, executors=executors,
                         parallelism=options.parallelism)  # fmt: skip
    each_batch = batch_function(job, writer)
    stopped = False
    waits("planning the stream and reading its first micro-batch (about 15 s)")
    query = start_query(job, each_batch)
    try:
        _wait(query, writer)
        writer.finish()
        if options.trigger == "available-now" and options.final_flush:  # the end of the stream: every key
            query = start_query(job, each_batch, flush=True)
            _wait(query, writer)
            writer.finish()
    except KeyboardInterrupt:
        query.stop()
        stopped = True
    except BaseException:
        writer.finish(quietly=True)  # the batch in flight ends before the error goes on (failed, its rows are kept)
        raise
    finally:
        waits.done()
    writer.finish()  # after Ctrl-C: the batch in flight written, or its failure raised
    return writer.write_summary({"stopped": stopped})


def _wait(query: Any, writer: Any) -> None:
    """Until the query ends (``writer``: the stream's ``BatchWriter``); Spark's count of rows its watermark dropped
    goes into the summary (it stays 0)."""
    seen: set = set()  # the reports taken, by batch and time: an idle trigger reports the next batch's number too
    while True:
        ended = query.awaitTermination(1)
        failed = writer.failure()
        if failed is not None and not ended:  # the batch in flight failed: the stream stops now, with its error
            query.stop()
            raise failed
        recent = query.recentProgress
        for progress in recent:
            if (progress["batchId"], progress["timestamp"]) in seen or progress["id"] is None:
                continue
            seen.add((progress["batchId"], progress["timestamp"]))
            if progress.get("numInputRows"):  # a batch's whole trigger, as Spark times it (foreachBatch is a part);
                # its rows: the files' and the control files' (an idle or no-op trigger has none)
                trigger = progress["durationMs"].get("triggerExecution", 0) / 1000
                started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
                with writer.lock:  # foreachBatch's thread writes the summary
                    writer.trigger_seconds[str(progress["batchId"])] = round(trigger, 3)
                    writer.trigger_started[str(progress["batchId"])] = started
            operators = progress.get("stateOperators", [])
            writer.dropped_by_spark += sum(op.get("numRowsDroppedByWatermark", 0) for op in operators)
        seen &= {(p["batchId"], p["timestamp"]) for p in recent}  # Spark keeps the last reports only: so does this
        if ended:
            break
    if query.exception() is not None:
        raise query.exception()
