"""Distinct counts and quantiles: exact, and as Apache DataSketches sketches that Spark shares.

None of them is invertible, so no subtract-on-evict; all of them merge, which is what slicing needs (Suzanne
et al., §2.3 and §3): the per-event techniques merge slices' partials into windows. The batch path lowers a
window whose events are all in its chunk with no partial at all (``window_results``: distinct counts from
each value's merged runs of windows, ``spanning.kernels.ranges.union_runs``; HLL estimates from the count of
distinct hashes or the registers, ``spanning.kernels.hll.window_estimates``; quantiles from one sort of the
chunk's pairs, a KLL sketch only past K values). Per 1M rows of 15m/1m windows (243,000 windows) that took
the HLL estimate from 7.3 s to 1.4 s and ``count_distinct`` from 10.5 s to 0.7 s: slices would still merge a
partial into each of a window's 15 slices, the sweep counts each value once per run of windows. The windows
that need a partial (shared with a carried chunk, kept open by a stream, written as a sketch, a vector
plan's task's) get it built at once from the values of their member events (``ObjectArrays``; the HLL
registers of windows in HLL mode from one scatter-max of their values' hashes, ``spanning.kernels.hll``).
Named after Spark's functions:

* ``count_distinct:col``: the number of distinct non-null values (Spark's ``count(DISTINCT col)``); partial:
  the set of values;
* ``percentile:col:q``: Spark's exact ``percentile``: the values sorted, position ``q·(n − 1)``, linear
  interpolation between its two neighbours; partial: the sorted values;
* ``approx_count_distinct:col[:lgK]``: a HyperLogLog sketch (Flajolet et al.; DataSketches' HLL_8, lgK 4-21,
  default 12 as Spark's ``hll_sketch_agg``), the result rounded as Spark's ``hll_sketch_estimate``, from the
  registers alone (``order_free``), so that no path's slicing changes it;
* ``approx_percentile:col:q[:K]``: a KLL sketch of doubles (Karnin, Lang and Liberty; K 8-65535, default 200
  as Spark's ``kll_sketch_agg_double``), the result its inclusive quantile as ``kll_sketch_get_quantile_double``;
* ``hll_sketch:col[:lgK]`` and ``kll_sketch:col[:K]``: the window's sketch itself, as bytes that Spark's
  ``hll_union_agg`` / ``kll_merge_agg_double`` and the ``datasketches`` package read (to roll cells up to
  regions, or windows up to hours, without reading the events again).

Nulls are ignored, and NaN is null (docs/SEMANTICS.md), unlike in Spark, where NaN is a value that
``count(DISTINCT)`` counts and the sketches take. The sketches' partials are their serialized bytes (immutable,
picklable, comparable), so they travel through every path like any other partial. Values are hashed by
type as Spark hashes them: integers as 64-bit longs, text as its UTF-8 bytes; Spark's ``hll_sketch_agg``
takes no doubles, so an HLL of a float column exists on the Python engines only.

>>> agg = parse_distinct("count_distinct", ["caller"])
>>> agg.lower(agg.combine(agg.lift({"caller": "a"}, 0), agg.combine(agg.lift({"caller": "b"}, 1),
...                                                                 agg.lift({"caller": "a"}, 2))))
2
>>> p = parse_distinct("percentile", ["duration", "0.5"])
>>> p.lower(p.combine(p.lift({"duration": 10}, 0), p.lift({"duration": 40}, 1)))
25.0
>>> h = parse_distinct("approx_count_distinct", ["caller"])
>>> h.lower(h.combine(h.lift({"caller": 7}, 0), h.lift({"caller": 8}, 1)))
2
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import pandas as pd

from spanning.aggregates.capabilities import Capabilities, ResultKind, SqlFunction
from spanning.aggregates.columns import BatchColumns, value_of
from spanning.aggregates.protocol import Aggregate
from spanning.kernels.hll import hll_mode_windows, value_coupons, window_estimates
from spanning.kernels.ranges import explode, range_count, sorted_members, union_runs

__all__ = [
    "ApproxCountDistinct",
    "ApproxPercentile",
    "CountDistinct",
    "HllSketch",
    "KllSketch",
    "Percentile",
    "parse_distinct",
    "java_inclusive_rank",
    "java_item",
    "order_free",
    "percentile_of_sorted",
]

DEFAULT_LG_K, LG_K_RANGE = 12, (4, 21)  # Spark's hll_sketch_agg default and bounds
DEFAULT_K, K_RANGE = 200, (8, 65535)  # Spark's kll_sketch_agg_* default and bounds


def percentile_of_sorted(values: tuple, q: float) -> float | None:
    """Spark's ``percentile``: position q·(n − 1) in the sorted values, interpolated between its neighbours."""
    if not values:
        return None
    position = q * (len(values) - 1)
    lower, higher = math.floor(position), math.ceil(position)
    if lower == higher:
        return float(values[lower])
    return (higher - position) * float(values[lower]) + (position - lower) * float(values[higher])


