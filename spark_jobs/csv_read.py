"""Local CSV files read by every core, in byte ranges: the column kinds counted, then the windows reduced.

``spanning run`` reads each CSV file it can split (local, uncompressed, no quote character in it) in byte ranges,
a share for each core (``spanning.engines.csv_partials``):

1. ``count_csv``: a Spark job whose tasks count the grammar's forms in every column of their ranges. Its counts
   stand in for the count over the whole column that fixes each column's kind (``prepare.KindCounts``), so that
   ``prepare`` types the columns as it would over the rows themselves, with no other pass.
2. ``csv_window_job``: ``vector``'s tasks read their ranges again, type and reduce them (``read_side_job``), and
   write their late and rejected rows into the run's side folder (``spark_jobs.side_rows``).

A file with a quote character may hold a line break inside a quoted field, which a byte range cannot tell from a
record's end, and one with a carriage return alone ends lines where a range does not look. Such files, compressed
ones, and queries the tasks cannot compute (``csv_reads_itself``) take the general way (each file parsed whole by
one task, then ``prepare``'s Spark SQL), with the same rows and reasons.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import types as T

from spanning.app.files import Inputs
from spanning.app.jobspec import EVENTS_COLUMN, RunConfig
from spanning.engines.csv_partials import CsvPlan, add_stats, byte_pieces, range_partials
from spanning.engines.parquet_partials import ReadPlan
from spanning.engines.reader import ColumnStats
from spark_jobs.plans import (
    READ_SIDE_FROM,
    TASKS_PER_CORE,
    VECTOR_PER_WINDOW,
    _partials,
    python_only,
    read_side_job,
    sketches_or_sets,
)
from spark_jobs.prepare import Prepared, local_input_bytes
from spark_jobs.worker_parquet import LOCAL_MASTERS

SPLITTABLE = (".csv", ".tsv", ".txt")  # uncompressed CSV files: ``.gz`` and ``.bz2`` are read whole
CSV_MODULES = ("spanning.engines.csv_partials", "spanning.app.csv_records")  # what the tasks import besides vector's


@dataclass
class CsvCounts:
    """The first pass's counts over every file: each column's forms, the records, and the byte ranges."""

    stats: dict[str, ColumnStats]
    rows: int
    ambiguous: int  # quote characters and lone carriage returns in all files: with any, no range is read
    pieces: list[tuple[str, int, int]]

    def column_stats(self, name: str, plain_only: bool) -> ColumnStats | None:
        """``prepare.KindCounts``' counts of an input column, from this pass (None: not a column of the files)."""
        return self.stats.get(name)


def csv_reads_itself(spark: SparkSession, cfg: RunConfig, inputs: Inputs | None) -> bool:
    """Whether ``vector``'s tasks may read ``inputs`` in byte ranges for ``cfg``, as far as the files' names and the
    query tell: local uncompressed CSV files of at least ``READ_SIDE_FROM`` bytes (unless ``--plan vector``), on a
    local master (the tasks' side folder is on the driver's disk); times from two plain columns, keys and
    aggregated columns plain columns, aggregates that the vector kernel computes from one spec."""
    if inputs is None or inputs.format != "csv" or inputs.columns is None:
        return False
    master = spark.sparkContext.master
    if not (master == "local" or master.startswith(LOCAL_MASTERS)):
        return False
    size, plan = local_input_bytes(inputs), cfg.spark.plan
    if size is None or not all(os.path.splitext(p)[1].lower() in SPLITTABLE for p in inputs.files):
        return False
    if plan not in ("auto", "vector") or (plan == "auto" and size < READ_SIDE_FROM):
        return False
    fields, query = cfg.events, cfg.query
    if python_only(cfg) or sketches_or_sets(cfg) or query.windows or query.series_start == "first":
        return False
    if fields.duration is not None or fields.point_events:
        return False
    if any(a not in VECTOR_PER_WINDOW for a in query.per_window_aggregates):
        return False
    names = set(inputs.columns)
    return all(c in names for c in [fields.start, fields.end, *fields.keys, *query.value_columns])


