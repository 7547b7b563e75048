"""``spanning stream``: the engine as a Structured Streaming job, with checkpointed state and a late output.

The query (``streaming_rows``)::

    file stream of CDR files ─ prepare (reader contract) ─┐
                                                          ├─ union ─ pack ─ groupBy(bucket) ─ applyInPandas-
    control stream (checkpoint/spanning/control/) ────────┘                           WithState (reduce_bucket)

* **State.** Keys are hashed into a fixed number of buckets (recorded in the checkpoint). Each bucket is one
  Spark group, and its ``OpenWindows`` (``spanning.engines.open_windows``: per key its series, clock and open
  windows, so what it holds is bounded by its open windows) is kept in the checkpoint as a snapshot and the
  changed keys of each batch since (``spark_jobs.bucket_store``): a batch writes the keys it changed, not the
  bucket. Spark's state value per bucket says which files make it. One Spark group per key would cost a JVM
  round trip per key and batch.
* **Semantics** are those of ``spanning run`` (docs/SEMANTICS.md): within a micro-batch each key's events are
  taken in end order, each key has its own clock, a window is released once that clock passes its end + TTP,
  and an event that overlaps released windows goes to ``late/`` with ``windows_missed``.
* **Nothing is dropped by Spark.** The stateful operator (``applyInPandasWithState``) runs with ``NoTimeout`` and
  the query has no ``withWatermark``: Spark's late-row filter exists only with an event-time watermark, so it never
  sees a row to drop. Lateness is decided per key by the engine, and every late row is written. The job still reads
  Spark's ``numRowsDroppedByWatermark`` into summary.json, where it must stay 0.
* **The stream's watermark** (largest end seen minus ``--max-disorder``) is the job's own: each batch's
  buckets report their largest end, and with ``--idle-flush`` the driver writes the new watermark as a
  control file that the next batch hands to every bucket (``OpenWindows.advance``). ``available-now`` ends
  with a control file that flushes every key, as ``spanning run`` does at the end of its input.
* **Packed rows.** A task packs its rows per bucket into one row (the bucket, its rows as an Arrow IPC stream:
  ``packing_functions``), and each bucket's output leaves the processor the same way, as an Arrow IPC file in the
  checkpoint's ``outbox/`` that its one row names, read by ``BatchWriter`` on the driver, which empties the outbox
  once the batch is written: a batch crosses the stateful step as a few rows each way (PySpark's
  ``transformWithStateInPandas``, the step until 2026-11-26, handed its input to pandas row by row). The rows are
  not reduced before the exchange: at 10 events per key and batch, partials per (key, window) would be 0.85-9 times
  as many as the rows from 3 to 60 windows per event (docs/STREAMING.md). One processor since 2026-11-26: the JVM
  micro-batch processor (``--processor jvm``) was removed.
* **Outputs, exactly once.** ``foreachBatch`` takes each batch's rows to the driver as Arrow (one Spark
  action), writes its windows, late and rejected rows into temporary folders and renames each to
  ``windows/batch=N`` (``late/``, ``rejected/``) only when complete; a batch run again after a crash
  replaces its own folders, and Spark commits a batch only after ``foreachBatch`` returns.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from spanning.aggregates import seconds_columns
from spanning.app.csv_records import MALFORMED
from spanning.app.files import Inputs, check_plain_columns, input_files
from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, UsageError, key_column
from spanning.app.progress import Progress
from spanning.app.stream_command import StreamOptions
from spanning.engines.reader import CHRONON_MS, CHRONONS_PER_SECOND, tzinfo
from spark_jobs.bucket_store import STORE_FOLDER, Version, new_stream_id
from spark_jobs.prepare import (
    END,
    REASON,
    SEQ,
    START,
    KindCounts,
    Prepared,
    csv_file_records,
    local_csv_text,
    prepare,
    quoted,
    read_input,
    valid_column,
)
from spark_jobs.run import small_local_input, to_seconds, to_time
from spark_jobs.windowed import result_type

BUCKET, KIND, CONTROL, FLUSH = "_bucket", "_kind", "_control_clock", "_control_flush"
JOB_FILE = "job.json"  # in checkpoint/spanning/: what the checkpoint was made for
OPERATOR = "applyInPandasWithState"  # job.json's "operator": the Spark stateful step whose state the checkpoint holds
OLDER_OPERATOR = "transformWithStateInPandas"  # that of checkpoints made before 2026-11-26 (refused: other state)
# Spark's value per bucket: which files of the bucket store make its state (spark_jobs.bucket_store.Version)
BUCKET_STATE = T.StructType([T.StructField(name, T.LongType()) for name in Version._fields])
STATE_STORE = "bucket files"  # job.json's "state": where the open windows are (checkpoint/spanning/buckets/)
OLDER_STATE_STORE = "spark"  # that of checkpoints made before 2026-11-27: each bucket whole in Spark's state store
PROCESSOR = "python"  # job.json's "processor": the one processor (checkpoints of the removed "jvm" one are refused)
KINDS_FILE = "column-kinds.json"  # in checkpoint/spanning/: the counts that fixed the column kinds
FAIL_ONCE: tuple[str, int] | None = None  # recovery tests: (flag file, end): a batch fails once past that end
TRIGGERS_KEPT = 1000  # summary.json's trigger_seconds: the last this many batches
PAYLOAD = "_rows"  # packed rows: a bucket's rows as one Arrow IPC stream (packing_functions)
PACKED = T.StructType([T.StructField(BUCKET, T.IntegerType()), T.StructField(PAYLOAD, T.BinaryType())])
PACK_ROWS = 1 << 20  # a task packs its rows per bucket at most this many at a time (memory bound)
OUTBOX = "outbox"  # in checkpoint/spanning/: each bucket's output of the batch running, an Arrow IPC file
IN_OUTBOX = b"outbox:"  # a packed payload that names an outbox file instead of holding the rows
STATS = ("accepted", "max_end", "keys", "held_windows", "state_bytes", "state_written", "windows", "late",
         "rejected")  # per bucket and batch


@dataclass
class StreamQuery:
    """The streaming rows and what a batch of them needs to be written (``BatchWriter``)."""

    rows: DataFrame  # the processor's output: one row per released window, late event, rejected row or bucket stat
    prepared: Prepared
    cfg: RunConfig
    options: StreamOptions
    aggregates: dict[str, str]  # output name -> internal column of the processor's output
    originals: dict[str, str]  # input column -> internal column
    packed: DataFrame | None = None  # the Python processor's output as it leaves it: ``rows`` packed per bucket


def job_record(cfg: RunConfig, options: StreamOptions, schema: T.StructType, fmt: str) -> dict:
    """What a checkpoint was made for: a restart must ask for the same."""
    query, events = cfg.query, cfg.events
    return {
        "range": query.range, "slide": query.slide, "ttp": query.ttp, "offset": query.offset,
        "aggregates": query.aggregates, "series_start": query.series_start, "keys": events.keys,
        "start": events.start, "end": events.end, "duration": events.duration, "point_events": events.point_events,
        "time_unit": events.time_unit, "buckets": options.buckets, "format": fmt, "schema": schema.json(),
        "processor": PROCESSOR, "operator": OPERATOR, "timezone": events.timezone, "state": STATE_STORE,
    }  # fmt: skip


#: job.json's entries that checkpoints made before them lack: compared only where a checkpoint has them
LATER_ENTRIES = ("timezone",)


def check_checkpoint(folder: Path, record: dict) -> None:
    """Refuse a checkpoint made for other windows, keys, aggregates or bucket count; record it when new."""
    path = folder / JOB_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        saved.setdefault("processor", PROCESSOR)  # a checkpoint made before --processor existed
        saved.setdefault("operator", OLDER_OPERATOR)
        saved.setdefault("state", OLDER_STATE_STORE)
        if saved["processor"] == PROCESSOR and saved["operator"] != OPERATOR:
            raise UsageError(
                f"--checkpoint {folder.parent} holds its windows in the state of Spark's {saved['operator']}, which"
                f" spanning stream no longer uses (it keeps them with {OPERATOR} since 2026-11-26,"
                " docs/STREAMING.md): give a new --checkpoint (and --output), or go on with the earlier version"
            )
        if saved["processor"] == PROCESSOR and saved["state"] != STATE_STORE:
            raise UsageError(
                f"--checkpoint {folder.parent} holds each bucket's open windows whole in Spark's state store, which"
                " spanning stream no longer uses (since 2026-11-27 a batch writes only the keys it changes, under"
                f" {folder / STORE_FOLDER}, docs/STREAMING.md): give a new --checkpoint (and --output), or go on with"
                " the earlier version"
            )
        if saved["processor"] != PROCESSOR:
            raise UsageError(
                f"--checkpoint {folder.parent} was made by --processor {saved['processor']}, which spanning stream no"
                " longer has (one processor since 2026-11-26, docs/STREAMING.md): its open windows are Parquet under"
                f" {folder / 'state'}; give a new --checkpoint (and --output) to go on with the one processor"
            )
        changed = [name for name in record if name != "schema" and (name in saved or name not in LATER_ENTRIES)
                   and saved.get(name) != record[name]]  # fmt: skip
        if changed:
            details = ", ".join(f"{name} {saved.get(name)!r} -> {record[name]!r}" for name in changed)
            raise UsageError(
                f"--checkpoint {folder.parent} was made for another query ({details}): a checkpoint continues"
                " the stream it was made for; give a new --checkpoint (and --output) for a new query"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(record, indent=1))
    os.replace(temp, path)


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


def local_parquet_text(cfg: RunConfig, fmt: str) -> Callable[[str], Any] | None:
    """For local Parquet files: a column of the files there as one Arrow array, read on the driver (the column
    kinds are then counted without a Spark job, ``KindCounts``); None for other formats and remote paths."""
    if fmt != "parquet" or any("://" in p for p in cfg.inputs.paths):
        return None

    @functools.cache
    def columns_of_files() -> tuple[list[str], set[str]]:  # listed once, when the first column is asked for
        import pyarrow.parquet as pq

        files = input_files(cfg.inputs.paths, fmt, cfg.inputs.delimiter, warn=False).files
        return files, set.intersection(*[set(pq.read_schema(path).names) for path in files]) if files else set()

    def column_text(name: str) -> Any:
        import pyarrow as pa
        import pyarrow.parquet as pq

        files, columns = columns_of_files()
        if name not in columns:  # e.g. a partition column
            return None
        return pa.chunked_array([pq.read_table(path, columns=[name]).column(0) for path in files])

    return column_text


#: the rows of Spark's ``binaryFile`` source, which a stream must be given
BINARY_FILE = T.StructType([
    T.StructField("path", T.StringType()), T.StructField("modificationTime", T.TimestampType()),
    T.StructField("length", T.LongType()), T.StructField("content", T.BinaryType()),
])  # fmt: skip


def streaming_rows(spark: SparkSession, cfg: RunConfig, options: StreamOptions) -> StreamQuery:
    """The streaming rows of ``spanning stream``: the files that land in its input folder, read as ``spanning run``
    reads them (``stateful_rows`` does the rest, as it does for ``spanning.spark.aggregate`` on a stream).

    Its rows carry ``_kind``: ``windows`` (key, window bounds, aggregates), ``late`` and ``rejected`` (the
    input row, with ``windows_missed`` or ``reason``) and ``stats`` (per bucket and batch); ``BatchWriter``
    turns one micro-batch of it into the job's outputs.
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
    column_text = local_parquet_text(cfg, fmt) or local_csv_text(inputs)
    kinds = KindCounts(lambda: there if there is not None else files_there(spark, cfg, fmt)[0], saved_kinds(options),
                       column_text)  # fmt: skip
    reader = spark.readStream if fmt == "csv" else spark.readStream.schema(schema)
    if options.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", options.max_files_per_trigger)
    if fmt == "csv":  # each new file parsed by the batch job's reader: the same rows, reasons and lines
        files = reader.format("binaryFile").schema(BINARY_FILE).load(str(folder))
        names = [f.name for f in schema.fields if f.name != MALFORMED]  # the schema the files there gave
        stream = csv_file_records(files, names, cfg.inputs.delimiter)
    elif fmt == "parquet":
        stream = reader.parquet(str(folder))
    else:
        stream = reader.json(str(folder))
    job = stateful_rows(spark, stream, cfg, options, kinds, csv=fmt == "csv")
    check_checkpoint(state, job_record(cfg, options, schema, fmt))  # once the query is known good (a mistyped
    return job  # column recorded would refuse the corrected restart)


