"""``spanning run --engine spark``: read, validate, window, and write windows/, rejected/, late/, summary.json."""

from __future__ import annotations

import functools
import uuid
from dataclasses import replace
from typing import Any, NamedTuple

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spanning.aggregates import SqlFunction, parse_aggregate, seconds_columns
from spanning.app.csv_partials import first_records_stats
from spanning.app.files import Inputs
from spanning.app.jobspec import EVENTS_COLUMN, RunConfig
from spanning.engines.reader import CHRONONS_PER_SECOND, ColumnStats
from spanning.planning.height import resolve_height
from spanning.planning.specs import window_labels
from spark_jobs.batch.csv_read import (
    CSV_MODULES,
    as_read_schema,
    checked_kinds,
    csv_plan,
    csv_reads_itself,
    csv_times_sample,
    csv_window_job,
)
from spark_jobs.batch.plans import (
    MAX_KEY_IDS,
    Choice,
    choose_plan,
    jvm_window_job,
    key_ids,
    late_flag,
    late_rows,
    parquet_window_job,
    python_only,
    python_plan_certain,
    read_plan,
    vector_reads_parquet,
)
from spark_jobs.batch.side_rows import SideRows
from spark_jobs.batch.windowed import LATE_SEQ, MISSED, window_job
from spark_jobs.batch.worker_parquet import LOCAL_MASTERS
from spark_jobs.reading.prepare import (
    END,
    REASON,
    SEQ,
    START,
    Prepared,
    as_read,
    events,
    load,
    parquet_footer_schema,
    parquet_key_values,
    parquet_times_sample,
    plain_parquet_files,
    prepared_frame,
    quoted,
)
from spark_jobs.sessions import session_kind
from spark_jobs.sessions.session import ANSI, ZONE, job_settings, ship_engine, warm_python_workers

VECTOR_MODULES = ("numpy", "pyarrow", "pyarrow.parquet", "spanning.engines.parquet_partials",
                  "spanning.kernels.compiled")  # what vector's tasks import: the warm-up loads them (and the kernel)
PYTHON_MODULES = ("numpy", "pandas", "pyarrow", "spark_jobs.batch.windowed", "spanning.engines.engine",
                  "spanning.engines.keyed", "spanning.engines.streams", "spanning.aggregates.distinct",
                  "spanning.kernels.hll")  # what the Python plan's tasks import, and the kernels they call
# (``windowed.warm_up``); not the compiled kernel's own warm_up, which loads every kernel (vector's too): that warm-up
# job took 2.6 s on both cores and slowed the read stage beside it, the imports alone 1.5 s (one run each, 3M rows,
# 2026-11-29)


HEIGHT_SAMPLE = 200_000  # events measured for --height auto
PLAN_SAMPLE = 50_000  # events measured for --plan auto
# local inputs below this many bytes take the explode without measuring a sample: a judgement of 2026-11-22, not a
# measurement (the sample's pass costs a Spark job, and at the sample data's size every plan is within a second)
SMALL_INPUT = 32 * 2**20
# 200k, 5 s more at 1M rows (docs/BENCHMARKS.md)


def to_time(column, cfg: RunConfig, is_timestamp: bool):
    if not is_timestamp:
        return column
    return F.timestamp_millis(column) if cfg.events.time_unit == "ms" else F.timestamp_seconds(column)


def to_seconds(name: str, cfg: RunConfig, seconds: list[str]):
    """An aggregate column as written: ``occupancy`` ones (``seconds``) divided into seconds (``seconds_columns``)."""
    column = quoted(name)
    if name in seconds:
        column = column / CHRONONS_PER_SECOND[cfg.events.time_unit]
    return column.alias(name)


def _no_late_rows(prepared: Prepared) -> DataFrame:
    """No row, in the columns of ``late_rows``' (as read, and windows_missed)."""
    return prepared.rows.where(F.lit(False)).withColumn("windows_missed", F.lit(0).cast("long"))


def _tag(label: str | None) -> list:
    return [] if label is None else [F.lit(label).alias("window")]


