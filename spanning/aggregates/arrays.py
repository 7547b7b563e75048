"""The array faces of the built-in aggregates: the batch form of SE-Slicing (Suzanne et al., §3.2, Algorithms 3-4).

In the batch path every event contributes to a contiguous run of windows ``first[e]..last[e]``; an array face
reduces the events of a chunk into one partial per window with the range kernels of ``spanning.kernels.ranges``
(``window_partials``), merges the partials of two chunks window by window (``merge``) and lowers them to the
result column (``lower_partials``). A partial is a tuple of numpy arrays with one entry per window.

Each class here is the array face of one built-in aggregate of ``spanning.aggregates.builtins``, which
inherits it; it reads the aggregate's ``column`` (and ``largest``, ``result``, ``population``).

Integer sums are exact and never wrap: they stay int64, are widened to Python ints (an object array) only
where a window's sum leaves int64, and a window whose exact sum does not fit raises ``SumOverflowError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spanning.aggregates.columns import INT64_MAX, INT64_MIN, BatchColumns, SumOverflowError, nullable
from spanning.kernels.ranges import (
    explode,
    extreme_sentinel,
    range_max,
    range_min,
    range_sum_float,
    range_sum_int,
)

__all__ = ["ArgExtremeArrays", "CountArrays", "ExtremeArrays", "ExtremeCountArrays", "MeanArrays", "StdDevArrays",
           "SumArrays"]  # fmt: skip


def _kept(keep: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays at the rows ``keep`` marks; no copies when it marks all (no nulls, the common case)."""
    if keep.all():
        return arrays
    return tuple(a[keep] for a in arrays)


# ------------------------------------------------------------------------------------------------
# sum-like, cumulative (duplicate-sensitive)


class CountArrays:
    """Partial (count,): ``count`` counts events, ``count:col`` the non-null values of ``col``."""

    column: str | None

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        if self.column is not None:
            first, last = _kept(cols.valid(self.column), first, last)
        return (cols.run_counts(first, last, n),)

    def merge(self, a: tuple, b: tuple) -> tuple:
        return (a[0] + b[0],)

    def lower_partials(self, partials: tuple) -> Any:
        return partials[0].astype(np.int64, copy=False)  # a column shared with another is copied by its caller


class SumArrays:
    """Partial (sum, count): an int64 sum, widened to Python ints only where a window leaves int64.

    ``range_sum_int`` and ``_add_exact`` keep the sums exact, so a window whose intermediate sums pass 2^63 but
    whose final sum fits is still exact.
    """

    column: str

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        values, first, last = _kept(cols.valid(self.column), cols.values(self.column), first, last)
        counts = cols.run_counts(first, last, n)
        if values.dtype.kind in "iub":
            return range_sum_int(first, last, n, values.astype(np.int64, copy=False)), counts
        return range_sum_float(first, last, n, values), counts

    def merge(self, a: tuple, b: tuple) -> tuple:
        return _add_exact(a[0], b[0]), a[1] + b[1]

    def lower_partials(self, partials: tuple) -> Any:
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


