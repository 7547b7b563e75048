"""``spanning run --engine local`` over CSV files read in byte ranges: every core a share, memory per range.

Where the Spark job's tasks would read a CSV file in byte ranges (local, uncompressed, no quote character and no
carriage return alone: ``spanning.app.files.Inputs.splittable``), the local engine runs the same range tasks
(``spanning.app.csv_partials.range_partials``) in this process's threads: pyarrow's parser and the compiled kernels
release the GIL. Each range is typed by the reader contract's functions, reduced to partials per (key, window)
(``spanning.engines.parquet_partials.reduce_events``), and its late and rejected rows written as read into a side
folder. The partials are then sorted by (key, window), and a slice at a time merged per (key, window) with Arrow's
hash aggregation, lowered into the aggregates (Σx from its two 32-bit halves, checked to fit 64 bits, as the Spark
plans do) and written.

So the process holds a few ranges at a time and the partials (about the windows' size), not the file: the general
way holds every row as read in pandas (ten times the file, measured 2026-11-28). The column kinds follow the Spark
job's way too: the ranges are typed by the kinds of the first records (``first_records_stats``), and read again
with the whole files' counts where those give a column the windows read another kind (``used_columns``).

The queries that take this way are those the range tasks compute (``reads_in_ranges``); the others, and files that
are not splittable, take the general way (``spanning.app.local_run.prepare_local``), with the same rows and reasons.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spanning.aggregates import SumOverflowError
from spanning.aggregates.capabilities import SqlFunction
from spanning.aggregates.parser import parse_aggregate
from spanning.app.csv_partials import (
    REASON,
    CsvPlan,
    byte_pieces,
    counted_columns,
    first_records_stats,
    range_partials,
    ranges_hold,
    read_kinds,
    used_columns,
)
from spanning.app.files import Inputs
from spanning.app.jobspec import RunConfig, UsageError, value_column
from spanning.engines.parquet_partials import WINDOWS_MISSED, ReadPlan, piece_name
from spanning.engines.reader import ColumnStats, chronon_timestamps, column_kind, time_kinds
from spanning.engines.window_ranges import INT32_MAX, INT32_MIN, LOW_BITS
from spanning.kernels.threads import available_cores, one_core

__all__ = ["RangeOutputs", "outputs_in_ranges", "reads_in_ranges"]

LOWERED = (SqlFunction.COUNT, SqlFunction.SUM, SqlFunction.AVG, SqlFunction.MIN, SqlFunction.MAX)
# partial rows merged and lowered at a time: a guess for memory (about 100 MB of a slice's rows, merged and lowered,
# beside the partials), not measured; 10,000 keys at 30M rows make 36M windows
MERGE_ROWS = 1 << 20


@dataclass
class RangeOutputs:
    """The run's three outputs, typed as the general way types them, and its counts."""

    windows: Iterator[pa.Table]  # in key and window order, a slice at a time (lowering may raise SumOverflowError)
    late: pa.Table
    rejected: pa.Table
    rows_read: int
    rejected_rows: int
    late_rows: int


def reads_in_ranges(cfg: RunConfig, inputs: Inputs) -> bool:
    """Whether ``cfg`` over ``inputs`` takes this way: where byte ranges hold (``csv_partials.ranges_hold``), with
    empty windows skipped and the aggregates count, sum, mean, min and max of numeric columns."""
    query = cfg.query
    if not ranges_hold(cfg, inputs) or query.empty_windows != "skip":
        return False
    for spec in query.aggregate_columns.values():
        capabilities = parse_aggregate(spec).capabilities
        if capabilities.sql not in LOWERED or capabilities.per_window:
            return False
    return set(query.value_columns) <= set(query.numeric_columns)


@dataclass(frozen=True)
class _Output:
    """One aggregate: its partial columns (``run_partials``' specs) and its result from the merged ones."""

    name: str
    partials: list[tuple[str, str, str, str | None]]
    lower: Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], pa.Array]  # (values, present) by partial name


