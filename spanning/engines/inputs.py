"""An input frame as the engines take it: columns checked, times as chronons, keys as codes.

``read_events`` turns the rows of a pandas DataFrame or an Arrow table into events ``[starts, ends)`` with
a key code each (in order of first appearance; null keys form one group, docs/SEMANTICS.md §10) and the
series start of each key (docs/SEMANTICS.md §8), with a clear error for unusable input.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from spanning.aggregates import Aggregate
from spanning.engines.params import EventColumns, Execution
from spanning.engines.reader import (
    REASONS,
    check_timezone,
    column_kind,
    first_reasons,
    is_text,
    number_values,
    text_stats,
    time_chronons,
    time_kind_of,
    time_kinds,
)
from spanning.kernels import threads
from spanning.kernels.compiled import (
    appearance_codes,
    first_rows,
    key_extremes,
    table_span,
    text_layout,
    text_neighbours_differ,
)
from spanning.kernels.windows import as_chronon, event_ends

__all__ = [
    "EventTimes",
    "FrameEvents",
    "arrow_frame",
    "as_frame",
    "column_codes",
    "event_times",
    "event_values",
    "group_codes",
    "key_runs",
    "read_events",
]


class FrameEvents(NamedTuple):
    """The input rows as the engines take them."""

    frame: pd.DataFrame
    keys: list[str]
    groups: np.ndarray  # key code of each row, in order of first appearance
    group_rows: np.ndarray  # row where each key first appears
    starts: np.ndarray  # event bounds [starts, ends), chronons
    ends: np.ndarray  # point events made [l, l + 1)
    series_start: np.ndarray | None  # per key: the explicit series start, or None (each key's first row)
    timestamps: bool = False  # the times were timestamps or date-time text: windows are given as UTC timestamps
    rejected: pd.DataFrame | None = None  # rows that are no events, as given, with their ``reason``


class EventTimes(NamedTuple):
    """The start and end chronons of each row, and why a row is no event (None: every row is one)."""

    starts: np.ndarray
    ends: np.ndarray  # point events: the start (made [l, l + 1) later)
    timestamps: bool
    reasons: np.ndarray | None

    def rows(self, keep: np.ndarray) -> EventTimes:
        return EventTimes(self.starts[keep], self.ends[keep], self.timestamps, None)


def event_times(frame: pd.DataFrame, columns: EventColumns) -> EventTimes:
    """Times under the reader contract (``spanning.engines.reader``), as ``spanning run`` reads them.

    Integer columns are chronons as they are. Timestamps, date-time text (in ``columns.timezone`` unless it
    carries a zone) and epoch numbers (integers, floats, text) become chronons of ``columns.time_unit``. A
    row without a start or an end, with a fraction of a chronon, or ending before it starts gets the
    command's reason.
    """
    start = frame[columns.start]
    end = None if columns.point_events else frame[columns.end]
    if _plain_integers(start) and (end is None or _plain_integers(end)):  # chronons: the fast path
        starts = start.to_numpy(dtype=np.int64)
        ends = starts.copy() if end is None else end.to_numpy(dtype=np.int64)
        order = ends < starts
        reasons = np.where(order, REASONS["order"], None) if order.any() else None
        return EventTimes(starts, ends, False, reasons)
    check_timezone(columns.timezone)
    kind = time_kinds(time_kind_of(start), None if end is None else time_kind_of(end))
    first = time_chronons(start, kind, columns.time_unit, columns.timezone)
    last = first if end is None else time_chronons(end, kind, columns.time_unit, columns.timezone)
    reasons = first_reasons(len(frame), [
        (~first.present, REASONS["start"]),
        (~last.present, REASONS["end"]),
        (first.fractional | last.fractional, REASONS["fraction"]),
        (last.values < first.values, REASONS["order"]),
    ])  # fmt: skip
    any_bad = (reasons != None).any()  # noqa: E711
    return EventTimes(first.values, last.values, kind == "date_time", reasons if any_bad else None)


def event_values(frame: pd.DataFrame, aggs: Sequence[Aggregate]) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The columns the aggregates add up as numbers: text ones parsed under the reader contract (integers if
    every number is one, else floats; ``NaN`` is null). A value that is no number, an integer beyond 64 bits
    or an infinite one gets the command's reason. Typed columns are left as they are (no copy)."""
    text_columns = [c for c in dict.fromkeys(c for a in aggs for c in a.numeric_columns) if is_text(frame[c])]
    if not text_columns:
        return frame, None
    frame = frame.copy()
    checks = []
    for name in text_columns:
        numbers = number_values(frame[name], column_kind("value", text_stats(frame[name])))
        checks += numbers.checks(name)
        frame[name] = numbers.nullable()
    reasons = first_reasons(len(frame), checks)
    return frame, reasons if (reasons != None).any() else None  # noqa: E711


