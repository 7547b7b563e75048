"""SQL nulls, exact integers, and the batch path's view of the event columns.

Both faces of every aggregate use these (docs/SEMANTICS.md §10):

* ``is_null`` and ``value_of``: nulls are None, NaN and pandas NA/NaT, and are ignored by every aggregate;
* ``nullable`` and ``nullable_column``: results as pandas nullable columns (null where a window has none);
* ``BatchColumns``: one numpy array per column and its null mask, as the array faces read them;
* ``SumOverflowError``: integer sums are exact and never wrap; past int64 they stop the run.

>>> is_null(float("nan")), is_null(0), value_of({"x": None}, "x")
(True, False, None)
>>> nullable_column([1, None]).tolist()
[1, <NA>]
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from spanning.kernels.ranges import range_count

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "BatchColumns",
    "EventSpans",
    "SumOverflowError",
    "is_null",
    "no_columns",
    "nullable",
    "nullable_column",
    "value_of",
]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class SumOverflowError(ValueError):
    """An integer sum whose exact value does not fit in int64 in some window.

    Integer sums never wrap. Results stay int64 (what Spark and the nullable pandas column
    hold), so rather than print a wrapped number the engines stop with this error, naming the column.
    """

    def __init__(self, column: str) -> None:
        self.column = column
        super().__init__(
            f"integer sum of column {column!r} exceeds the 64-bit range (±{INT64_MAX}) in at least one window:"
            " spanning never wraps sums; exclude or fix the oversized values, or give the column as floating point"
        )

    def __reduce__(self):  # picklable across processes (Spark workers) with its column
        return type(self), (self.column,)


class BatchColumns:
    """The batch path's view of the events: one numpy array per column, plus which entries are null.

    ``seq`` is each event's arrival number (its row position in the input); arg-aggregates break ties
    on it and return it when no result column is named. A count n stands for the positions 0 .. n − 1, made only
    if an aggregate reads them (1M of them took 1 ms of a 22 ms ``spanning.aggregate`` that reads none).
    """

    def __init__(self, columns: Mapping[str, tuple[np.ndarray, np.ndarray]], seq: np.ndarray | int,
                 spans: EventSpans | None = None) -> None:  # fmt: skip
        self._columns = columns
        self._seq = seq
        self.spans = spans  # the events' times and the windows', for aggregates that read them (occupancy)
        self._memo: dict = {}
        self._locks: dict = {}

    @property
    def seq(self) -> np.ndarray:
        if isinstance(self._seq, int):  # the row positions, made when first read
            self._seq = np.arange(self._seq, dtype=np.int64)
        return self._seq

    def with_spans(self, spans: EventSpans) -> BatchColumns:
        """These columns, with the events' times and their windows' geometry."""
        return BatchColumns(self._columns, self._seq, spans)

    def memo(self, key: tuple, compute: Any) -> Any:
        """``compute()``, once per key for these events: what several aggregates of one chunk derive alike
        (the (event, window) pairs of their runs, ``spanning.aggregates.distinct``), once also when aggregates run
        side by side in threads (``threads.side_by_side``): a second thread asking for a key waits for the first.
        Two threads each building the windows' KLL sketches, which compact at random past K values, gave an
        approx_percentile that was not the written sketch's."""
        if key not in self._memo:
            with self._locks.setdefault(key, threading.Lock()):  # setdefault: one lock per key, even in a race
                if key not in self._memo:
                    self._memo[key] = compute()
        return self._memo[key]

    def run_counts(self, first: np.ndarray, last: np.ndarray, n: int) -> np.ndarray:
        """``range_count`` of the runs, once per chunk for all that count the same runs (``count``, the counts of
        ``sum`` and ``mean`` over a column with no nulls, the empty windows that ``skip_empty`` leaves out). Read
        only: they share it."""
        return self.memo(("run counts", id(first), id(last), n), lambda: (first, last, range_count(first, last, n)))[2]

    def share_run_counts(self, first: np.ndarray, last: np.ndarray, n: int, counts: np.ndarray) -> None:
        """Give ``run_counts`` of these runs, counted already (``spanning.kernels.compiled.covered_windows``)."""
        self.memo(("run counts", id(first), id(last), n), lambda: (first, last, counts))

    def values(self, name: str) -> np.ndarray:
        return self._columns[name][0]

    def valid(self, name: str) -> np.ndarray:
        return self._columns[name][1]

    def subset(self, index: np.ndarray) -> BatchColumns:
        spans = None if self.spans is None else self.spans.subset(index)
        if isinstance(self._seq, int):  # the positions taken are the index's
            index = np.asarray(index)
            seq = np.flatnonzero(index) if index.dtype == bool else index.astype(np.int64)
        else:
            seq = self._seq[index]
        return BatchColumns({k: (v[index], m[index]) for k, (v, m) in self._columns.items()}, seq, spans)


