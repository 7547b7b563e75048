"""``spanning stream``: the engine as a Structured Streaming job, with checkpointed state and a late output.

The query (``streaming_rows``)::

    file stream of CDR files ─ spread ─ prepare (reader contract) ─ bucket ─┐
                                                                          ├─ union ─ foreachBatch (BatchWriter):
    control stream (checkpoint/spanning/control/) ────────────────────────┘   the batch as Arrow on the driver,
                                                                              BucketReducer, then the outputs

* **State.** Keys are hashed into a fixed number of buckets (recorded in the checkpoint). Each bucket's
  ``OpenWindows`` (``spanning.engines.open_windows``: per key its series, clock and open windows, so what it holds is
  bounded by its open windows) is kept in the checkpoint as a snapshot and the changed keys of each batch since
  (``spark_jobs.bucket_store``): a batch writes the keys it changed, not the bucket. Each batch's record says which
  files make each bucket after it.
* **The stateful step is on the driver** (``spark_jobs.stream_buckets``, since 2026-11-28). The executors' tasks
  read, spread, validate and bucket a batch's rows; ``foreachBatch`` takes them to the driver as Arrow in one Spark
  action, and the compiled kernel reduces them against each bucket's open windows there. Until then the step was
  Spark's ``applyInPandasWithState`` on the executors, one group per bucket: a shuffle of the rows, and the windows
  handed back through files, which together cost more than the reduction (docs/STREAMING.md).
* **Semantics** are those of ``spanning run`` (docs/SEMANTICS.md): within a micro-batch each key's events are
  taken in end order, each key has its own clock, a window is released once that clock passes its end + TTP,
  and an event that overlaps released windows goes to ``late/`` with ``windows_missed``.
* **Nothing is dropped by Spark.** The query has no stateful operator and no ``withWatermark``: Spark's late-row
  filter exists only with an event-time watermark, so it never sees a row to drop. Lateness is decided per key by
  the engine, and every late row is written. The job still reads Spark's ``numRowsDroppedByWatermark`` into
  summary.json, where it must stay 0.
* **The stream's watermark** (largest end seen minus ``--max-disorder``) is the job's own: each batch's
  buckets report their largest end, and with ``--idle-flush`` the driver writes the new watermark as a
  control file that the next batch hands to every bucket (``OpenWindows.advance``). ``available-now`` ends
  with a control file that flushes every key, as ``spanning run`` does at the end of its input. The control files
  are a file source of the query, so Spark's offset log records which batch took which.
* **Outputs, exactly once.** ``BatchWriter`` writes a batch's windows, late and rejected rows into temporary
  folders and renames each to ``windows/batch=N`` (``late/``, ``rejected/``) only when complete, then the batch's
  record (its state versions among them); a batch run again after a crash starts from the versions of the record
  before it and replaces its own folders, and Spark commits a batch only after ``foreachBatch`` returns.
* **Batches overlap** (``spanning stream`` without ``--no-overlap`` or ``--idle-flush``): ``foreachBatch`` takes a
  batch's rows to the driver, keeps them in ``checkpoint/spanning/pending/`` and returns, and the batch is reduced
  and written in a thread of its own while the executors read the next batch (one batch in flight). A batch that
  Spark committed but the process did not write is written from its kept rows when the stream starts again.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import astuple, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spanning import __version__
from spanning.aggregates import seconds_columns
from spanning.app.csv_records import MALFORMED
from spanning.app.files import Inputs, check_plain_columns, input_files
from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, UsageError, key_column
from spanning.app.progress import Progress
from spanning.app.stream_command import JOB_FILE, StreamOptions
from spanning.engines.reader import CHRONON_MS, CHRONONS_PER_SECOND, ColumnStats, text_stats, tzinfo
from spark_jobs.batch_records import BatchRecords, save_json
from spark_jobs.bucket_store import STORE_FOLDER, Version, write_whole
from spark_jobs.prepare import (
    REASON,
    KindCounts,
    Prepared,
    csv_file_records,
    local_csv_stats,
    prepare,
    quoted,
    read_input,
)
from spark_jobs.run import small_local_input
from spark_jobs.stream_buckets import BUCKET, CONTROL, FLUSH, BucketReducer, warm_up_in_background

OPERATOR = "foreachBatch"  # job.json's "operator": where the open windows are reduced (the driver, stream_buckets)
OLDER_OPERATORS = {  # those of checkpoints made before: refused (the versions of their state are in Spark's)
    "transformWithStateInPandas": "2026-11-26", "applyInPandasWithState": "2026-11-28"}  # operator -> until
STATE_STORE = "bucket files"  # job.json's "state": where the open windows are (checkpoint/spanning/buckets/)
PROCESSOR = "python"  # job.json's "processor": the one processor (checkpoints of the removed "jvm" one are refused)
KINDS_FILE = "column-kinds.json"  # in checkpoint/spanning/: the counts that fixed the column kinds
TRIGGERS_KEPT = 1000  # summary.json's trigger_seconds: the last this many batches
PENDING_FOLDER = "pending"  # in checkpoint/spanning/: the rows of batches Spark committed, until they are written
# without --max-files-per-trigger, a micro-batch takes files up to this many bytes (Spark's maxBytesPerTrigger; one
# file at least): the driver holds a batch's rows as Arrow, 165 bytes a row of the benchmark's CDRs, 6.2 times their
# Parquet bytes and 2.0 times their CSV bytes, so about 200 MB at most (1.2M such rows), well under Spark's
# spark.driver.maxResultSize (1 GiB) and a 1 GiB driver; a bound, not a tuned value
BATCH_BYTES = 32 << 20


@dataclass
class StreamQuery:
    """The streaming rows and what a batch of them needs to be written (``BatchWriter``)."""

    rows: DataFrame  # the reader contract's rows with their bucket, and the control rows
    prepared: Prepared
    cfg: RunConfig
    options: StreamOptions
    aggregates: dict[str, str]  # output name -> internal column of the reducer's windows
    originals: dict[str, str]  # input column -> internal column
    reducer: BucketReducer  # a batch's rows against the buckets' open windows, on the driver


def job_record(cfg: RunConfig, options: StreamOptions, schema: T.StructType, fmt: str) -> dict:
    """What a checkpoint was made for: a restart must ask for the same."""
    query, events = cfg.query, cfg.events
    return {
        "range": query.range, "slide": query.slide, "ttp": query.ttp, "offset": query.offset,
        "aggregates": query.aggregates, "series_start": query.series_start, "keys": events.keys,
        "start": events.start, "end": events.end, "duration": events.duration, "point_events": events.point_events,
        "time_unit": events.time_unit, "buckets": options.buckets, "format": fmt, "schema": schema.json(),
        "processor": PROCESSOR, "operator": OPERATOR, "timezone": events.timezone, "state": STATE_STORE,
        VERSION_ENTRY: __version__,
    }  # fmt: skip


#: job.json's entries that checkpoints made before them lack: compared only where a checkpoint has them
LATER_ENTRIES = ("timezone",)
#: job.json's version of spanning that made the checkpoint: named in a refusal, never compared (a later version
#: that reads the same state goes on with it); checkpoints made before 0.2.0 lack it
VERSION_ENTRY = "spanning_version"


def check_checkpoint(folder: Path, record: dict) -> None:
    """Refuse a checkpoint made for other windows, keys, aggregates or bucket count; record it when new."""
    path = folder / JOB_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        made_by = f"spanning {saved[VERSION_ENTRY]}" if VERSION_ENTRY in saved else "spanning 0.1.0 or earlier"
        saved.setdefault("processor", PROCESSOR)  # a checkpoint made before --processor existed
        saved.setdefault("operator", "transformWithStateInPandas")  # a checkpoint made before "operator" existed
        if saved["processor"] == PROCESSOR and saved["operator"] != OPERATOR:
            until = OLDER_OPERATORS.get(saved["operator"])
            if until is None:  # not one of ours before: a later version's
                raise UsageError(
                    f"--checkpoint {folder.parent} was made by {made_by} with operator {saved['operator']!r}, which"
                    f" spanning {__version__} does not know (a later version's?): go on with the version that made it,"
                    " or give a new --checkpoint (and --output)"
                )
            raise UsageError(
                f"--checkpoint {folder.parent} ({made_by}) keeps which state files make each bucket in the state of"
                f" Spark's {saved['operator']}, which spanning stream used until {until}"
                " (since then the driver reduces each batch and keeps them in the checkpoint's batch records,"
                " docs/STREAMING.md): give a new --checkpoint (and --output), or go on with the earlier version"
            )
        if saved["processor"] != PROCESSOR:
            raise UsageError(
                f"--checkpoint {folder.parent} was made by --processor {saved['processor']} ({made_by}), which spanning"
                " stream no longer has (one processor since 2026-11-26, docs/STREAMING.md): its open windows are"
                f" Parquet under {folder / 'state'}; give a new --checkpoint (and --output) to go on with the one"
                " processor"
            )
        changed = [name for name in record if name not in ("schema", VERSION_ENTRY)
                   and (name in saved or name not in LATER_ENTRIES) and saved.get(name) != record[name]]  # fmt: skip
        if changed:
            details = ", ".join(f"{name} {saved.get(name)!r} -> {record[name]!r}" for name in changed)
            raise UsageError(
                f"--checkpoint {folder.parent} was made by {made_by} for another query ({details}): a checkpoint"
                " continues the stream it was made for; give a new --checkpoint (and --output) for a new query"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    save_json(path, record)


def files_there(spark: SparkSession, cfg: RunConfig, fmt: str | None = None) -> tuple[DataFrame, Inputs]:
    """The files already in the input folder, read as ``spanning run`` reads them, and the checked files (their
    format among them): they fix the schema and the column kinds."""
    try:
        inputs = input_files(cfg.inputs.paths, fmt or cfg.inputs.format, cfg.inputs.delimiter, warn=False)  # told
    except UsageError as err:
        raise UsageError(
            f"{err}: spanning stream reads the schema and column kinds from the files already in"
            f" {cfg.inputs.paths[0]}; put one file there before starting"
        ) from None
    return read_input(spark, inputs), inputs


#: each local Parquet file's kinds' counts of one of its columns (``text_stats``), counted ahead in the background
#: (``count_kinds_ahead``), by (path, size, modification time, column)
_COUNTED_AHEAD: dict[tuple, Future] = {}


def _parquet_file(path: str) -> tuple:
    stat = os.stat(path)
    return path, stat.st_size, stat.st_mtime_ns


def _parquet_counts(path: str, columns: list[str], plain_only: bool = False) -> dict[str, ColumnStats]:
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table's dataset layer cost about 50 ms per file here (6 files of 100k
    # rows, one column: 0.30-0.32 s against 0.016-0.048 s, 2026-11-28)
    table = pq.ParquetFile(path).read(columns=columns)
    return {name: text_stats(table.column(name), plain_only=plain_only) for name in columns}


def local_parquet_stats(cfg: RunConfig, fmt: str) -> Callable[[str, bool], ColumnStats | None] | None:
    """For local Parquet files: ``KindCounts``'s counts of a column of the files there, made on the driver file by
    file (the counts add up) without a Spark job, or taken from ``count_kinds_ahead``; None for other formats and
    remote paths. A column that is not in every file (a partition column) gives None: Spark counts it."""
    if fmt != "parquet" or any("://" in p for p in cfg.inputs.paths):
        return None

    @functools.cache
    def columns_of_files() -> tuple[list[str], set[str]]:  # listed once, when the first column is asked for
        import pyarrow.parquet as pq

        files = input_files(cfg.inputs.paths, fmt, cfg.inputs.delimiter, warn=False).files
        return files, set.intersection(*[set(pq.read_schema(path).names) for path in files]) if files else set()

    def column_stats(name: str, plain_only: bool) -> ColumnStats | None:
        files, columns = columns_of_files()
        if name not in columns:
            return None
        total = ColumnStats()
        for path in files:
            ahead = _COUNTED_AHEAD.get((*_parquet_file(path), name))
            counts = ahead.result()[name] if ahead is not None else _parquet_counts(path, [name], plain_only)[name]
            total = ColumnStats(*[a + b for a, b in zip(astuple(total), astuple(counts), strict=True)])
        if plain_only:  # what the role "plain" reads, as text_stats gives it
            return ColumnStats(present=total.present, plain_integer=total.plain_integer)
        return total

    return column_stats


def count_kinds_ahead(cfg: RunConfig, inputs: Inputs) -> None:
    """Start counting the kinds of the text columns that the query's times and values may read from the local
    Parquet files ``inputs``, in a background thread, for ``local_parquet_stats`` to take: a new stream's start
    counts them while its JVM starts (0.6-0.8 s of the driver's own time for 600k rows, 2026-11-28)."""
    if inputs.format != "parquet" or any("://" in p for p in inputs.files):
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = cfg.events
    names = {fields.start, fields.end, *cfg.query.numeric_columns} - {None}  # a duration is read as a number
    work = []
    for path in inputs.files:
        text = [f.name for f in pq.read_schema(path) if f.name in names and f.type in (pa.string(), pa.large_string())]
        file = _parquet_file(path)
        todo = [name for name in text if (*file, name) not in _COUNTED_AHEAD]
        if todo:
            work.append((path, todo, Future()))
            _COUNTED_AHEAD.update({(*file, name): work[-1][2] for name in todo})

    def count() -> None:  # a daemon thread: a stream that fails to start, or Ctrl-C, does not wait for it
        for path, todo, counted in work:
            try:
                counted.set_result(_parquet_counts(path, todo))
            except Exception as err:  # raised where the counts are taken, as a count made there raises it
                counted.set_exception(err)

    if work:
        threading.Thread(target=count, name="spanning-column-kinds", daemon=True).start()


#: the rows of Spark's ``binaryFile`` source, which a stream must be given
BINARY_FILE = T.StructType([
    T.StructField("path", T.StringType()), T.StructField("modificationTime", T.TimestampType()),
    T.StructField("length", T.LongType()), T.StructField("content", T.BinaryType()),
])  # fmt: skip


def streaming_rows(spark: SparkSession, cfg: RunConfig, options: StreamOptions) -> StreamQuery:
    """The streaming rows of ``spanning stream``: the files that land in its input folder, read as ``spanning run``
    reads them (``stateful_rows`` does the rest, as it does for ``spanning.spark.aggregate`` on a stream).

    Its rows are the reader contract's (the input row, and a ``reason`` where it cannot be used) with their key's
    bucket, and the control rows; ``BatchWriter`` reduces one micro-batch of them on the driver (``job.reducer``)
    and writes the job's outputs.
    """
    folder = Path(cfg.inputs.paths[0])
    state = Path(options.checkpoint) / "spanning"
    saved = json.loads((state / JOB_FILE).read_text()) if (state / JOB_FILE).exists() else {}
    if "format" in saved:  # a restart: the schema the stream started with, not the files there now
        schema, fmt = T.StructType.fromJson(json.loads(saved["schema"])), saved["format"]
        there = inputs = None
    else:
        there, inputs = files_there(spark, cfg)
        schema, fmt = there.schema, inputs.format
    # the column kinds: counted once over the files there at the start, then kept with the checkpoint
    column_stats = local_parquet_stats(cfg, fmt) or local_csv_stats(inputs)
    kinds = KindCounts(lambda: there if there is not None else files_there(spark, cfg, fmt)[0], saved_kinds(options),
                       column_stats)  # fmt: skip
    reader = spark.readStream if fmt == "csv" else spark.readStream.schema(schema)
    if options.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", options.max_files_per_trigger)
    else:  # the driver holds a batch's rows (stream_buckets): a bounded batch, also on a first start on a full folder
        reader = reader.option("maxBytesPerTrigger", BATCH_BYTES)
    if fmt == "csv":  # each new file parsed by the batch job's reader: the same rows, reasons and lines
        files = reader.format("binaryFile").schema(BINARY_FILE).load(str(folder))
        names = [f.name for f in schema.fields if f.name != MALFORMED]  # the schema the files there gave
        stream = csv_file_records(files, names, cfg.inputs.delimiter)
    elif fmt == "parquet":
        stream = reader.parquet(str(folder))
    else:
        stream = reader.json(str(folder))
    job = stateful_rows(spark, stream, cfg, options, kinds, csv=fmt == "csv", spread=cfg.spark.partitions)
    check_checkpoint(state, job_record(cfg, options, schema, fmt))  # once the query is known good (a mistyped
    return job  # column recorded would refuse the corrected restart)


def saved_kinds(options: StreamOptions) -> dict | None:
    """The column kinds' counts a stream's checkpoint keeps (``KINDS_FILE``), or None for a new one."""
    path = Path(options.checkpoint) / "spanning" / KINDS_FILE
    return json.loads(path.read_text()) if path.exists() else None


def stateful_rows(spark: SparkSession, stream: DataFrame, cfg: RunConfig, options: StreamOptions,
                  kinds: KindCounts, csv: bool = False, spread: int | None = None) -> StreamQuery:  # fmt: skip
    """The stream's query over the streaming DataFrame ``stream`` (its checkpoint checked by the caller): the
    reader contract (``prepare``, text columns typed by ``kinds``), each row's bucket, the control stream, and the
    reducer that ``BatchWriter`` runs on each batch. ``spanning stream`` and ``spanning.spark.aggregate`` on a
    streaming DataFrame both come here. ``spread`` (``--partitions``): each batch's rows hashed over that many tasks
    before the reader contract; None leaves them in the tasks that read them."""
    state = Path(options.checkpoint) / "spanning"
    control = state / "control"
    control.mkdir(parents=True, exist_ok=True)
    kinds_file = state / KINDS_FILE
    # No spread unless asked for: Spark packs a batch's small files and splits its large ones (by row group) into
    # about one task per core, and a shuffle of the rows cost more than it gave wherever measured, up to one 12.5 MB
    # file (600k rows, one row group) in one batch: 13.3-14.0 s against 13.9-17.1 s, whole processes (2026-11-28,
    # docs/STREAMING.md). Hashed on the whole row, as the arrival number is (prepare).
    if spread:
        stream = stream.repartition(spread, *[quoted(c) for c in stream.columns])
    prepared = prepare(stream, cfg, csv=csv, kinds=kinds)
    if not kinds_file.exists():
        save_json(kinds_file, kinds.saved)
    aggregates = {name: f"_agg_{i}" for i, name in enumerate([*cfg.query.aggregate_columns, EVENTS_COLUMN])}
    originals = {name: f"_in_{i}" for i, name in enumerate(prepared.original_columns)}
    control_schema = T.StructType([T.StructField(BUCKET, T.IntegerType()), T.StructField(CONTROL, T.LongType()),
                                   T.StructField(FLUSH, T.BooleanType())])  # fmt: skip
    controls = spark.readStream.schema(control_schema).option("maxFilesPerTrigger", 1).json(str(control))
    keys = [key_column(i) for i in range(len(prepared.keys))]
    bucket = F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(options.buckets)) if keys else F.lit(0)
    rows = prepared.rows.withColumn(BUCKET, bucket.cast("int"))
    rows = rows.withColumn(CONTROL, F.lit(None).cast("long")).withColumn(FLUSH, F.lit(None).cast("boolean"))
    rows = rows.unionByName(controls, allowMissingColumns=True)

    store = state / STORE_FOLDER
    reducer = BucketReducer(prepared, cfg, aggregates, originals, store.resolve())
    return StreamQuery(rows, prepared, cfg, options, aggregates, originals, reducer)