def _plain_integers(series: pd.Series) -> bool:
    return series.dtype.kind in "iu" and not (series.dtype.kind == "u" and series.dtype.itemsize == 8)


def read_events(
    events: Any, aggs: Sequence[Aggregate], columns: EventColumns, execution: Execution, series_start: Any
) -> FrameEvents:
    """Check the columns and the times, and turn the rows into events (with a clear error for bad input)."""
    frame = as_frame(events)
    keys = list(columns.keys)
    if columns.count_based and not columns.point_events:
        raise ValueError("count_based=True counts point events: give point_events=True too")
    if execution.swag is not None and not columns.point_events:
        raise ValueError("swag= aggregates point events: give point_events=True too")
    needed = [columns.start, *([] if columns.point_events else [columns.end]), *keys]
    needed += [c for a in aggs for c in a.columns]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(f"unknown column {missing[0]!r}: the columns are {', '.join(map(str, frame.columns))}")
    rejected = frame.iloc[:0].assign(reason=pd.Series(dtype=object))  # none, unless the rows say otherwise

    def checked() -> tuple[pd.DataFrame, np.ndarray | None, EventTimes | None, np.ndarray | None]:
        """The values and times under the reader contract, why rows are no events, and the events' ends if all are."""
        parsed, reasons = event_values(frame, aggs)
        times = None if columns.count_based else event_times(frame, columns)
        if times is not None and times.reasons is not None:  # the command's order: times first, then values
            reasons = times.reasons if reasons is None else np.where(times.reasons != None, times.reasons, reasons)  # noqa: E711
        ends = None if times is None or reasons is not None else event_ends(times.starts, times.ends)
        return parsed, reasons, times, ends

    def coded() -> tuple[np.ndarray, np.ndarray] | Exception:
        try:
            return group_codes(frame, keys)
        except Exception as error:  # raised below only if every row is an event: a rejected row's key may be the cause
            return error

    # the keys coded beside the checks (their kernels release the GIL), again after them if some rows are no events:
    # 1M rows' wide integer keys took 5.0 ms beside the checks' and the ends' 2.7 ms (timed in their threads,
    # 2026-11-29, bench/results/inprocess-hashed-keys-2026-11-29.md)
    (parsed, reasons, times, ends), codes = threads.side_by_side([checked, coded], len(frame))
    # a key that is also a summed text column is keyed by its parsed numbers ("1" and "01" one key, as the output
    # shows them), not by the text ``coded`` read
    parsed_key = parsed is not frame and not set(keys).isdisjoint(c for a in aggs for c in a.numeric_columns)
    if reasons is not None:  # rows that cannot be events: set aside with their reason, as the command does
        bad = reasons != None  # noqa: E711 - elementwise
        rejected = frame[bad].assign(reason=reasons[bad])
        parsed, times = parsed[~bad], None if times is None else times.rows(~bad)
    if reasons is not None or parsed_key:
        codes = group_codes(parsed, keys)
    if isinstance(codes, Exception):
        raise codes
    groups, group_rows = codes
    frame = parsed
    if times is None:  # count-based: time = arrival number within the key
        starts = pd.Series(np.zeros(len(frame), dtype=np.int64)).groupby(groups).cumcount().to_numpy(np.int64)
        ends, timestamps = event_ends(starts, starts), False
    else:
        starts, timestamps = times.starts, times.timestamps
        if ends is None:  # some rows were no events: the ends of those that are
            ends = event_ends(starts, times.ends)  # point events [l, l + 1)
    if series_start == "earliest":  # per key, the earliest start in the data: no window is cut off
        per_key = earliest_starts(starts, groups, len(group_rows))
    elif series_start is None:
        per_key = None
    else:
        per_key = np.full(len(group_rows), as_chronon(series_start, "series start"), dtype=np.int64)
    return FrameEvents(frame, keys, groups, group_rows, starts, ends, per_key, timestamps, rejected)