@dataclass(frozen=True)
class EventSpans:
    """The events' ``[start, end)`` in chronons and where their windows are: window ``j`` of the caller's
    numbering starts at ``offset + (j − shift[e]) · slide`` for event e (``shift``: the caller's numbering
    minus the window number, per event), and lasts ``range``."""

    starts: np.ndarray
    ends: np.ndarray
    shift: np.ndarray
    range: int
    slide: int
    offset: int

    def subset(self, index: np.ndarray) -> EventSpans:
        return replace(self, starts=self.starts[index], ends=self.ends[index], shift=self.shift[index])

    def inside(self, event: np.ndarray, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each (event, window) pair's part of the event inside the window, ``[lo, hi)`` in chronons."""
        window_start = self.offset + (window - self.shift[event]) * self.slide
        return np.maximum(self.starts[event], window_start), np.minimum(self.ends[event], window_start + self.range)

    def occupancy(self, first: np.ndarray, last: np.ndarray, n: int) -> np.ndarray:
        """Per window j of ``0..n − 1``, the chronons that the events whose run ``first..last`` holds it spend
        inside it (``spanning.kernels.ranges.window_occupancy``)."""
        from spanning.kernels.ranges import window_occupancy

        first_start = self.offset + (first - self.shift) * self.slide
        return window_occupancy(self.starts, self.ends, first, last, first_start, self.slide, self.range, n)


class _NoColumns(dict):
    """The columns of no events: every column is an empty array."""

    def __getitem__(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)


def no_columns() -> BatchColumns:
    """The columns of no events (for the partials of windows no event reached)."""
    return BatchColumns(_NoColumns(), np.zeros(0, dtype=np.int64))


def nullable_column(values: Any) -> Any:
    """Python results as a column: Int64 or Float64 when they are numbers (None -> NA), else objects."""
    values = list(values)
    array = pd.array(values)
    if array.dtype in (pd.Int64Dtype(), pd.Float64Dtype()):
        return array
    out = np.empty(len(array), dtype=object)
    out[:] = [None if is_null(v) else v for v in values]
    return out


def is_null(value: Any) -> bool:
    """SQL null: None, NaN or pandas' NA/NaT."""
    if value is None:
        return True
    kind = type(value)
    if kind is int or kind is str:  # the common cases, without pandas
        return False
    if kind is float:
        return value != value
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # containers are never null
        return False


def nullable(values: np.ndarray, present: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """Values as a pandas nullable array (Int64 or Float64), null where ``present`` is False; it holds ``values``
    itself where they are int64 or float64 already (the callers' own arrays: no copy of millions of windows)."""
    if values.dtype.kind in "iub":
        return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), ~present)
    return pd.arrays.FloatingArray(values.astype(np.float64, copy=False), ~present)


def value_of(row: Mapping[str, Any] | None, column: str) -> Any:
    """The value of ``column`` in an event's row, None when null; numpy integers as exact Python ints."""
    value = row[column] if row is not None else None
    if value is None or type(value) is int:
        return value
    if is_null(value):
        return None
    if isinstance(value, np.integer):  # numpy ints wrap on overflow: partials hold exact Python ints
        return int(value)
    return value