def count_csv(spark: SparkSession, cfg: RunConfig, inputs: Inputs) -> CsvCounts:
    """The first pass: each column's counts over every record of ``inputs`` (all the forms for the time and
    aggregated columns, the plain integers for the others, as ``prepare`` asks them), in a Spark job whose tasks
    read byte ranges."""
    names, delimiter = list(inputs.columns), inputs.delimiter
    fields, query = cfg.events, cfg.query
    full = {fields.start, fields.end, *query.numeric_columns} & set(names)
    cores = spark.sparkContext.defaultParallelism
    pieces = byte_pieces([(path, os.path.getsize(path)) for path in inputs.files], cores)

    def counts_of_ranges(batches):  # runs on the executors: pyarrow only
        import pyarrow as pa

        from spanning.engines.csv_partials import range_stats

        for batch in batches:
            for piece in batch.column(0).to_pylist():
                stats, rows, ambiguous = range_stats(*pieces[piece], names, delimiter, full)
                forms = {name: dataclasses.astuple(counted) for name, counted in stats.items()}
                counts = {"rows": rows, "ambiguous": ambiguous, "stats": forms}
                yield pa.RecordBatch.from_pydict({"counts": [json.dumps(counts)]})

    tasks = max(min(len(pieces), TASKS_PER_CORE * cores), 1)
    ids = spark.range(len(pieces), numPartitions=tasks)
    found = [json.loads(row["counts"]) for row in ids.mapInArrow(counts_of_ranges, "counts string").collect()]
    stats = {name: ColumnStats() for name in names}
    for piece in found:
        for name, values in piece["stats"].items():
            stats[name] = add_stats(stats[name], ColumnStats(*values))
    return CsvCounts(stats, sum(p["rows"] for p in found), sum(p["ambiguous"] for p in found), pieces)


def csv_plan(prepared: Prepared, cfg: RunConfig, counts: CsvCounts, side: str) -> CsvPlan | None:
    """What the tasks read and compute, with the kinds ``prepare`` gave the columns from ``counts``, writing their
    late and rejected rows into the folder ``side`` (``spark_jobs.side_rows``); None where a range may not hold
    whole records (a quote in the files) or a column is no plain one."""
    fields, query = cfg.events, cfg.query
    if counts.ambiguous or prepared.result_types or prepared.keys != list(fields.keys):
        return None
    types = {f.name: f.dataType for f in prepared.rows.schema.fields}
    integer_columns = [c for c in prepared.original_columns if isinstance(types[c], T.LongType)]
    values = {}
    for name, internal in prepared.values.items():
        kind = prepared.value_types.get(internal)
        if not isinstance(kind, (T.LongType, T.DoubleType)):
            return None
        values[name] = (internal, "integer" if isinstance(kind, T.LongType) else "float")
    _, columns = _partials({**prepared.aggregates(query), EVENTS_COLUMN: "count"}, prepared, query)
    series = None if query.series_start == "earliest" else int(query.series_start)
    read = ReadPlan(fields.start, fields.end, fields.time_unit, list(fields.keys), values, query.range, query.slide,
                    query.offset, query.ttp, series, [tuple(c) for c in columns])  # fmt: skip
    time_kind = "date_time" if prepared.time_is_timestamp else "number"
    checked = [name for name in query.value_columns if name in query.numeric_columns]
    return CsvPlan(read, list(prepared.original_columns), prepared.inputs.delimiter, integer_columns, time_kind,
                   fields.timezone, checked, side)  # fmt: skip


def csv_window_job(spark: SparkSession, prepared: Prepared, cfg: RunConfig, plan: CsvPlan, counts: CsvCounts,
                   observed: Observation) -> DataFrame:  # fmt: skip
    """The windows of ``vector`` where the tasks read the CSV files' byte ranges (``read_side_job``)."""
    return read_side_job(spark, prepared, cfg, counts.pieces, plan, observed, partials_of=range_partials)


def csv_times_sample(plan: CsvPlan, counts: CsvCounts, most_bytes: int = 4 * 2**20) -> tuple:
    """The start and end chronons of the first records of the first range (up to ``most_bytes`` of it), read on the
    driver as the tasks read them: the plan's sample of windows per event, with no Spark job."""
    import pyarrow as pa

    from spanning.app.csv_records import range_records, text_schema
    from spanning.engines.reader import time_chronons

    path, start, end = counts.pieces[0]
    read = plan.read
    used = list(dict.fromkeys([read.start, read.end]))
    records = range_records(path, start, min(end, start + most_bytes), plan.delimiter, plan.names, used)
    table = pa.Table.from_batches(records.batches, schema=text_schema(used))
    times = [time_chronons(table.column(c).combine_chunks(), plan.time_kind, read.time_unit, plan.timezone)
             for c in (read.start, read.end)]  # fmt: skip
    usable = times[0].present & times[1].present
    return times[0].values[usable], times[1].values[usable]
