"""Aggregate functions in lift / combine / lower form (Suzanne et al., §2.3, §3.1, Table 1).

Each aggregate has two faces that give the same results:

* the scalar face (``identity``, ``lift``, ``combine``, ``lower``) used by the per-event path, where a
  partial is a small Python value;
* the array face (``window_partials``, ``merge``, ``lower_partials``) used by the batch path, where a
  partial is a tuple of numpy arrays with one entry per window.

``duplicate_sensitive`` tells a technique whether an event may be combined into several slices
(max-like, Table 1 "selective") or must go through the (φ, ϕ) pair (sum-like, "cumulative", §3.2).

SQL null semantics: nulls (None, NaN, pandas NA) are ignored; ``count`` counts events, ``count:col``
non-null values; everything else is null over no values.

Integer sums are exact and never wrap: they stay int64, and a window whose exact sum does
not fit in int64 raises ``SumOverflowError`` on every path (per-event, batch, chunked) alike.

>>> agg = parse_aggregate("max:duration")
>>> agg.lower(agg.combine(agg.lift({"duration": 18}, 0), agg.lift({"duration": 63}, 1)))
63
>>> parse_aggregate("mean:bytes").lower((30, 3))
10.0
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from spanning.ranges import explode, range_count, range_max, range_min, range_sum_int

__all__ = [
    "Aggregate",
    "BatchColumns",
    "SumOverflowError",
    "UserAggregate",
    "parse_aggregate",
    "BUILTIN_AGGREGATES",
    "count",
    "sum_of",
    "mean",
    "minimum",
    "maximum",
    "stddev",
    "stddev_pop",
    "argmin",
    "argmax",
    "mincount",
    "maxcount",
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
    on it and return it when no result column is named.
    """

    def __init__(self, columns: Mapping[str, tuple[np.ndarray, np.ndarray]], seq: np.ndarray) -> None:
        self._columns = columns
        self.seq = seq

    def values(self, name: str) -> np.ndarray:
        return self._columns[name][0]

    def valid(self, name: str) -> np.ndarray:
        return self._columns[name][1]

    def subset(self, index: np.ndarray) -> BatchColumns:
        return BatchColumns({k: (v[index], m[index]) for k, (v, m) in self._columns.items()}, self.seq[index])


def nullable_column(values: Any) -> Any:
    """Python results as a column: Int64 or Float64 when they are numbers (None -> NA), else objects."""
    values = list(values)
    array = pd.array(values)
    if array.dtype in (pd.Int64Dtype(), pd.Float64Dtype()):
        return array
    out = np.empty(len(array), dtype=object)
    out[:] = [None if is_null(v) else v for v in values]
    return out


class _NoColumns(dict):
    """The columns of no events: every column is an empty array."""

    def __getitem__(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)


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
    """Values as a pandas nullable array (Int64 or Float64), null where ``present`` is False."""
    if values.dtype.kind in "iub":
        return pd.arrays.IntegerArray(values.astype(np.int64), ~present)
    return pd.arrays.FloatingArray(values.astype(np.float64), ~present)


class Aggregate:
    """Protocol of every aggregate. Subclasses fill in both faces."""

    name: str = "aggregate"
    columns: tuple[str, ...] = ()
    duplicate_sensitive: bool = True
    numeric_columns: tuple[str, ...] = ()  # columns the batch path must read as numbers
    inverse: Any = None  # inverse(total, oldest) -> total without its oldest part, for invertible SWAGs

    # --- scalar face (per-event path) -------------------------------------------------------
    def identity(self) -> Any:
        raise NotImplementedError

    def lift(self, row: Mapping[str, Any] | None, seq: int) -> Any:
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def lower(self, partial: Any) -> Any:
        raise NotImplementedError

    # --- array face (batch path) ------------------------------------------------------------
    vectorised: bool = True

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        raise NotImplementedError

    def merge(self, a: tuple, b: tuple) -> tuple:
        """Combine two partial arrays window by window, ``a`` holding the older events."""
        raise NotImplementedError

    def identity_partials(self, n: int) -> tuple:
        """Partial arrays of ``n`` windows no event reached."""
        none = np.zeros(0, dtype=np.int64)
        return self.window_partials(BatchColumns(_NoColumns(), none), none, none, n)

    def lower_partials(self, partials: tuple) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<aggregate {self.name}>"