def _output(name: str, spec: str, values: dict[str, tuple[str, str]]) -> _Output:
    """The partials and lowering of one aggregate, over the internal value columns (``values``: column ->
    (internal name, "integer" | "float")); the Spark plans' ``spark_jobs.batch.plans._partial`` in numpy."""
    agg = parse_aggregate(spec)
    sql = agg.capabilities.sql
    if agg.column is None:  # count(*)
        return _Output(name, [("_n", "sum", "one", None)], lambda v, p: pa.array(v["_n"]))
    c, kind = values[agg.column]
    n = f"_n{c}"
    count = (n, "sum", "valid", c)
    if sql is SqlFunction.COUNT:
        return _Output(name, [count], lambda v, p: pa.array(v[n]))
    if sql in (SqlFunction.MIN, SqlFunction.MAX):
        best = f"_{sql.value}{c}"
        return _Output(name, [(best, sql.value, "value", c)], lambda v, p: pa.array(v[best], mask=~p[best]))
    if kind == "float":
        total = f"_s{c}"

        def float_sum(v, p):
            some = v[n] > 0
            if sql is SqlFunction.AVG:
                return pa.array(np.divide(v[total], v[n], where=some, out=np.zeros(len(some))), mask=~some)
            return pa.array(v[total], mask=~some)

        return _Output(name, [count, (total, "sum", "value", c)], float_sum)
    # exact integer sums: Σx = 2^32·Σ(x >> 32) + Σ(x & (2^32 - 1)), neither part overflowing (plans._partial)
    high, low = f"_h{c}", f"_l{c}"

    def integer_sum(v, p):
        some = v[n] > 0
        hi, lo = v[high] + (v[low] >> 32), v[low] & LOW_BITS
        if sql is SqlFunction.AVG:
            exact = hi.astype(np.float64) * float(2**32) + lo.astype(np.float64)
            return pa.array(np.divide(exact, v[n], where=some, out=np.zeros(len(some))), mask=~some)
        if (some & ((hi < INT32_MIN) | (hi > INT32_MAX))).any():
            raise SumOverflowError(agg.column)
        return pa.array(np.where(some, (hi << 32) + lo, 0), mask=~some)

    return _Output(name, [count, (high, "sum", "high", c), (low, "sum", "low", c)], integer_sum)


def _plan(cfg: RunConfig, inputs: Inputs, stats: dict[str, ColumnStats], side: str) -> tuple[CsvPlan, list[_Output]]:
    """The range tasks' plan with the kinds that ``stats`` give the columns, as the general way types them (keys and
    other columns of plain integers as integers, text otherwise), and the outputs' lowering."""
    fields, query = cfg.events, cfg.query
    names = list(inputs.columns)
    time_kind = time_kinds(column_kind("time", stats[fields.start]), column_kind("time", stats[fields.end]))
    integer_columns = [c for c in names if column_kind("plain", stats[c]) == "integer"]
    values = {name: (value_column(i), column_kind("value", stats[name])) for i, name in enumerate(query.value_columns)}
    outputs = [_output(name, spec, values) for name, spec in query.aggregate_columns.items()]
    partials = list({spec[0]: spec for out in outputs for spec in out.partials}.values())
    series = None if query.series_start == "earliest" else int(query.series_start)
    read = ReadPlan(fields.start, fields.end, fields.time_unit, list(fields.keys), values, query.range, query.slide,
                    query.offset, query.ttp, series, partials)  # fmt: skip
    checked = [name for name in query.value_columns if name in query.numeric_columns]
    plan = CsvPlan(read, names, inputs.delimiter, integer_columns, time_kind, fields.timezone, checked, side,
                   counted_columns(cfg, names))  # fmt: skip
    return plan, outputs


