"""Plans that keep built-in aggregates in the JVM: the batch form of SE-Slicing as Spark SQL.

With each key's events taken in end order, the clock when an event arrives is its own end u, so the
event counts in one contiguous run of window numbers (the same run as ``spanning.chunks.reduce_chunk``):

    a = max(first window ending after l,  first window w with u(w) + δ ≥ u,  the key's series start)
    b = last window starting before u

and it is late, with ``windows_missed = min(b + 1, a) - (first window ending after l)``, when that is
positive. That is column arithmetic, with no sort and no Python. The windows then come from one of:

* ``explode``: group the events by (key, a, b) first (many calls share a run), then explode each run
  into its windows and merge the partials per (key, window);
* ``range``: a difference array over window numbers (Suzanne et al.'s Σφ + ϕ as a range update): +partial
  at a, −partial at b + 1, a running sum per key in window order, filled between change points. Two rows
  per run instead of b − a + 1, exact for counts and integer sums (DECIMAL(38, 0) running sums);
* ``python``: the mapInPandas job (``spark_jobs.windowed``), for what only Python does: the paper's
  per-event techniques, point-event SWAGs, and the aggregates these plans do not cover.

``choose_plan`` picks one from the aggregates and the measured windows per event; ``--plan`` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spanning.aggregates import Count, Extreme, Mean, Sum, SumOverflowError, parse_aggregate
from spanning.jobspec import EVENTS_COLUMN, RunConfig, UsageError
from spark_jobs.prepare import END, SEQ, SERIES, START, Prepared, quoted, valid_column

PLANS = ("auto", "explode", "range", "python")
RANGE_FROM = 6.0  # windows per event from which the range update beats the explode (measured; see the README)
A, B, MISSED_RUN, K = "_a", "_b", "_missed", "_k"
LATE_SEQ, MISSED = "_late_seq", "_windows_missed"  # the window job's late-row columns (spark_jobs.windowed)
INT64_MAX = 2**63 - 1


@dataclass
class Choice:
    """The plan of one query, and why (written to summary.json)."""

    plan: str
    reason: str
    windows_per_event: float | None = None


def jvm_aggregates(cfg: RunConfig) -> bool:
    """Whether the JVM plans compute every aggregate of ``cfg`` (count, count:col, sum, mean, min, max)."""
    return all(isinstance(parse_aggregate(a), (Count, Sum, Mean, Extreme)) for a in cfg.aggregates)


def python_only(cfg: RunConfig) -> str | None:
    """Why a query needs the Python plan, or None."""
    if cfg.technique != "se-slicing":
        return f"--technique {cfg.technique} runs the paper's per-event algorithm in Python"
    if cfg.swag is not None:
        return "--swag aggregates point events through a FIFO SWAG in Python"
    if cfg.empty_windows == "emit":
        return "--empty-windows emit is written by the Python plan"
    if not jvm_aggregates(cfg):
        return "an aggregate other than count, sum, mean, min and max"
    return None


def choose_plan(cfg: RunConfig, prepared: Prepared, sample: DataFrame | None) -> Choice:
    """The plan for ``cfg``: ``--plan`` if given, else by the aggregates and the windows per event."""
    needs_python = python_only(cfg)
    if cfg.plan == "python":
        return Choice("python", "--plan python")
    if cfg.plan in ("explode", "range"):
        if needs_python:
            raise UsageError(f"--plan {cfg.plan} cannot run this query: {needs_python}; use --plan python or auto")
        if cfg.plan == "range" and not all(_range_kind(prepared, a) for a in prepared.aggregates(cfg).values()):
            raise UsageError("--plan range covers count, count:col and sums or means of integer columns: use explode")
        return Choice(cfg.plan, f"--plan {cfg.plan}")
    if needs_python:
        return Choice("python", needs_python)
    per_event = windows_per_event(cfg, sample) if sample is not None else None
    rangeable = all(_range_kind(prepared, a) for a in prepared.aggregates(cfg).values())
    if rangeable and per_event is not None and per_event >= RANGE_FROM:
        return Choice("range", f"{per_event:.1f} windows per event ≥ {RANGE_FROM}: two rows per run", per_event)
    why = "an aggregate the range update does not cover" if not rangeable else (
        f"{per_event:.1f} windows per event < {RANGE_FROM}" if per_event is not None else "no sample")
    return Choice("explode", f"pre-aggregated explode ({why})", per_event)


def windows_per_event(cfg: RunConfig, sample: DataFrame) -> float:
    """Mean number of windows an event overlaps, over a sample of the events."""
    s, o, w = cfg.slide, cfg.offset, cfg.range
    first = _floordiv(f"{START} - {o} - {w}", s) + " + 1"
    last = _floordiv(f"greatest({END}, {START} + 1) - {o} - 1", s)
    value = sample.agg(F.avg(F.expr(f"({last}) - ({first}) + 1"))).first()[0]
    return float(value or 0.0)


def _floordiv(x: str, y: int) -> str:
    """⌊x / y⌋ in exact long arithmetic (y > 0)."""
    return f"((({x}) - pmod(({x}), {y})) div {y})"


def _range_kind(prepared: Prepared, spec: str) -> bool:
    agg = parse_aggregate(spec)
    if isinstance(agg, Count):
        return True
    if isinstance(agg, (Sum, Mean)):
        return isinstance(prepared.value_types[agg.column], T.LongType)
    return False


def window_runs(rows: DataFrame, cfg: RunConfig, keys: list[str], series_start: str) -> DataFrame:
    """The events with their run of windows [a, b] and the windows they missed (see the module docstring)."""
    if series_start == "first":  # the start of each key's first event in end order, as a stream has it
        by_key = Window.partitionBy(*[quoted(k) for k in keys]) if keys else Window.partitionBy(F.lit(0))
        rows = rows.withColumn(SERIES, F.min_by(F.col(START), F.struct(END, SEQ)).over(by_key))
    s, o, w, d = cfg.slide, cfg.offset, cfg.range, cfg.ttp
    overlap_first = f"({_floordiv(f'{START} - {o} - {w}', s)} + 1)"
    open_first = f"(-{_floordiv(f'{o + w + d} - {END}', s)})"
    # from the key's earliest start, the series never begins after an event's first window: no per-key pass
    series_first = [] if series_start == "earliest" else [f"({_floordiv(f'{SERIES} - {o} - {w}', s)} + 1)"]
    a = f"greatest({', '.join([overlap_first, open_first, *series_first])})"
    b = _floordiv(f"greatest({END}, {START} + 1) - {o} - 1", s)
    return rows.select(
        "*",
        F.expr(a).alias(A),
        F.expr(b).alias(B),
        F.expr(f"greatest(least({b} + 1, {a}) - {overlap_first}, 0)").alias(MISSED_RUN),
    )


def jvm_window_job(events: DataFrame, prepared: Prepared, cfg: RunConfig, plan: str, series_start: str) -> DataFrame:
    """Windows and late rows in the window job's columns (keys, window_start, window_end, aggregates,
    ``__events``, ``_late_seq``, ``_windows_missed``), computed by ``plan`` without Python."""
    keys = prepared.keys
    if keys:  # one shuffle of the raw events by key; the groupings by (key, run) and (key, window) then stay local
        events = events.repartition(*[quoted(k) for k in keys])
    runs = window_runs(events, cfg, keys, series_start)
    outputs = {**prepared.aggregates(cfg), EVENTS_COLUMN: "count"}
    active = runs.where(F.col(A) <= F.col(B))
    if plan == "range":
        windows = _range_update(active, prepared, keys, outputs)
    else:
        windows = _explode(active, prepared, keys, outputs)
    start = F.col(K) * cfg.slide + cfg.offset
    key_cols = [quoted(k) for k in keys]
    windows = windows.select(
        *key_cols,
        start.alias("window_start"),
        (start + cfg.range).alias("window_end"),
        *[F.col(f"`{name}`") for name in outputs],
        F.lit(None).cast("long").alias(LATE_SEQ),
        F.lit(None).cast("long").alias(MISSED),
    )
    late = runs.where(F.col(MISSED_RUN) > 0).select(
        F.col(SEQ).alias(LATE_SEQ), F.col(MISSED_RUN).cast("long").alias(MISSED)
    )
    return windows.unionByName(late, allowMissingColumns=True)


# ------------------------------------------------------------------------------------------------
# partials: per aggregate, (pre-aggregation columns, merge of those columns, the result from merged columns)


def _value(prepared: Prepared, column: str) -> tuple[Column, Column]:
    return F.col(column), F.col(valid_column(column))


def _partials(spec: str, prepared: Prepared, i: int) -> tuple[list[Column], list, object]:
    """Pre-aggregation of one aggregate over events, its merge over partial rows, and its lowering."""
    agg = parse_aggregate(spec)
    n = f"_p{i}_n"
    if isinstance(agg, Count) and agg.column is None:
        return [F.count(F.lit(1)).alias(n)], [("sum", n)], lambda c: c[n]
    value, valid = _value(prepared, agg.column)
    count_valid = F.sum(valid.cast("long")).alias(n)
    if isinstance(agg, Count):
        return [count_valid], [("sum", n)], lambda c: c[n]
    total = f"_p{i}_s"
    if isinstance(agg, (Sum, Mean)):
        is_int = isinstance(prepared.value_types[agg.column], T.LongType)
        if is_int:  # exact: DECIMAL(38, 0) holds any sum of 2^64 longs, intermediate ones included
            summed = F.sum(F.when(valid, value).cast("decimal(38,0)"))
        else:
            summed = F.sum(F.when(valid, value))
        pre = [count_valid, summed.alias(total)]
        merge = [("sum", n), ("sum", total)]
        if isinstance(agg, Mean):
            return pre, merge, lambda c: F.when(c[n] > 0, c[total].cast("double") / c[n])
        if not is_int:
            return pre, merge, lambda c: F.when(c[n] > 0, c[total])
        column = next(c for c, internal in prepared.values.items() if internal == agg.column)
        message = str(SumOverflowError(column))
        return pre, merge, lambda c: F.when(c[n] > 0, F.when(
            c[total].isNull() | (c[total] > F.lit(INT64_MAX).cast("decimal(38,0)"))
            | (c[total] < F.lit(-INT64_MAX - 1).cast("decimal(38,0)")),
            F.raise_error(F.lit(message)),
        ).otherwise(c[total].cast("long")))  # fmt: skip
    if isinstance(agg, Extreme):
        kind = "max" if agg.largest else "min"
        pick = F.max if agg.largest else F.min
        return [pick(F.when(valid, value)).alias(total)], [(kind, total)], lambda c: c[total]
    raise ValueError(f"no JVM plan for {spec!r}")


def _merge(kind: str, column: str) -> Column:
    functions = {"sum": F.sum, "max": F.max, "min": F.min}
    return functions[kind](F.col(column)).alias(column)


def _explode(active: DataFrame, prepared: Prepared, keys: list[str], outputs: dict[str, str]) -> DataFrame:
    key_cols = [quoted(k) for k in keys]
    parts = [_partials(spec, prepared, i) for i, spec in enumerate(outputs.values())]
    pre = active.groupBy(*key_cols, A, B).agg(*[c for p in parts for c in p[0]])
    partial_columns = [name for p in parts for _, name in p[1]]
    exploded = pre.select(*key_cols, F.explode(F.sequence(F.col(A), F.col(B))).alias(K), *partial_columns)
    merged = exploded.groupBy(*key_cols, K).agg(*[_merge(kind, name) for p in parts for kind, name in p[1]])
    return merged.select(*key_cols, K, *[p[2](merged).alias(name) for p, name in zip(parts, outputs, strict=True)])


def _range_update(active: DataFrame, prepared: Prepared, keys: list[str], outputs: dict[str, str]) -> DataFrame:
    key_cols = [quoted(k) for k in keys]
    parts = [_partials(spec, prepared, i) for i, spec in enumerate(outputs.values())]
    pre = active.groupBy(*key_cols, A, B).agg(*[c for p in parts for c in p[0]])
    names = [name for p in parts for _, name in p[1]]
    plus = pre.select(*key_cols, F.col(A).alias(K), *[F.col(c) for c in names])
    minus = pre.select(*key_cols, (F.col(B) + 1).alias(K), *[(-F.col(c)).alias(c) for c in names])
    deltas = plus.unionByName(minus).groupBy(*key_cols, K).agg(*[F.sum(c).alias(c) for c in names])
    order = Window.partitionBy(*key_cols).orderBy(K) if keys else Window.orderBy(K)
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    changes = deltas.select(
        *key_cols, K, F.lead(K).over(order).alias("_next"), *[F.sum(c).over(running).alias(c) for c in names]
    )
    events_column = f"_p{len(parts) - 1}_n"  # the hidden count of the last output
    filled = changes.where(F.col(events_column) > 0).select(
        *key_cols, F.explode(F.sequence(F.col(K), F.col("_next") - 1)).alias(K), *names
    )
    return filled.select(*key_cols, K, *[p[2](filled).alias(name) for p, name in zip(parts, outputs, strict=True)])