def _objects(values: list) -> np.ndarray:
    """A 1-d object array of ``values`` (sets, tuples and bytes stay whole: numpy would unpack tuples)."""
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def _pairs_by_window(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (event, window) pair of the runs first..last (``spanning.kernels.ranges.explode``), ordered by
    window, each window's events in their order in the chunk."""
    runs = np.flatnonzero(last >= first)  # events with a run of windows
    event, window = explode(first[runs], last[runs])
    order = np.argsort(window, kind="stable")
    return runs[event[order]], window[order]


class ObjectArrays:
    """The array face of an aggregate whose partial is a Python object: one per window, in an object array.

    ``window_partials`` explodes the events' runs into (event, window) pairs (the batch form of SE-Slicing,
    Suzanne et al., §3.2) and builds each window's partial from its values at once (``from_values``: a set,
    the sorted values, one sketch updated with them), not by merging one partial per event. The batch path
    asks for partials only where a window needs one (``reduce_chunk``); the others it lowers with
    ``window_results``, with no object per window. Not slices: merging the 15 slice sketches of a 15m/1m
    window took at least 10 µs a window in the library (measured, one core), 2.4 s for the 243,000 windows
    of 1M rows, where the whole HLL estimate of those windows now takes 1.0 s.
    """

    column: str
    capabilities: Capabilities
    sorted_values = False  # whether ``from_values`` is handed each window's values sorted
    array_values = False  # whether it is handed a numpy array (else a list of Python values)

    def from_values(self, values: list) -> Any:
        raise NotImplementedError

    def shared_as(self) -> tuple | None:
        """What another aggregate must match to share this one's window partials (None: never shared)."""
        return None

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        shared = self.shared_as()
        if shared is None:
            return self._window_partials(cols, first, last, n)
        # several quantiles of a column, or its estimate and its sketch: one sketch per window for all of them
        # (the memo keeps first and last alive with the partials, so their ids name them while it lasts)
        return cols.memo((*shared, id(first), id(last), n),
                         lambda: (first, last, self._window_partials(cols, first, last, n)))[2]  # fmt: skip

    def _window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        out = _objects([self.identity()] * n)
        if not n or not len(first):
            return (out,)
        event, window = self._member_pairs(cols, first, last)
        self._fill_from_values(out, cols.values(self.column)[event], window)
        return (out,)

    def _member_pairs(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray) -> tuple:
        """The (event, window) pairs of the events whose value is not null, ordered by window."""
        # the (event, window) pairs grouped by window, once per chunk for all its aggregates of this kind
        # (the memo keeps first and last alive with their pairs, so their ids name them while it lasts)
        _, _, event, window = cols.memo(("window pairs", id(first), id(last)),
                                        lambda: (first, last, *_pairs_by_window(first, last)))  # fmt: skip
        keep = cols.valid(self.column)[event]
        return event[keep], window[keep]

    def _fill_from_values(self, out: np.ndarray, values: np.ndarray, window: np.ndarray) -> None:
        """``out[w]``: the partial ``from_values`` builds of the values paired with window w (ordered by window)."""
        if not len(values):
            return
        if self.sorted_values:  # per window, its values sorted (percentile); else in the chunk's arrival order
            order = np.lexsort((values, window))
            window, values = window[order], values[order]
        if not self.array_values:
            values = values.tolist()  # Python values, as the scalar face has them
        bounds = np.flatnonzero(np.r_[True, window[1:] != window[:-1], True])
        from_values, starts = self.from_values, bounds[:-1].tolist()
        for w, lo, hi in zip(window[bounds[:-1]].tolist(), starts, bounds[1:].tolist(), strict=True):
            out[w] = from_values(values[lo:hi])

    def _present(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray) -> tuple:
        """The events with a value and a run of windows: their values, firsts and lasts."""
        keep = cols.valid(self.column) & (last >= first)
        return cols.values(self.column)[keep], first[keep], last[keep]

    def _sorted_members(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        """Each window's values sorted (``sorted_members``), once per chunk and column for all quantiles."""
        return cols.memo(("sorted members", self.column, id(first), id(last), n),
                         lambda: (first, last, *sorted_members(*self._present(cols, first, last), n)))[2:]  # fmt: skip

    def merge(self, a: tuple, b: tuple) -> tuple:
        return (_objects([self.combine(x, y) for x, y in zip(a[0], b[0], strict=True)]),)

    def lower_partials(self, partials: tuple) -> Any:
        results = [self.lower(p) for p in partials[0]]
        kind = self.capabilities.result
        if kind is ResultKind.COUNT:
            return np.array(results, dtype=np.int64)
        if kind is ResultKind.FLOAT:
            return pd.array(results, dtype="Float64")
        return _objects(results)


class CountDistinct(ObjectArrays, Aggregate):
    """``count_distinct:col``: exact, the set of the window's non-null values (merged by union)."""

    # a union is idempotent but not a selection (a ∪ b is neither a nor b), which SlickDeque's selective form
    # needs: declared cumulative, it takes the (φ, ϕ) path
    capabilities = Capabilities(result=ResultKind.COUNT, vectorised=True, sql=SqlFunction.COUNT_DISTINCT)

    def __init__(self, column: str) -> None:
        self.column = column
        self.columns = (column,)
        self.name = f"count_distinct:{column}"

    def identity(self) -> frozenset:
        return frozenset()

    def lift(self, row, seq):
        value = value_of(row, self.column)
        return frozenset() if value is None else frozenset((value,))

    def combine(self, a, b):
        if not a:
            return b
        return a | b if b else a

    def lower(self, partial) -> int:
        return len(partial)

    def from_values(self, values: list) -> frozenset:
        return frozenset(values)

    def window_results(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> np.ndarray:
        """The windows' distinct counts with no set: each value's runs merged, then counted (``union_runs``)."""
        values, first, last = self._present(cols, first, last)
        codes, _ = pd.factorize(values)
        run_first, run_last, _ = union_runs(codes.astype(np.int64), first, last)
        return range_count(run_first, run_last, n)


class Percentile(ObjectArrays, Aggregate):
    """``percentile:col:q``: exact (Spark's ``percentile``); partial: the window's non-null values, sorted."""

    capabilities = Capabilities(result=ResultKind.FLOAT, vectorised=True, sql=SqlFunction.PERCENTILE)

    def __init__(self, column: str, q: float) -> None:
        self.column, self.q = column, q
        self.columns = self.numeric_columns = (column,)
        self.name = f"percentile:{column}:{q:g}"

    def identity(self) -> tuple:
        return ()

    def lift(self, row, seq):
        value = value_of(row, self.column)
        return () if value is None else (value,)

    def combine(self, a, b):
        if not a:
            return b
        if not b:
            return a
        return tuple(sorted(a + b))  # two sorted runs: Timsort merges them in linear time

    def lower(self, partial) -> float | None:
        return percentile_of_sorted(partial, self.q)

    sorted_values = True

    def from_values(self, values: list) -> tuple:
        return tuple(values)  # window_partials hands them sorted

    def window_results(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> Any:
        """``percentile_of_sorted`` of every window at once, from one sort of the chunk's pairs."""
        bounds, ordered = self._sorted_members(cols, first, last, n)
        size = np.diff(bounds)
        filled = np.flatnonzero(size)
        position = self.q * (size[filled] - 1)
        lower, higher = np.floor(position), np.ceil(position)
        low = ordered[bounds[filled] + lower.astype(np.int64)].astype(np.float64)
        high = ordered[bounds[filled] + higher.astype(np.int64)].astype(np.float64)
        out = np.full(n, np.nan)
        out[filled] = np.where(lower == higher, low, (higher - position) * low + (position - lower) * high)
        return pd.arrays.FloatingArray(out, size == 0)


def datasketches_module() -> Any:
    """The ``datasketches`` package, or a clear error naming the extra that installs it."""
    if "datasketches" in sys.modules:  # once per window on the batch path: the import statement costs more
        return sys.modules["datasketches"]
    try:
        import datasketches
    except ImportError:
        raise ValueError(
            "approx_count_distinct, approx_percentile, hll_sketch and kll_sketch need the datasketches package:"
            " pip install 'spanning[sketches]' (or pip install datasketches)"
        ) from None
    return datasketches


class _Sketch(ObjectArrays, Aggregate):
    """A DataSketches sketch as a partial: its bytes, or None before any value (also for all-null windows)."""

    kind = "sketch"

    def __init__(self, column: str, size: int, name: str) -> None:
        self.column, self.size = column, size
        self.columns = (column,)
        self.name = name
        datasketches_module()  # a missing package fails when the query is built, not in a worker

    def identity(self) -> None:
        return None

    def lift(self, row, seq):
        value = value_of(row, self.column)
        if value is None:
            return None
        sketch = self._new()
        sketch.update(self._hashable(value))
        return self._bytes(sketch)

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return self._merged(a, b)

    def from_values(self, values: list) -> bytes:
        sketch = self._new()
        update = sketch.update
        if values and type(values[0]) is bool:
            values = [self._hashable(v) for v in values]
        # a repeated value changes neither an HLL's registers nor its HIP estimate, so each value once, in order
        # of first arrival, gives the same bytes; a window's values repeat often (a busy subscriber's calls)
        for value in dict.fromkeys(values) if self.kind == "hll" else values:
            update(value)
        return self._bytes(sketch)

    def shared_as(self) -> tuple:
        return ("sketch", self.kind, self.column, self.size)

    # subclasses: _new, _hashable, _bytes, _merged


def order_free(sketch: bytes) -> bytes:
    """An HLL sketch's bytes flagged out of order, so that every reader estimates it from its registers alone.

    DataSketches' HLL keeps two estimators: HIP, accumulated update by update (so it depends on the order of
    the values, and on how a window was cut into slices and merged), and the composite one, a function of the
    registers, which unions use. The out-of-order flag (bit 4 of the flags byte, in HLL mode: the mode byte's
    low bits are 2) selects the composite one, in Spark's ``hll_sketch_estimate`` as in Python. Coupon modes
    (few values) estimate from the coupon count, whatever the order: left as they are.
    """
    if len(sketch) < 8 or sketch[7] & 3 != 2:
        return sketch
    flagged = bytearray(sketch)
    flagged[5] |= 16
    return bytes(flagged)


class ApproxCountDistinct(_Sketch):
    """``approx_count_distinct:col[:lgK]``: HyperLogLog (HLL_8 bytes, as Spark's ``hll_sketch_agg`` writes)."""

    capabilities = Capabilities(result=ResultKind.COUNT, vectorised=True, sql=SqlFunction.HLL)
    kind = "hll"

    def __init__(self, column: str, lg_k: int = DEFAULT_LG_K, name: str | None = None) -> None:
        super().__init__(column, lg_k, name or f"approx_count_distinct:{column}:{lg_k}")

    def _new(self):
        ds = datasketches_module()
        return ds.hll_sketch(self.size, ds.tgt_hll_type.HLL_8)

    @staticmethod
    def _hashable(value: Any) -> Any:
        return int(value) if isinstance(value, bool) else value

    @staticmethod
    def _bytes(sketch) -> bytes:
        return sketch.serialize_updatable()  # Spark's layout: updatable HLL_8

    def _merged(self, a: bytes, b: bytes) -> bytes:
        ds = datasketches_module()
        union = ds.hll_union(self.size)
        union.update(ds.hll_sketch.deserialize(a))
        union.update(ds.hll_sketch.deserialize(b))
        return self._bytes(union.get_result(ds.tgt_hll_type.HLL_8))

    def _window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        """The windows that the library would hold in HLL mode get their registers from one scatter-max of
        the pairs' hashes (``spanning.kernels.hll``); the others, in a coupon mode, a sketch of their values."""
        out = _objects([None] * n)
        if not n or not len(first):
            return (out,)
        event, window = self._member_pairs(cols, first, last)
        values = cols.values(self.column)
        hashable = self._hashable if values.dtype == bool or values.dtype == object else None
        promoted, sketches = hll_mode_windows(values, event, window, n, self.size, datasketches_module(), hashable)
        out[promoted] = _objects(sketches)
        rest = np.ones(n, dtype=bool)
        rest[promoted] = False
        keep = rest[window]
        self._fill_from_values(out, values[event[keep]], window[keep])
        return (out,)

    def window_results(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> np.ndarray | None:
        """The estimates with no sketch per window (``spanning.kernels.hll.window_estimates``): the same
        numbers as the lowered sketches. None for ``hll_sketch``, whose result is the bytes."""
        if type(self).lower is not ApproxCountDistinct.lower:
            return None
        values, first, last = self._present(cols, first, last)
        hashable = self._hashable if values.dtype == bool or values.dtype == object else None
        coupon = value_coupons(values, datasketches_module(), hashable).astype(np.int64)
        return window_estimates(coupon, first, last, n, self.size, datasketches_module())

    def lower(self, partial) -> int:
        if partial is None:
            return 0
        estimate = datasketches_module().hll_sketch.deserialize(order_free(partial)).get_estimate()
        return math.floor(estimate + 0.5)  # Java's Math.round


def java_inclusive_rank(q: float, n: int) -> float:
    """The rank to ask DataSketches' C++ KLL for, so that it picks the item Java's (Spark's) picks for ``q``.

    Both take the smallest item whose cumulative weight reaches ⌈q·n⌉, but Java first rounds q·n to 7 decimals
    (for n ≤ 10^7), so 0.95 · 20 = 19.000000000000004 is 19 there and 20 in C++. Asking C++ for the middle
    of that weight's step, (m − ½) / n, gives Java's item m whatever the float error.
    """
    natural = q * n
    if n <= 10_000_000:
        natural = math.floor(natural * 1e7 + 0.5) / 1e7  # Java's Math.round(natural · 10^7) / 10^7
    return (max(math.ceil(natural), 1) - 0.5) / n


def java_item(q: float, n: Any) -> Any:
    """Java's item for ``q`` among ``n`` (an int64 array): the m of ``java_inclusive_rank``, 1-based, at once."""
    natural = q * np.asarray(n, dtype=np.float64)
    rounded = np.floor(natural * 1e7 + 0.5) / 1e7  # Java's Math.round(natural · 10^7) / 10^7, for n ≤ 10^7
    natural = np.where(np.asarray(n) <= 10_000_000, rounded, natural)
    return np.maximum(np.ceil(natural), 1).astype(np.int64)


class ApproxPercentile(_Sketch):
    """``approx_percentile:col:q[:K]``: KLL of doubles (bytes as Spark's ``kll_sketch_agg_double`` writes)."""

    capabilities = Capabilities(result=ResultKind.FLOAT, vectorised=True, sql=SqlFunction.KLL)
    kind = "kll"

    def __init__(self, column: str, q: float, k: int = DEFAULT_K, name: str | None = None) -> None:
        super().__init__(column, k, name or f"approx_percentile:{column}:{q:g}:{k}")
        self.q = q
        self.numeric_columns = (column,)

    def _new(self):
        return datasketches_module().kll_doubles_sketch(self.size)

    @staticmethod
    def _hashable(value: Any) -> float:
        return float(value)

    @staticmethod
    def _bytes(sketch) -> bytes:
        return sketch.serialize()

    def _merged(self, a: bytes, b: bytes) -> bytes:
        kll = datasketches_module().kll_doubles_sketch
        sketch = kll.deserialize(a)
        sketch.merge(kll.deserialize(b))
        return sketch.serialize()

    def lower(self, partial) -> float | None:
        if partial is None:
            return None
        sketch = datasketches_module().kll_doubles_sketch.deserialize(partial)
        return sketch.get_quantile(java_inclusive_rank(self.q, sketch.n))

    array_values = True

    def from_values(self, values: np.ndarray) -> bytes:
        return self._sketch_of(values).serialize()

    def _sketch_of(self, values: np.ndarray) -> Any:
        sketch = self._new()
        sketch.update(values.astype(np.float64, copy=False))  # one call for the window's values
        return sketch

    def window_results(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> Any:
        """The quantiles with a sketch only for windows of more than K values: a KLL of at most K values
        holds them all (no compaction yet), so its inclusive quantile is the value of Java's rank among the
        sorted values (``java_item``), read from one sort of the chunk's pairs. None for ``kll_sketch``."""
        if type(self).lower is not ApproxPercentile.lower:
            return None
        bounds, ordered = self._sorted_members(cols, first, last, n)
        size = np.diff(bounds)
        out = np.full(n, np.nan)
        held = np.flatnonzero((size > 0) & (size <= self.size))
        out[held] = ordered[bounds[held] + java_item(self.q, size[held]) - 1]
        past = np.flatnonzero(size > self.size)
        # one sketch per window for every quantile of the column (the memo keeps first and last alive)
        sketches = cols.memo((*self.shared_as(), "past K", id(first), id(last), n), lambda: (first, last, [
            self._sketch_of(ordered[bounds[w]:bounds[w + 1]]) for w in past.tolist()]))[2]  # fmt: skip
        out[past] = [sketch.get_quantile(java_inclusive_rank(self.q, sketch.n)) for sketch in sketches]
        return pd.arrays.FloatingArray(out, size == 0)


class HllSketch(ApproxCountDistinct):
    """``hll_sketch:col[:lgK]``: the window's HLL sketch as bytes (an empty sketch over no value)."""

    capabilities = Capabilities(result=ResultKind.BINARY, vectorised=True, sql=SqlFunction.HLL)

    def __init__(self, column: str, lg_k: int = DEFAULT_LG_K) -> None:
        super().__init__(column, lg_k, f"hll_sketch:{column}:{lg_k}")

    def lower(self, partial) -> bytes:
        return self._bytes(self._new()) if partial is None else order_free(partial)


class KllSketch(ApproxPercentile):
    """``kll_sketch:col[:K]``: the window's KLL sketch of doubles as bytes (null over no value)."""

    capabilities = Capabilities(result=ResultKind.BINARY, vectorised=True, sql=SqlFunction.KLL)

    def __init__(self, column: str, k: int = DEFAULT_K) -> None:
        super().__init__(column, 0.5, k, f"kll_sketch:{column}:{k}")

    def lower(self, partial) -> bytes | None:
        return partial


def _quantile(text: str, spec: str) -> float:
    try:
        q = float(text)
    except ValueError:
        q = math.nan
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"bad aggregate {spec!r}: the quantile must be a number from 0 to 1, got {text!r}")
    return q


def _size(text: str, bounds: tuple[int, int], what: str, spec: str) -> int:
    if not text.isdigit() or not bounds[0] <= int(text) <= bounds[1]:
        raise ValueError(f"bad aggregate {spec!r}: {what} must be an integer from {bounds[0]} to {bounds[1]}")
    return int(text)


FORMS = {
    "count_distinct": "count_distinct:column",
    "percentile": "percentile:column:q",
    "approx_count_distinct": "approx_count_distinct:column[:lgK]",
    "approx_percentile": "approx_percentile:column:q[:K]",
    "hll_sketch": "hll_sketch:column[:lgK]",
    "kll_sketch": "kll_sketch:column[:K]",
}


def parse_distinct(kind: str, args: list[str]) -> Aggregate:
    """One of ``FORMS`` from its ``"kind:arg:..."`` parts (a clear ValueError names the form)."""
    spec = ":".join([kind, *args])
    arity = {"count_distinct": (1, 1), "percentile": (2, 2), "approx_count_distinct": (1, 2),
             "approx_percentile": (2, 3), "hll_sketch": (1, 2), "kll_sketch": (1, 2)}[kind]  # fmt: skip
    if not arity[0] <= len(args) <= arity[1] or any(not a for a in args):
        raise ValueError(f"bad aggregate {spec!r}: write it as {FORMS[kind]!r}")
    column = args[0]
    if kind == "count_distinct":
        return CountDistinct(column)
    if kind == "percentile":
        return Percentile(column, _quantile(args[1], spec))
    if kind in ("approx_count_distinct", "hll_sketch"):
        lg_k = _size(args[1], LG_K_RANGE, "lgK", spec) if len(args) > 1 else DEFAULT_LG_K
        return ApproxCountDistinct(column, lg_k) if kind == "approx_count_distinct" else HllSketch(column, lg_k)
    if kind == "kll_sketch":
        return KllSketch(column, _size(args[1], K_RANGE, "K", spec) if len(args) > 1 else DEFAULT_K)
    k = _size(args[2], K_RANGE, "K", spec) if len(args) > 2 else DEFAULT_K
    return ApproxPercentile(column, _quantile(args[1], spec), k)