def outputs_in_ranges(cfg: RunConfig, inputs: Inputs) -> RangeOutputs | None:
    """The run's outputs, its ranges read by every core (``reads_in_ranges`` must hold); None where the first
    records' kinds cannot plan it (their start and end disagree): the general way then reads every row."""
    stats = first_records_stats(cfg, inputs)
    side = tempfile.mkdtemp(prefix="spanning-local-side-")
    try:
        try:
            plan, outputs = _plan(cfg, inputs, stats, side)
        except UsageError:
            return None
        while True:
            pieces = byte_pieces([(path, os.path.getsize(path)) for path in inputs.files], available_cores())
            tables, counts = _read_ranges(pieces, plan)
            true_plan, true_outputs = _plan(cfg, inputs, read_kinds(side, plan.names), side)  # the whole files' kinds
            if used_columns(true_plan) == used_columns(plan):
                break
            plan, outputs = true_plan, true_outputs  # a column the windows read changed kind: read again
            shutil.rmtree(side)
            os.makedirs(side)
        windows = _windows(tables, true_plan, outputs)
        late = _side_rows(side, "late", pieces, true_plan, pa.field(WINDOWS_MISSED, pa.int64()))
        rejected = _side_rows(side, "rejected", pieces, true_plan, pa.field(REASON, pa.string()))
        return RangeOutputs(windows, late, rejected, *counts)
    finally:
        shutil.rmtree(side, ignore_errors=True)


def _read_ranges(pieces: list[tuple[str, int, int]], plan: CsvPlan) -> tuple[list[pa.Table], tuple[int, int, int]]:
    """Each range's partials, in the ranges' order, and the rows read, rejected and late: a thread per core."""

    def read(piece: tuple[str, int, int]) -> list:
        with one_core():  # the threads are the cores' shares already
            return list(range_partials(*piece, plan))

    with concurrent.futures.ThreadPoolExecutor(available_cores(), thread_name_prefix="spanning-range") as pool:
        results = [got for piece in pool.map(read, pieces) for got in piece]
    totals = tuple(int(sum(counts[i] for _, counts in results)) for i in range(3))
    return [table for table, _ in results], totals


def _windows(tables: list[pa.Table], plan: CsvPlan, outputs: list[_Output]) -> Iterator[pa.Table]:
    """The windows, in key and window order (nulls first), a slice of at most ``MERGE_ROWS`` partial rows at a
    time: the ranges' partials sorted by (key, window) (their indices, not their rows), each slice's rows merged per
    (key, window) and lowered. ``tables`` is emptied: the partials are held once."""
    import pyarrow.compute as pc

    keys = plan.read.keys
    partials = _one_chunk(tables)
    if partials is None or partials.num_rows == 0:
        yield _lowered(_merged(partials, plan), plan, outputs)  # no window: the columns, in their types
        return
    order = pc.sort_indices(partials, sort_keys=[*[(k, "ascending") for k in keys], ("_k", "ascending")],
                            null_placement="at_start")  # fmt: skip
    held = None  # the last (key, window) of a slice, whose rows may go on in the next one
    for begin in range(0, len(order), MERGE_ROWS):
        rows = partials.take(order.slice(begin, MERGE_ROWS))
        if held is not None:
            rows = pa.concat_tables([held, rows])
        held = None
        if begin + MERGE_ROWS < len(order):
            cut = _last_window_start(rows, [*keys, "_k"])
            rows, held = rows.slice(0, cut), rows.slice(cut)
        if rows.num_rows:  # a slice of one (key, window) goes on whole in the next
            yield _lowered(_merged(rows, plan), plan, outputs)


def _one_chunk(tables: list[pa.Table]) -> pa.Table | None:
    """The ranges' partials as one table of one chunk a column (a ``take`` across many chunks costs a pass over
    all of them: 22 s of a 50 s run of 36M windows), a column at a time, so that the copy holds one column
    twice, not every column; ``tables`` is emptied. None: no table."""
    if not tables:
        return None
    joined = pa.concat_tables(tables, promote_options="permissive")  # no copy: the ranges' chunks
    tables.clear()
    columns = {name: joined.column(name) for name in joined.column_names}
    del joined
    combined = {}
    for name in list(columns):
        combined[name] = columns.pop(name).combine_chunks()  # the column's chunks are freed as it is copied
    return pa.table(combined)