class Computed(NamedTuple):
    """The job as lazy DataFrames, and where its counts of rows read and rejected come from."""

    counts: Observation  # "read" and "rejected", ready once the frame that observes them is written
    windows: DataFrame
    late: DataFrame
    rejected: DataFrame
    choices: list[Choice]
    counted_by_windows: bool  # the windows' pass counts (one spec): rejected/ (and late/ for a JVM plan, whose
    # count is then among ``counts``) needs no pass when there are none
    persisted: tuple[DataFrame, ...] = ()  # cached for the job's passes: ``release`` drops them after the writes
    rows: DataFrame | None = None  # every prepared row, with its reason (null for an event)
    side: SideRows | None = None  # late (and rejected) rows that the windows' tasks wrote, when they read the input
    # the Python plan's late rows ("late"), counted as its windows are written (``compute``'s ``side_outputs``)
    late_counts: Observation | None = None

    def output(self, name: str) -> DataFrame:
        """The frame of output ``name`` (windows, late, rejected), once the outputs before it are written."""
        return self.side.frame(name) if self.side is not None and self.side.carries(name) else getattr(self, name)


def release(job: Computed) -> None:
    """Drop what ``compute`` cached. Spark's cache matches a later query by its plan, so a later job of this
    session over the same path (rewritten since) would otherwise read the old rows from the cache."""
    for frame in job.persisted:
        frame.unpersist()
    if job.side is not None:
        job.side.remove()


