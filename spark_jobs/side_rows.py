"""Late and rejected rows written by the tasks that read the input themselves, for ``spanning run`` to write.

Where ``vector``'s tasks read the input (Parquet row groups, ``spanning.engines.parquet_partials``; CSV byte ranges,
``spanning.engines.csv_partials``), each task knows its late rows (and, for CSV, its rejected ones with their
reasons) as it reduces them. It writes them as read, as a Parquet part of the run's side folder, so that late/ and
rejected/ need no second pass over the input: measured 2026-11-29 on 30M rows with 170,757 late (a TTP of 2 h), the
JVM's late pass cost about 6 s however few rows were late (docs/BENCHMARKS.md).

The folder is on the driver's file system, which a local master's executors share: the callers use it on local
masters only. A folder's files are listed when a DataFrame is made of it, so ``frame`` is called once the windows,
whose pass writes the parts, are written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T


class SideRows:
    """The run's side folder: ``late/`` and (where the tasks judge the rows) ``rejected/``, in the schemas of
    ``schemas`` (the outputs the tasks write, by name: those of the job's own frames, so that both ways agree)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.folder = tempfile.mkdtemp(prefix="spanning-side-")
        self.schemas: dict[str, T.StructType] = {}
        # removed by ``remove``, or with this object, or at the latest as the process exits (a job that failed)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, True)

    def carries(self, name: str) -> bool:
        return name in self.schemas

    def frame(self, name: str) -> DataFrame:
        """The rows the tasks wrote into ``name``/ (none when no task had any), in its schema."""
        folder = os.path.join(self.folder, name)
        schema = self.schemas[name]
        if not os.path.isdir(folder) or not any(f.startswith("part-") for f in os.listdir(folder)):
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(folder).select(*[F.col(f"`{f.name}`") for f in schema])

    def remove(self) -> None:
        self._finalizer()