class MeanArrays(SumArrays):
    """Partial (sum, count) as for ``sum``, lowered to sum / count."""

    def lower_partials(self, partials: tuple) -> Any:
        sums, counts = partials
        if sums.dtype == object:  # an exact sum past int64: a mean is a float, so divide the exact sum
            means = np.array([s / int(c) if c else 0.0 for s, c in zip(sums, counts, strict=True)], dtype=np.float64)
            return nullable(means, counts > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums / np.where(counts > 0, counts, 1)
        return nullable(means, counts > 0)


class StdDevArrays:
    """Partial (n, mean, M2), merged as Chan, Golub and LeVeque (1979) merge two samples."""

    column: str
    population: bool

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        values, keep = cols.values(self.column), cols.valid(self.column)
        values, first, last = values[keep].astype(np.float64), first[keep], last[keep]
        event, window = explode(first, last)
        x = values[event]
        counts = np.bincount(window, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.bincount(window, weights=x, minlength=n) / np.where(counts > 0, counts, 1)
        m2 = np.bincount(window, weights=(x - means[window]) ** 2, minlength=n).astype(np.float64)  # centred
        return counts, means, m2

    def merge(self, a: tuple, b: tuple) -> tuple:
        na, ma, m2a = a
        nb, mb, m2b = b
        n = na + nb
        safe = np.where(n > 0, n, 1)
        delta = mb - ma
        return n, ma + delta * nb / safe, m2a + m2b + delta * delta * na * nb / safe

    def lower_partials(self, partials: tuple) -> Any:
        counts, _, m2 = partials
        dof = counts if self.population else counts - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            result = np.sqrt(np.maximum(m2, 0.0) / np.where(dof > 0, dof, 1))
        return nullable(result, dof > 0)


# ------------------------------------------------------------------------------------------------
# max-like, selective (duplicate-insensitive), and the count of the extreme


def _numbers(values: np.ndarray) -> np.ndarray:
    """A numeric column as float64 or int64 (the two dtypes the extreme kernels take)."""
    return values.astype(np.float64 if values.dtype.kind == "f" else np.int64, copy=False)


def _ascending(values: np.ndarray, largest: bool) -> np.ndarray:
    """Values mapped so that the better one is larger: bitwise not ~v = -v - 1 for integers (-v wraps at -2^63)."""
    if largest:
        return values
    return -values if values.dtype.kind == "f" else ~values


def _better_present(va: np.ndarray, pa: np.ndarray, vb: np.ndarray, pb: np.ndarray, largest: bool) -> np.ndarray:
    """Window by window, the better of two extremes, taking only present ones (a sentinel may be a real value)."""
    best = np.maximum(va, vb) if largest else np.minimum(va, vb)
    return np.where(pa & pb, best, np.where(pa, va, vb))


def _extreme_partials(cols: BatchColumns, column: str, largest: bool, first: np.ndarray, last: np.ndarray,
                      n: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(best value, present) per window: the max (min) of ``column`` over the window's events."""
    values, first, last = _kept(cols.valid(column), cols.values(column), first, last)
    values = _numbers(values)
    sentinel = extreme_sentinel(values.dtype, largest)
    best = (range_max if largest else range_min)(first, last, n, values, sentinel)
    if len(values) and (values.min() if largest else values.max()) == sentinel:
        present = cols.run_counts(first, last, n) > 0  # a value equal to the sentinel (e.g. -2^63 for max)
    else:
        present = best != sentinel
    return best, present


class ExtremeArrays:
    """Partial (best, present): the max (min) of the column, and whether the window has a value."""

    column: str
    largest: bool

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        return _extreme_partials(cols, self.column, self.largest, first, last, n)

    def merge(self, a: tuple, b: tuple) -> tuple:
        return _better_present(a[0], a[1], b[0], b[1], self.largest), a[1] | b[1]

    def lower_partials(self, partials: tuple) -> Any:
        best, present = partials
        return nullable(np.where(present, best, 0), present)


def _pad(values: np.ndarray) -> np.ndarray:
    """At least one element, so that an all-null column can still be indexed (its windows are null)."""
    return values if len(values) else np.zeros(1, dtype=values.dtype)


class ArgExtremeArrays:
    """Partial (value, seq, result, result present, present) of each window's winner; ties: the first arrival."""

    column: str
    largest: bool
    result: str | None

    def _rank(self, values: np.ndarray, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rank of each event in the order "better result" (the winner ranks highest), and its inverse."""
        order = np.lexsort((-seq, _ascending(_numbers(values), self.largest)))  # best last; ties: first arrival
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank, order

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
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

    def merge(self, a: tuple, b: tuple) -> tuple:
        va, sa, ra, oka, pa = a
        vb, sb, rb, okb, pb = b
        better = (vb > va) if self.largest else (vb < va)  # the values themselves: nothing to wrap
        take_b = pb & (~pa | better | ((vb == va) & (sb < sa)))
        return tuple(np.where(take_b, y, x) for x, y in zip(a, b, strict=True))

    def lower_partials(self, partials: tuple) -> Any:
        _, _, result, ok, _ = partials
        out = np.empty(len(result), dtype=object)
        out[:] = [r.item() if hasattr(r, "item") else r for r in result] if len(result) else []
        out[~ok] = None
        return out


class ExtremeCountArrays:
    """Partial (best, count, present): the window's max (min) and how many of its events reach it."""

    column: str
    largest: bool

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        best, present = _extreme_partials(cols, self.column, self.largest, first, last, n)
        keep = cols.valid(self.column)
        values = _numbers(cols.values(self.column)[keep])
        event, window = explode(first[keep], last[keep])
        hits = values[event] == best[window]
        return best, np.bincount(window[hits], minlength=n), present

    def merge(self, a: tuple, b: tuple) -> tuple:
        best = _better_present(a[0], a[2], b[0], b[2], self.largest)
        counts = np.where(a[2] & (a[0] == best), a[1], 0) + np.where(b[2] & (b[0] == best), b[1], 0)
        return best, counts, a[2] | b[2]

    def lower_partials(self, partials: tuple) -> Any:
        _, counts, present = partials
        return nullable(counts, present)