def _kept(keep: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays at the rows ``keep`` marks; no copies when it marks all (no nulls, the common case)."""
    if keep.all():
        return arrays
    return tuple(a[keep] for a in arrays)


def _value(row: Mapping[str, Any] | None, column: str) -> Any:
    value = row[column] if row is not None else None
    if value is None or type(value) is int:
        return value
    if is_null(value):
        return None
    if isinstance(value, np.integer):  # numpy ints wrap on overflow: partials hold exact Python ints
        return int(value)
    return value


# ------------------------------------------------------------------------------------------------
# sum-like, cumulative (duplicate-sensitive)


class Count(Aggregate):
    """``count`` counts events; ``count:col`` counts the non-null values of ``col``."""

    def __init__(self, column: str | None = None) -> None:
        self.column = column
        self.columns = (column,) if column else ()
        self.name = f"count:{column}" if column else "count"

    def identity(self) -> int:
        return 0

    def lift(self, row, seq):
        if self.column is None:
            return 1
        return 0 if _value(row, self.column) is None else 1

    combine = staticmethod(operator.add)
    inverse = staticmethod(operator.sub)

    def lower(self, partial):
        return partial

    def window_partials(self, cols, first, last, n):
        if self.column is not None:
            first, last = _kept(cols.valid(self.column), first, last)
        return (range_count(first, last, n),)

    def merge(self, a, b):
        return (a[0] + b[0],)

    def lower_partials(self, partials):
        return partials[0].astype(np.int64)


class NullableValue(Aggregate):
    """An aggregate whose partial is a column value, or None before any non-null value (sum, min, max)."""

    def __init__(self, column: str, name: str) -> None:
        self.column = column
        self.columns = self.numeric_columns = (column,)
        self.name = name

    def identity(self):
        return None

    def lift(self, row, seq):
        return _value(row, self.column)

    def lower(self, partial):
        return partial


class Sum(NullableValue):
    """Sum of a column; exact for integers, never wrapped (``SumOverflowError`` past int64).

    Per event the partial is a Python int (exact); in batch an int64 array, widened to an object array
    of Python ints only where a window's sum leaves int64 (``range_sum_int``, ``_add_exact``), so a
    window whose intermediate sums pass 2^63 but whose final sum fits is still exact.
    """

    def __init__(self, column: str) -> None:
        super().__init__(column, f"sum:{column}")

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return a + b

    def lower(self, partial):
        if type(partial) is int and not INT64_MIN <= partial <= INT64_MAX:
            raise SumOverflowError(self.column)
        return partial

    def window_partials(self, cols, first, last, n):
        values, first, last = _kept(cols.valid(self.column), cols.values(self.column), first, last)
        counts = range_count(first, last, n)
        if values.dtype.kind in "iub":
            return range_sum_int(first, last, n, values.astype(np.int64, copy=False)), counts
        event, window = explode(first, last)
        return np.bincount(window, weights=values[event], minlength=n).astype(np.float64), counts

    def merge(self, a, b):
        return _add_exact(a[0], b[0]), a[1] + b[1]

    def lower_partials(self, partials):
        sums, counts = partials
        present = counts > 0
        if sums.dtype == object:  # widened to Python ints somewhere: back to int64, or the error
            sums = _exact_to_int64(sums, present, self.column)
        return nullable(sums, present)


def _add_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` of integer sums without wrapping: int64 while it fits, else Python ints (object array)."""
    if a.dtype.kind == "f" or b.dtype.kind == "f":  # a column read as floats in some chunk
        return a.astype(np.float64) + b.astype(np.float64)
    if a.dtype != object and b.dtype != object:
        total = a + b  # wraps on overflow; two's complement: it did iff the result's sign differs from both
        if not (((a ^ total) & (b ^ total)) < 0).any():
            return total
    return a.astype(object) + b.astype(object)


def _exact_to_int64(sums: np.ndarray, present: np.ndarray, column: str) -> np.ndarray:
    """Exact sums (Python ints) of the present windows as int64; ``SumOverflowError`` if one does not fit."""
    values = [v if p else 0 for v, p in zip(sums.tolist(), present.tolist(), strict=True)]
    if any(isinstance(v, float) for v in values):  # joined with a chunk that read the column as floats
        return np.array(values, dtype=np.float64)
    if not all(INT64_MIN <= v <= INT64_MAX for v in values):
        raise SumOverflowError(column)
    return np.array(values, dtype=np.int64)


class Mean(Aggregate):
    """Arithmetic mean: partial (sum, n), lowered to sum / n."""

    def __init__(self, column: str) -> None:
        self.column = column
        self._sum = Sum(column)
        self.columns = self.numeric_columns = (column,)
        self.name = f"mean:{column}"

    def identity(self):
        return (0, 0)

    def lift(self, row, seq):
        value = _value(row, self.column)
        return (0, 0) if value is None else (value, 1)

    def combine(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    @staticmethod
    def inverse(total, oldest):
        return (total[0] - oldest[0], total[1] - oldest[1])

    def lower(self, partial):
        total, n = partial
        return total / n if n else None

    def window_partials(self, cols, first, last, n):
        return self._sum.window_partials(cols, first, last, n)

    def merge(self, a, b):
        return self._sum.merge(a, b)

    def lower_partials(self, partials):
        sums, counts = partials
        if sums.dtype == object:  # an exact sum past int64: a mean is a float, so divide the exact sum
            means = np.array([s / int(c) if c else 0.0 for s, c in zip(sums, counts, strict=True)], dtype=np.float64)
            return nullable(means, counts > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums / np.where(counts > 0, counts, 1)
        return nullable(means, counts > 0)


class StdDev(Aggregate):
    """Standard deviation, sample (n - 1) or population (n); partial (n, mean, M2), Chan et al.'s merge."""

    def __init__(self, column: str, population: bool = False) -> None:
        self.column = column
        self.population = population
        self.columns = self.numeric_columns = (column,)
        self.name = f"{'stddev_pop' if population else 'stddev'}:{column}"

    def identity(self):
        return (0, 0.0, 0.0)

    def lift(self, row, seq):
        value = _value(row, self.column)
        return (0, 0.0, 0.0) if value is None else (1, float(value), 0.0)

    def combine(self, a, b):
        na, ma, m2a = a
        nb, mb, m2b = b
        if not na:
            return b
        if not nb:
            return a
        n = na + nb
        delta = mb - ma
        return (n, ma + delta * nb / n, m2a + m2b + delta * delta * na * nb / n)

    def lower(self, partial):
        n, _, m2 = partial
        dof = n if self.population else n - 1
        return math.sqrt(max(m2, 0.0) / dof) if dof > 0 else None

    def window_partials(self, cols, first, last, n):
        values, keep = cols.values(self.column), cols.valid(self.column)
        values, first, last = values[keep].astype(np.float64), first[keep], last[keep]
        event, window = explode(first, last)
        x = values[event]
        counts = np.bincount(window, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.bincount(window, weights=x, minlength=n) / np.where(counts > 0, counts, 1)
        m2 = np.bincount(window, weights=(x - means[window]) ** 2, minlength=n).astype(np.float64)  # centred
        return counts, means, m2

    def merge(self, a, b):
        na, ma, m2a = a
        nb, mb, m2b = b
        n = na + nb
        safe = np.where(n > 0, n, 1)
        delta = mb - ma
        return n, ma + delta * nb / safe, m2a + m2b + delta * delta * na * nb / safe

    def lower_partials(self, partials):
        counts, _, m2 = partials
        dof = counts if self.population else counts - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            result = np.sqrt(np.maximum(m2, 0.0) / np.where(dof > 0, dof, 1))
        return nullable(result, dof > 0)


# ------------------------------------------------------------------------------------------------
# max-like, selective (duplicate-insensitive)


def _numbers(values: np.ndarray) -> np.ndarray:
    """A numeric column as float64 or int64 (the two dtypes the extreme kernels take)."""
    return values.astype(np.float64 if values.dtype.kind == "f" else np.int64, copy=False)


def _sentinel(values: np.ndarray, largest: bool) -> object:
    """A value no other beats: the start of a window's max (min) before any event."""
    if values.dtype.kind == "f":
        return -np.inf if largest else np.inf
    return INT64_MIN if largest else INT64_MAX


def _ascending(values: np.ndarray, largest: bool) -> np.ndarray:
    """Values mapped so that the better one is larger: bitwise not ~v = -v - 1 for integers (-v wraps at -2^63)."""
    if largest:
        return values
    return -values if values.dtype.kind == "f" else ~values


def _better_present(va: np.ndarray, pa: np.ndarray, vb: np.ndarray, pb: np.ndarray, largest: bool) -> np.ndarray:
    """Window by window, the better of two extremes, taking only present ones (a sentinel may be a real value)."""
    best = np.maximum(va, vb) if largest else np.minimum(va, vb)
    return np.where(pa & pb, best, np.where(pa, va, vb))


class Extreme(NullableValue):
    """``max`` or ``min`` of a column (selective: a slice keeps one value)."""

    duplicate_sensitive = False

    def __init__(self, column: str, largest: bool) -> None:
        super().__init__(column, f"{'max' if largest else 'min'}:{column}")
        self.largest = largest

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        if self.largest:
            return b if b > a else a
        return b if b < a else a

    def window_partials(self, cols, first, last, n):
        values, first, last = _kept(cols.valid(self.column), cols.values(self.column), first, last)
        values = _numbers(values)
        sentinel = _sentinel(values, self.largest)
        best = (range_max if self.largest else range_min)(first, last, n, values, sentinel)
        if len(values) and (values.min() if self.largest else values.max()) == sentinel:
            present = range_count(first, last, n) > 0  # a value equal to the sentinel (e.g. -2^63 for max)
        else:
            present = best != sentinel
        return best, present

    def merge(self, a, b):
        return _better_present(a[0], a[1], b[0], b[1], self.largest), a[1] | b[1]

    def lower_partials(self, partials):
        best, present = partials
        return nullable(np.where(present, best, 0), present)


class ArgExtreme(Aggregate):
    """``argmax:col[:ret]``: the ``ret`` value of the event with the largest ``col`` (``argmin`` likewise).

    Ties go to the event that arrived first. Without ``ret`` the result is that event's arrival number
    (its row position for ``aggregate``, its insert count for ``Engine``). Partial: (value, seq, result).
    """

    duplicate_sensitive = False

    def __init__(self, column: str, largest: bool, result: str | None = None) -> None:
        self.column = column
        self.largest = largest
        self.result = result
        self.numeric_columns = (column,)
        self.columns = (column, result) if result else (column,)
        kind = "argmax" if largest else "argmin"
        self.name = f"{kind}:{column}:{result}" if result else f"{kind}:{column}"

    def identity(self):
        return None

    def lift(self, row, seq):
        value = _value(row, self.column)
        if value is None:
            return None
        return (value, seq, row[self.result] if self.result else seq)

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        if a[0] == b[0]:
            return a if a[1] < b[1] else b
        if (b[0] > a[0]) == self.largest:
            return b
        return a

    def lower(self, partial):
        if partial is None:
            return None
        return None if is_null(partial[2]) else partial[2]

    def _rank(self, values: np.ndarray, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rank of each event in the order "better result" (the winner ranks highest), and its inverse."""
        order = np.lexsort((-seq, _ascending(_numbers(values), self.largest)))  # best last; ties: first arrival
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank, order

    def window_partials(self, cols, first, last, n):
        keep = cols.valid(self.column)
        values, seq = cols.values(self.column)[keep], cols.seq[keep]
        rank, order = self._rank(values, seq)
        best = range_max(first[keep], last[keep], n, rank, -1)
        present = best >= 0
        if not len(order):  # no value at all: every window is null
            order, values, seq = np.zeros(1, dtype=np.int64), _pad(values), np.zeros(1, dtype=np.int64)
        winner = order[np.where(present, best, 0)]
        if self.result:
            result = _pad(cols.values(self.result)[keep])[winner]
            result_valid = _pad(cols.valid(self.result)[keep])[winner]
        else:
            result, result_valid = seq[winner], np.ones(len(winner), dtype=bool)
        return values[winner], seq[winner], result, present & result_valid, present

    def merge(self, a, b):
        va, sa, ra, oka, pa = a
        vb, sb, rb, okb, pb = b
        better = (vb > va) if self.largest else (vb < va)  # the values themselves: nothing to wrap
        take_b = pb & (~pa | better | ((vb == va) & (sb < sa)))
        return tuple(np.where(take_b, y, x) for x, y in zip(a, b, strict=True))

    def lower_partials(self, partials):
        _, _, result, ok, _ = partials
        out = np.empty(len(result), dtype=object)
        out[:] = [r.item() if hasattr(r, "item") else r for r in result] if len(result) else []
        out[~ok] = None
        return out


def _pad(values: np.ndarray) -> np.ndarray:
    """At least one element, so that an all-null column can still be indexed (its windows are null)."""
    return values if len(values) else np.zeros(1, dtype=values.dtype)


class ExtremeCount(Aggregate):
    """``maxcount:col`` / ``mincount:col``: how many events reach the window's max (min) of ``col``.

    Cumulative (Table 1): partial (extreme, count), so it takes the (φ, ϕ) path.
    """

    def __init__(self, column: str, largest: bool) -> None:
        self.column = column
        self.largest = largest
        self._extreme = Extreme(column, largest)
        self.columns = self.numeric_columns = (column,)
        self.name = f"{'maxcount' if largest else 'mincount'}:{column}"

    def identity(self):
        return None

    def lift(self, row, seq):
        value = _value(row, self.column)
        return None if value is None else (value, 1)

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        if a[0] == b[0]:
            return (a[0], a[1] + b[1])
        return b if (b[0] > a[0]) == self.largest else a

    def lower(self, partial):
        return None if partial is None else partial[1]

    def window_partials(self, cols, first, last, n):
        best, present = self._extreme.window_partials(cols, first, last, n)
        keep = cols.valid(self.column)
        values = _numbers(cols.values(self.column)[keep])
        event, window = explode(first[keep], last[keep])
        hits = values[event] == best[window]
        return best, np.bincount(window[hits], minlength=n), present

    def merge(self, a, b):
        best = _better_present(a[0], a[2], b[0], b[2], self.largest)
        counts = np.where(a[2] & (a[0] == best), a[1], 0) + np.where(b[2] & (b[0] == best), b[1], 0)
        return best, counts, a[2] | b[2]

    def lower_partials(self, partials):
        _, counts, present = partials
        return nullable(counts, present)


# ------------------------------------------------------------------------------------------------
# user-defined


class UserAggregate(Aggregate):
    """An aggregate from your own functions (paper Table 1 categories decide ``duplicate_sensitive``).

    ``lift(row)`` gets the event's row (a mapping); ``combine(older, newer)`` must be associative with
    ``identity`` as neutral element. The batch path runs such aggregates on the per-event engine.

    >>> longest_name = UserAggregate("longest", identity="", lift=lambda row: row["name"],
    ...                              combine=lambda a, b: max(a, b, key=len), lower=lambda p: p or None,
    ...                              duplicate_sensitive=False, columns=("name",))
    >>> longest_name.lower(longest_name.combine(longest_name.lift({"name": "ab"}, 0), "abc"))
    'abc'
    """

    vectorised = False

    def __init__(
        self,
        name: str,
        *,
        identity: Any,
        lift: Callable[[Mapping[str, Any]], Any],
        combine: Callable[[Any, Any], Any],
        lower: Callable[[Any], Any] = lambda partial: partial,
        duplicate_sensitive: bool = True,
        columns: tuple[str, ...] = (),
        inverse: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.name = name
        self.inverse = inverse  # inverse(total, oldest): lets soe / SlickDeque's invertible form take it
        self._identity = identity
        self._lift = lift
        self.combine = combine  # type: ignore[method-assign]
        self.lower = lower  # type: ignore[method-assign]
        self.duplicate_sensitive = duplicate_sensitive
        self.columns = tuple(columns)

    def identity(self):
        return self._identity

    def lift(self, row, seq):
        return self._lift(row)


# ------------------------------------------------------------------------------------------------
# constructors and the "kind:column" string form


def count(column: str | None = None) -> Aggregate:
    """``count`` (events) or ``count:col`` (non-null values)."""
    return Count(column)


def sum_of(column: str) -> Aggregate:
    return Sum(column)


def mean(column: str) -> Aggregate:
    return Mean(column)


def minimum(column: str) -> Aggregate:
    return Extreme(column, largest=False)


def maximum(column: str) -> Aggregate:
    return Extreme(column, largest=True)


def stddev(column: str) -> Aggregate:
    return StdDev(column, population=False)


def stddev_pop(column: str) -> Aggregate:
    return StdDev(column, population=True)


def argmin(column: str, result: str | None = None) -> Aggregate:
    return ArgExtreme(column, largest=False, result=result)


def argmax(column: str, result: str | None = None) -> Aggregate:
    return ArgExtreme(column, largest=True, result=result)


def mincount(column: str) -> Aggregate:
    return ExtremeCount(column, largest=False)


def maxcount(column: str) -> Aggregate:
    return ExtremeCount(column, largest=True)


BUILTIN_AGGREGATES: dict[str, Callable[..., Aggregate]] = {
    "count": count,
    "sum": sum_of,
    "mean": mean,
    "min": minimum,
    "max": maximum,
    "stddev": stddev,
    "stddev_pop": stddev_pop,
    "argmin": argmin,
    "argmax": argmax,
    "mincount": mincount,
    "maxcount": maxcount,
}
_ARITY = {"count": (0, 1), "argmin": (1, 2), "argmax": (1, 2)}


def parse_aggregate(spec: str | Aggregate) -> Aggregate:
    """Build an aggregate from ``"kind"`` / ``"kind:column"`` / ``"argmax:column:result"``."""
    if isinstance(spec, Aggregate):
        return spec
    if not isinstance(spec, str):
        raise ValueError(f"an aggregate must be a string like 'sum:bytes' or an Aggregate, got {spec!r}")
    kind, *args = spec.strip().split(":")
    if kind not in BUILTIN_AGGREGATES:
        known = ", ".join(sorted(BUILTIN_AGGREGATES))
        raise ValueError(f"unknown aggregate {spec!r}: the kinds are {known}")
    low, high = _ARITY.get(kind, (1, 1))
    if not low <= len(args) <= high or any(not a for a in args):
        forms = {0: kind, 1: f"{kind}:column", 2: f"{kind}:column:result"}
        allowed = " or ".join(repr(forms[n]) for n in range(low, high + 1))
        raise ValueError(f"bad aggregate {spec!r}: write it as {allowed}")
    return BUILTIN_AGGREGATES[kind](*args)