def compute(spark, cfg: RunConfig, inputs: Inputs | None = None, frame: DataFrame | None = None,
            workers_warming: bool = False, side_outputs: bool = False,
            csv_stats: dict[str, ColumnStats] | None = None) -> Computed:  # fmt: skip
    """The windows, late events and rejected rows of ``cfg`` as lazy DataFrames, with the plans chosen.

    The rows are ``cfg``'s input files, or ``frame`` (any DataFrame, ``spark_jobs.api``), which ``inputs`` names
    the files of when it is a plain read of them (``read_input``): the Parquet footers then serve the plans.
    ``workers_warming``: the caller has started the Python workers' warm-up (``warm_vector_workers``).
    ``side_outputs``: the caller writes the outputs in order, windows first (``_write_outputs``), so that tasks
    reading the input may write the late and rejected rows as they go (``Computed.output``, ``SideRows``), on a
    local master; a ``BatchResult``'s frames are lazy and taken in any order, so the API's are not.
    ``csv_stats``: the counts of every column of CSV files read in byte ranges (``csv_read.KindsChanged``); else
    the job is planned with the kinds of their first records, and checked once the windows are written.
    """
    # the tasks' side folder is one of this machine's: a local master of this process (a Connect server's master
    # is local to the server, whose machine may be another)
    side = (SideRows(spark) if side_outputs and session_kind.is_local_master(spark, LOCAL_MASTERS)
            and not session_kind.is_connect(spark) else None)  # fmt: skip
    csv_counts = None  # local CSV files that vector's tasks read in byte ranges: the counts the job is planned with
    if side is not None and frame is not None and csv_reads_itself(cfg, inputs):
        csv_counts = csv_stats or first_records_stats(cfg, inputs)
    column_stats = None if csv_counts is None else csv_counts.get
    if frame is None:
        prepared = load(spark, cfg, inputs)
    else:
        prepared = prepared_frame(frame, cfg, inputs, column_stats=column_stats)
    # on Connect, the rows read through a view analysed now, under the job's settings (``session_kind.pinned``):
    # every frame of the job is built above it, so that the Observations of its passes stay in the plans this
    # client sends, which bring their metrics back (one inside a view comes back empty)
    prepared.rows = session_kind.pinned(spark, {"rows": prepared.rows})["rows"]
    csv_reads = None if csv_counts is None else csv_plan(prepared, cfg, side.folder)

    def csv_replanned(stats: dict[str, ColumnStats]) -> tuple:  # the rows prepared with the files' true counts
        again = prepared_frame(frame, cfg, inputs, column_stats=stats.get)
        return again, csv_plan(again, cfg, side.folder)

    persisted = []
    query, execution = cfg.query, cfg.execution
    if execution.height == "auto":  # Table 4's cost model on the sizes of (a sample of) the events
        keys = [quoted(k) for k in prepared.keys]
        sample = events(prepared, "first").select(START, END, *keys).limit(HEIGHT_SAMPLE).toPandas()
        groups = sample.groupby(prepared.keys, sort=False, dropna=False).ngroup().to_numpy() if keys else None
        height = resolve_height("auto", execution.technique, query.spec, (sample[START], sample[END], groups))
        cfg.execution = execution.with_height(height)  # summary.json tells the height measured
    specs = [replace(cfg, query=query.one_window(s)) for s in query.specs] if query.windows else [cfg]
    small = prepared.input_bytes is not None and prepared.input_bytes < SMALL_INPUT  # no pass to measure it
    measured = parquet_times_sample(prepared.inputs, cfg.events, PLAN_SAMPLE)  # on the driver: no Spark job
    if measured is None and csv_reads is not None:
        measured = csv_times_sample(csv_reads, inputs)  # on the driver: no Spark job
    if measured is None:
        measured = events(prepared, "first").select(START, END).limit(PLAN_SAMPLE)
    choices = [choose_plan(spec, prepared, None if small or python_only(cfg) else measured, csv_reads is not None)
               for spec in specs]  # fmt: skip
    counted_by_windows = len(specs) == 1  # an observation may appear once in a query: one spec, one pass
    tasks_read_ranges = csv_reads is not None and counted_by_windows and choices[0].plan == "vector"
    if not prepared.columnar and not tasks_read_ranges:  # parsing text costs more than caching it; a Parquet scan
        # costs less; and rows the tasks read in byte ranges never pass through Spark (late/ and rejected/ too)
        prepared.rows = prepared.rows.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(prepared.rows)
    if prepared.inputs is None and not persisted and any(c.plan == "python" for c in choices):
        # the Python plan's late rows are joined back by arrival number: a caller's DataFrame (a join, say) need
        # not give its rows the same numbers twice, so its prepared rows are cached for the job's passes
        prepared.rows = prepared.rows.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(prepared.rows)
    counts = Observation(f"spanning-counts-{uuid.uuid4().hex[:12]}")  # one name per job: two jobs' frames may meet
    observe = counts if counted_by_windows else None
    late = late_flag(specs[0], str(query.series_start)) if counted_by_windows and choices[0].plan != "python" else None
    ids = None
    if any(c.key_ids for c in choices):
        known = parquet_key_values(prepared, cfg.events.keys, MAX_KEY_IDS)  # on the driver: no Spark job
        ids = key_ids(events(prepared, "first"), prepared.keys, known)

    if any(c.plan == "vector" for c in choices) and not workers_warming:
        warm_python_workers(spark, VECTOR_MODULES + (CSV_MODULES if csv_reads is not None else ()))
    elif any(c.plan == "python" for c in choices) and not workers_warming:
        warm_python_workers(spark, python_plan_modules(cfg))
    carried = []  # the outputs whose rows the tasks write into the side folder

    def window_part(spec: RunConfig, choice: Choice) -> DataFrame:
        if tasks_read_ranges:  # the tasks read byte ranges (one spec: ``choice`` is the only one)
            choice.reads_input = True
            carried.extend(["late", "rejected"])
            return csv_window_job(spark, prepared, spec, csv_reads, counts)
        reads = read_plan(prepared, spec) if choice.plan == "vector" and counted_by_windows else None
        if reads is not None:  # the tasks read the Parquet row groups: no row enters the JVM
            choice.reads_input = True
            if side is not None and parquet_footer_schema(prepared.inputs) is not None:  # late rows as Spark reads
                reads = replace(reads, side=side.folder)
                carried.append("late")
            return parquet_window_job(spark, prepared, spec, reads, counts)
        if choice.plan == "python":
            return window_job(events(prepared, query.series_start, observe), prepared, spec,
                              series_start=query.series_start != "first")  # fmt: skip
        # the JVM plans need no per-key series start from the earliest start (spark_jobs.batch.plans.window_runs)
        rows = events(prepared, "first" if query.series_start == "earliest" else query.series_start, observe, late)
        return jvm_window_job(rows, prepared, spec, choice.plan, str(query.series_start),
                              ids if choice.key_ids else None, with_late=False)  # fmt: skip

    parts = [window_part(spec, choice) for spec, choice in zip(specs, choices, strict=True)]
    labels = window_labels(query.specs) if query.windows else [None] * len(specs)
    tag = [F.col("window")] if query.windows else []
    if query.windows:  # several specs: one job each (the batch plans share nothing), tagged and unioned
        parts = [p.withColumn("window", F.lit(label)) for p, label in zip(parts, labels, strict=True)]
    out = functools.reduce(lambda a, b: a.unionByName(b), parts)
    late_parts = [  # the JVM plans' late rows come from the rows themselves; where the tasks write them (one spec),
        # the frame gives late/ its columns only (``SideRows``), and window_runs' expressions cost the driver 0.3 s
        (late_rows(prepared, spec, str(query.series_start)) if "late" not in carried else _no_late_rows(prepared))
        .select(*as_read(prepared), *_tag(label), "windows_missed")
        for spec, choice, label in zip(specs, choices, labels, strict=True)
        if choice.plan != "python"
    ]
    late_counts = None
    if any(c.plan == "python" for c in choices):  # one Python pass yields windows and late rows together
        out = out.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(out)
        late_ids = out.where(F.col(LATE_SEQ).isNotNull()).select(F.col(LATE_SEQ).alias(SEQ), *tag, F.col(MISSED))
        late_parts.append(
            prepared.rows.join(late_ids, SEQ).select(*as_read(prepared), *tag, F.col(MISSED).alias("windows_missed"))
        )
    windows = out
    if side_outputs and late_parts and all(c.plan == "python" for c in choices):
        # the late rows counted on their way past the windows' write (above the cache, which the late rows'
        # query then reads): none, and their output needs no join of the input with the cache (a second pass
        # over the input: 1.7 s of a 21.0 s run at 3M rows with the two sketches, Spark's event log of 2026-11-29)
        late_counts = Observation(f"spanning-late-{uuid.uuid4().hex[:12]}")
        windows = windows.observe(late_counts, F.count(F.col(LATE_SEQ)).alias("late"))
    windows = windows.where(F.col(LATE_SEQ).isNull())
    if query.empty_windows == "skip":
        windows = windows.where(F.col(EVENTS_COLUMN) > 0)
    seconds = seconds_columns(query.aggregate_columns, cfg.events.time_unit)
    windows = windows.select(
        *[quoted(k) for k in prepared.keys],
        *tag,
        to_time(F.col("window_start"), cfg, prepared.time_is_timestamp).alias("window_start"),
        to_time(F.col("window_end"), cfg, prepared.time_is_timestamp).alias("window_end"),
        *[to_seconds(name, cfg, seconds) for name in query.aggregate_columns],
    )
    late_events = functools.reduce(lambda a, b: a.unionByName(b), late_parts)
    rejected = prepared.rows
    if not counted_by_windows:  # every row passes here once, on its way to rejected/ or not
        rejected = rejected.observe(counts, F.count(F.lit(1)).alias("read"), F.count(REASON).alias("rejected"))
    rejected = rejected.where(F.col(REASON).isNotNull()).select(*as_read(prepared), F.col(REASON))
    if side is not None and carried:
        side.schemas = {name: {"late": late_events, "rejected": rejected}[name].schema for name in carried}
        if csv_reads is not None:  # the as-read columns typed by the whole files' kinds, once the tasks counted them

            def check_kinds() -> None:
                typed = checked_kinds(csv_reads, csv_replanned)
                side.schemas = {"late": as_read_schema(typed, T.StructField("windows_missed", T.LongType())),
                                "rejected": as_read_schema(typed, T.StructField(REASON, T.StringType()))}  # fmt: skip

            side.as_text, side.before_sides = True, check_kinds
    elif side is not None:  # no task writes there: the job's own frames serve
        side.remove()
        side = None
    return Computed(counts, windows, late_events, rejected, choices, counted_by_windows, tuple(persisted),
                    prepared.rows, side, late_counts)


