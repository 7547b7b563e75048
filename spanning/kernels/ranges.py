"""Range updates over window numbers: the kernels of the batch path, as the aggregates call them.

In the batch path every event ``e`` contributes to a contiguous run of windows ``first[e]..last[e]``
(inclusive, local window numbers ``0 .. n_windows-1``). Each function here reduces the events into
one value per window with the compiled loops of ``spanning.kernels.compiled``, or numpy array operations;
no Python loop over events or windows.

>>> import numpy as np
>>> first, last = np.array([0, 1, 1]), np.array([2, 1, 3])
>>> range_count(first, last, 4).tolist()
[1, 3, 2, 1]
>>> range_max(first, last, 4, np.array([5, 9, 1]), -1).tolist()
[5, 9, 5, 1]
"""

from __future__ import annotations

import numpy as np

from spanning.kernels import compiled, threads

__all__ = [
    "range_count", "range_sum_int", "range_sum_float", "explode", "window_occupancy", "range_max", "range_min",
    "extreme_sentinel", "union_runs", "sorted_members", "runs_within",
]  # fmt: skip

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SPLIT_BLOCK = 1 << 30  # values per split pass: Σ lo < 2^30 * 2^32 and Σ |hi| <= 2^30 * 2^31 stay in int64


def range_count(first: np.ndarray, last: np.ndarray, n_windows: int) -> np.ndarray:
    """Number of runs covering each window: a difference array and one prefix sum."""
    return _difference_sum(first, last, n_windows, np.zeros(0, dtype=np.int64))  # no values: each run counts 1


def _positions(windows: np.ndarray) -> np.ndarray:
    """Window numbers as the compiled loops take them: contiguous int64 (no copy when they are)."""
    return np.ascontiguousarray(windows, dtype=np.int64)


def range_sum_int(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray) -> np.ndarray:
    """Exact integer sum per window: int64 when every window's sum fits, else Python ints (object array).

    Integer sums never wrap (docs/SEMANTICS.md §10). int64 difference arrays wrap, but every step is an addition, so a
    result is exact modulo 2^64 and therefore exact whenever the true sum fits in int64. When
    max|v| * len(values) < 2^63 every window sum fits and the plain path runs (the common case, one
    bound check). Otherwise each value is split as v = hi * 2^32 + lo (hi = v >> 32 signed, lo = the
    low 32 bits, unsigned): the sums of hi and of lo cannot wrap (at most 2^30 values per pass),
    and hi * 2^32 + lo gives the exact sum, widened to Python ints only if some window needs it.

    >>> import numpy as np
    >>> top = 2**63 - 1
    >>> range_sum_int(np.array([0, 0, 1]), np.array([1, 0, 1]), 2, np.array([top, 1, -1])).tolist()
    [9223372036854775808, 9223372036854775806]
    """
    values = values.astype(np.int64, copy=False)
    sums, (low, high) = _difference_sums(first, last, n_windows, values)  # the bound read in the sums' pass
    if max(int(high), -int(low)) * len(values) <= _INT64_MAX:
        return sums
    exact = None
    for i in range(0, len(values), _SPLIT_BLOCK):  # one block unless there are 2^30 values or more
        block = slice(i, i + _SPLIT_BLOCK)
        part = _split_sum(first[block], last[block], n_windows, values[block])
        exact = part if exact is None else exact.astype(object) + part.astype(object)
    if exact.dtype == object and all(_INT64_MIN <= v <= _INT64_MAX for v in exact):
        return exact.astype(np.int64)
    return exact


def _difference_sum(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray) -> np.ndarray:
    """Σ values over the runs covering each window, in int64 (wraps, i.e. exact modulo 2^64); ``values`` of length 0
    count the runs (``_difference_sums`` without the values' bounds)."""
    return _difference_sums(first, last, n_windows, values)[0]