def earliest_starts(starts: np.ndarray, groups: np.ndarray, keys: int) -> np.ndarray:
    """Each of ``keys`` keys' earliest start (int64's largest for a key without rows), the least of the shares'
    (``key_extremes_in_shares``; 1M rows of 50 keys: in one pass the other core idled for its 1.2-1.5 ms)."""
    return functools.reduce(np.minimum, key_extremes_in_shares(starts, groups, keys, False)[1])


def key_extremes_in_shares(values: np.ndarray, groups: np.ndarray, keys: int,
                           largest: bool) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
    """The rows cut into ``threads.shares`` (their ``threads.bounds``), and each share's largest (``largest``) or
    least ``values`` per key of ``keys`` (``key_extremes``; int64's least or largest for a key without rows there),
    the shares after the first found in threads."""
    count = threads.shares(len(values))
    cut = threads.bounds(len(values), count)
    none = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max

    def share(k: int) -> np.ndarray:
        extremes = np.full(keys, none, dtype=np.int64)
        key_extremes(values[cut[k] : cut[k + 1]], groups[cut[k] : cut[k + 1]], extremes, largest)
        return extremes

    return cut, threads.in_shares(share, count)


def as_frame(events: Any) -> pd.DataFrame:
    if isinstance(events, pd.DataFrame):
        if isinstance(events.index, pd.RangeIndex) and events.index.start == 0 and events.index.step == 1:
            return events  # row labels are already positions: no copy
        return events.reset_index(drop=True)
    if callable(getattr(events, "to_pandas", None)):  # pyarrow.Table / RecordBatch
        return arrow_frame(events)
    if type(events).__module__.startswith("pyspark."):  # a Spark DataFrame: the Spark engine's entry takes it
        raise TypeError("spanning.aggregate takes pandas or Arrow rows; for a Spark DataFrame call"
                        " spanning.spark.aggregate(df, ...) (the same parameters, run on the DataFrame's session)")
    raise ValueError(f"events must be a pandas DataFrame or a pyarrow Table, got {type(events).__name__}")


def arrow_frame(table: Any) -> pd.DataFrame:
    """A pyarrow Table or RecordBatch as pandas, each integer column with nulls as a pandas nullable integer
    (``Int64``, ...): ``to_pandas`` alone makes it float64, which rounds values beyond 2**53, so that keys
    2**62 + 1 and 2**62 + 3 would become one. Other columns convert as ``to_pandas`` converts them.

    >>> import pyarrow as pa
    >>> frame = arrow_frame(pa.table({"cell": [2**62 + 1, None, 2**62 + 3], "n": [1, 2, 3]}))
    >>> [str(t) for t in frame.dtypes], frame["cell"].tolist() == [2**62 + 1, pd.NA, 2**62 + 3]
    (['Int64', 'int64'], True)
    """
    import pyarrow as pa

    frame = table.to_pandas()
    for i, column in enumerate(table.columns):
        if pa.types.is_integer(column.type) and column.null_count:
            nullable = pd.api.types.pandas_dtype(str(column.type).capitalize().replace("Uint", "UInt"))
            frame.isetitem(i, pd.Series(column.to_pandas(types_mapper=lambda _, t=nullable: t), index=frame.index))
    return frame


