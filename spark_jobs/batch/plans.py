"""Plans that keep built-in aggregates in the JVM: the batch form of SE-Slicing as Spark SQL.

With each key's events taken in end order, the clock when an event arrives is its own end u, so the
event counts in one contiguous run of window numbers (the same run as ``spanning.engines.chunks.reduce_chunk``):

    a = max(first window ending after l,  first window w with u(w) + δ ≥ u,  the key's series start)
    b = last window starting before u

and it is late, with ``windows_missed = min(b + 1, a) - (first window ending after l)``, when that is
positive. That is column arithmetic, with no sort and no Python. The windows then come from one of:

* ``explode``: each event exploded into the windows of its run, merged per (key, window);
* ``vector``: each input task reduces its own events to partials per (key, window) with the compiled kernel
  (``spanning.engines.window_ranges`` over ``spanning.kernels.compiled``: difference arrays for counts and
  integer sums, the explode's loop or a sparse table for min and max, the explode's loop for float sums), merges
  them across its chunks while that pays (``merged_while_it_pays``), and only those partials cross the shuffle,
  merged as the explode merges its rows. No raw row is shuffled and no
  task holds a whole key: a hot key, or no key at all, spreads over the input's tasks like any other. Where
  the input is local Parquet with plain columns (``read_plan``), the tasks read their row groups themselves
  (``parquet_window_job``, with ``spanning.engines.parquet_partials``) and no row enters the JVM; otherwise the
  JVM reads and validates the rows and hands each task's runs to ``mapInArrow``. Counts, sums, means, min and
  max, the distinct counts and quantiles, occupancy and erlang;
* ``python``: the mapInPandas job (``spark_jobs.batch.windowed``), for what only Python does: the paper's
  per-event techniques, point-event SWAGs, and the aggregates these plans do not cover.

Integer sums are exact on every JVM plan (two long sums, see ``_partial``). ``choose_plan`` picks a plan
from the aggregates and the measured windows per event; ``--plan`` overrides it.

Three plans remain. ``range`` (a difference array in SQL: two rows per event and a window function) and
``dyadic`` (power-of-two blocks) were retired on 2026-11-27: they were chosen only between the explode and
vector, from 6 and 32 windows per event, and vector's compiled kernel does the same range updates in one pass
of each task with no rows per block or per change point (docs/BENCHMARKS.md). The explode stays for what
vector does not take (columns other than longs and doubles) and for few windows per event on an input that
Spark reads, where it needs no Python worker at all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from spanning.aggregates import ResultKind, SqlFunction, SumOverflowError, parse_aggregate
from spanning.app.files import Inputs
from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, UsageError, WindowQuery, key_column
from spanning.engines.parquet_partials import COUNTS, MERGE_ROWS, ReadPlan, pieces
from spanning.engines.window_ranges import INT32_MAX, INT32_MIN, LOW_BITS
from spanning.kernels.windows import event_ends
from spanning.techniques.registry import has_batch_form
from spark_jobs.batch.key_hash import spark_xxhash64
from spark_jobs.reading.prepare import (
    EVENT_END,
    INTEGRAL,
    REASON,
    SEQ,
    SERIES,
    START,
    Prepared,
    TimesSample,
    as_read,
    local_input_bytes,
    parquet_times_sample,
    quoted,
    valid_column,
)
from spark_jobs.sessions import session_kind

# windows per event from which auto takes vector over the explode where Spark reads the rows: set from the 3M-row
# in-session table of 2026-11-22 (bench/results/benchmarks-history-2026-11-22-to-29.md, "The Spark job against the
# Spark SQL a user would write": the explode best at 3.6, vector at 19 and 63, nothing measured between); not
# re-measured with the kernel
VECTOR_FROM = 8.0
A, B, MISSED_RUN, K = "_a", "_b", "_missed", "_k"
LATE_SEQ, MISSED = "_late_seq", "_windows_missed"  # the window job's late-row columns (spark_jobs.batch.windowed)
# Parquet bytes from which auto lets vector's tasks read the files: a guess, not measured (below it the Python
# workers' start is not paid back); from 31 MB (3M rows) up it was measured faster (docs/BENCHMARKS.md, issue 30)
READ_SIDE_FROM = 8 * 2**20
# the partials vector's tasks hand the JVM, at most, for spanning run to start it with its quick compiler alone: a
# judgement between two measurements of 2026-11-27 at 30M rows, 15m/1m (docs/BENCHMARKS.md): 1.9M partials (a hot
# key) ran 6 s faster with C1 alone, 40M (10k keys) twice as slow
QUICK_COMPILER_PARTIALS = 5_000_000
TASKS_PER_CORE = 2  # the read-side tasks of vector (parquet_window_job): each takes its share of the pieces
CHUNK_ROWS = 1 << 20  # events a vector task reduces at once: bounds a worker's memory, whatever a key holds
KEY_ID, MAX_KEY_IDS = "_id", 50_000  # group by a long id per key when there are at most this many keys


@dataclass
class Choice:
    """The plan of one query, and why (written to summary.json)."""

    plan: str
    reason: str
    windows_per_event: float | None = None
    key_ids: bool = False  # group by a long id per key (see key_ids), unless the key is one integer column
    reads_input: bool = False  # vector's tasks read the Parquet row groups themselves (``parquet_window_job``)


def jvm_aggregates(cfg: RunConfig) -> bool:
    """Whether the JVM plans compute every aggregate of ``cfg``: those equal to a SQL aggregate function."""
    return all(parse_aggregate(a).capabilities.sql is not None for a in cfg.query.aggregates)


def python_only(cfg: RunConfig) -> str | None:
    """Why a query needs the Python plan, or None."""
    if not has_batch_form(cfg.execution.technique):  # the JVM plans are SE-Slicing's batch form
        return f"--technique {cfg.execution.technique} runs the paper's per-event algorithm in Python"
    if cfg.execution.swag is not None:
        return "--swag aggregates point events through a FIFO SWAG in Python"
    if cfg.query.empty_windows == "emit":
        return "--empty-windows emit is written by the Python plan"
    if not jvm_aggregates(cfg):
        per_window = cfg.query.per_window_aggregates
        in_python = [a for a in per_window if a not in VECTOR_PER_WINDOW]
        if in_python:
            return f"{in_python[0]}: computed by the batch path in Python (the vector kernel takes occupancy, erlang)"
        if all(parse_aggregate(a).capabilities.sql is not None for a in cfg.query.aggregates if a not in per_window):
            return None  # occupancy or erlang, and SQL aggregates: the vector plan takes them all
        return ("an aggregate other than count, sum, mean, min, max and the distinct counts and quantiles"
                " (count_distinct, percentile, approx_count_distinct, approx_percentile, hll_sketch, kll_sketch)")
    return None


def sketches_or_sets(cfg: RunConfig) -> list[str]:
    """The aggregates of ``cfg`` whose partials are sets, value lists or sketches: the explode merges them
    (Spark's collect_set, collect_list, hll_union_agg, kll_merge_agg_double), vector's tasks and the Python
    plan build them per window (``spanning.aggregates.distinct.ObjectArrays``)."""
    return [a for a in cfg.query.aggregates if parse_aggregate(a).capabilities.sql in MERGED_AS_COLLECTIONS]


def python_plan_certain(cfg: RunConfig) -> bool:
    """Whether ``choose_plan`` gives every window spec of ``cfg`` the Python plan, whatever the input: ``--plan
    python``, or ``auto`` with a query that only the Python plan runs or with sets or sketches."""
    plan = cfg.spark.plan
    return plan == "python" or (plan == "auto" and bool(python_only(cfg) or sketches_or_sets(cfg)))


def groups_by_its_key(prepared: Prepared) -> bool:
    """Whether the plans group by the key column itself: one integer key is already what an id would be
    (``key_ids``), so an id would only add the distinct keys' read, the hashing and the join back."""
    return len(prepared.key_types) == 1 and isinstance(prepared.key_types[0], INTEGRAL)


def choose_plan(cfg: RunConfig, prepared: Prepared, sample: DataFrame | TimesSample | None,
                csv_read: bool = False) -> Choice:  # fmt: skip
    """The plan for ``cfg``: ``--plan`` if given, else by the aggregates and the windows per event. ``csv_read``:
    vector's tasks can read the local CSV files in byte ranges (``spark_jobs.batch.csv_read.csv_plan``)."""
    needs_python, plan = python_only(cfg), cfg.spark.plan
    per_window = cfg.query.per_window_aggregates
    ids = not groups_by_its_key(prepared)  # whether a JVM plan groups by key ids
    if plan == "python":
        return Choice("python", "--plan python")
    vectorisable = all(_vector_kind(prepared, a) for a in prepared.aggregates(cfg.query).values())
    per_event = windows_per_event(cfg, sample) if sample is not None and not needs_python else None
    sampled = per_event is not None  # a large input: its distinct keys for the ids cost little beside it
    collections = sketches_or_sets(cfg)
    if plan != "auto":
        if needs_python:
            raise UsageError(f"--plan {plan} cannot run this query: {needs_python}; use --plan python or auto")
        if per_window and plan != "vector":
            raise UsageError(f"--plan {plan} cannot compute {per_window[0]} (the time inside each window): use"
                             " --plan vector, python or auto")  # fmt: skip
        if plan == "vector" and not vectorisable:
            raise UsageError("--plan vector covers count, sum, mean, min and max of integer and float columns and"
                             " the distinct counts and quantiles: use explode")  # fmt: skip
        return Choice(plan, f"--plan {plan}", per_event, ids and (plan == "vector" or sampled))
    if needs_python:
        return Choice("python", needs_python)
    if collections:  # sets, value lists, sketches: built per window from its values, in the workers
        return Choice("python", f"{collections[0]}: each window's set, values or sketch built at once from its"
                      " values by the batch path and lowered there (measured faster than vector and the"
                      " explode, docs/BENCHMARKS.md)",
                      per_event)  # fmt: skip
    if per_window:  # only vector's kernel has the windows' bounds
        return Choice("vector", f"{per_window[0]}: the time inside each window, summed per window by"
                      " the vector kernel (spanning.kernels.compiled.run_occupancy)", per_event, ids)  # fmt: skip
    if vectorisable and read_plan(prepared, cfg) is not None and (prepared.input_bytes or 0) >= READ_SIDE_FROM:
        return Choice("vector", "plain Parquet columns: each task reads its row groups and reduces them to window"
                      " partials with the compiled kernel, whatever the windows per event", per_event)  # fmt: skip
    if vectorisable and csv_read and (prepared.input_bytes or 0) >= READ_SIDE_FROM:
        return Choice("vector", "local CSV files: each task reads its byte ranges, types them by the counts of the"
                      " first pass and reduces them to window partials with the compiled kernel, whatever the"
                      " windows per event", per_event)  # fmt: skip
    if per_event is None:
        return Choice("explode", "a small input (no sample measured): the explode is never far from the best")
    if vectorisable and per_event >= VECTOR_FROM:
        return Choice("vector", f"{per_event:.1f} windows per event ≥ {VECTOR_FROM}: each task's runs reduced to "
                      "window partials by the compiled kernel, no row per window before the merge", per_event,
                      ids)  # fmt: skip
    return Choice("explode", f"{per_event:.1f} windows per event: few enough to explode", per_event, ids)


def windows_per_event(cfg: RunConfig, sample: DataFrame | TimesSample) -> float:
    """Mean number of windows an event overlaps, over a sample of the events: a DataFrame of _start and _end,
    or those arrays read on the driver (``prepare.parquet_times_sample``), with the same arithmetic in numpy."""
    if isinstance(sample, tuple):
        starts, ends = sample[:2]
        if len(starts) == 0:
            return 0.0
        spec = cfg.query.spec  # its window arithmetic works on arrays as on numbers
        first = spec.first_window_ending_after(starts)
        last = spec.last_window_starting_before(event_ends(starts, ends))
        return float(np.mean(last - first + 1))
    value = sample.agg(F.avg(F.expr(f"{_last_overlapped(cfg)} - {_first_overlapped(cfg)} + 1"))).first()[0]
    return float(value or 0.0)


def _first_overlapped(cfg: RunConfig) -> str:
    """The first window an event [l, u) overlaps: the first one ending after l."""
    return f"({_floordiv(f'{START} - {cfg.query.offset} - {cfg.query.range}', cfg.query.slide)} + 1)"


def _last_overlapped(cfg: RunConfig) -> str:
    """The last window an event overlaps: the last one starting before u (a point event is [l, l + 1))."""
    return _floordiv(f"{EVENT_END} - {cfg.query.offset} - 1", cfg.query.slide)


def _floordiv(x: str, y: int) -> str:
    """⌊x / y⌋ in exact long arithmetic (y > 0)."""
    return f"((({x}) - pmod(({x}), {y})) div {y})"


def _vector_kind(prepared: Prepared, spec: str) -> bool:
    agg = parse_aggregate(spec)
    if agg.capabilities.per_window:
        return spec in VECTOR_PER_WINDOW
    if agg.capabilities.sql is None:  # no SQL merge: the Python plan
        return False
    if agg.capabilities.sql in MERGED_AS_COLLECTIONS:  # built per window by the batch path, any column type
        return True
    return agg.column is None or isinstance(prepared.value_types[agg.column], (T.LongType, T.DoubleType))


def _partial_type(column: PartialColumn, source: T.DataType | None) -> T.DataType:
    """The Spark type of a partial column that vector's tasks write: a set or value list is an array of its
    column's type, a sketch its bytes, a merged value keeps its column's type, counts and sums are longs."""
    kind = column.merge.partition(":")[0]
    if kind in ("set", "list"):
        return T.ArrayType(source)
    if kind in ("hll", "kll"):
        return T.BinaryType()
    return source if column.derive == "value" else T.LongType()


def window_runs(rows: DataFrame, cfg: RunConfig, keys: list[str], series_start: str) -> DataFrame:
    """The events with their run of windows [a, b] and the windows they missed (see the module docstring)."""
    if series_start == "first":  # the start of each key's first event in end order, as a stream has it
        by_key = Window.partitionBy(*[quoted(k) for k in keys]) if keys else Window.partitionBy(F.lit(0))
        rows = rows.withColumn(SERIES, F.min_by(F.col(START), F.struct(F.expr(EVENT_END), SEQ)).over(by_key))
    a, b, missed = _run_bounds(cfg, None if series_start == "earliest" else SERIES)
    return rows.select("*", F.expr(a).alias(A), F.expr(b).alias(B), F.expr(missed).alias(MISSED_RUN))


def late_flag(cfg: RunConfig, series_start: str) -> Column | None:
    """Whether an event is late, over its own columns only (no per-key series column), or None if that needs one."""
    if series_start == "first":
        return None
    series = None if series_start == "earliest" else f"CAST({int(series_start)} AS BIGINT)"
    return F.expr(f"{_run_bounds(cfg, series)[2]} > 0")


def _run_bounds(cfg: RunConfig, series: str | None) -> tuple[str, str, str]:
    """SQL for a, b and the windows missed, from _start, _end and ``series`` (the key's series start, or None
    from the key's earliest start: the series never begins after an event's first window, so no term)."""
    s, o, w, d = cfg.query.slide, cfg.query.offset, cfg.query.range, cfg.query.ttp
    overlap_first = _first_overlapped(cfg)
    open_first = f"(-{_floordiv(f'{o + w + d} - {EVENT_END}', s)})"  # the clock at arrival: the event's own u
    series_first = [] if series is None else [f"({_floordiv(f'{series} - {o} - {w}', s)} + 1)"]
    a = f"greatest({', '.join([overlap_first, open_first, *series_first])})"
    b = _last_overlapped(cfg)
    return a, b, f"greatest(least({b} + 1, {a}) - {overlap_first}, 0)"


@dataclass
class KeyIds:
    """A long per distinct key, for the plans to group by (``key_ids``)."""

    table: DataFrame  # the distinct keys (``_key0``, ...) and their ``_id``, small enough to broadcast
    hashed: bool  # ``_id`` is Spark's xxhash64 of the key columns, so each row computes its own (no join)


_HASHED_TYPES = {"string": "string", "tinyint": "byte", "smallint": "short", "int": "int", "bigint": "long"}


def key_ids(events: DataFrame, keys: list[str], known: list[tuple] | None = None) -> KeyIds | None:
    """A long id per distinct key, or None past ``MAX_KEY_IDS`` keys.

    Grouping by a long instead of a text key makes every hash aggregation of the plans about 1.4× faster
    (measured: the key is hashed once per exploded row), and ``vector`` ships a long to Python instead of
    the text. The distinct keys come from one pass over the keys (or ``known``: read on the driver,
    ``prepare.parquet_key_values``), are collected and broadcast, to give the windows their keys back.
    The id is Spark's ``xxhash64`` of the key columns, an expression each row computes, when the distinct
    keys' hashes differ (``spark_jobs.batch.key_hash`` checks it on the driver); else a dense number per key,
    which each row gets by a broadcast join (deterministic: numbered on the driver).
    """
    if not keys:
        return None
    distinct = known
    if distinct is None:
        distinct = events.select(*[quoted(k) for k in keys]).distinct().limit(MAX_KEY_IDS + 1).collect()
    if len(distinct) > MAX_KEY_IDS:
        return None
    kinds = [_HASHED_TYPES.get(events.schema[k].dataType.simpleString()) for k in keys]
    hashes = {spark_xxhash64(tuple(row), kinds) for row in distinct} if None not in kinds else set()
    hashed = len(hashes) == len(distinct)
    schema = T.StructType([
        *[T.StructField(f"_key{i}", events.schema[k].dataType, True) for i, k in enumerate(keys)],
        T.StructField(KEY_ID, T.LongType(), False),
    ])  # fmt: skip
    # from Arrow: a LocalRelation in the JVM, where a list of rows would start Python workers (1-1.5 s cold)
    columns = [pa.array([row[j] for row in distinct], to_arrow_type(schema[j].dataType)) for j in range(len(keys))]
    arrow = pa.Table.from_arrays([*columns, pa.array(range(len(distinct)), pa.int64())], names=schema.fieldNames())
    table = events.sparkSession.createDataFrame(arrow, schema)
    if hashed:  # Spark's own hash for the windows' way back, the same expression as the rows'
        table = table.withColumn(KEY_ID, F.xxhash64(*[F.col(f"_key{i}") for i in range(len(keys))]))
    return KeyIds(table, hashed)


def jvm_window_job(
    events: DataFrame,
    prepared: Prepared,
    cfg: RunConfig,
    plan: str,
    series_start: str,
    ids: KeyIds | None = None,
    with_late: bool = True,
) -> DataFrame:
    """Windows and late rows in the window job's columns (keys, window_start, window_end, aggregates,
    ``__events``, ``_late_seq``, ``_windows_missed``), computed by ``plan`` without Python.

    No plan shuffles the events themselves: each aggregates map-side first (Spark's partial aggregation, or
    vector's tasks), so only partial rows per (key, window) cross the network, as in the SQL a user writes.
    With ``ids`` (``key_ids``), the plans group by the key's id and the keys come back by a broadcast join.
    Without ``with_late``, only windows (the job takes late rows from ``late_rows``).
    """
    keys = prepared.keys
    if ids is not None and ids.hashed:
        events = events.withColumn(KEY_ID, F.xxhash64(*[quoted(k) for k in keys])).drop(*keys)
    elif ids is not None:
        same = [quoted(k).eqNullSafe(F.col(f"_key{i}")) for i, k in enumerate(keys)]
        events = events.join(F.broadcast(ids.table), functools.reduce(lambda x, y: x & y, same)).drop(
            *keys, *[f"_key{i}" for i in range(len(keys))]
        )
    group = [KEY_ID] if ids is not None else keys
    runs = window_runs(events, cfg, group, series_start)
    outputs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
    active = runs.where(F.col(A) <= F.col(B))
    vector = functools.partial(_vectorised, query=cfg.query)
    build = {"vector": vector, "explode": _explode}[plan]
    windows = build(active, prepared, group, outputs)
    if ids is not None:
        windows = windows.join(F.broadcast(ids.table), KEY_ID).select(
            *[F.col(f"_key{i}").alias(k) for i, k in enumerate(keys)], K, *[quoted(name) for name in outputs]
        )
    windows = _window_rows(windows, cfg, keys, outputs)
    if not with_late:
        return windows
    late = runs.where(F.col(MISSED_RUN) > 0).select(
        F.col(SEQ).alias(LATE_SEQ), F.col(MISSED_RUN).cast("long").alias(MISSED)
    )
    return windows.unionByName(late, allowMissingColumns=True)


def _window_rows(windows: DataFrame, cfg: RunConfig, keys: list[str], outputs: dict[str, str]) -> DataFrame:
    """Merged windows by number ``_k`` as the window job's rows: their bounds, no late-row columns."""
    start = F.col(K) * cfg.query.slide + cfg.query.offset
    return windows.select(
        *[quoted(k) for k in keys],
        start.alias("window_start"),
        (start + cfg.query.range).alias("window_end"),
        *[quoted(name) for name in outputs],
        F.lit(None).cast("long").alias(LATE_SEQ),
        F.lit(None).cast("long").alias(MISSED),
    )


_READ_KEYS = (pa.types.is_signed_integer, pa.types.is_string, pa.types.is_large_string)


def footer_readable(schema: pa.Schema, cfg: RunConfig) -> bool:
    """Whether the columns of local Parquet files of ``schema`` are plain enough for ``vector``'s tasks to read
    them (``read_plan``), from the footer and the query alone: ``--start`` and ``--end`` columns (no expression,
    no ``--duration``) both timestamps with a zone or both integers, keys that are integer or text columns,
    aggregated columns of integers or floats, and a series start from each key's earliest event or a fixed time
    (``first`` needs the key's first event in end order). Of the time inside windows
    (``WindowQuery.per_window_aggregates``), the tasks compute what vector does (``VECTOR_PER_WINDOW``)."""
    fields, query = cfg.events, cfg.query
    if fields.duration is not None or fields.point_events or query.series_start == "first":
        return False
    if any(a not in VECTOR_PER_WINDOW for a in query.per_window_aggregates):
        return False
    types = {f.name: f.type for f in schema}
    times = [types.get(fields.start), types.get(fields.end)]
    if None in times or not (all(pa.types.is_timestamp(t) and t.tz is not None and t.unit in ("ms", "us")
                                 for t in times)  # as Spark reads them (prepare.parquet_footer_schema)
                             or all(pa.types.is_signed_integer(t) for t in times)):  # fmt: skip
        return False
    if not all(k in types and any(test(types[k]) for test in _READ_KEYS) for k in fields.keys):
        return False
    return all(_read_value_kind(types.get(name)) is not None for name in query.value_columns)


def _read_value_kind(kind: pa.DataType | None) -> str | None:
    """How ``vector``'s tasks read a value column of Parquet type ``kind``: "integer", "float", or None (not)."""
    if kind is not None and pa.types.is_signed_integer(kind):
        return "integer"
    if kind is not None and pa.types.is_floating(kind) and not pa.types.is_float16(kind):
        return "float"
    return None


def vector_reads_parquet(cfg: RunConfig, inputs: Inputs) -> bool:
    """Whether ``vector``'s tasks will read ``inputs``' Parquet row groups themselves (``choose_plan`` and
    ``read_plan``), as far as the files tell before Spark starts."""
    plan, size = cfg.spark.plan, local_input_bytes(inputs)
    if plan not in ("auto", "vector") or python_only(cfg) or sketches_or_sets(cfg) or cfg.query.windows:
        return False
    if inputs.format != "parquet" or inputs.parquet_schema is None or size is None:
        return False
    return not (plan == "auto" and size < READ_SIDE_FROM) and footer_readable(inputs.parquet_schema, cfg)


def jvm_merge_is_small(cfg: RunConfig, inputs: Inputs) -> bool:
    """Whether the JVM's share of ``cfg`` over ``inputs`` is only a small merge and write, as far as the files
    tell before Spark starts: ``vector``'s tasks will read the Parquet row groups (``vector_reads_parquet``),
    and the partials they hand the JVM are estimated at most ``QUICK_COMPILER_PARTIALS``
    (``partials_per_event`` on a task's piece of the first rows). ``spanning run`` then starts the JVM with its
    quick compiler alone (``spark_jobs.sessions.session.get_session``)."""
    if not vector_reads_parquet(cfg, inputs):
        return False
    sample = parquet_times_sample(inputs, cfg.events, CHUNK_ROWS, with_keys=True)
    rows = sum(pq.ParquetFile(path).metadata.num_rows for path in inputs.files)
    return sample is not None and partials_per_event(cfg, sample) * rows <= QUICK_COMPILER_PARTIALS


def partials_per_event(cfg: RunConfig, sample: TimesSample) -> float:
    """The partials per (key, window) that a task reducing ``sample`` (starts, ends, key groups) would hand on,
    per event: each key's span of windows, from its first event's first window to its last event's last (an
    upper bound: a span may have gaps)."""
    import pandas as pd

    starts, ends, groups = sample
    if len(starts) == 0:
        return 0.0
    spec = cfg.query.spec
    runs = pd.DataFrame({"key": groups, "a": spec.first_window_ending_after(starts),
                         "b": spec.last_window_starting_before(event_ends(starts, ends))})  # fmt: skip
    spans = runs.groupby("key").agg(a=("a", "min"), b=("b", "max"))
    return float((spans["b"] - spans["a"] + 1).sum()) / len(starts)


def read_plan(prepared: Prepared, cfg: RunConfig) -> ReadPlan | None:
    """What ``vector``'s tasks need to read the Parquet input themselves (``parquet_window_job``), or None when
    the input or a column is not plain enough for that (``footer_readable``), or a key is an expression."""
    fields = cfg.events
    schema = prepared.inputs.parquet_schema if prepared.local_parquet and prepared.inputs else None
    if schema is None or not footer_readable(schema, cfg) or prepared.keys != list(fields.keys):
        return None
    types = {f.name: f.type for f in schema}
    if prepared.result_types:
        return None
    values = {}
    for name, internal in prepared.values.items():
        kind = _read_value_kind(types.get(name))
        if kind is None:
            return None
        values[name] = (internal, kind)
    return tasks_read_plan(prepared, cfg, values)


def tasks_read_plan(prepared: Prepared, cfg: RunConfig, values: dict[str, tuple[str, str]]) -> ReadPlan:
    """The ``ReadPlan`` of ``cfg`` for tasks that read the input themselves, its aggregated columns read as
    ``values`` (column -> (internal name, "integer" | "float")): the same partial columns as ``read_side_job``'s."""
    fields, query = cfg.events, cfg.query
    _, columns = _partials({**prepared.aggregates(query), EVENTS_COLUMN: "count"}, prepared, query)
    series = None if query.series_start == "earliest" else int(query.series_start)
    return ReadPlan(fields.start, fields.end, fields.time_unit, list(fields.keys), values, query.range, query.slide,
                    query.offset, query.ttp, series, [tuple(c) for c in columns])  # fmt: skip


def parquet_window_job(spark, prepared: Prepared, cfg: RunConfig, plan: ReadPlan, counts: Observation) -> DataFrame:
    """The windows of ``vector`` where the tasks read the Parquet row groups themselves (``read_plan``).

    Each task reduces its row groups to partials per (key, window) and counts with
    ``spanning.engines.parquet_partials`` (no row enters the JVM); see ``read_side_job``.
    """
    cores = session_kind.cores(spark)
    groups = []
    for path in prepared.inputs.files:
        meta = pq.ParquetFile(path).metadata
        groups += [(path, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    return read_side_job(spark, prepared, cfg, pieces(groups, cores, CHUNK_ROWS), plan, counts)


def read_side_job(spark, prepared: Prepared, cfg: RunConfig, work: list[tuple], plan, counts: Observation,
                  partials_of: Callable | None = None) -> DataFrame:  # fmt: skip
    """The windows of ``vector`` where the tasks read the input themselves, a share of ``work``'s pieces each:
    ``partials_of(*piece, plan)`` yields each piece's partials and counts (``parquet_partials.row_group_partials``
    unless given). The partials merge per (key, window) and are lowered as ``jvm_window_job``'s, and ``counts``
    observes the rows read, rejected and late on the way."""
    keys = prepared.keys
    outputs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
    parts, columns = _partials(outputs, prepared, cfg.query)  # the same columns as ``plan.partials``
    schema = T.StructType([
        *[T.StructField(k, t) for k, t in zip(keys, prepared.key_types, strict=True)], T.StructField(K, T.LongType()),
        *[T.StructField(c.name, _partial_type(c, prepared.value_types.get(c.source))) for c in columns],
        *[T.StructField(c, T.LongType()) for c in COUNTS],
    ])  # fmt: skip
    arrow_schema = to_arrow_schema(schema)
    cores = session_kind.cores(spark)

    def partials_of_pieces(batches):  # runs on the executors: pyarrow and numpy only
        from spanning.engines.parquet_partials import task_batches

        mine = [work[piece] for batch in batches for piece in batch.column(0).to_pylist()]
        yield from task_batches(mine, plan, arrow_schema, partials_of=partials_of)

    # a few pieces a task, TASKS_PER_CORE tasks a core: each task costs 0.3-0.5 s of its own besides its pieces
    # (measured 2026-11-27 on 30M rows, 30 tasks of one piece: the gap between one task's last batch and the
    # next task's start), and pieces of one size keep the cores even
    tasks = max(min(len(work), TASKS_PER_CORE * cores), 1)
    ids = spark.range(len(work), numPartitions=tasks).select(F.col("id").alias("_piece"))
    partials = ids.mapInArrow(partials_of_pieces, schema).observe(
        counts, *[F.coalesce(F.sum(c), F.lit(0)).alias(c[1:]) for c in COUNTS]
    )
    windowed = partials.where(F.col(K).isNotNull()).drop(*COUNTS)
    merged = _lowered(_merged_partials(windowed, [*[quoted(k) for k in keys], K], columns), keys, parts, outputs)
    return _window_rows(merged, cfg, keys, outputs)


def late_rows(prepared: Prepared, cfg: RunConfig, series_start: str) -> DataFrame:
    """The late events of the JVM plans, as read plus ``windows_missed``: the arithmetic of ``window_runs``
    on the accepted rows themselves, so no join back by arrival number (a shuffle of every row)."""
    rows = prepared.rows.where(F.col(REASON).isNull())
    if series_start not in ("first", "earliest"):
        rows = rows.withColumn(SERIES, F.lit(int(series_start)).cast("long"))
    runs = window_runs(rows, cfg, [key_column(i) for i in range(len(prepared.keys))], series_start)
    return runs.where(F.col(MISSED_RUN) > 0).select(
        *as_read(prepared), F.col(MISSED_RUN).cast("long").alias("windows_missed")
    )


# ------------------------------------------------------------------------------------------------
# partials: per aggregate, what each event contributes, how contributions merge, and the result


class PartialColumn(NamedTuple):
    """One merged column of an aggregate: what each event contributes and how contributions merge."""

    name: str
    merge: str  # "sum" | "max" | "min" | "set" | "list" | "hll:<lgK>" | "kll:<K>" (see ``merged``)
    derive: str  # an event's contribution: "one", "valid" (1 if it has a value), "value" (null if none), "double"
    # (the value as a double, null if none), and
    # "high" / "low" (value >> 32 and value & LOW_BITS, 0 if none); _vectorised derives the same in numpy
    source: str | None = None  # the internal value column it derives from

    @property
    def contribution(self) -> Column:
        """An event's contribution, over the internal columns."""
        if self.derive == "one":
            return F.lit(1).cast("long")
        if self.derive == "plain":  # a column read as it is (text, for count_distinct and hll_sketch): nulls are null
            return F.col(self.source)
        value, valid = F.col(self.source), F.col(valid_column(self.source))
        if self.derive == "valid":
            return valid.cast("long")
        if self.derive == "value":
            return F.when(valid, value)
        if self.derive == "double":
            return F.when(valid, value.cast("double"))
        part = F.shiftright(value, 32) if self.derive == "high" else value.bitwiseAND(F.lit(LOW_BITS))
        return F.when(valid, part).otherwise(0)


@dataclass
class Partial:
    """One aggregate as columns that merge by sum, max or min, and its result from the merged columns."""

    columns: list[PartialColumn]
    lower: Callable[[], Column]  # the result, over the merged columns (by name)
    exact_sum_of: str | None = None  # an integer sum of this column, by its parts: _vectorised finishes it in numpy


MERGE = {"sum": F.sum, "max": F.max, "min": F.min}
OCCUPANCY = "_occ"  # the partial column of occupancy and erlang: the chronons inside the window, summed
VECTOR_PER_WINDOW = ("occupancy", "erlang")  # the aggregates of the time inside windows that vector computes
MERGED_AS_COLLECTIONS = (SqlFunction.COUNT_DISTINCT, SqlFunction.PERCENTILE, SqlFunction.HLL, SqlFunction.KLL)


def merged(column: PartialColumn, from_events: bool) -> Column:
    """One partial column merged over a group: the events' contributions (``from_events``) or merged partials.

    Sums, mins and maxes merge the same either way; a set, a value list or a sketch is built from the events
    (collect_set, collect_list, hll_sketch_agg, kll_sketch_agg_double) and merged from partials (their union,
    concatenation, hll_union_agg, kll_merge_agg_double).
    """
    kind, _, size = column.merge.partition(":")
    source = column.contribution if from_events else F.col(column.name)
    if kind in MERGE:
        return MERGE[kind](source)
    if kind == "set":
        return F.collect_set(source) if from_events else F.array_distinct(F.flatten(F.collect_list(source)))
    if kind == "list":
        return F.collect_list(source) if from_events else F.flatten(F.collect_list(source))
    if kind == "hll":
        return F.hll_sketch_agg(source, int(size)) if from_events else F.hll_union_agg(source)
    if kind == "kll":
        return F.kll_sketch_agg_double(source, int(size)) if from_events else F.kll_merge_agg_double(source)
    raise ValueError(f"no merge {column.merge!r}")


def _order_free_hll(sketch: Column) -> Column:
    """``spanning.aggregates.distinct.order_free`` in SQL: an HLL-mode sketch flagged out of order (bit 4 of
    byte 5), so that ``hll_sketch_estimate`` uses the registers' estimate, as the Python engines do."""
    def byte(i: int) -> Column:
        return F.conv(F.hex(F.substring(sketch, i + 1, 1)), 16, 10).cast("int")

    flagged = F.concat(F.substring(sketch, 1, 5), F.unhex(F.lpad(F.hex(byte(5).bitwiseOR(F.lit(16))), 2, "0")),
                       F.substring(sketch, 7, F.length(sketch)))  # fmt: skip
    return F.when(byte(7).bitwiseAND(F.lit(3)) == 2, flagged).otherwise(sketch)


def _percentile_of_list(values: Column, q: float) -> Column:
    """Spark's ``percentile`` over a value list (``spanning.aggregates.distinct.percentile_of_sorted``)."""
    ordered = F.array_sort(values)
    position = (F.size(ordered) - 1).cast("double") * F.lit(q)
    lower, higher = F.floor(position), F.ceil(position)
    low = F.element_at(ordered, (lower + 1).cast("int")).cast("double")
    high = F.element_at(ordered, (higher + 1).cast("int")).cast("double")
    interpolated = F.when(lower == higher, low).otherwise((higher - position) * low + (position - lower) * high)
    return F.when(F.size(ordered) > 0, interpolated)


def _collection_partial(agg, prepared: Prepared) -> Partial:
    """count_distinct, percentile and the sketches: one set, list or sketch column per column (and size),
    shared by every aggregate that needs it (several quantiles of a column read one list or sketch)."""
    c, sql = agg.column, agg.capabilities.sql
    derive = "value" if c in prepared.value_types else "plain"  # a number, or a column as read (text)
    if sql is SqlFunction.COUNT_DISTINCT:
        name = f"_set{c}"
        return Partial([PartialColumn(name, "set", derive, c)], lambda: F.size(F.col(name)).cast("long"))
    if sql is SqlFunction.PERCENTILE:
        name = f"_list{c}"
        return Partial([PartialColumn(name, "list", "value", c)], lambda: _percentile_of_list(F.col(name), agg.q))
    if sql is SqlFunction.HLL:
        dtype = prepared.value_types.get(c) or prepared.result_types[c]
        if not isinstance(dtype, (T.LongType, T.IntegerType, T.StringType, T.BinaryType)):
            user = next(name for name, internal in prepared.values.items() if internal == c)
            raise UsageError(f"{agg.name.split(':')[0]} of {user!r}: Spark's hll_sketch_agg takes integer and text"
                             " columns, not doubles; use --plan python or --engine local (they hash doubles)")
        name = f"_hll{c}_{agg.size}"
        column = PartialColumn(name, f"hll:{agg.size}", derive, c)
        if agg.capabilities.result is ResultKind.BINARY:
            return Partial([column], lambda: _order_free_hll(F.col(name)))
        return Partial([column], lambda: F.hll_sketch_estimate(_order_free_hll(F.col(name))))
    name = f"_kll{c}_{agg.size}"
    column = PartialColumn(name, f"kll:{agg.size}", "double", c)
    some = F.kll_sketch_get_n_double(F.col(name)) > 0
    if agg.capabilities.result is ResultKind.BINARY:
        return Partial([column], lambda: F.when(some, F.col(name)))
    return Partial([column], lambda: F.when(some, F.kll_sketch_get_quantile_double(F.col(name), F.lit(agg.q))))


def _partial(spec: str, prepared: Prepared, query: WindowQuery | None = None) -> Partial:
    """The contributions of one aggregate (over internal columns) and its lowering (``query``: the windows, for
    the aggregates of the time inside them, which only vector computes).

    Columns are named by what they hold, so aggregates that need the same one (``count`` and ``__events``,
    ``sum:x`` and ``mean:x``) share it.
    """
    agg = parse_aggregate(spec)
    sql = agg.capabilities.sql
    if agg.capabilities.per_window:
        if query is None or spec not in VECTOR_PER_WINDOW:
            raise ValueError(f"no JVM plan for {spec!r}")
        column = PartialColumn(OCCUPANCY, "sum", "occupancy")
        if spec == "erlang":
            return Partial([column], lambda: F.col(OCCUPANCY) / F.lit(float(query.range)))
        return Partial([column], lambda: F.col(OCCUPANCY))
    if sql in MERGED_AS_COLLECTIONS:
        return _collection_partial(agg, prepared)
    if sql is SqlFunction.COUNT and agg.column is None:
        return Partial([PartialColumn("_n", "sum", "one")], lambda: F.col("_n"))
    c = agg.column
    bound = prepared.value_bounds.get(c)
    n = "_n" if bound is not None and bound.no_nulls else f"_n{c}"  # no nulls: the count of events
    count = PartialColumn(n, "sum", "one") if n == "_n" else PartialColumn(n, "sum", "valid", c)
    if sql is SqlFunction.COUNT:
        return Partial([count], lambda: F.col(n))
    if sql in (SqlFunction.MIN, SqlFunction.MAX):
        kind = sql.value
        best = f"_{kind}{c}"
        return Partial([PartialColumn(best, kind, "value", c)], lambda: F.col(best))
    if sql not in (SqlFunction.SUM, SqlFunction.AVG):
        raise ValueError(f"no JVM plan for {spec!r}")
    if not isinstance(prepared.value_types[c], T.LongType) or (bound is not None and bound.plain_sum_fits):
        # a double sum, in the order Spark adds; or an integer sum that the input's bounds keep in 64 bits
        total = f"_s{c}"
        columns = [count, PartialColumn(total, "sum", "value", c)]
        if sql is SqlFunction.AVG:
            return Partial(columns, lambda: F.when(F.col(n) > 0, F.col(total) / F.col(n)))
        return Partial(columns, lambda: F.when(F.col(n) > 0, F.col(total)))
    # exact integer sums in long arithmetic: Σx = 2^32·Σ(x >> 32) + Σ(x & (2^32 - 1)); neither part overflows
    # below 2^31 events per window. With the carry of the low part moved up, the sum fits 64 bits exactly
    # when the high part fits 32 bits.
    high, low = f"_h{c}", f"_l{c}"
    columns = [count, PartialColumn(high, "sum", "high", c), PartialColumn(low, "sum", "low", c)]

    def parts() -> tuple[Column, Column]:
        return F.col(high) + F.shiftright(F.col(low), 32), F.col(low).bitwiseAND(F.lit(LOW_BITS))

    if sql is SqlFunction.AVG:

        def mean() -> Column:
            hi, lo = parts()
            return F.when(F.col(n) > 0, (hi.cast("double") * float(2**32) + lo.cast("double")) / F.col(n))

        return Partial(columns, mean)
    message = _overflow_message(prepared, c)

    def checked() -> Column:
        hi, lo = parts()
        fits = hi.between(INT32_MIN, INT32_MAX)
        return F.when(F.col(n) > 0, F.when(fits, F.shiftleft(hi, 32) + lo).otherwise(F.raise_error(F.lit(message))))

    return Partial(columns, checked, c)


def _overflow_message(prepared: Prepared, internal: str) -> str:
    """The error of an integer sum of the value column ``internal`` that leaves 64 bits, naming the user's column."""
    return str(SumOverflowError(next(name for name, c in prepared.values.items() if c == internal)))


def _partials(outputs: dict[str, str], prepared: Prepared,
              query: WindowQuery | None = None) -> tuple[list[Partial], list[PartialColumn]]:  # fmt: skip
    """The partials of every output, and their columns without repeats."""
    parts = [_partial(spec, prepared, query) for spec in outputs.values()]
    columns = {column.name: column for p in parts for column in p.columns}
    return parts, list(columns.values())


def _lowered(merged: DataFrame, keys: list[str], parts: list[Partial], outputs: dict[str, str]) -> DataFrame:
    key_cols = [quoted(k) for k in keys]
    return merged.select(*key_cols, K, *[p.lower().alias(name) for p, name in zip(parts, outputs, strict=True)])


def _merged_partials(partials: DataFrame, by: list, columns: list[PartialColumn]) -> DataFrame:
    """Vector's partials merged per (key, window): shuffled by (key, window) first, so that Spark's map-side
    partial aggregation, which cannot reduce them (a task's partials hold each of its (key, window) once), is
    not run over them before the shuffle: it runs after it, on rows the shuffle already put together."""
    return _aggregated(partials.repartition(*by), by, columns, False)


def _aggregated(frame: DataFrame, by: list, columns: list[PartialColumn], from_events: bool) -> DataFrame:
    """``frame`` grouped by ``by``: contributions of events (``from_events``) or merged partial columns."""
    return frame.groupBy(*by).agg(*[merged(c, from_events).alias(c.name) for c in columns])


def _explode(active: DataFrame, prepared: Prepared, keys: list[str], outputs: dict[str, str]) -> DataFrame:
    """Each event into the windows of its run, merged per (key, window): the SQL users write, plus the TTP."""
    key_cols = [quoted(k) for k in keys]
    parts, columns = _partials(outputs, prepared)
    exploded = active.withColumn(K, F.explode(F.sequence(F.col(A), F.col(B))))
    return _lowered(_aggregated(exploded, [*key_cols, K], columns, True), keys, parts, outputs)


def shipped_values(prepared: Prepared, columns: list[PartialColumn]) -> list[Column]:
    """The value columns that ``run_partials`` reads in a task: a text column as read (null where missing), a
    number null where it is not valid."""
    sources = sorted({c.source for c in columns if c.source is not None})
    return [F.col(v) if v in prepared.result_types else F.when(F.col(valid_column(v)), F.col(v)).alias(v)
            for v in sources]  # fmt: skip


def partial_fields(inputs: DataFrame, columns: list[PartialColumn]) -> list[T.StructField]:
    """The window number and the partial columns of ``run_partials``' rows, as Spark fields: a merged value
    keeps its column's type (in ``inputs``), counts, sums and the parts of sums are longs."""
    return [T.StructField(K, T.LongType(), False),
            *[T.StructField(c.name, _partial_type(c, inputs.schema[c.source].dataType if c.source else None))
              for c in columns]]  # fmt: skip


def _vectorised(active: DataFrame, prepared: Prepared, keys: list[str], outputs: dict[str, str],
                query: WindowQuery | None = None) -> DataFrame:  # fmt: skip
    """Each input task reduces its own events to partials per (key, window) in numpy, and only those are merged.

    The events go to ``mapInArrow`` where they are read, with only the keys, the run [a, b] and each value
    column once (null where the value is missing). Each task takes its events in chunks of ``CHUNK_ROWS`` and
    hands each chunk to ``spanning.engines.window_ranges.run_partials``: difference arrays for counts and the
    two parts of exact integer sums, a sparse table for min and max, a segment tree for float sums, each covered
    window written once; a task merges its chunks' partials across them while that pays
    (``merged_while_it_pays``). The partials then merge per (key, window) as every plan's do (sums add, max and
    min take theirs), and are lowered. No raw row crosses a shuffle, no task holds a whole key (a hot key or no
    key at all spreads over the input's tasks like any other), and a worker holds one chunk at a time, and at
    most ``MERGE_ROWS`` partials.
    """
    key_cols = [quoted(k) for k in keys]
    parts, columns = _partials(outputs, prepared, query)
    spans = None
    times = []
    if any(c.derive == "occupancy" for c in columns):  # the events' [l, u) and the windows' geometry
        spans = (START, "_u", query.offset, query.slide, query.range)
        times = [F.col(START), F.expr(EVENT_END).alias("_u")]
    inputs = active.select(*key_cols, F.col(A), F.col(B), *times, *shipped_values(prepared, columns))
    derived = [tuple(c) for c in columns]  # (name, merge, derive, source) as plain tuples, for the executors
    schema = T.StructType([*[inputs.schema[k] for k in keys], *partial_fields(inputs, columns)])
    chunk_rows, merge_rows = CHUNK_ROWS, MERGE_ROWS

    def partials_of_partition(batches):  # runs on the executors: numpy and pyarrow only
        import pyarrow as pa

        from spanning.engines.window_ranges import merged_while_it_pays, reduced_in_chunks, run_partials

        def reduced(chunk):
            return [run_partials(pa.Table.from_batches(chunk), keys, A, B, derived, spans)]

        tables = reduced_in_chunks(batches, chunk_rows, reduced)
        for table in merged_while_it_pays(tables, keys, derived, merge_rows):
            yield from table.to_batches(1 << 16)

    partials = inputs.mapInArrow(partials_of_partition, schema)
    return _lowered(_merged_partials(partials, [*key_cols, K], columns), keys, parts, outputs)