def _last_window_start(rows: pa.Table, columns: list[str]) -> int:
    """Where the rows of the last (key, window) of ``rows`` (sorted by ``columns``) begin."""
    import pyarrow.compute as pc

    same = np.ones(rows.num_rows, bool)
    for name in columns:
        column = rows.column(name)
        last = column[-1]
        equal = pc.is_null(column) if not last.is_valid else pc.fill_null(pc.equal(column, last), False)
        same &= equal.to_numpy(zero_copy_only=False)
    differ = np.flatnonzero(~same)
    return int(differ[-1]) + 1 if len(differ) else 0


def _merged(rows: pa.Table | None, plan: CsvPlan) -> pa.Table:
    """Partial rows merged per (key, window) (Arrow's hash aggregation), in key and window order; None (no range was
    read): an empty table of the merged columns."""
    keys = plan.read.keys
    columns = [(name, merge) for name, merge, _, _ in plan.read.partials]
    if rows is None:  # no range at all: the partials' types are not known, the outputs' are the plan's
        return pa.table({**{k: pa.array([], t) for k, t in zip(keys, _key_types(plan), strict=True)},
                         "_k": pa.array([], pa.int64()),
                         **{f"{name}_{merge}": pa.array([], pa.int64()) for name, merge in columns}})  # fmt: skip
    merged = rows.group_by([*keys, "_k"], use_threads=False).aggregate(columns)
    return merged.sort_by([*[(k, "ascending") for k in keys], ("_k", "ascending")], null_placement="at_start")


def _key_types(plan: CsvPlan) -> list[pa.DataType]:
    """The keys as the general way types them: plain integers as integers, text otherwise."""
    return [pa.int64() if k in plan.integer_columns else pa.string() for k in plan.read.keys]


def _lowered(merged: pa.Table, plan: CsvPlan, outputs: list[_Output]) -> pa.Table:
    """Merged partials as the windows' rows: the keys, the window's bounds, each output."""
    read = plan.read
    values, present = {}, {}
    for name, merge, _, _ in read.partials:
        column = merged.column(f"{name}_{merge}").combine_chunks()
        present[name] = column.is_valid().to_numpy(zero_copy_only=False)
        values[name] = column.fill_null(0).to_numpy(zero_copy_only=False)
    k = merged.column("_k").to_numpy()
    starts = k * read.slide + read.offset
    bounds = [starts, starts + read.range]
    if plan.time_kind == "date_time":
        bounds = [pa.array(chronon_timestamps(b, read.time_unit)) for b in bounds]
    arrays = [merged.column(key).combine_chunks().cast(t) for key, t in zip(read.keys, _key_types(plan), strict=True)]
    arrays += [pa.array(b) for b in bounds] + [out.lower(values, present) for out in outputs]
    return pa.Table.from_arrays(arrays, names=[*read.keys, "window_start", "window_end", *[o.name for o in outputs]])


def _side_rows(side: str, name: str, pieces: list[tuple[str, int, int]], plan: CsvPlan, extra: pa.Field) -> pa.Table:
    """The late or rejected rows the ranges wrote, in read order, each column typed as the general way types the
    whole column (``spanning.app.files.typed_csv``: plain integers as integers, text otherwise)."""
    types = {c: pa.int64() if c in plan.integer_columns else pa.string() for c in plan.names}
    schema = pa.schema([*[pa.field(c, t) for c, t in types.items()], extra])
    folder = os.path.join(side, name)
    parts = [os.path.join(folder, f"part-{piece_name(path, f'{start:013d}')}.parquet") for path, start, _ in pieces]
    tables = [pq.read_table(part) for part in dict.fromkeys(parts) if os.path.exists(part)]
    if not tables:
        return schema.empty_table()
    rows = pa.concat_tables(tables, promote_options="permissive")
    return pa.table([rows.column(f.name).cast(f.type) for f in schema], schema=schema)
