"""``spanning stream``: the engine as a Structured Streaming job, with checkpointed state and a late output.

The query (``streaming_rows``)::

    file stream of CDR files ─ spread ─ prepare (reader contract) ─ key group ─┐
                                                                             ├─ union ─ foreachBatch (BatchWriter):
    control stream (checkpoint/spanning/control/) ───────────────────────────┘   repartition by key group,
                                                                                 mapInArrow (stream.tasks: reduce,
                                                                                 write), then the batch's record

* **State.** Keys are hashed into a fixed number of key groups (``--buckets``, recorded in the checkpoint as
  ``buckets``). Each group's ``OpenWindows`` (``spanning.engines.open_windows``: per key its series, clock and open
  windows, so what it holds is bounded by its open windows) is kept in the checkpoint as a snapshot and the changed
  keys of each batch since (``stream.bucket_store``): a batch writes the keys it changed, not the group. Each batch's
  record says which files make each group after it.
* **The stateful step is in the executors' tasks** on any master but a local one (``--reduce-on auto``, the
  default; ``spark_jobs.stream.tasks``, since 2026-11-29): one action per
  batch spreads its rows over P tasks by key group (P: ``--parallelism``, Spark's default parallelism unless given,
  free to change at a restart), and each task reduces its groups against their state with the compiled kernel and
  writes its outputs; the driver receives a stats row per group. ``--reduce-on driver`` takes the rows to the driver
  as Arrow and reduces them there, as from 2026-11-28 (``spark_jobs.stream.buckets``). Until then the step was
  Spark's ``applyInPandasWithState`` on the executors, one group per bucket, whose state store commits and windows
  handed back through files cost more than the reduction (docs/STREAMING.md).
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
* **Batches overlap** on the driver (``--reduce-on driver`` without ``--no-overlap`` or ``--idle-flush``):
  ``foreachBatch`` takes a batch's rows to the driver, keeps them in ``checkpoint/spanning/pending/`` and returns,
  and the batch is reduced and written in a thread of its own while the executors read the next batch (one batch in
  flight). A batch that Spark committed but the process did not write is written from its kept rows when the stream
  starts again. On the executors the action reduces and writes the batch before ``foreachBatch`` returns.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spanning import __version__
from spanning.app.csv_records import MALFORMED
from spanning.app.files import Inputs, input_files
from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, UsageError, key_column
from spanning.app.stream_command import JOB_FILE, StreamOptions
from spanning.engines.reader import ColumnStats, text_stats
from spanning.planning.specs import window_labels
from spark_jobs.reading.prepare import (
    KindCounts,
    Prepared,
    csv_file_records,
    local_csv_stats,
    prepared_frame,
    quoted,
    read_input,
)
from spark_jobs.stream.batch_records import save_json
from spark_jobs.stream.bucket_store import STORE_FOLDER, write_whole
from spark_jobs.stream.buckets import BUCKET, CONTROL, FLUSH, BucketReducer, SpecReducers

OPERATOR = "foreachBatch"  # job.json's "operator": the state is the checkpoint's, reduced in foreachBatch's action
# (the executors' tasks or the driver: the same files and records, so a checkpoint goes on with either)
OLDER_OPERATORS = {  # those of checkpoints made before: refused (the versions of their state are in Spark's)
    "transformWithStateInPandas": "2026-11-26", "applyInPandasWithState": "2026-11-28"}  # operator -> until
STATE_STORE = "bucket files"  # job.json's "state": where the open windows are (checkpoint/spanning/buckets/)
PROCESSOR = "python"  # job.json's "processor": the one processor (checkpoints of the removed "jvm" one are refused)
KINDS_FILE = "column-kinds.json"  # in checkpoint/spanning/: the counts that fixed the column kinds
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
    reducer: BucketReducer | SpecReducers  # a batch's rows against the key groups' open windows

    def without_frames(self) -> StreamQuery:
        """What a batch needs, without the DataFrames (a Spark Connect client's, which cannot be pickled): the
        query's ``foreachBatch`` function runs in the Connect server's Python (``stream.remote``)."""
        return replace(self, rows=None, prepared=replace(self.prepared, rows=None))


def job_record(cfg: RunConfig, options: StreamOptions, schema: T.StructType, fmt: str) -> dict:
    """What a checkpoint was made for: a restart must ask for the same."""
    query, events = cfg.query, cfg.events
    return {
        "range": query.range, "slide": query.slide, "windows": [list(spec) for spec in query.windows],
        "ttp": query.ttp, "offset": query.offset,
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
        saved.setdefault("windows", [])  # made before a stream took several window specs: it had one
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
    prepared = prepared_frame(stream, cfg, kinds=kinds, csv=csv)
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

    store = (state / STORE_FOLDER).resolve()
    if cfg.query.windows:  # several specs (``windows=``): a reducer each, over the same rows, their rows tagged
        reducer = SpecReducers([BucketReducer(prepared, replace(cfg, query=cfg.query.one_window(spec)), aggregates,
                                              originals, store, offset=i * options.buckets)
                                for i, spec in enumerate(cfg.query.specs)], window_labels(cfg.query.specs))
    else:
        reducer = BucketReducer(prepared, cfg, aggregates, originals, store)
    return StreamQuery(rows, prepared, cfg, options, aggregates, originals, reducer)


def control_file(folder: Path, name: str, rows: list[dict]) -> None:
    """A control file, whole when the control stream sees it (written under a hidden name, then renamed)."""
    write_whole(folder / name, lambda temp: temp.write_text("".join(json.dumps(row) + "\n" for row in rows)))


def start_query(job: StreamQuery, each_batch: Callable[[DataFrame, int], None], flush: bool = False) -> Any:
    """Start ``job``'s query with ``foreachBatch(each_batch)`` under its checkpoint. ``flush``: first a control file
    that releases every key's windows (the end of the input, as ``spanning run`` ends), for an available-now round
    after the one that read the input."""
    options = job.options
    if flush:
        control_file(Path(options.checkpoint) / "spanning" / "control", f"flush-{time.time_ns()}.json",
                      [{BUCKET: b, CONTROL: 0, FLUSH: True} for b in range(options.buckets)])  # fmt: skip
    return (job.rows.writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", str(Path(options.checkpoint) / "query"))
            .trigger(**options.spark_trigger).start())  # fmt: skip


