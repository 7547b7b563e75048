"""Windows of events that each count in one run of consecutive windows, per key, with array operations.

The batch form of SE-Slicing (Suzanne et al., §4) once each event's run of windows ``[a, b]`` is known
(``spark_jobs.batch.plans.window_runs`` derives it from the TTP semantics: with each key's events in end order,
an event counts in one contiguous run of window numbers). A window's aggregate then merges the partials of
the events whose run contains it, which is a range update followed by point queries:

* the runs are placed on cells of (key, window), each run on consecutive cells: every window of each key's
  span when the spans are small, else only the covered stretches of each key's windows
  (``spanning.kernels.compiled.run_cells``);
* counts and integer sums are difference arrays: ``+x`` at ``a``, ``−x`` at ``b + 1``, a running sum;
* max and min are the explode's loop for short runs and a sparse table for long ones; float sums add each
  event to each window of its run, in event order, as the explode query does;
* each covered cell is a window, one row per (key, window number).

These are the compiled loops of ``spanning.kernels.compiled``, the same that ``spanning.aggregate`` runs;
nothing is done per event in Python.

>>> import numpy as np
>>> got = aggregate_runs(np.array([0, 0, 1]), np.array([0, 2, 5]), np.array([3, 2, 5]),
...                      [(np.array([1, 1, 1]), None, "sum"), (np.array([4.0, 9.0, 1.0]), None, "max")])
>>> got.window.tolist(), got.values[0].tolist(), got.values[1].tolist()
([0, 1, 2, 3, 5], [1, 1, 2, 1, 1], [4.0, 4.0, 9.0, 4.0, 1.0])
>>> got.key_row.tolist()  # an input row of each window's key
[0, 0, 0, 0, 2]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from spanning.kernels.compiled import appearance_codes, first_rows, run_cells, run_sums_int, table_span
from spanning.kernels.ranges import (
    extreme_sentinel,
    range_count,
    range_max,
    range_min,
    range_sum_float,
    window_occupancy,
)

MERGES = ("sum", "max", "min")  # the values are numbers, never NaN (the readers make NaN null)
# merged_while_it_pays stops merging a task's tables once a merge keeps more of its rows: a guess, not measured (the
# merges measured on 2026-11-28 kept 41-46% of their rows; with 10,000 keys the 2M-row bound is reached in two pieces)
KEPT_TO_MERGE = 0.8
COLLECTIONS = ("set", "list", "hll", "kll")  # merges whose partial is a set, a value list or a sketch (its bytes)
DENSE_PER_EVENT = 4  # a dense (key, window) grid when it has at most this many cells per event
LOW_BITS = 0xFFFFFFFF  # an exact integer sum is carried as two int64 sums, of value >> 32 and of value & LOW_BITS
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


@dataclass
class RunWindows:
    """The covered windows, in (key, window) order: one entry per window."""

    key_row: np.ndarray  # index of an input row of the window's key
    window: np.ndarray  # window number
    values: list[np.ndarray]  # one per column, merged over the events whose run contains the window
    present: list[np.ndarray | None]  # per column: False where no event had a value (None: always present)
    run_row: np.ndarray  # per event, the row of its run's first window (its run is on consecutive rows)


def aggregate_runs(
    codes: np.ndarray, first: np.ndarray, last: np.ndarray, columns: Sequence[tuple[np.ndarray, np.ndarray | None, str]]
) -> RunWindows:
    """Merge each column over the windows ``first[i] .. last[i]`` of each event ``i``, per key code.

    ``codes`` are non-negative key codes (``key_codes``); every ``first <= last``. ``columns`` are
    ``(values, present, merge)`` with ``merge`` in ``MERGES``; ``present`` (or None: all present) marks the
    events that have a value. Windows that no event covers are left out.

    The runs are first placed on cells of (key, window) (``spanning.kernels.compiled.run_cells``), each run on
    consecutive cells, and then reduced with the aggregates' own range kernels (``spanning.kernels.ranges``).
    """
    n = len(first)
    empty = np.zeros(0, np.int64)
    if n == 0:
        return RunWindows(empty, empty, [np.zeros(0, v.dtype) for v, _, _ in columns], [None] * len(columns), empty)
    codes = np.ascontiguousarray(codes, np.int64)
    first, last = np.ascontiguousarray(first, np.int64), np.ascontiguousarray(last, np.int64)
    keys = int(codes.max()) + 1
    cell_first, cell_code, cell_window, covered_only = run_cells(codes, first, last, keys, DENSE_PER_EVENT * n + 1024)
    cell_last = cell_first + (last - first)
    cells = len(cell_code)
    covering = range_count(cell_first, cell_last, cells)
    live = None if covered_only else np.flatnonzero(covering > 0)  # a dense grid's empty cells go

    def kept(per_cell: np.ndarray) -> np.ndarray:
        return per_cell if live is None else per_cell[live]

    key_row = first_rows(codes, keys)
    values, present = [], []
    for column, has, merge in columns:
        column = np.asarray(column)
        has = None if has is None else np.asarray(has, bool)
        low, high = (cell_first, cell_last) if has is None else (cell_first[has], cell_last[has])
        taken = column if has is None else column[has]
        if merge == "sum" and column.dtype.kind in "iub":  # exact modulo 2^64: callers split wide sums
            merged = run_sums_int(low, high, cells, np.ascontiguousarray(taken, np.int64))
        elif merge == "sum":
            merged = range_sum_float(low, high, cells, taken)
        else:
            kind = np.float64 if column.dtype.kind == "f" else np.int64
            extreme = range_max if merge == "max" else range_min
            merged = extreme(low, high, cells, taken.astype(kind), extreme_sentinel(kind, merge == "max"))
        values.append(kept(merged))
        present.append(None if has is None else kept(range_count(low, high, cells)) > 0)
    run_row = cell_first if live is None else np.cumsum(covering > 0)[cell_first] - 1
    return RunWindows(key_row[kept(cell_code)], kept(cell_window), values, present, run_row)


def key_codes(arrays: Sequence) -> np.ndarray:
    """Dense int64 codes of the rows' keys (pyarrow arrays, nulls are a key), equal rows equal codes, in order of
    first appearance.

    In linear time, with no sort: integers by a table over a short span or a hash table over a wide one
    (``appearance_codes``), other columns hashed (Arrow's ``dictionary_encode``); several columns by mixed radix, their
    combined integers coded again.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not arrays:
        return np.zeros(0, np.int64)
    no_nulls = np.zeros(0, bool)

    def integer_codes(values: np.ndarray, null: np.ndarray) -> tuple[np.ndarray, int]:
        codes, first = appearance_codes(values, null, table_span(len(values)))
        return codes, len(first)

    def hashed(array) -> tuple[np.ndarray, int]:
        encoded = pc.dictionary_encode(array, null_encoding="encode")  # nulls one key, in their place
        return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(encoded.dictionary)

    codes, count = None, 0
    for array in arrays:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        part = None
        if pa.types.is_integer(array.type):  # uint64 read as int64: one to one
            null, filled = no_nulls, array
            if array.null_count:  # the nulls by the mask; the values under it are no keys
                null = np.array(array.is_null().to_numpy(zero_copy_only=False), bool)
                filled = array.fill_null(0)
            part = integer_codes(np.ascontiguousarray(filled.to_numpy(), np.int64), null)
        if part is None:
            part = hashed(array)
        if codes is None:
            codes, count = part
        else:  # mixed radix, below count * count: coded again so that many key columns never overflow
            combined = codes * part[1] + part[0]
            codes, count = integer_codes(combined, no_nulls)
    return codes


#: The partial columns a caller asks of ``run_partials``: (name, merge, derive, source), as
#: ``spark_jobs.batch.plans.PartialColumn``. ``derive`` is what one event contributes: "one"; "valid" (1 when its
#: ``source`` value is present); "value" (the value, absent when null); "high" / "low" (value >> 32 and
#: value & LOW_BITS, 0 when null: an exact integer sum in two int64 parts).
PartialSpec = tuple[str, str, str, "str | None"]


def run_partials(table, keys: Sequence[str], first: str, last: str, columns: Sequence[PartialSpec],
                 spans: tuple[str, str, int, int, int] | None = None):  # fmt: skip
    """The partial aggregates per (key, window) of an Arrow table of events with their runs of windows.

    ``spans`` (the start and end columns, then the windows' offset, slide and range) is needed by the columns
    derived as "occupancy": the chronons the events spend inside each window
    (``spanning.kernels.ranges.window_occupancy``).

    ``table`` has the key columns, the run's ``first`` and ``last`` window numbers (``first <= last``) and each
    ``source`` column (null where the event has no value). The result has the key columns, ``_k`` (the window
    number) and one column per partial, null where no event of the window had a value: what Spark merges
    across tasks (sums add, max and min take theirs), so a table may hold any part of a key's events.

    >>> import pyarrow as pa
    >>> events = pa.table({"cell": [7, 7, 8], "a": [0, 1, 0], "b": [1, 1, 0], "x": [5, None, 2]})
    >>> got = run_partials(events, ["cell"], "a", "b", [("n", "sum", "one", None), ("top", "max", "value", "x")])
    >>> got.to_pydict()
    {'cell': [7, 7, 8], '_k': [0, 1, 0], 'n': [1, 2, 1], 'top': [5, 5, 2]}
    """
    import pyarrow as pa

    n = table.num_rows
    codes = key_codes([table.column(k) for k in keys]) if keys else np.zeros(n, np.int64)
    read = {}
    for source in {c[3] for c in columns if c[3] is not None}:
        column = table.column(source).combine_chunks()
        present = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else None
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
            column = column.fill_null(0)
        read[source] = (column.to_numpy(zero_copy_only=False), present, column.type)  # text: None where null
    contributions = []
    for _, merge, derive, source in columns:
        if merge.partition(":")[0] in COLLECTIONS or derive == "occupancy":  # built per window below
            continue
        if derive == "one":
            contributions.append((np.ones(n, np.int64), None, merge))
            continue
        value, present, _ = read[source]
        if derive == "valid":
            contributions.append((np.ones(n, np.int64) if present is None else present.astype(np.int64), None, merge))
        elif derive == "value":
            contributions.append((value, present, merge))
        else:
            part = value >> 32 if derive == "high" else value & LOW_BITS
            contributions.append((part if present is None else np.where(present, part, 0), None, merge))
    first_window = table.column(first).to_numpy()
    last_window = table.column(last).to_numpy()
    got = aggregate_runs(codes, first_window, last_window, contributions)
    rows = pa.array(got.key_row)
    arrays = [table.column(k).take(rows).combine_chunks() for k in keys] + [pa.array(got.window)]
    numeric = iter(zip(got.values, got.present, strict=True))
    collected = _collection_partials(first_window, last_window, got, columns, read)
    for name in [c[0] for c in columns if c[2] == "occupancy"]:  # one column, shared by occupancy and erlang
        collected[name] = pa.array(_occupancy_partials(table, first_window, last_window, got, spans))
    for name, _, derive, source in columns:
        if name in collected:
            arrays.append(collected[name])
            continue
        column, present = next(numeric)
        kind = read[source][2] if derive == "value" else pa.int64()
        arrays.append(pa.array(column, type=kind, mask=None if present is None else ~present))
    return pa.Table.from_arrays(arrays, names=[*keys, "_k", *[c[0] for c in columns]])


def _occupancy_partials(table, first, last, got: RunWindows, spans) -> np.ndarray:
    """The occupancy of each of ``got``'s windows (``spanning.kernels.ranges.window_occupancy``): each event's run
    is on consecutive rows of ``got``, from ``got.run_row``."""

    start, end, offset, slide, range_ = spans
    starts = np.ascontiguousarray(table.column(start).to_numpy(), np.int64)
    ends = np.ascontiguousarray(table.column(end).to_numpy(), np.int64)
    first = first.astype(np.int64)
    rows = got.run_row
    return window_occupancy(starts, ends, rows, rows + (last - first), offset + first * slide, slide, range_,
                            len(got.window))  # fmt: skip


def _collection_partials(first, last, got: RunWindows, columns: Sequence[PartialSpec], read: dict) -> dict:
    """The set, value list or sketch of each collection column (``COLLECTIONS``) per covered window, as Arrow
    arrays by column name: built by the batch path's array faces (``spanning.aggregates.distinct``), each
    event's run of windows being a run of consecutive rows of ``got`` (every window of a run is covered)."""
    wanted = [c for c in columns if c[1].partition(":")[0] in COLLECTIONS]
    if not wanted:
        return {}
    import pyarrow as pa

    from spanning.aggregates.columns import BatchColumns
    from spanning.aggregates.distinct import ApproxCountDistinct, ApproxPercentile, CountDistinct, Percentile

    windows = len(got.window)
    row = got.run_row
    cols = BatchColumns({source: (value if derive != "double" else value.astype(np.float64),
                                  np.ones(len(value), bool) if present is None else present)
                         for _, _, derive, source in wanted for value, present, _ in [read[source]]},
                        np.arange(len(first)))  # fmt: skip
    row_last = row + (last - first)
    out = {}
    for name, merge, _, source in wanted:
        kind, _, size = merge.partition(":")
        if kind == "set":
            agg = CountDistinct(source)
        elif kind == "list":
            agg = Percentile(source, 0.5)  # its partial, the sorted values, whatever the quantile
        elif kind == "hll":
            agg = ApproxCountDistinct(source, int(size))
        else:
            agg = ApproxPercentile(source, 0.5, int(size))  # its partial, the sketch, whatever the quantile
        (partials,) = agg.window_partials(cols, row, row_last, windows)
        if kind in ("hll", "kll"):
            out[name] = pa.array(partials.tolist(), type=pa.binary())
        else:  # every window has a list, empty when none of its events had a value (Spark's flatten needs one)
            out[name] = pa.array([list(p) for p in partials.tolist()], type=pa.list_(read[source][2]))
    return out


def merged_while_it_pays(tables: Iterable, keys: Sequence[str], columns: Sequence[PartialSpec], most_rows: int):
    """A task's partial tables (``run_partials``'), merged per (key, window) across them while that pays.

    Each table holds each of its (key, window) once, but the tables of one task share the windows that their
    events' runs both reach: on time-ordered input, a task's eight 1M-row pieces at 61 windows per event (30M rows,
    a hot key, 2026-11-28) made 578k partials for 240k windows. Merged here (sums add, max and min take theirs,
    nulls skipped, as Spark merges them after the shuffle; 0.03-0.06 s for those 578k rows), they cross the JVM
    and its shuffle once. Tables are held up to ``most_rows`` rows, then merged and handed on, so a task holds at
    most that and one table more. Once a merge keeps more than ``KEPT_TO_MERGE`` of its rows (tables that share
    few windows), the rest pass as they come; so do tables of sets, lists or sketches.

    >>> import pyarrow as pa
    >>> spec = [("n", "sum", "one", None), ("top", "max", "value", "x")]
    >>> parts = [pa.table({"cell": [7, 7], "_k": [0, 1], "n": [1, 2], "top": [5, None]}),
    ...          pa.table({"cell": [7, 8], "_k": [1, 0], "n": [3, 1], "top": [4, 2]})]
    >>> [t.to_pydict() for t in merged_while_it_pays(parts, ["cell"], spec, most_rows=10)]
    [{'cell': [7, 7, 8], '_k': [0, 1, 0], 'n': [1, 5, 1], 'top': [5, 4, 2]}]
    """
    import pyarrow as pa

    merging = all(merge in MERGES for _, merge, _, _ in columns)
    by = [*keys, "_k"]
    held: list = []
    rows = 0

    def merged():
        table = pa.concat_tables(held, promote_options="permissive")
        if len(held) == 1:
            return table
        grouped = table.group_by(by, use_threads=False).aggregate([(name, merge) for name, merge, _, _ in columns])
        return pa.table({**{k: grouped.column(k) for k in by},
                         **{name: grouped.column(f"{name}_{merge}") for name, merge, _, _ in columns}})  # fmt: skip

    for table in tables:
        if not merging:
            yield table
            continue
        if not table.num_rows:
            continue
        held.append(table)
        rows += table.num_rows
        if rows >= most_rows:
            out = merged()
            yield out
            merging = out.num_rows <= KEPT_TO_MERGE * rows
            held, rows = [], 0
    if held:
        yield merged()


def reduced_in_chunks(batches, chunk_rows: int, reduce):
    """``reduce`` over the Arrow record batches of a Spark task (``mapInArrow``), ``chunk_rows`` rows or more at a
    time (a list of batches each): what a worker holds is bounded by a chunk, whatever a key or task holds."""
    chunk, rows = [], 0
    for batch in batches:
        if batch.num_rows:
            chunk.append(batch)
            rows += batch.num_rows
        if rows >= chunk_rows:
            yield from reduce(chunk)
            chunk, rows = [], 0
    if rows:
        yield from reduce(chunk)