class BatchWriter:
    """``foreachBatch``: one micro-batch of ``StreamQuery.rows`` into windows/, late/, rejected/ and the summary.

    ``overlap``: the batch's reduction and writes run in a thread of their own while Spark goes on to the next batch,
    whose rows the executors read meanwhile (one batch in flight: the next waits for it before it is handed over).
    Spark commits a batch once ``foreachBatch`` returns, so its rows are first kept in the checkpoint
    (``PENDING_FOLDER``) until its record is written; a restart writes any batch kept there before Spark starts."""

    def __init__(self, job: StreamQuery, output: Path | None, progress: Any = print,
                 sink: Callable[[dict, int], None] | None = None, overlap: bool = False) -> None:  # fmt: skip
        """``output``: the folder of windows/, late/, rejected/ and summary.json; or None with ``sink``, which is
        given each batch's three outputs as Arrow tables (name -> table) and its id, and writes them."""
        self.job, self.output, self.progress = job, output, progress
        self.sink = sink if sink is not None else self._write_files
        # the session's time zone, which the batches' sessions (Spark's copies) keep: the windows' bounds are in it
        self.zone = job.rows.sparkSession.conf.get("spark.sql.session.timeZone")
        for orphan in [] if output is None else output.glob("*/_tmp-batch=*"):  # a batch killed while writing:
            shutil.rmtree(orphan, ignore_errors=True)  # it runs again from the checkpoint
        self.lock = threading.Lock()
        # read once: the batches of earlier runs (a batch run again replaces its record), the oldest folded
        self.records = BatchRecords(Path(job.options.checkpoint) / "spanning")
        previous = None if output is None else self.output / "summary.json"
        summary = json.loads(previous.read_text()) if previous is not None and previous.exists() else {}
        self.dropped_by_spark = summary.get("rows_dropped_by_spark", 0)  # over every run of the stream
        self.trigger_seconds: dict[str, float] = summary.get("trigger_seconds", {})  # batch -> Spark's trigger time
        self.trigger_started: dict[str, float] = {}  # batch -> its trigger's start (epoch seconds), this run's
        self.pending = Path(job.options.checkpoint) / "spanning" / PENDING_FOLDER
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="spanning-batch") if overlap else None
        self._in_flight: Future | None = None
        self._write_kept()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        began = time.perf_counter()
        rows = batch.toArrow()  # the one Spark action of a batch
        collected = round(time.perf_counter() - began, 3)
        if self._worker is None:  # no overlap
            self._finish(rows, batch_id, collected)
            return
        self._keep(rows, batch_id)  # before Spark commits the batch
        self.finish()  # the batch before, whose failure fails this one (its rows are kept: a restart writes them)
        self._in_flight = self._worker.submit(self._finish, rows, batch_id, collected)

    def finish(self, quietly: bool = False) -> None:
        """Wait for the batch in flight (``overlap``), raising its failure (``quietly``: not, while another error is
        on its way; the failed batch's rows stay kept for a restart). Interrupted (Ctrl-C), it is still in flight."""
        in_flight = self._in_flight
        if in_flight is None:
            return
        try:
            in_flight.result()
        except Exception:
            if not quietly:
                raise
        finally:
            if in_flight.done():  # its outcome given once
                self._in_flight = None

    def failure(self) -> BaseException | None:
        """The failure of the batch in flight, once it has failed (``_wait`` stops the stream then, rather than at
        the next batch, which may be long in coming)."""
        in_flight = self._in_flight
        return in_flight.exception() if in_flight is not None and in_flight.done() else None

    def _finish(self, rows: Any, batch_id: int, collected: float) -> None:
        """A batch's rows, taken to the driver in ``collected`` seconds, reduced and written, then its record."""
        began = time.perf_counter()
        counts = self._write(rows, batch_id)
        record = {"batch": batch_id, **counts, "collect_seconds": collected,
                  "seconds": round(collected + time.perf_counter() - began, 3), "done_at": round(time.time(), 3)}
        with self.lock:
            self.records.add(record)
        self._kept(batch_id).unlink(missing_ok=True)
        self.progress(self.describe(record))
        self.write_summary()

    def _keep(self, rows: Any, batch_id: int) -> None:
        """A batch's rows in ``PENDING_FOLDER`` as an Arrow file, whole (written under a hidden name, then renamed)."""
        import pyarrow as pa

        def write(temp: Path) -> None:
            with pa.OSFile(str(temp), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as file:
                file.write_table(rows)

        self.pending.mkdir(parents=True, exist_ok=True)
        write_whole(self._kept(batch_id), write)

    def _kept(self, batch_id: int) -> Path:
        """Where a batch's rows are kept until it is written."""
        return self.pending / f"{batch_id:08d}.arrow"

    def _write_kept(self) -> None:
        """The batches that Spark committed before their outputs were written (the process stopped in between):
        written from their kept rows, in batch order, before Spark starts the next."""
        import pyarrow as pa

        for path in sorted(self.pending.glob("[0-9]*.arrow")) if self.pending.exists() else []:
            if not path.stem.isdigit():  # not one of ours
                continue
            batch_id = int(path.stem)
            if batch_id in self.records.by_batch:  # written, its rows not yet removed
                path.unlink()
                continue
            with pa.OSFile(str(path)) as source:  # read into memory: the file goes once the batch is written
                rows = pa.ipc.open_file(source).read_all()
            self.progress(f"batch {batch_id}: committed by Spark before it was written; written from {path}")
            self._finish(rows, batch_id, 0.0)

    def _write(self, rows: Any, batch_id: int) -> dict:
        """A batch's rows (as Arrow, on the driver) reduced against the buckets' state as it was before this batch,
        then each output's files, whole or not at all."""
        import pyarrow as pa

        job = self.job
        began = time.perf_counter()
        before = self.versions_before(batch_id)
        reduced = job.reducer(rows, before)
        windows = self._as_output(reduced.windows, self.zone)
        computed = time.perf_counter()
        keys = {k: key_column(i) for i, k in enumerate(job.prepared.keys)}
        outputs = {
            "windows": (windows, {**keys, "window_start": "window_start", "window_end": "window_end",
                                  **{n: i for n, i in job.aggregates.items() if n != EVENTS_COLUMN}}),
            "late": (reduced.late, {**job.originals, "windows_missed": "windows_missed"}),
            "rejected": (reduced.rejected, {**job.originals, REASON: REASON}),
        }  # fmt: skip
        tables = {kind: pa.table({name: rows.column(internal) for name, internal in columns.items()})
                  for kind, (rows, columns) in outputs.items()}  # fmt: skip
        counts = {kind: rows.num_rows for kind, rows in tables.items()}
        self.sink(tables, batch_id)
        stats = reduced.buckets
        ends = [b["max_end"] for b in stats.values() if b["max_end"] is not None]
        # every bucket's state version after this batch: those it left alone carried over
        after = {**{str(b): list(v) for b, v in before.items()}, **{str(b): s["version"] for b, s in stats.items()}}
        return {"rows_read": sum(b["accepted"] for b in stats.values()) + counts["rejected"], **counts,
                "max_end": max(ends) if ends else None, "compute_seconds": round(computed - began, 3),
                "state_written": sum(b["state_written"] for b in stats.values()),
                "write_seconds": round(time.perf_counter() - computed, 3),
                "buckets": {str(b): {k: v[k] for k in ("keys", "held_windows", "state_bytes", "state_written")}
                            for b, v in stats.items()},
                "versions": after}  # fmt: skip

    def versions_before(self, batch_id: int) -> dict[int, Version]:
        """Each bucket's state version as the last batch before ``batch_id`` left it (a batch that Spark runs again
        starts from the state its first run started from)."""
        with self.lock:
            return self.records.versions_before(batch_id)

    def _write_files(self, tables: dict, batch_id: int) -> None:
        """Each non-empty output of a batch as ``kind/batch=N/``, renamed in whole: a batch run again after a crash
        replaces its own folders."""
        import pyarrow.parquet as pq

        for kind, rows in tables.items():
            if not rows.num_rows:
                continue
            final = self.output / kind / f"batch={batch_id}"
            temp = self.output / kind / f"_tmp-batch={batch_id}"
            shutil.rmtree(temp, ignore_errors=True)
            temp.mkdir(parents=True)
            pq.write_table(rows, temp / "part-00000.parquet")
            shutil.rmtree(final, ignore_errors=True)
            os.replace(temp, final)

    def _as_output(self, windows: Any, zone: str) -> Any:
        """The reducer's windows as the job writes them: their bounds as times (in the session's time zone, as
        Spark hands timestamps to Arrow; ``spark_jobs.run.to_time``) and ``occupancy`` in seconds
        (``spark_jobs.run.to_seconds``), as ``spanning run``'s SQL makes them."""
        import pyarrow as pa
        import pyarrow.compute as pc

        job = self.job
        per_second = CHRONONS_PER_SECOND[job.cfg.events.time_unit]
        if job.prepared.time_is_timestamp:
            for name in ("window_start", "window_end"):
                micros = pc.multiply_checked(windows.column(name), 1_000_000 // per_second)
                windows = windows.set_column(windows.schema.get_field_index(name), name,
                                             micros.cast(pa.timestamp("us", zone)))  # fmt: skip
        for name in seconds_columns(job.cfg.query.aggregate_columns, job.cfg.events.time_unit):
            internal = job.aggregates[name]  # chronons / chronons per second
            seconds = pc.divide(windows.column(internal).cast(pa.float64()), float(per_second))
            windows = windows.set_column(windows.schema.get_field_index(internal), internal, seconds)
        return windows

    def describe(self, record: dict) -> str:
        watermark = self.watermark()
        if watermark is not None and self.job.prepared.time_is_timestamp:  # as a time in --timezone
            events = self.job.cfg.events
            seconds = watermark * CHRONON_MS[events.time_unit] / 1000
            watermark = datetime.fromtimestamp(seconds, tzinfo(events.timezone)).isoformat(sep=" ")
        rate = record["rows_read"] / record["seconds"] if record.get("seconds") else 0.0
        return (f"batch {record['batch']}: {record['rows_read']} rows, {record['windows']} windows released,"
                f" {record['late']} late, {record['rejected']} rejected, watermark {watermark},"
                f" {record.get('seconds', 0):.2f} s ({rate:,.0f} rows/s)")  # fmt: skip

    def watermark(self) -> int | None:
        """The stream's watermark: the largest end seen, minus --max-disorder."""
        largest = self.records.max_end()
        return None if largest is None else largest - self.job.options.max_disorder

    def recent_triggers(self) -> dict[str, float]:
        """``trigger_seconds`` of the last ``TRIGGERS_KEPT`` batches (a stream that runs for months stays small)."""
        recent = sorted(self.trigger_seconds, key=int)[-TRIGGERS_KEPT:]
        self.trigger_seconds = {batch: self.trigger_seconds[batch] for batch in recent}
        self.trigger_started = {b: t for b, t in self.trigger_started.items() if b in self.trigger_seconds}
        return dict(self.trigger_seconds)

    def batch_seconds(self) -> dict[str, float]:
        """Of this run's batches whose records are kept: from the start of the batch's trigger to its record, written
        once its outputs are (with ``overlap``, that runs into the next batch's trigger)."""
        return {str(r["batch"]): round(r["done_at"] - self.trigger_started[str(r["batch"])], 3)
                for r in self.records.records() if "done_at" in r and str(r["batch"]) in self.trigger_started}

    def write_summary(self, extra: dict | None = None) -> dict:
        with self.lock:
            totals = self.records.totals()
            read, rejected = totals["rows_read"], totals["rejected"]
            # the names of spanning run's summary.json (a batch's record keeps its own short names)
            total = {"rows_read": read, "accepted": read - rejected, "rejected": rejected, "late": totals["late"],
                     "windows_written": totals["windows"]}  # fmt: skip
            state = totals["buckets"]  # each bucket as its last batch left it
            summary = {
                **total, "batches": totals["batches"], "watermark": self.watermark(),
                **{name: sum(b[name] for b in state.values()) for name in ("keys", "held_windows", "state_bytes")},
                "rows_dropped_by_spark": self.dropped_by_spark, "trigger_seconds": self.recent_triggers(),
                "batch_seconds": self.batch_seconds(),
                "output": None if self.output is None else str(self.output),
                "checkpoint": str(Path(self.job.options.checkpoint).resolve()),
                **(extra or {}),
            }  # fmt: skip
            if self.output is not None:
                save_json(self.output / "summary.json", summary)
            return summary


def _control_file(folder: Path, name: str, rows: list[dict]) -> None:
    """A control file, whole when the control stream sees it (written under a hidden name, then renamed)."""
    write_whole(folder / name, lambda temp: temp.write_text("".join(json.dumps(row) + "\n" for row in rows)))


class IdleFlush:
    """With ``--idle-flush``: after a batch that moved the watermark, a control file for every bucket (``advance``)."""

    def __init__(self, job: StreamQuery, writer: BatchWriter) -> None:
        self.job, self.writer = job, writer
        self.folder = Path(job.options.checkpoint) / "spanning" / "control"
        # the clock of the last control file: only a later one is written
        self.last = max((json.loads(path.read_text().splitlines()[0])[CONTROL]
                         for path in self.folder.glob("advance-*.json")), default=None)  # fmt: skip

    def after_batch(self, batch_id: int) -> None:
        options, spec = self.job.options, self.job.cfg.query.spec
        watermark = self.writer.watermark()
        if options.idle_flush is None or watermark is None:
            return
        # windows whose end the watermark passed by --idle-flush: released by a clock past end + TTP
        clock = watermark - options.idle_flush + spec.ttp + 1
        if self.last is not None and clock <= self.last:
            return  # nothing new to release (and no batch of its own to trigger)
        _control_file(self.folder, f"advance-{batch_id:08d}.json",
                      [{BUCKET: b, CONTROL: clock, FLUSH: False} for b in range(options.buckets)])  # fmt: skip
        self.last = clock


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
    from spanning.app.stream_command import stream_output
    from spark_jobs.session import get_session, starting, warm_python_workers

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
    if there is None or there.format == "csv":  # the only Python the executors run: CSV files parsed by the batch
        # job's reader (the driver reduces each batch); started with its imports while the driver plans the stream
        warm_python_workers(spark, ("pyarrow", "spanning.app.csv_records"))
    warm_up_in_background()  # the driver's kernel, which reduces each batch (stream_buckets), while it plans
    job = streaming_rows(spark, cfg, options)
    # batches overlap (BatchWriter) unless --no-overlap or --idle-flush, whose control file each batch's watermark
    # decides for the next batch: that must wait for the batch's record
    writer = BatchWriter(job, stream_output(cfg, options), said,
                         overlap=options.overlap and options.idle_flush is None)  # fmt: skip
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


def batch_function(job: StreamQuery, writer: BatchWriter) -> Callable[[DataFrame, int], None]:
    """``foreachBatch``'s function: the batch written, then (``--idle-flush``) the control file its watermark calls
    for. One per stream, for all its queries (the drained round's too): ``IdleFlush`` remembers its last clock."""
    idle = IdleFlush(job, writer)

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        writer(batch, batch_id)
        idle.after_batch(batch_id)

    return each_batch


def start_query(job: StreamQuery, each_batch: Callable[[DataFrame, int], None], flush: bool = False) -> Any:
    """Start ``job``'s query with ``foreachBatch(each_batch)`` under its checkpoint. ``flush``: first a control file
    that releases every key's windows (the end of the input, as ``spanning run`` ends), for an available-now round
    after the one that read the input."""
    options = job.options
    if flush:
        _control_file(Path(options.checkpoint) / "spanning" / "control", f"flush-{time.time_ns()}.json",
                      [{BUCKET: b, CONTROL: 0, FLUSH: True} for b in range(options.buckets)])  # fmt: skip
    return (job.rows.writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", str(Path(options.checkpoint) / "query"))
            .trigger(**options.spark_trigger).start())  # fmt: skip


def _wait(query: Any, writer: BatchWriter) -> None:
    """Until the query ends; Spark's count of rows its watermark dropped goes into the summary (it stays 0)."""
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