def python_plan_modules(cfg: RunConfig) -> tuple[str, ...]:
    """What the Python plan's tasks import for ``cfg``: ``PYTHON_MODULES``, and the DataSketches library when
    an aggregate is an HLL or KLL sketch."""
    sketches = any(parse_aggregate(a).capabilities.sql in (SqlFunction.HLL, SqlFunction.KLL)
                   for a in cfg.query.aggregates)  # fmt: skip
    return PYTHON_MODULES + (("datasketches",) if sketches else ())


def daemon_modules(cfg: RunConfig, inputs: Inputs, master: str, connect: bool = False) -> tuple[str, ...]:
    """Vector's modules on ``master`` where its tasks will read the files themselves (Parquet row groups, or local
    CSV files in byte ranges), as far as the files tell before Spark starts; else none. What ``spanning run``'s
    worker daemon imports before it forks the workers (``session.get_session``'s ``worker_modules``): 100 CSV files
    of 3M rows, 8.38 s against 8.69 s, six alternating pairs. Not the Python plan's (pandas, DataSketches): one
    daemon importing them while the JVM builds the session made 3M rows with two sketches 15.75 s against 15.38 s
    (medians of twelve pairs), where two workers had imported them side by side (2026-11-30)."""
    if vector_reads_parquet(cfg, inputs):
        return VECTOR_MODULES
    if csv_reads_itself(cfg, inputs) and not connect and session_kind.is_local_name(master, LOCAL_MASTERS):
        return VECTOR_MODULES + CSV_MODULES  # the tasks will read the CSV files' byte ranges (``compute``)
    return ()