def _difference_sums(first: np.ndarray, last: np.ndarray, n_windows: int,
                     values: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:  # fmt: skip
    """``_difference_sum`` and the least and largest of ``values``. ``compiled.run_sums_into``, into an array of
    numpy's (huge pages: 9M windows in 37 ms against 88-94 ms for ``run_counts``' own, 2026-11-29). Not cut into
    threads' shares: on 1M events of 16,633 windows, two shares added took 1.5 ms against 1.3 ms for one pass (2
    cores, other work running)."""
    first, last, values = _positions(first), _positions(last), _positions(values)
    out = np.zeros(n_windows + 1, dtype=np.int64)
    bounds = compiled.run_sums_into(first, last, values, out)
    return out[:n_windows], bounds


def range_sum_float(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray) -> np.ndarray:
    """Float sum per window, each window's values added in event order: the explode's sums, to the last bit.

    >>> import numpy as np
    >>> range_sum_float(np.array([0, 1]), np.array([1, 2]), 3, np.array([0.5, 2.0])).tolist()
    [0.5, 2.5, 2.0]
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    return compiled.run_sums_float(_positions(first), _positions(last), n_windows, values)


def _split_sum(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray) -> np.ndarray:
    """Exact window sums of at most 2^30 int64 values: int64 if all fit, else an object array."""
    high = _difference_sum(first, last, n_windows, values >> 32)  # |Σ hi| < 2^61: no wrap
    low = _difference_sum(first, last, n_windows, values & 0xFFFFFFFF)  # 0 <= Σ lo < 2^62: no wrap
    high += low >> 32  # carry: the sum is high * 2^32 + (low & 0xFFFFFFFF)
    low &= 0xFFFFFFFF
    if high.min(initial=0) >= -(2**31) and high.max(initial=0) < 2**31:  # high * 2^32 + low fits
        return (high << 32) + low
    return high.astype(object) * (1 << 32) + low.astype(object)


def explode(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (event, window) pair, events in input order: the SQL "explode" done with arrays.

    Used where a sum must be sequential per window (floats) or needs the window's own result
    (centred squares, counts of the extreme). Its size is Σ (last - first + 1).
    """
    return compiled.run_windows(_positions(first), _positions(last))


def range_max(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray, sentinel: object) -> np.ndarray:
    """Maximum per window over the runs covering it (``sentinel`` where none does).

    ``compiled.run_extremes``: the explode's loop for short runs; for long ones a sparse table, a run of length L
    being two (overlapping) blocks of length 2^j, j = ⌊log2 L⌋, then every level pushed down into the two
    halves below it: O(n + W log W), independent of how long the events are.
    """
    return _range_extreme(first, last, n_windows, values, sentinel, True)


def range_min(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray, sentinel: object) -> np.ndarray:
    """Minimum per window, as ``range_max`` (no negation: -(-2^63) would wrap in int64).

    >>> import numpy as np
    >>> range_min(np.array([0, 1]), np.array([1, 2]), 3, np.array([-2**63, 7]), 2**63 - 1).tolist()
    [-9223372036854775808, -9223372036854775808, 7]
    """
    return _range_extreme(first, last, n_windows, values, sentinel, False)


def extreme_sentinel(dtype: np.dtype, largest: bool) -> np.generic:
    """A value no other beats, the start of a window's max (``largest``) or min before any event: ∓inf for
    floats, the int64 bounds for integers (the two dtypes the extreme kernels take)."""
    if np.dtype(dtype).kind == "f":
        return np.float64(-np.inf if largest else np.inf)
    return np.int64(_INT64_MIN if largest else _INT64_MAX)


def _range_extreme(first, last, n_windows, values, sentinel, largest: bool) -> np.ndarray:
    """``compiled.run_extremes``, its events cut into ``threads.shares``: each share's max (min) over the band of
    windows its own runs reach, in threads, then each window's from the shares in event order, the earlier kept
    on a tie (as one pass keeps it: -0.0 before 0.0 stays -0.0). The kernel never keeps a NaN."""
    values = np.ascontiguousarray(values)
    first, last, sentinel = _positions(first), _positions(last), values.dtype.type(sentinel)
    count = threads.shares(len(values))
    if count < 2 or n_windows * 4 > len(values):  # many windows: one pass, not a band of them per share and a merge
        best = np.full(n_windows, sentinel, values.dtype)  # numpy's huge pages (``compiled.window_labels``)
        compiled.run_extremes_into(first, last, values, largest, best)
        return best
    cut = threads.bounds(len(values), count)

    def share(k: int) -> tuple[int, np.ndarray]:  # the share's band of windows, from its lowest one
        lo, hi = cut[k], cut[k + 1]
        low = int(first[lo:hi].min())
        band = int(last[lo:hi].max()) - low + 1
        return low, compiled.run_extremes(first[lo:hi] - low, last[lo:hi] - low, band, values[lo:hi], sentinel,
                                          largest)  # fmt: skip

    parts = threads.in_shares(share, count)
    best = np.full(n_windows, sentinel, values.dtype)
    for low, part in parts:
        held = best[low : low + len(part)]
        better = part > held if largest else part < held  # strictly: the earlier share wins a tie
        held[better] = part[better]
    return best


def union_runs(ids: np.ndarray, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows each id's runs cover, as disjoint runs: ``(first, last, id)`` of the union per id.

    A window's distinct ids are the ids whose union covers it, so ``range_count`` of these runs counts them:
    a sweep over the windows with each id entering and leaving once per disjoint run, where the explode
    would pay a pair per (event, window). One sort of the events by (id, first).

    >>> import numpy as np
    >>> f, l, i = union_runs(np.array([7, 7, 5, 7]), np.array([0, 2, 1, 6]), np.array([3, 4, 1, 6]))
    >>> f.tolist(), l.tolist(), i.tolist()
    ([1, 0, 6], [1, 4, 6], [5, 7, 7])
    >>> range_count(f, l, 7).tolist()  # distinct ids per window
    [1, 2, 1, 1, 1, 0, 1]
    """
    if not len(ids):
        return first[:0], last[:0], ids[:0]
    order = np.lexsort((first, ids))
    ids, first, last = ids[order], first[order], last[order]
    group = np.cumsum(np.r_[False, ids[1:] != ids[:-1]])
    low = int(first.min())
    stride = int(last.max()) - low + 2
    reach = np.maximum.accumulate(group * stride + (last - low))  # the farthest last so far, within the id
    before = np.r_[-1, reach[:-1] - group[1:] * stride]  # negative at an id's first run
    opens = np.flatnonzero(first - low > before)  # a run that starts past everything before it: a new run
    closes = np.r_[opens[1:] - 1, len(ids) - 1]
    return first[opens], reach[closes] - group[closes] * stride + low, ids[opens]


def sorted_members(values: np.ndarray, first: np.ndarray, last: np.ndarray,
                   n_windows: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Each window's member values, sorted within the window: ``(bounds, sorted)``, window w's values being
    ``sorted[bounds[w]:bounds[w + 1]]``.

    One sort of packed keys (window · 2^b + the value's rank among the events), not an argsort of the pairs:
    the pairs are the explode's, but the sort moves plain int64 keys.

    >>> import numpy as np
    >>> bounds, values = sorted_members(np.array([9.0, 1.0, 5.0]), np.array([0, 0, 1]), np.array([1, 0, 1]), 3)
    >>> bounds.tolist(), values.tolist()
    ([0, 2, 4, 4], [1.0, 9.0, 5.0, 9.0])
    """
    by_value = np.argsort(values, kind="stable")
    rank = np.empty(len(values), dtype=np.int64)
    rank[by_value] = np.arange(len(values))
    lengths = np.maximum(last - first + 1, 0)
    bits = max(len(values), 1).bit_length()
    # packed keys fit in int64: n_windows · 2^bits < 2^62 (2^40 windows of 2^22 events would not fit in memory)
    keys = explode(first, first + lengths - 1)[1]
    keys <<= bits
    keys |= np.repeat(rank, lengths)
    keys.sort()  # built in place, one plain sort
    ranks = keys & ((1 << bits) - 1)
    bounds = np.zeros(n_windows + 1, dtype=np.int64)
    has = lengths > 0
    np.cumsum(range_count(first[has], last[has], n_windows), out=bounds[1:])
    return bounds, values[by_value][ranks]


def window_occupancy(
    starts: np.ndarray, ends: np.ndarray, first: np.ndarray, last: np.ndarray, first_start: np.ndarray,
    slide: int, range_: int, n_windows: int,
) -> np.ndarray:  # fmt: skip
    """Σ over the events whose run ``first..last`` (in ``0..n_windows - 1``) holds window j of the time they
    spend inside it, per window j (int64, exact): event ``[l, u)`` occupies the window ``[S, S + ω)`` for
    ``min(u, S + ω) − max(l, S)`` chronons, ``first_start`` being the start S of each event's window ``first``.

    >>> import numpy as np
    >>> # [3, 12) in windows of 10 sliding by 5 from 0: [-5, 5) holds 2 s of it, [0, 10) 7, [5, 15) 7, [10, 20) 2
    >>> window_occupancy(np.array([3]), np.array([12]), np.array([0]), np.array([3]), np.array([-5]), 5, 10, 4)
    array([2, 7, 7, 2])
    """
    return compiled.run_occupancy(_positions(first), _positions(last), n_windows, _positions(starts),
                                  _positions(ends), _positions(first_start), slide, range_)  # fmt: skip


def runs_within(windows: np.ndarray, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs ``first..last`` cut to the windows where the boolean ``windows`` is true: ``(run, first, last)``,
    ``run`` naming the input run of each piece (a run over several stretches of such windows gives a piece per
    stretch, in order).

    >>> import numpy as np
    >>> run, f, l = runs_within(np.array([1, 1, 0, 0, 1, 1], bool), np.array([0, 2, 1]), np.array([5, 3, 1]))
    >>> run.tolist(), f.tolist(), l.tolist()
    ([0, 0, 2], [0, 4, 1], [1, 5, 1])
    """
    edges = np.diff(np.r_[False, windows, False].astype(np.int8))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    lo = np.searchsorted(ends, first)  # the first stretch ending at or after the run's first window
    hi = np.searchsorted(starts, last, side="right") - 1  # the last starting at or before its last
    run, stretch = explode(lo, hi)
    return run, np.maximum(first[run], starts[stretch]), np.minimum(last[run], ends[stretch])