def group_codes(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Key codes in order of first appearance, and the row where each key first appears.

    Null keys (None, NaN, pandas NA, in any mix) form one ordinary group; "" is a key like any other.

    In linear time, with no sort, whatever the order of the rows: each key column is coded on its own
    (``column_codes``), and several are combined by mixed radix, coded again in order of first appearance.
    """
    n = len(frame)
    if not keys:
        return np.zeros(n, dtype=np.int64), np.zeros(1 if n else 0, dtype=np.int64)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    codes, first = column_codes(frame[keys[0]])
    for key in keys[1:]:
        part, part_first = column_codes(frame[key])
        combined = codes * len(part_first) + part  # below n * n: no overflow up to 3e9 rows
        codes, first = _integer_codes(combined, None)
    return codes, first


def column_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``group_codes`` of one key column: codes in order of first appearance (nulls one key) and first rows.

    * Integers (and booleans, masked or not): one compiled pass, a table over a short span or a hash table over a
      wide one (``appearance_codes``).
    * Rows grouped by key (sorted input, as the Spark job and batch files have it): the runs are numbered
      (``key_runs``), when the first rows say that the neighbours mostly agree.
    * Objects: a frame read from CSV or Parquet holds one Python object per distinct string, so the objects'
      addresses are hashed as integers and only one object per address is hashed as a key
      (``_object_codes``); other columns are hashed as they are (``pd.factorize``).
    """
    n = len(series)
    dtype = series.dtype
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if _mostly_grouped(series):
        runs = key_runs(series)
        if runs is not None:
            return runs
    if dtype.kind in "iub":
        null = None
        if pd.api.types.is_extension_array_dtype(dtype):  # masked: the nulls by the mask, no float detour
            null = np.ascontiguousarray(series.isna().to_numpy(), dtype=bool)
            values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=False if dtype.kind == "b" else 0)
            if not null.any():
                null = None
        else:
            values = series.to_numpy()
        if values.dtype.kind in "iub":  # uint64 read as int64: one to one, so equal keys stay equal
            as_int = values.view(np.int64) if values.dtype == np.uint64 else values.astype(np.int64, copy=False)
            return _integer_codes(np.ascontiguousarray(as_int), null)
    values = series.to_numpy()
    if values.dtype == object and not isinstance(dtype, pd.CategoricalDtype):
        codes = _object_codes(values)
        if isinstance(codes, tuple):  # one object per key, none null: the addresses' codes are the keys'
            return codes
    else:
        codes = pd.factorize(series, use_na_sentinel=True)[0].astype(np.int64, copy=False)
    codes = _null_group(codes)
    return codes, first_rows(codes, int(codes.max()) + 1)


def _integer_codes(values: np.ndarray, null: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Codes of int64 ``values`` in order of first appearance (rows where ``null``: one key), and first rows: a table
    over a short span, else a hash table (``appearance_codes``), in one compiled pass either way."""
    flags = np.zeros(0, dtype=bool) if null is None else null
    if not flags.flags.writeable:  # one compiled signature: a read-only mask would be another
        flags = flags.copy()
    return appearance_codes(values, flags, table_span(len(values)))


def _null_group(codes: np.ndarray) -> np.ndarray:
    """Codes in order of first appearance with -1 for nulls, the nulls made one key in its place of appearance."""
    nulls = codes < 0
    if not nulls.any():
        return codes
    at = int(np.argmax(nulls))
    null_code = int(codes[:at].max()) + 1 if at else 0  # the keys before the first null are codes 0 .. null_code - 1
    return np.where(nulls, null_code, codes + (codes >= null_code)).astype(np.int64, copy=False)


SAMPLE_ROWS = 4096  # the first rows, for choices that only change the speed: the results are the same either way


def _mostly_grouped(series: pd.Series) -> bool:
    """Whether most of the first rows equal their neighbour: rows grouped by key, for ``key_runs``."""
    head = series.iloc[:SAMPLE_ROWS]
    if len(head) < 2:
        return True
    values = np.where(head.isna().to_numpy(), None, head.to_numpy())  # nulls as one object: NA has no truth value
    try:
        differ = int(np.count_nonzero(values[1:] != values[:-1]))
    except (TypeError, ValueError):  # keys that do not compare: let key_runs see
        return True
    return 4 * differ <= len(head)


def _object_codes(values: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` codes (-1 for nulls) of an object column, through the objects' addresses where the column
    holds few objects (as read from a file): the addresses are hashed as integers, one object of each hashed as a
    key. The same object is the same key; an object that is no key (NaN) stays -1. Where each key is one object
    and none is null (a file's column), the addresses' codes and first rows are the keys': ``(codes, first rows)``,
    with no gather of the keys' codes and no pass for their first rows (3 ms of 1M rows)."""
    n = len(values)
    values = np.ascontiguousarray(values)  # a column of a 2-D object block is strided: its pointers are not in a row
    head = values[:SAMPLE_ROWS]
    addresses = np.ctypeslib.as_array((ctypes.c_ssize_t * n).from_address(values.ctypes.data)).view(np.int64)
    keys, objects = len(pd.unique(head)), len(pd.unique(addresses[:SAMPLE_ROWS]))
    if objects > 2 * keys + 16 or keys > 0.9 * len(head):  # one object per row, or per key and row: no gain
        return pd.factorize(values, use_na_sentinel=True)[0].astype(np.int64, copy=False)
    per_address, first = _integer_codes(addresses, None)  # read while ``values`` holds the objects
    per_object = pd.factorize(values[first], use_na_sentinel=True)[0].astype(np.int64, copy=False)
    if (per_object == np.arange(len(per_object))).all():  # every object another key, none null
        return per_address, first
    return per_object[per_address]


def key_runs(series: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """Codes of a key column whose rows are grouped by key (None if some key has two runs).

    Sorted input, as the Spark job and batch files have it: number the runs, a neighbour comparison
    instead of hashing every key (4x faster on 1M string keys). Nulls need care: pd.NA has no truth
    value, NaN != NaN, and a masked (Int64, boolean) column's nulls are read as 0, so nulls are found
    through the mask, or, for the cost of the run heads only, with ``pd.isna`` on them.
    """
    n = len(series)
    dtype = series.dtype
    null = None
    if pd.api.types.is_extension_array_dtype(dtype) and dtype.kind in "iufb":  # exact numbers, no float detour
        null = series.isna().to_numpy()  # the column's mask
        values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=False if dtype.kind == "b" else 0)
    else:
        values = series.to_numpy()
    change = np.empty(n, dtype=bool)
    change[0] = True
    try:
        change[1:] = _neighbours_differ(values)
    except TypeError:  # "boolean value of NA is ambiguous": set the nulls aside, compare the rest
        null = series.isna().to_numpy()
        values = values.copy()
        values[null] = None
        change[1:] = values[1:] != values[:-1]
    if null is not None:  # a null run ends where a non-null starts, and the other way round
        change[1:] = np.where(null[1:] | null[:-1], null[1:] != null[:-1], change[1:])
        starts = np.flatnonzero(change)
        null_heads = null[starts]
    else:  # NaN (and None next to NaN) start a run at each row: adjacent null runs are one key
        starts = np.flatnonzero(change)
        null_heads = pd.isna(values[starts])
        if null_heads.any():
            change[starts[1:][null_heads[1:] & null_heads[:-1]]] = False
            starts = np.flatnonzero(change)
            null_heads = pd.isna(values[starts])
    null_runs = int(null_heads.sum())
    if null_runs > 1 or len(pd.unique(values[starts][~null_heads])) + null_runs != len(starts):
        return None  # some key in two runs: hash them all
    return np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, n))), starts


