"""The windows' Parquet parts written by the Python workers with pyarrow, where they are running already.

Spark's Parquet writer runs in the JVM, whose writer code a ``spanning run`` process runs for the first time:
measured on 2026-11-28 (30M rows, a hot key, 15m/1m, 758,384 windows in two tasks), the last stage took 2.2 s a
task with it against 0.95 s with Spark's ``noop`` sink, and 1.45-1.5 s with the windows handed to the Python
workers that the read side had started (``mapInArrow``) and written there with pyarrow (docs/BENCHMARKS.md).

Used only where it writes what Spark's writer writes, to a folder every worker sees (``writes_in_workers``):

* Parquet output, on a local master (``local``, ``local[n]``, ``local-cluster[...]``): the executors share the
  driver's file system, where the run's temporary output folder is;
* a plan whose tasks run Python already (``vector``, ``python``): the explode runs none, and starting workers
  would cost more than the write;
* few windows: where ``plans.jvm_merge_is_small`` holds (vector reads the Parquet input and hands the JVM at most
  ``QUICK_COMPILER_PARTIALS`` partials, so the JVM runs its quick compiler alone). With 10,000 keys (30M rows,
  15m/1m, 36.8M windows, both compilers) Spark's writer was the faster: 51.8 s against 61.9 s, one pair, the
  windows' hand-over to Python costing more than the write it saved;
* columns of flat types, which pyarrow writes as Spark does (timestamps as microseconds adjusted to UTC, as
  ``spark.sql.parquet.outputTimestampType`` is set), and the session's compression codec, which pyarrow has.

Each task writes its rows to one part named by its partition, through a hidden temporary file renamed into place
as the task ends: a task run again writes the same part again, and an attempt that failed leaves only a hidden
file, which readers skip (and which goes with the run's temporary folder).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from spark_jobs.sessions import session_kind

#: Spark's ``spark.sql.parquet.compression.codec`` -> pyarrow's name, for the codecs both write alike
CODECS = {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "uncompressed": "none", "none": "none"}
FLAT = (T.NumericType, T.StringType, T.BooleanType, T.TimestampType, T.TimestampNTZType, T.DateType, T.BinaryType)
LOCAL_MASTERS = ("local[", "local-cluster[")
# rows a part's row group holds at most (batches are gathered up to it before a write): pyarrow's own default, not
# measured here; Spark's writer makes row groups of 128 MB instead
ROW_GROUP_ROWS = 1 << 20


def writes_in_workers(frame: DataFrame, fmt: str, plans: list[str], few_windows: bool) -> bool:
    """Whether ``write_in_workers`` writes ``frame`` as Spark's writer would, its workers are running anyway, and
    the windows are ``few_windows`` (``plans.jvm_merge_is_small``)."""
    spark = frame.sparkSession
    fields = frame.schema.fields
    return (
        few_windows
        and fmt == "parquet"
        and session_kind.is_local_master(spark, LOCAL_MASTERS)
        and any(plan != "explode" for plan in plans)
        and all(isinstance(f.dataType, FLAT) and not isinstance(f.dataType, T.DecimalType) for f in fields)
        and spark.conf.get("spark.sql.parquet.compression.codec", "snappy").lower() in CODECS
    )


def write_in_workers(frame: DataFrame, folder: str) -> int:
    """Write ``frame`` into ``folder`` (created if missing) as Parquet parts, one per task; returns the rows written.

    With no rows at all, one part holds the schema alone, as Spark writes an empty frame.
    """
    spark = frame.sparkSession
    codec = CODECS[spark.conf.get("spark.sql.parquet.compression.codec", "snappy").lower()]
    schema = to_arrow_schema(frame.schema, timezone="UTC")  # Spark's writer: instants in UTC, microseconds
    suffix = {"none": "parquet", "gzip": "gz.parquet"}.get(codec, f"{codec}.parquet")  # as Spark names its parts
    run, group_rows = uuid.uuid4().hex, ROW_GROUP_ROWS
    Path(folder).mkdir(parents=True, exist_ok=True)

    def write_part(batches):  # runs on the executors: pyarrow only (pq goes by reference)
        import os

        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        name = f"part-{context.partitionId():05d}-{run}.{suffix}"
        final, temp = os.path.join(folder, name), os.path.join(folder, f".{name}.{context.attemptNumber()}")
        rows, gathered, gathered_rows, writer = 0, [], 0, None

        def flush():
            nonlocal gathered, gathered_rows, writer
            table = pa.Table.from_batches(gathered).rename_columns(schema.names).cast(schema)
            writer = writer or pq.ParquetWriter(temp, schema, compression=codec)
            writer.write_table(table, row_group_size=group_rows)
            gathered, gathered_rows = [], 0

        try:
            for batch in batches:
                gathered.append(batch)
                rows += batch.num_rows
                gathered_rows += batch.num_rows
                if gathered_rows >= group_rows:
                    flush()
            if gathered:
                flush()
        finally:
            if writer is not None:
                writer.close()
        if writer is not None:
            os.replace(temp, final)
        yield pa.RecordBatch.from_pydict({"rows": [rows]}, schema=pa.schema([("rows", pa.int64())]))

    positional = frame.toDF(*[f"_{i}" for i in range(len(frame.columns))])  # mapInArrow reads a dot as a field's
    rows = sum(row["rows"] for row in positional.mapInArrow(write_part, "rows long").collect())
    if rows == 0:
        pq.write_table(schema.empty_table(), Path(folder, f"part-00000-{run}.{suffix}"), compression=codec)
    return rows
