"""Late and rejected rows written by the tasks that read the input themselves, for ``spanning run`` to write.

Where ``vector``'s tasks read the input (Parquet row groups, ``spanning.engines.parquet_partials``; CSV byte ranges,
``spanning.app.csv_partials``), each task knows its late rows (and, for CSV, its rejected ones with their
reasons) as it reduces them. It writes them as read, as a Parquet part of the run's side folder, so that late/ and
rejected/ need no second pass over the input: issue 66's measurement (30M rows, a TTP of 2 h) put the JVM's late
pass at about 6 s, however few rows were late (docs/BENCHMARKS.md).

The folder is on the driver's file system, which a local master's executors share: the callers use it on local
masters only. A folder's files are listed when a DataFrame is made of it, so ``frame`` is called once the windows,
whose pass writes the parts, are written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

DRIVER_WRITES_BELOW = 64 * 2**20  # side parts' bytes under which the driver writes the output itself (``table``):
# a judgement, not measured (about 10M rows of a narrow CDR held on the driver at once)


class SideRows:
    """The run's side folder: ``late/`` and (where the tasks judge the rows) ``rejected/``, in the schemas of
    ``schemas`` (the outputs the tasks write, by name: those of the job's own frames, so that both ways agree).
    ``as_text``: the tasks wrote the input's columns as text (CSV), to be typed here by the kinds the whole files
    give (``spark_jobs.batch.csv_read.checked_kinds``); ``before_sides``: called once the windows are written, before
    the first side output is read (the CSV kinds' check)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.folder = tempfile.mkdtemp(prefix="spanning-side-")
        self.schemas: dict[str, T.StructType] = {}
        self.as_text = False
        self.before_sides: Callable[[], None] | None = None
        # removed by ``remove``, or with this object, or at the latest as the process exits (a job that failed)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, True)

    def carries(self, name: str) -> bool:
        return name in self.schemas

    def _parts(self, name: str) -> list[str]:
        """The parts the tasks wrote into ``name``/, once the windows are (``before_sides`` run first)."""
        if self.before_sides is not None:
            self.before_sides()
            self.before_sides = None
        folder = os.path.join(self.folder, name)
        return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.startswith("part-")) if os.path.isdir(
            folder) else []  # fmt: skip

    def frame(self, name: str) -> DataFrame:
        """The rows the tasks wrote into ``name``/ (none when no task had any), in its schema."""
        folder = os.path.join(self.folder, name)
        schema = self.schemas[name]
        if not self._parts(name):
            return self.spark.createDataFrame([], schema)
        extra = schema.fields[-1]  # windows_missed or reason, written as the job types it
        stored = T.StructType([*[T.StructField(f.name, T.StringType()) for f in schema.fields[:-1]], extra])
        rows = self.spark.read.schema(stored if self.as_text else schema).parquet(folder)
        return rows.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema])

    def table(self, name: str, most_bytes: int = DRIVER_WRITES_BELOW):
        """The rows the tasks wrote into ``name``/ as one Arrow table in its schema, read on the driver, or None
        where their parts hold ``most_bytes`` or more (then ``frame`` has Spark read them). Spark's Parquet writer
        is cold in a ``spanning run`` whose windows the Python workers wrote: 1.4 s for 170k late rows (30M rows,
        a TTP of 2 h, 2026-11-29), against tens of milliseconds here."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        parts = self._parts(name)
        if sum(os.path.getsize(p) for p in parts) >= most_bytes:
            return None
        schema = to_arrow_schema(self.schemas[name], timezone="UTC")  # as Spark's writer writes it
        if not parts:
            return schema.empty_table()
        table = pa.concat_tables([pq.read_table(p) for p in parts], promote_options="permissive")
        return pa.table([table.column(f.name).cast(f.type) for f in schema], schema=schema)

    def remove(self) -> None:
        self._finalizer()
