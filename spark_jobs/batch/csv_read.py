"""Local CSV files read by every core, in byte ranges, in one pass (``spanning.app.csv_partials``).

``spanning run`` plans the job with the column kinds of the files' first records (``first_records_stats``): the
kinds that ``prepare`` gives columns from counts over the whole column. ``vector``'s tasks then read their byte
ranges once: they type and reduce the rows, write their late and rejected rows into the run's side folder
(``side_rows``), and count every column's forms. Once the windows are written, ``checked_kinds`` adds up
those counts: the kinds that the whole files give. Where a column the windows read takes another kind, the job is
planned and run again with the true counts (``KindsChanged``); where only a column that late/ and rejected/ carry
does, those are typed by the true kinds.

Measured 2026-11-29 (30M rows, one 1.0 GB file, 15m/1m, whole processes, medians of 3): a first pass of counts
and a second of windows took 27.2 s, one pass 24.8 s (docs/BENCHMARKS.md).

Files whose byte ranges may not hold whole records (a quote character: a quoted field may hold a line break; a
carriage return alone), compressed files, and queries the tasks cannot compute (``csv_reads_itself``) take the
general way: each file parsed whole by one task, then ``prepare``'s Spark SQL, with the same rows and reasons.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import types as T

from spanning.app.csv_partials import (
    FIRST_RECORDS,
    CsvPlan,
    byte_pieces,
    counted_columns,
    first_records,
    first_records_stats,
    range_partials,
    range_times,
    ranges_hold,
    read_kinds,
    used_columns,
)
from spanning.app.files import Inputs
from spanning.app.jobspec import RunConfig
from spanning.engines.reader import ColumnStats, column_kind, time_chronons, time_kinds
from spark_jobs.batch.plans import (
    QUICK_COMPILER_PARTIALS,
    READ_SIDE_FROM,
    VECTOR_PER_WINDOW,
    partials_per_event,
    python_only,
    read_side_job,
    sketches_or_sets,
    tasks_read_plan,
)
from spark_jobs.batch.worker_parquet import LOCAL_MASTERS
from spark_jobs.reading.prepare import Prepared, key_groups, local_input_bytes
from spark_jobs.sessions import session_kind

CSV_MODULES = ("spanning.app.csv_partials", "spanning.app.csv_records")  # what the tasks import besides vector's


class KindsChanged(Exception):
    """The whole files' counts give a column the windows read another kind than their first records did: the job
    is planned and run again with ``stats``."""

    def __init__(self, stats: dict[str, ColumnStats]) -> None:
        super().__init__("the files' column kinds differ from their first records'")
        self.stats = stats


def csv_reads_itself(cfg: RunConfig, inputs: Inputs | None) -> bool:
    """Whether ``vector``'s tasks may read ``inputs`` in byte ranges for ``cfg``: local CSV files whose ranges hold
    whole records (``Inputs.splittable``) of at least ``READ_SIDE_FROM`` bytes (unless ``--plan vector``); times
    from two plain columns, keys and aggregated columns plain columns, aggregates that the vector kernel computes,
    one window spec."""
    if not ranges_hold(cfg, inputs):
        return False
    size, plan = local_input_bytes(inputs), cfg.spark.plan
    if size is None or plan not in ("auto", "vector") or (plan == "auto" and size < READ_SIDE_FROM):
        return False
    if python_only(cfg) or sketches_or_sets(cfg):
        return False
    return all(a in VECTOR_PER_WINDOW for a in cfg.query.per_window_aggregates)


def csv_plan(prepared: Prepared, cfg: RunConfig, side: str) -> CsvPlan | None:
    """What the tasks read and compute, with the kinds ``prepare`` gave the columns, writing their late and rejected
    rows and their counts into the folder ``side``; None where a column is no plain one (a key expression, an
    arg-aggregate's column)."""
    fields, query = cfg.events, cfg.query
    if prepared.result_types or prepared.keys != list(fields.keys):
        return None
    types = {f.name: f.dataType for f in prepared.rows.schema.fields}
    integer_columns = [c for c in prepared.original_columns if isinstance(types[c], T.LongType)]
    values = {}
    for name, internal in prepared.values.items():
        kind = prepared.value_types.get(internal)
        if not isinstance(kind, (T.LongType, T.DoubleType)):
            return None
        values[name] = (internal, "integer" if isinstance(kind, T.LongType) else "float")
    read = tasks_read_plan(prepared, cfg, values)
    names = list(prepared.original_columns)
    time_kind = "date_time" if prepared.time_is_timestamp else "number"
    checked = [name for name in query.value_columns if name in query.numeric_columns]
    return CsvPlan(read, names, prepared.inputs.delimiter, integer_columns, time_kind, fields.timezone, checked, side,
                   counted_columns(cfg, names))  # fmt: skip


def csv_window_job(spark: SparkSession, prepared: Prepared, cfg: RunConfig, plan: CsvPlan,
                   observed: Observation) -> DataFrame:  # fmt: skip
    """The windows of ``vector`` where the tasks read the CSV files' byte ranges (``read_side_job``)."""
    cores = session_kind.cores(spark)
    pieces = byte_pieces([(path, os.path.getsize(path)) for path in prepared.inputs.files], cores)
    return read_side_job(spark, prepared, cfg, pieces, plan, observed, partials_of=range_partials)


def checked_kinds(plan: CsvPlan, replan) -> Prepared:
    """The kinds of the whole files (the tasks' counts, ``read_kinds``) against those ``plan`` was made with.
    ``replan(stats)``: ``prepare`` of the rows with those counts, and the plan it gives. Returns the rows prepared
    with the true kinds, whose columns late/ and rejected/ take; raises ``KindsChanged`` where the windows read a
    column whose kind changed."""
    stats = read_kinds(plan.side, plan.names)
    prepared, again = replan(stats)
    if again is None or used_columns(again) != used_columns(plan):
        raise KindsChanged(stats)
    return prepared


def csv_times_sample(plan: CsvPlan, inputs: Inputs) -> tuple:
    """The start and end chronons of the first records (``first_records``), typed as the tasks type them: the plan's
    sample of windows per event, with no Spark job."""
    read = plan.read
    table = first_records(inputs, list(dict.fromkeys([read.start, read.end])))
    starts, ends, usable = _usable_times(table, read.start, read.end, lambda text: range_times(text, plan))
    return starts.values[usable], ends.values[usable]


def csv_merge_is_small(cfg: RunConfig, inputs: Inputs, master: str | None) -> bool:
    """``plans.jvm_merge_is_small`` for CSV files that ``vector``'s tasks will read in byte ranges (a local master,
    as ``compute``'s side folder needs; ``csv_reads_itself``): the partials they hand the JVM, estimated from the
    first records (``partials_per_event``) times the rows the files hold (the first records' bytes a row), at most
    ``QUICK_COMPILER_PARTIALS``. Called before Spark starts: ``master`` as the command was given it (None: local,
    unless under ``spark-submit``)."""
    from spanning.app.jobspec import UsageError

    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its master, not known here
        return False
    if not session_kind.is_local_name(master or "local[*]", LOCAL_MASTERS) or not csv_reads_itself(cfg, inputs):
        return False
    fields = cfg.events
    table = first_records(inputs, list(inputs.columns))  # read once: the counts and the sample
    stats = first_records_stats(cfg, inputs, table)
    try:  # the kind the tasks will give the times, as ``prepare`` gives it from these counts
        kind = time_kinds(column_kind("time", stats[fields.start]), column_kind("time", stats[fields.end]))
    except UsageError:  # start and end disagree: the job says so
        return False
    starts, ends, usable = _usable_times(table, fields.start, fields.end,
                                         lambda text: time_chronons(text, kind, fields.time_unit, fields.timezone))
    sizes = [os.path.getsize(path) for path in inputs.files]
    rows = int(usable.sum()) * max(sum(sizes), 1) / max(min(FIRST_RECORDS, sizes[0]), 1)  # the first records' bytes
    sample = starts.values[usable], ends.values[usable], key_groups(table, list(fields.keys), usable)
    return partials_per_event(cfg, sample) * rows <= QUICK_COMPILER_PARTIALS


def _usable_times(table, start: str, end: str, typed) -> tuple:
    """The ``start`` and ``end`` text columns of ``table`` as ``Times`` (``typed``), and the rows where both are."""
    starts, ends = (typed(table.column(c).combine_chunks()) for c in (start, end))
    return starts, ends, starts.present & ends.present


def as_read_schema(prepared: Prepared, extra: T.StructField) -> T.StructType:
    """The columns of late/ (``extra``: windows_missed) or rejected/ (reason): the rows as read, as typed."""
    types = {f.name: f.dataType for f in prepared.rows.schema.fields}
    return T.StructType([*[T.StructField(c, types[c]) for c in prepared.original_columns], extra])