def _neighbours_differ(values: np.ndarray) -> np.ndarray:
    """``values[1:] != values[:-1]``; for objects, Python compares only the pairs the compiled kernel leaves.

    A frame read from CSV or Parquet holds one Python object per distinct string (pandas and Arrow deduplicate
    them), so the object addresses settle almost every pair: 3 ms instead of 165 ms on 1M string keys in 50 runs.
    The same object is the same key (a NaN object too: nulls are one key). A frame built row by row holds one
    object per row: ``text_neighbours_differ`` compares their bytes where they lie, on each core a share of the
    rows (1M of them: 22-25 ms on one core, 10-14 ms on two, against 79-95 ms for Python's comparison,
    2026-11-28), and leaves to Python what is not ASCII text (nulls included).
    """
    if values.dtype != object or len(values) < 2:
        return values[1:] != values[:-1]
    values = np.ascontiguousarray(values)  # a column of a 2-D object block is strided: its pointers are not in a row
    addresses = np.ctypeslib.as_array((ctypes.c_ssize_t * len(values)).from_address(values.ctypes.data))
    layout = text_layout()
    if layout is not None:
        decided = _text_pairs(addresses.view(np.int64), layout)  # read while ``values`` holds the objects
        differ, pairs = decided == 1, np.flatnonzero(decided == 2)
    else:  # another interpreter: the addresses settle what they can
        differ = addresses[1:] != addresses[:-1]
        pairs = np.flatnonzero(differ)
    differ[pairs] = values[1:][pairs] != values[:-1][pairs]
    return differ


def _text_pairs(addresses: np.ndarray, layout: tuple[int, int], cores: int | None = None) -> np.ndarray:
    """``text_neighbours_differ`` over ``cores`` (``threads.shares``): each thread a share of the pairs."""
    count = threads.shares(len(addresses), cores)
    if count < 2:
        return text_neighbours_differ(addresses, *layout)
    cut = threads.bounds(len(addresses) - 1, count)  # share k: the pairs cut[k] .. cut[k+1]-1

    def share(k: int) -> np.ndarray:
        return text_neighbours_differ(addresses[cut[k] : cut[k + 1] + 1], *layout)

    return np.concatenate(threads.in_shares(share, count))