def planned_worker_modules(cfg: RunConfig, inputs: Inputs, master: str, connect: bool = False) -> tuple[str, ...]:
    """What the job's Python workers will import on ``master``, as far as the files and the query tell before Spark
    starts: vector's (``daemon_modules``), or the Python plan's when the query alone chooses it; none when the plan
    is not known yet."""
    vector = daemon_modules(cfg, inputs, master, connect)
    if vector:
        return vector
    return python_plan_modules(cfg) if python_plan_certain(cfg) else ()


def warm_vector_workers(spark, cfg: RunConfig, inputs: Inputs) -> bool:
    """Start the Python workers' warm-up as soon as the session is up, when the files already tell that vector's
    tasks will read them (``vector_reads_parquet``, or local CSV files read in byte ranges: ``csv_reads_itself``),
    or the query alone that the Python plan will run it (``python_plan_certain``): it then runs while the driver
    reads the input and plans, with a core to spare, rather than in the windows stage's first tasks. Whether it was
    started.

    Measured 2026-11-28 (30M rows, hot key, 15m/1m, whole processes): the warm-up job took 1.3 s on both cores,
    and the driver's 1.6-2.2 s from the session to the query left one core idle. The Python plan's tasks
    otherwise import pandas, numba, the engine and DataSketches, and load their kernels, in the windows stage
    (py-spy of its workers, 3M rows with the two sketches, 2026-11-29): that stage took 7.2 s instead of
    8.3 s with the warm-up (one run each, Spark's event log).
    """
    modules = planned_worker_modules(cfg, inputs, session_kind.master(spark), session_kind.is_connect(spark))
    if not modules:
        return False
    ship_engine(spark)  # once per application: a session that was active already may not have the engine yet
    warm_python_workers(spark, modules)
    return True


def computed(spark: SparkSession, df: DataFrame, cfg: RunConfig, inputs: Any = None,
             workers_warming: bool = False, side_outputs: bool = False, csv_stats: Any = None) -> Computed:
    """The batch job of ``cfg`` over ``df`` (``run.compute``) under the job's settings, the engine shipped.
    ``inputs``: the files ``df`` reads, where the caller knows them (``spanning run``); else found from ``df``.
    ``workers_warming``: the caller has started the Python workers' warm-up (``run.warm_vector_workers``).
    ``side_outputs``: the caller writes the outputs windows first; ``csv_stats``: known CSV counts (``run.compute``)."""
    ship_engine(spark)
    if inputs is None:  # the API: a plain read of local Parquet files (``prepared_frame`` would look the same way)
        inputs = plain_parquet_files(df)
        if inputs is not None and not workers_warming:  # the workers started while the call plans, as spanning run
            workers_warming = warm_vector_workers(spark, cfg, inputs)  # starts them before it calls this
    with job_settings(spark, {ZONE: cfg.events.timezone, ANSI: "false"}):
        # a classic frame is analysed as built, with these settings in its plan; on Connect, where a server analyses
        # a frame again at each action, the prepared rows (every expression the settings change) are a view
        # analysed under them (``compute``), and the job's frames above it read the same whatever the session's
        return compute(spark, cfg, inputs, frame=df, workers_warming=workers_warming, side_outputs=side_outputs,
                       csv_stats=csv_stats)
