"""Window partials made where Parquet rows are read: a row group in, partials per (key, window) out.

The ``vector`` plan of ``spanning run`` hands each Spark task some row groups of the input; the task reads
them with pyarrow, checks each row as the job's reader contract does for typed Parquet columns, finds each
event's run of windows [a, b] (the arithmetic of ``spark_jobs.batch.plans.window_runs``), and reduces the runs with
``spanning.engines.window_ranges.run_partials``. No row enters the JVM: what leaves a task is one row per
(key, window) it saw and its counts of rows read, rejected and late. Rejected and late rows themselves are
written by the job's own passes over the input, only when these counts say there are some.

Only plain columns qualify (``ReadPlan``): times that are timestamps with a zone or integer chronons, keys
that are integers or text, values that are integers or floats. Everything else goes through Spark's reader.

>>> import pyarrow as pa
>>> plan = ReadPlan("start", "end", "s", ["cell"], {"bytes": ("_v0", "integer")}, 10, 5, 0, 100, None,
...                 [("_n", "sum", "one", None), ("_s", "sum", "value", "_v0")])
>>> events = pa.table({"cell": [1, 1, 2], "start": [0, 3, 7], "end": [4, 2, 8], "bytes": [10, 20, None]})
>>> partials, counts = reduce_rows(events, plan)
>>> partials.to_pydict(), counts
({'cell': [1, 1, 2, 2], '_k': [-1, 0, 0, 1], '_n': [1, 1, 1, 1], '_s': [10, 10, None, None]}, (3, 1, 0))
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from spanning.engines.window_ranges import PartialSpec, merged_while_it_pays, run_partials
from spanning.kernels.compiled import event_runs

COUNTS = ("_read", "_rejected", "_late")  # a task's counts, on a row of their own (no key, no window)
# partial rows a task holds to merge them across its pieces (merged_while_it_pays), at most: a guess for memory (about
# 100 MB of partials besides a piece), not measured; the 30M-row tasks of 2026-11-28 held 506-578k, under it
MERGE_ROWS = 1 << 21
WINDOWS_MISSED = "windows_missed"  # a late row's windows released before it arrived, as late/ names it
TICKS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


@dataclass(frozen=True)
class ReadPlan:
    """What a task reads and computes: plain values only, so that it pickles to the executors as it is."""

    start: str  # column names as in the files
    end: str
    time_unit: str  # "s" or "ms": what one chronon is, for timestamp columns
    keys: list[str]
    values: dict[str, tuple[str, str]]  # column -> (internal name, "integer" | "float")
    range: int
    slide: int
    offset: int
    ttp: int
    series: int | None  # a fixed series start, or None: from each key's earliest event (no window before it)
    partials: list[PartialSpec]
    side: str | None = None  # where a task writes its late rows, as read (``write_side_part``), or None: not at all


def _chronons(column, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """(chronons, present) of a time column: timestamps floored to the chronon (as Spark's unix_seconds and
    unix_millis), integers as they are."""
    import pyarrow as pa

    present = column.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(column.type):
        ticks = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        return np.floor_divide(ticks, TICKS_PER_SECOND[column.type.unit] // TICKS_PER_SECOND[unit]), present
    return column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), present


def reduce_rows(table, plan: ReadPlan):
    """The partials (``run_partials``'s table) of one table of rows as read, and (read, rejected, late)."""
    reduced = _reduced(table, plan)
    return reduced.partials, reduced.counts


def _reduced(table, plan: ReadPlan) -> Reduced:
    import pyarrow as pa

    start, has_start = _chronons(table.column(plan.start).combine_chunks(), plan.time_unit)
    end, has_end = _chronons(table.column(plan.end).combine_chunks(), plan.time_unit)
    accepted = has_start & has_end  # the reader contract's reasons for plain columns (end < start: event_runs) ...
    shipped = {}
    for name, (internal, kind) in plan.values.items():
        column = table.column(name).combine_chunks()
        if kind == "float":
            column = column.cast(pa.float64())
            numbers = column.fill_null(0.0).to_numpy(zero_copy_only=False)
            accepted &= ~np.isinf(numbers)  # ... an infinite value; NaN and null are no value
            column = pa.array(numbers, mask=~(column.is_valid().to_numpy(zero_copy_only=False) & np.isfinite(numbers)))
        else:
            column = column.cast(pa.int64())
        shipped[internal] = column
    return reduce_events({k: table.column(k) for k in plan.keys}, start, end, accepted, shipped, plan)


class Reduced(NamedTuple):
    """What ``reduce_events`` makes of a table of events."""

    partials: object  # ``run_partials``'s table
    counts: tuple[int, int, int]  # rows read, rejected, late
    late: np.ndarray  # the late rows' positions
    missed: np.ndarray  # the windows each late row missed (released before it arrived)


def reduce_events(keys: dict, start: np.ndarray, end: np.ndarray, accepted: np.ndarray, shipped: dict,
                  plan: ReadPlan) -> Reduced:  # fmt: skip
    """The partials per (key, window) of rows whose columns are typed already: their ``keys`` (Arrow arrays),
    ``start`` and ``end`` in chronons, which of them pass the reader contract (``accepted``; a row whose end is
    before its start fails here, in place), and the value columns (``shipped``, by internal name, null where a
    row has no value). Each event's run of windows is ``spark_jobs.batch.plans.window_runs``' arithmetic."""
    import pyarrow as pa

    n = len(start)
    s, o, w = plan.slide, plan.offset, plan.range
    series = 0 if plan.series is None else plan.series
    a, b, late = event_runs(start, end, accepted, s, o, w, plan.ttp, series, plan.series is not None)
    active = np.flatnonzero(accepted & (a <= b))
    every = len(active) == n  # each row reaches a window (the common case): nothing to take

    def rows_of(column):
        return column if every else column.take(pa.array(active))

    spans, times = None, {}
    if any(derive == "occupancy" for _, _, derive, _ in plan.partials):  # the time inside windows: [l, u) too
        spans, times = ("_l", "_u", o, s, w), {"_l": start[active], "_u": np.maximum(end, start + 1)[active]}
    events = pa.table({**{k: rows_of(column) for k, column in keys.items()}, "_a": a[active], "_b": b[active],
                       **times, **{c: rows_of(column) for c, column in shipped.items()}})  # fmt: skip
    counts = (n, int(n - accepted.sum()), int(late.sum()))
    late_rows = np.flatnonzero(late)
    overlap_first = (start[late_rows] - o - w) // s + 1  # the windows it missed: window_runs' _missed
    missed = np.maximum(np.minimum(b[late_rows] + 1, a[late_rows]) - overlap_first, 0)
    return Reduced(run_partials(events, list(keys), "_a", "_b", plan.partials, spans), counts, late_rows, missed)


def row_group_partials(path: str, row_group: int, part: int, parts: int, plan: ReadPlan) -> Iterator:
    """``reduce_rows`` over part ``part`` of ``parts`` of one row group of a Parquet file: yields one
    (partials, counts). A part is at most ``CHUNK_ROWS``-sized by the caller's choice of ``parts``, so a task's
    memory is bounded by it, not by the file, the row group or a key; and the parts of a large row group
    spread over the cores as separate tasks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(dict.fromkeys([plan.start, plan.end, *plan.keys, *plan.values]))
    source = pq.ParquetFile(path)
    rows = source.metadata.row_group(row_group).num_rows
    size = max(-(-rows // parts), 1)

    def read(columns: list[str] | None):
        batches = source.iter_batches(batch_size=size, row_groups=[row_group], columns=columns, use_threads=False)
        for i, batch in enumerate(batches):  # the parts before this one are decoded and passed over
            if i == part:
                return pa.Table.from_batches([batch])
        return None

    table = read(columns)
    if table is None:
        return
    reduced = _reduced(table, plan)
    if plan.side is not None and len(reduced.late):  # the late rows with every column, as read
        every = source.schema_arrow.names
        whole = table if set(every) <= set(table.column_names) else read(None)  # decoded again only if need be
        late = whole.select(every).take(pa.array(reduced.late))
        late = late.append_column(WINDOWS_MISSED, pa.array(reduced.missed, pa.int64()))
        piece = piece_name(path, f"{row_group:06d}-{part:04d}")
        write_side_part(late, os.path.join(plan.side, "late"), piece)
    yield reduced.partials, reduced.counts


def piece_name(path: str, where: str) -> str:
    """A piece's name in the side folder: the file's (a hash of its path) and ``where`` in it, so that a task run
    again writes the same part."""
    return f"{uuid.uuid5(uuid.NAMESPACE_URL, os.path.abspath(path)).hex[:12]}-{where}"


def write_side_part(table, folder: str, piece: str) -> None:
    """``table`` as the Parquet part of one piece in ``folder`` (``write_whole_part``)."""
    import pyarrow.parquet as pq

    write_whole_part(folder, f"part-{piece}.parquet", lambda temp: pq.write_table(table, temp))


def write_whole_part(folder: str, name: str, write: Callable[[str], object]) -> None:
    """A task's part ``name`` in ``folder`` (created if missing), whole or not at all: ``write`` writes it under a
    hidden name, then it is renamed, so that a piece read again (a task retried) replaces its part whole and a failed
    attempt leaves only a hidden file, which readers skip."""
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}")
    write(temp)
    os.replace(temp, os.path.join(folder, name))


def task_batches(work: Sequence[tuple], plan, schema, most_rows: int = MERGE_ROWS,
                 partials_of: Callable[..., Iterator] | None = None) -> Iterator:  # fmt: skip
    """The partials of a task's pieces (``row_group_partials`` of each, the pieces as ``pieces`` gives them; or
    ``partials_of(*piece, plan)``), merged across the pieces while that pays (``merged_while_it_pays``), as record
    batches of ``schema`` (the keys, ``_k``, the partials, then ``COUNTS``, null); then one row of the task's
    counts, with null keys and window."""
    import pyarrow as pa

    totals = [0] * len(COUNTS)
    partials_of = partials_of or row_group_partials

    def tables():
        for piece in work:
            for table, counts in partials_of(*piece, plan):
                totals[:] = [t + c for t, c in zip(totals, counts, strict=True)]
                yield table

    for table in merged_while_it_pays(tables(), plan.keys, plan.partials, most_rows):
        arrays = [pa.nulls(table.num_rows, f.type) if f.name in COUNTS else table.column(f.name).cast(f.type)
                  for f in schema]  # fmt: skip
        yield from pa.Table.from_arrays(arrays, schema=schema).to_batches()
    found = dict(zip(COUNTS, totals, strict=True))
    yield pa.RecordBatch.from_arrays([pa.array([found.get(f.name)], f.type) for f in schema], schema=schema)


def pieces(row_groups: Sequence[tuple[str, int, int]], cores: int, most: int) -> list[tuple[str, int, int, int]]:
    """The tasks' pieces of the row groups ``(path, row group, rows)``: ``(path, row group, part, parts)``, each
    of at most ``most`` rows, and small enough that there are about three per core (so that cores finishing
    early take more), but not below 100,000 rows (a piece costs a few milliseconds of its own).

    >>> pieces([("a", 0, 3_000_000)], cores=2, most=1 << 20)
    [('a', 0, 0, 6), ('a', 0, 1, 6), ('a', 0, 2, 6), ('a', 0, 3, 6), ('a', 0, 4, 6), ('a', 0, 5, 6)]
    >>> pieces([("a", 0, 50), ("b", 0, 70)], cores=2, most=1 << 20)
    [('a', 0, 0, 1), ('b', 0, 0, 1)]
    """
    total = sum(rows for _, _, rows in row_groups)
    size = min(max(total // (3 * cores), 100_000), most)
    return [(path, group, part, parts) for path, group, rows in row_groups
            for parts in [max(-(-rows // size), 1)] for part in range(parts)]  # fmt: skip


def warm_up(part: int = 0, parts: int = 1) -> None:
    """Load what a task's first piece would otherwise load: the compiled kernel (``part`` of ``parts`` of it, see
    ``spanning.kernels.compiled.warm_up``), and the modules pyarrow imports on first use (``pyarrow.compute``, and
    pandas through it), by reducing two rows of each column kind. A Python worker does it while the driver plans
    (``spark_jobs.sessions.session.warm_python_workers``): measured 2026-11-27, a worker's first 1M-row piece took
    0.99 s against 0.15 s for the next, 0.6 s of it in these imports."""
    import pyarrow as pa

    from spanning.kernels.compiled import warm_up as load_kernel

    load_kernel(part=part, parts=parts)
    rows = pa.table({"k": [1, 2], "s": pa.array([0, 60_000_000], pa.timestamp("us", "UTC")),
                     "e": pa.array([90_000_000, 60_000_000], pa.timestamp("us", "UTC")),
                     "i": [3, None], "f": [1.5, None]})  # fmt: skip
    partials = [("n", "sum", "one", None), ("hi", "sum", "high", "_i"), ("lo", "sum", "low", "_i"),
                ("top", "max", "value", "_f"), ("low", "min", "value", "_i")]  # fmt: skip
    plan = ReadPlan("s", "e", "s", ["k"], {"i": ("_i", "integer"), "f": ("_f", "float")}, 60, 30, 0, 60, None,
                    partials)  # fmt: skip
    reduce_rows(rows, plan)
