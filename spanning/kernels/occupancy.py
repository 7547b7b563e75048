"""Occupancy: the time each event spends inside each window of its run, summed per window, O(1) per event.

An event ``[l, u)`` occupies window k, ``[S_k, S_k + ω)`` with ``S_k = o + k·β``, for
``min(u, S_k + ω) − max(l, S_k)`` chronons. Over the event's run of windows both terms are piecewise linear
in k, with one break each:

* ``min(u, S_k + ω)`` is ``S_k + ω`` (slope +β) while the window ends inside the event, then ``u``;
* ``max(l, S_k)`` is ``l`` while the window starts before the event, then ``S_k`` (slope +β).

So the run splits into at most four ranges, each adding ``constant + β·k·slope`` with slope −1, 0 or +1
to the windows it covers: two difference arrays (one of constants, one of slopes) and one prefix sum each,
whatever ω/β, as the range updates of ``spanning.kernels.ranges``. The sums are int64 and may wrap in between,
but every step is a ring operation, so the result is exact modulo 2^64, hence exact: a window's occupancy is
at most ω times its number of events.

>>> import numpy as np
>>> # [3, 12) in windows of 10 sliding by 5 from 0: [-5, 5) holds 2 s of it, [0, 10) 7, [5, 15) 7, [10, 20) 2
>>> window_occupancy(np.array([3]), np.array([12]), np.array([0]), np.array([3]), np.array([-5]), 5, 10, 4)
array([2, 7, 7, 2])
"""

from __future__ import annotations

import numpy as np

__all__ = ["occupancy_ranges", "window_occupancy"]


def occupancy_ranges(
    starts: np.ndarray, ends: np.ndarray, first: np.ndarray, last: np.ndarray, first_start: np.ndarray,
    slide: int, range_: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The four ranges of every event: (event, lo, hi, constant, slope), empty ranges (lo > hi) left out.

    ``first``/``last`` are the event's run in the caller's window numbering and ``first_start`` the start time
    of window ``first``; window j of the run then holds ``constant + slide·j·slope`` of the event.
    """
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    first, last = np.asarray(first, np.int64), np.asarray(last, np.int64)
    into_start = starts - first_start  # l and u relative to the first window's start
    into_end = ends - first_start
    ends_inside = first + (into_end - range_) // slide  # last window ending at or before u: its end is S + ω
    starts_before = first + into_start // slide  # last window starting at or before l: its start is l
    offset = slide * first  # S_j − S_first = slide·j − offset
    lo = np.concatenate([first, np.maximum(first, ends_inside + 1), first, np.maximum(first, starts_before + 1)])
    hi = np.concatenate([np.minimum(last, ends_inside), last, np.minimum(last, starts_before), last])
    constant = np.concatenate([range_ - offset, into_end, -into_start, offset])
    ones = np.ones(len(first), np.int64)
    slope = np.concatenate([ones, 0 * ones, 0 * ones, -ones])
    keep = lo <= hi
    event = np.tile(np.arange(len(first), dtype=np.int64), 4)
    return event[keep], lo[keep], hi[keep], constant[keep], slope[keep]


def window_occupancy(
    starts: np.ndarray, ends: np.ndarray, first: np.ndarray, last: np.ndarray, first_start: np.ndarray,
    slide: int, range_: int, n_windows: int,
) -> np.ndarray:  # fmt: skip
    """Σ over the events whose run ``first..last`` (in ``0..n_windows - 1``) holds window j of the time they
    spend inside it, per window j (int64, exact)."""
    _, lo, hi, constant, slope = occupancy_ranges(starts, ends, first, last, first_start, slide, range_)
    constants = _wrapping_range_sum(lo, hi, n_windows, constant)
    slopes = _wrapping_range_sum(lo, hi, n_windows, slope)
    with np.errstate(over="ignore"):
        return constants + slide * np.arange(n_windows, dtype=np.int64) * slopes


def _wrapping_range_sum(lo: np.ndarray, hi: np.ndarray, n_windows: int, values: np.ndarray) -> np.ndarray:
    """Σ values over the ranges covering each window, int64 modulo 2^64 (a difference array)."""
    diff = np.zeros(n_windows + 1, np.int64)
    np.add.at(diff, lo, values)
    np.subtract.at(diff, hi + 1, values)
    return np.cumsum(diff[:n_windows])