def saved_kinds(options: StreamOptions) -> dict | None:
    """The column kinds' counts a stream's checkpoint keeps (``KINDS_FILE``), or None for a new one."""
    path = Path(options.checkpoint) / "spanning" / KINDS_FILE
    return json.loads(path.read_text()) if path.exists() else None


def stateful_rows(spark: SparkSession, stream: DataFrame, cfg: RunConfig, options: StreamOptions,
                  kinds: KindCounts, csv: bool = False) -> StreamQuery:  # fmt: skip
    """The stream's query over the streaming DataFrame ``stream`` (its checkpoint checked by the caller): the
    reader contract (``prepare``, text columns typed by ``kinds``), the control stream, the packed rows and the
    stateful step. ``spanning stream`` and ``spanning.spark.aggregate`` on a streaming DataFrame both come here."""
    state = Path(options.checkpoint) / "spanning"
    control = state / "control"
    control.mkdir(parents=True, exist_ok=True)
    kinds_file = state / KINDS_FILE
    # a batch's rows over every core before the reader contract, not one task per file; hashed on the whole row, as
    # the arrival number is (prepare), so a batch run again spreads its rows the same way
    stream = stream.repartition(spark.sparkContext.defaultParallelism, *[quoted(c) for c in stream.columns])
    prepared = prepare(stream, cfg, csv=csv, kinds=kinds)
    if not kinds_file.exists():
        temp = kinds_file.with_suffix(".tmp")
        temp.write_text(json.dumps(kinds.saved, indent=1))
        os.replace(temp, kinds_file)
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

    specs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
    internal = {aggregates[name]: spec for name, spec in specs.items()}  # the processor's column -> aggregate
    out_schema = _output_schema(prepared, internal, originals)
    store = state / STORE_FOLDER
    (state / OUTBOX).mkdir(exist_ok=True)  # once here, not per bucket and batch on the executors
    files = (str(store.resolve()), new_stream_id(store), str((state / OUTBOX).resolve()))
    processor = _processor(prepared, cfg, list(rows.columns), (internal, originals, aggregates[EVENTS_COLUMN]),
                           out_schema, files)  # fmt: skip
    packing = packing_functions()
    packed = rows.mapInArrow(packing.pack_rows, PACKED)
    out = packed.groupBy(BUCKET).applyInPandasWithState(processor, PACKED, BUCKET_STATE, "append", "NoTimeout")
    return StreamQuery(out.mapInArrow(packing.unpack_rows, out_schema), prepared, cfg, options, aggregates, originals,
                       packed=out)  # fmt: skip


class Packing(NamedTuple):
    """The functions of packed rows (``packing_functions``)."""

    pack_rows: Any  # mapInArrow: a task's rows -> one row per bucket (the bucket, its rows as one IPC stream)
    unpack_rows: Any  # mapInArrow: packed rows -> the rows they hold
    encode: Any  # an Arrow table -> the bytes of one IPC stream
    decode: Any  # those bytes -> the table


def packing_functions() -> Packing:
    """The ``mapInArrow`` functions around the stateful step, and the encoding they share. Packed, a batch is a few
    rows each way through pandas (``transformWithStateInPandas``, the step until 2026-11-26, handed its input to
    pandas row by row: 60% of the Python workers' time at 1h/1m). Nested functions: they travel by value."""
    bucket_name, payload, pack_rows_at, in_outbox = BUCKET, PAYLOAD, PACK_ROWS, IN_OUTBOX

    def encode(table) -> bytes:
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()

    def decode(blob):
        import pyarrow as pa

        if blob[: len(in_outbox)] == in_outbox:  # the rows are in the outbox file it names
            with open(blob[len(in_outbox) :].decode(), "rb") as file:
                blob = file.read()
        return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()

    def pack_rows(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        from spanning.engines.window_ranges import reduced_in_chunks

        def packed(held):
            table = pa.Table.from_batches(held)
            buckets = table.column(bucket_name)
            for bucket in pc.unique(buckets).to_pylist():
                rows = table.filter(pc.equal(buckets, bucket))
                yield pa.RecordBatch.from_pydict({bucket_name: pa.array([bucket], pa.int32()),
                                                  payload: pa.array([encode(rows)], pa.binary())})  # fmt: skip

        yield from reduced_in_chunks(batches, pack_rows_at, packed)  # at most about PACK_ROWS rows at a time

    def unpack_rows(batches):
        for batch in batches:
            for blob in batch.column(1).to_pylist():
                yield from decode(blob).to_batches(1 << 16)

    return Packing(pack_rows, unpack_rows, encode, decode)


def _output_schema(prepared: Prepared, aggregates: dict, originals: dict) -> T.StructType:
    schema = prepared.rows.schema
    fields = [T.StructField(KIND, T.StringType())]
    fields += [T.StructField(key_column(i), schema[key_column(i)].dataType) for i in range(len(prepared.keys))]
    fields += [T.StructField("window_start", T.LongType()), T.StructField("window_end", T.LongType())]
    fields += [T.StructField(internal, result_type(spec, prepared)) for internal, spec in aggregates.items()]
    fields += [T.StructField(internal, schema[name].dataType) for name, internal in originals.items()]
    fields += [T.StructField("windows_missed", T.LongType()), T.StructField(REASON, T.StringType())]
    fields += [T.StructField(BUCKET, T.IntegerType()), *[T.StructField(name, T.LongType()) for name in STATS]]
    return T.StructType(fields)


def _processor(prepared: Prepared, cfg: RunConfig, input_columns: list[str], internal: tuple[dict, dict, str],
               schema: T.StructType, files: tuple[str, str, str]) -> Any:  # fmt: skip
    """The stateful processor: each bucket's ``OpenWindows``, fed a micro-batch of its rows; ``files``: the bucket
    store's folder, the stream's id (``spark_jobs.bucket_store``) and the outbox folder."""
    # the processor's aggregate columns -> their specs; input -> internal column; the hidden count of events
    specs, originals, events_column = internal

    # only plain values in the closure: the function travels by value to workers that import the engine only
    # once it is shipped
    window = (cfg.query.spec.range, cfg.query.spec.slide, cfg.query.spec.ttp, cfg.query.spec.offset)
    keys = [key_column(i) for i in range(len(prepared.keys))]
    series_start = None if cfg.query.series_start == "first" else int(cfg.query.series_start)
    value_columns = [*prepared.value_types, *[valid_column(c) for c in prepared.value_types], *prepared.result_types]
    skip_empty = cfg.query.empty_windows == "skip"
    fail_once = FAIL_ONCE
    # bytes: a plain value in the closure (the zone only labels timestamps: the processor casts to it)
    schema_bytes = to_arrow_schema(schema, timezone="UTC").serialize().to_pybytes()
    encode, decode = packing_functions()[2:]
    store, outbox = files[:2], files[2]

    def unpacked(blobs: list, names: list[str]):
        """The bucket's rows from the packed blobs (``pack_rows``), with the query's column names."""
        import pyarrow as pa

        return pa.concat_tables([decode(blob) for blob in blobs]).rename_columns(names)

    def columns_of(columns, kind: str, rows: int):
        """An Arrow table in the output's schema: ``columns`` (a name -> values mapping or a pandas frame) where
        given, ``kind`` in ``_kind``, nulls elsewhere."""
        import pyarrow as pa

        out_schema = pa.ipc.read_schema(pa.py_buffer(schema_bytes))
        arrays = []
        for field in out_schema:
            if field.name == KIND:
                arrays.append(pa.array([kind] * rows, field.type))
            elif field.name in columns:
                values = columns[field.name]
                if not isinstance(values, (pa.Array, pa.ChunkedArray)):
                    values = pa.array(values, from_pandas=True)
                arrays.append(values.cast(field.type))
            else:
                arrays.append(pa.nulls(rows, field.type))
        return pa.Table.from_arrays(arrays, schema=out_schema)

    def packed_frame(bucket: int, table):
        """One row for Spark: the bucket and the name of an outbox file holding its output as Arrow IPC. The
        windows leave by the file: through Spark (Python to JVM rows, then Arrow to the driver) they took 0.6 s
        of a 100k-row batch's 3 s at 15m/1m (docs/STREAMING.md)."""
        import uuid

        import pandas as pd

        path = os.path.join(outbox, f"{bucket}-{uuid.uuid4().hex}.arrow")  # a task run again writes another
        with open(path, "wb") as file:
            file.write(encode(table))
        return pd.DataFrame({BUCKET: [bucket], PAYLOAD: [IN_OUTBOX + path.encode()]})

    def reduce_bucket(key, rows, saved):
        """``applyInPandasWithState``'s function: one bucket's packed rows of a batch against its ``OpenWindows``
        (``saved``: Spark's ``GroupState``, holding the bucket's ``Version`` in the bucket store)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from spanning.engines.engine import build_aggregates
        from spanning.engines.open_windows import OpenWindows
        from spanning.engines.params import ChunkColumns
        from spanning.kernels.windows import WindowSpec
        from spark_jobs.bucket_store import NONE, BucketStore, Version

        names, aggs = build_aggregates(specs)
        bucket_store = BucketStore(*store, int(key[0]))
        version = Version(*saved.get) if saved.exists else NONE
        state = bucket_store.load(OpenWindows(WindowSpec(*window), aggs, names, keys, series_start,
                                              ChunkColumns(START, END, SEQ),
                                              skip_empty=events_column if skip_empty else None), version)  # fmt: skip
        batch = unpacked([blob for frame in rows for blob in frame.iloc[:, 1]], input_columns)
        is_control = pc.is_valid(batch.column(CONTROL))
        control = batch.filter(is_control).select([CONTROL, FLUSH]).to_pydict()
        batch = batch.filter(pc.invert(is_control))
        is_rejected = pc.is_valid(batch.column(REASON))
        rejected, accepted = batch.filter(is_rejected), batch.filter(pc.invert(is_rejected))
        parts = []
        for clock, flush in zip(control[CONTROL], control[FLUSH], strict=True):  # the watermark, then the batch
            if not flush:
                parts.append(("windows", state.advance(int(clock))))
        windows, late = state.feed(accepted.select([*keys, START, END, SEQ, *value_columns]).to_pandas())
        parts.append(("windows", windows))
        if any(control[FLUSH]):  # the end of an available-now run
            parts.append(("windows", state.flush()))
        version, written = bucket_store.save(state, version)
        saved.update(tuple(version))
        max_end = pc.max(accepted.column(END)).as_py()
        if fail_once and os.path.exists(fail_once[0]) and max_end is not None and max_end >= fail_once[1]:
            os.remove(fail_once[0])  # after the state update: Spark must not commit it
            raise RuntimeError("injected failure (FAIL_ONCE, a recovery test)")
        out = [columns_of(frame, kind, len(frame)) for kind, frame in parts if len(frame)]
        released = sum(len(frame) for _, frame in parts)
        if len(late):
            rows_of = accepted.take(pa.array(late["row"].to_numpy()))
            out.append(columns_of({"windows_missed": late["windows_missed"].to_numpy(),
                                   **{i: rows_of.column(n) for n, i in originals.items()}}, "late", len(late)))
        if rejected.num_rows:
            out.append(columns_of({REASON: rejected.column(REASON),
                                   **{i: rejected.column(n) for n, i in originals.items()}}, "rejected",
                                  rejected.num_rows))  # fmt: skip
        stats = {"accepted": accepted.num_rows, "keys": state.n_keys, "held_windows": state.held_windows,
                 "state_bytes": version.snapshot_bytes + version.delta_bytes, "state_written": written,
                 "max_end": max_end, "windows": released, "late": len(late),
                 "rejected": rejected.num_rows}  # fmt: skip
        out.append(columns_of({BUCKET: [int(key[0])], **{k: [v] for k, v in stats.items()}}, "stats", 1))
        yield packed_frame(int(key[0]), pa.concat_tables(out))

    return reduce_bucket


class BatchWriter:
    """``foreachBatch``: one micro-batch of ``StreamQuery.rows`` into windows/, late/, rejected/ and the summary."""

    def __init__(self, job: StreamQuery, output: Path | None, progress: Any = print,
                 sink: Callable[[dict, DataFrame, int], None] | None = None) -> None:  # fmt: skip
        """``output``: the folder of windows/, late/, rejected/ and summary.json; or None with ``sink``, which is
        given each batch's three outputs as Arrow tables (name -> table), the batch and its id, and writes them."""
        self.job, self.output, self.progress = job, output, progress
        self.sink = sink if sink is not None else self._write_files
        for orphan in [] if output is None else output.glob("*/_tmp-batch=*"):  # a batch killed while writing:
            shutil.rmtree(orphan, ignore_errors=True)  # it runs again from the checkpoint
        self.records = Path(job.options.checkpoint) / "spanning" / "batches"
        self.records.mkdir(parents=True, exist_ok=True)
        self.outbox = Path(job.options.checkpoint) / "spanning" / OUTBOX
        self._empty_outbox()  # a batch killed before it was written runs again, and writes its outbox again
        self.lock = threading.Lock()
        # read once: the batches of earlier runs (a batch run again replaces its record)
        saved = (json.loads(p.read_text()) for p in sorted(self.records.glob("*.json")))
        self.by_batch = {r["batch"]: r for r in saved}
        previous = None if output is None else self.output / "summary.json"
        summary = json.loads(previous.read_text()) if previous is not None and previous.exists() else {}
        self.dropped_by_spark = summary.get("rows_dropped_by_spark", 0)  # over every run of the stream
        self.trigger_seconds: dict[str, float] = summary.get("trigger_seconds", {})  # batch -> Spark's trigger time

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        began = time.perf_counter()
        counts = self._write(batch, batch_id)
        record = {"batch": batch_id, **counts, "seconds": round(time.perf_counter() - began, 3)}
        self._save(self.records / f"{batch_id:08d}.json", record)
        with self.lock:
            self.by_batch[batch_id] = record
        self.progress(self.describe(record))
        self.write_summary()

    def _write(self, batch: DataFrame, batch_id: int) -> dict:
        """One Spark action (the batch as Arrow, on the driver), then each output's files, whole or not at all."""
        import pyarrow as pa
        import pyarrow.compute as pc

        job = self.job
        began = time.perf_counter()
        as_time = job.prepared.time_is_timestamp
        keys = {k: key_column(i) for i, k in enumerate(job.prepared.keys)}
        if batch.columns == PACKED.fieldNames():
            table = self._unpacked_table(batch, as_time)
        else:
            table = self._processor_table(batch, keys, as_time)
        computed = time.perf_counter()
        outputs = {
            "windows": {**keys, "window_start": "window_start", "window_end": "window_end",
                        **{n: i for n, i in job.aggregates.items() if n != EVENTS_COLUMN}},
            "late": {**job.originals, "windows_missed": "windows_missed"},
            "rejected": {**job.originals, REASON: REASON},
        }  # fmt: skip
        kinds = table.column(KIND)
        tables = {}
        for kind, columns in outputs.items():
            rows = table.filter(pc.equal(kinds, kind))
            tables[kind] = pa.table({name: rows.column(internal) for name, internal in columns.items()})
        counts = {kind: rows.num_rows for kind, rows in tables.items()}
        self.sink(tables, batch, batch_id)
        self._empty_outbox()  # written: the next batch starts once this one returns, so no other file is wanted
        stats = table.filter(pc.equal(kinds, "stats")).select([BUCKET, *STATS]).to_pylist()
        buckets = {str(r[BUCKET]): r for r in stats}
        ends = [b["max_end"] for b in stats if b["max_end"] is not None]
        return {"rows_read": sum(b["accepted"] for b in stats) + counts["rejected"], **counts,
                "max_end": max(ends) if ends else None, "compute_seconds": round(computed - began, 3),
                "state_written": sum(b["state_written"] for b in stats),
                "write_seconds": round(time.perf_counter() - computed, 3),
                "buckets": {b: {k: v[k] for k in ("keys", "held_windows", "state_bytes", "state_written")}
                            for b, v in buckets.items()}}  # fmt: skip

    def _write_files(self, tables: dict, batch: DataFrame, batch_id: int) -> None:
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

    def _processor_table(self, batch: DataFrame, keys: dict[str, str], as_time: bool):
        """The Python processor's rows of one batch, as Arrow on the driver (one Spark action)."""
        job = self.job
        in_seconds = seconds_columns(job.cfg.query.aggregate_columns, job.cfg.events.time_unit)
        seconds = [job.aggregates[n] for n in in_seconds]  # occupancy in seconds
        return batch.select(
            F.col(KIND), F.col(BUCKET), *[F.col(c) for c in STATS], *[F.col(c) for c in keys.values()],
            to_time(F.col("window_start"), job.cfg, as_time).alias("window_start"),
            to_time(F.col("window_end"), job.cfg, as_time).alias("window_end"),
            *[to_seconds(c, job.cfg, seconds) for c in job.aggregates.values()],
            *[F.col(c) for c in job.originals.values()],
            F.col("windows_missed"), F.col(REASON),
        ).toArrow()  # fmt: skip

    def _unpacked_table(self, batch: DataFrame, as_time: bool):
        """The Python processor's packed rows of one batch (a few per bucket), unpacked on the driver into the
        rows ``_processor_table`` gives: the windows' bounds as times (in the session's time zone, as Spark hands
        timestamps to Arrow) and ``occupancy`` in seconds. No window passes through Spark's rows on the way."""
        import pyarrow as pa
        import pyarrow.compute as pc

        job = self.job
        decode = packing_functions().decode
        tables = [decode(blob) for blob in batch.toArrow().column(PAYLOAD).to_pylist()]
        table = pa.concat_tables(tables) if tables else to_arrow_schema(job.rows.schema, timezone="UTC").empty_table()
        per_second = CHRONONS_PER_SECOND[job.cfg.events.time_unit]
        if as_time:  # as Spark's timestamp_seconds / timestamp_millis (spark_jobs.run.to_time)
            zone = batch.sparkSession.conf.get("spark.sql.session.timeZone")
            for name in ("window_start", "window_end"):
                micros = pc.multiply_checked(table.column(name), 1_000_000 // per_second)
                table = table.set_column(table.schema.get_field_index(name), name,
                                         micros.cast(pa.timestamp("us", zone)))  # fmt: skip
        for name in seconds_columns(job.cfg.query.aggregate_columns, job.cfg.events.time_unit):
            internal = job.aggregates[name]  # as spark_jobs.run.to_seconds: chronons / chronons per second
            seconds = pc.divide(table.column(internal).cast(pa.float64()), float(per_second))
            table = table.set_column(table.schema.get_field_index(internal), internal, seconds)
        return table

    def _empty_outbox(self) -> None:
        """The buckets' output files of the batch written, and any a failed task attempt left."""
        for path in self.outbox.glob("*.arrow"):  # glob of a missing folder: none
            path.unlink(missing_ok=True)

    @staticmethod
    def _save(path: Path, content: dict) -> None:
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_text(json.dumps(content, indent=1))
        os.replace(temp, path)

    def batches(self) -> list[dict]:
        return [self.by_batch[b] for b in sorted(self.by_batch)]

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
        ends = [r["max_end"] for r in self.batches() if r.get("max_end") is not None]
        return max(ends) - self.job.options.max_disorder if ends else None

    def recent_triggers(self) -> dict[str, float]:
        """``trigger_seconds`` of the last ``TRIGGERS_KEPT`` batches (a stream that runs for months stays small)."""
        recent = sorted(self.trigger_seconds, key=int)[-TRIGGERS_KEPT:]
        self.trigger_seconds = {batch: self.trigger_seconds[batch] for batch in recent}
        return dict(self.trigger_seconds)

    def write_summary(self, extra: dict | None = None) -> dict:
        with self.lock:
            records = self.batches()
            read, rejected, late, windows = (sum(r[name] for r in records)
                                             for name in ("rows_read", "rejected", "late", "windows"))
            # the names of spanning run's summary.json (a batch's record keeps its own short names)
            total = {"rows_read": read, "accepted": read - rejected, "rejected": rejected, "late": late,
                     "windows_written": windows}
            state: dict = {}  # each bucket as its last batch left it
            for record in records:
                state.update(record.get("buckets", {}))
            summary = {
                **total, "batches": len(records), "watermark": self.watermark(),
                **{name: sum(b[name] for b in state.values()) for name in ("keys", "held_windows", "state_bytes")},
                "rows_dropped_by_spark": self.dropped_by_spark, "trigger_seconds": self.recent_triggers(),
                "output": None if self.output is None else str(self.output),
                "checkpoint": str(Path(self.job.options.checkpoint).resolve()),
                **(extra or {}),
            }  # fmt: skip
            if self.output is not None:
                self._save(self.output / "summary.json", summary)
            return summary


def _control_file(folder: Path, name: str, rows: list[dict]) -> None:
    """A control file, whole when the control stream sees it (written under a hidden name, then renamed)."""
    temp = folder / f".{name}.tmp"
    temp.write_text("".join(json.dumps(row) + "\n" for row in rows))
    os.replace(temp, folder / name)


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
    waits = Progress(quiet_off_terminal=True)  # on a terminal: the seconds before the first batch's line

    def said(line: str) -> None:  # a batch's line takes the place of the wait's
        waits.done()
        progress(line)

    waits(starting(cfg.spark.master))
    spark = get_session(cfg.spark.master, cfg.events.timezone, verbose, cfg.spark.partitions,
                        quick_compiler=quick_compiler(options, there))
    # the Python workers started, the engine and the compiled kernel loaded, while the driver plans the stream
    warm_python_workers(spark, ("numpy", "pandas", "pyarrow", "spanning.engines.open_windows",
                                "spanning.kernels.compiled"))  # fmt: skip
    partitions = spark.conf.get("spark.sql.shuffle.partitions")  # the session's, given back at the end
    if cfg.spark.partitions is None and not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # one state partition per core (a new checkpoint keeps it): 66-73k events/s against 62-64k with two per
        # core, measured with bench/bench_stream.py on 2 cores
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    job = streaming_rows(spark, cfg, options)
    writer = BatchWriter(job, stream_output(cfg, options), said)
    each_batch = batch_function(job, writer)
    stopped = False
    waits("planning the stream and reading its first micro-batch (about 15 s)")
    query = start_query(job, each_batch)
    try:
        _wait(query, writer)
        if options.trigger == "available-now" and options.final_flush:  # the end of the stream: every key
            query = start_query(job, each_batch, flush=True)
            _wait(query, writer)
    except KeyboardInterrupt:
        query.stop()
        stopped = True
    finally:
        waits.done()
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
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
    rows = job.rows if job.packed is None else job.packed  # packed: unpacked on the driver (BatchWriter)
    return (rows.writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", str(Path(options.checkpoint) / "query"))
            .trigger(**options.spark_trigger).start())  # fmt: skip


def _wait(query: Any, writer: BatchWriter) -> None:
    """Until the query ends; Spark's count of rows its watermark dropped goes into the summary (it stays 0)."""
    seen: set = set()
    while True:
        ended = query.awaitTermination(1)
        for progress in query.recentProgress:
            if progress["batchId"] in seen or progress["id"] is None:
                continue
            seen.add(progress["batchId"])
            if progress.get("numInputRows"):  # a batch's whole trigger, as Spark times it (foreachBatch is a part);
                # its rows: the files' and the control files' (an idle or no-op trigger has none)
                trigger = progress["durationMs"].get("triggerExecution", 0) / 1000
                with writer.lock:  # foreachBatch's thread writes the summary
                    writer.trigger_seconds[str(progress["batchId"])] = round(trigger, 3)
            operators = progress.get("stateOperators", [])
            writer.dropped_by_spark += sum(op.get("numRowsDroppedByWatermark", 0) for op in operators)
        if ended:
            break
    if query.exception() is not None:
        raise query.exception()
