"""Occupancy: the time each event spends inside each window of its run, summed per window, O(1) per event.

An event ``[l, u)`` occupies window k, ``[S_k, S_k + ω)`` with ``S_k = o + k·β``, for
``min(u, S_k + ω) − max(l, S_k)`` chronons. Over the event's run of windows both terms are piecewise linear
in k, with one break each:

* ``min(u, S_k + ω)`` is ``S_k + ω`` (slope +β) while the window ends inside the event, then ``u``;
* ``max(l, S_k)`` is ``l`` while the window starts before the event, then ``S_k`` (slope +β).

So what the event adds to window k is ``constant + β·k·slope``, where constant and slope change only at four
windows: the run's first, the first window that ends after ``u``, the first that starts after ``l``, and the one
after the run's last. Two difference arrays (constants, slopes) take four point updates per event, and a
running sum of each gives every window's occupancy: O(1) per event whatever ω/β, as the range updates of
``spanning.kernels.ranges``. The sums are int64 and may wrap in between, but every step is a ring operation,
so the result is exact modulo 2^64, hence exact: a window's occupancy is at most ω times its number of events.

>>> import numpy as np
>>> # [3, 12) in windows of 10 sliding by 5 from 0: [-5, 5) holds 2 s of it, [0, 10) 7, [5, 15) 7, [10, 20) 2
>>> window_occupancy(np.array([3]), np.array([12]), np.array([0]), np.array([3]), np.array([-5]), 5, 10, 4)
array([2, 7, 7, 2])
"""

from __future__ import annotations

import numpy as np

__all__ = ["SLOPE_STEPS", "occupancy_points", "occupancy_sums", "window_occupancy"]

SLOPE_STEPS = (1, -1, -1, 1)  # what the slope changes by at each of the four points


def occupancy_points(
    starts: np.ndarray, ends: np.ndarray, first: np.ndarray, last: np.ndarray, first_start: np.ndarray,
    slide: int, range_: int,
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:  # fmt: skip
    """Every event's four points (window numbers, each in ``first..last + 1``) and the constants added there.

    ``first``/``last`` are the event's run in the caller's window numbering and ``first_start`` the start time
    of window ``first``. From the run's first window the event adds ``S_k + ω − l`` (constant ``ω − l'`` with
    ``l' = l − S_first``, slope +1 on ``β·k − β·first``); from the first window that ends after ``u`` the
    ``S_k + ω`` term is ``u'``; from the first that starts after ``l`` the ``−l'`` term is ``−(S_k − S_first)``;
    after the run, nothing. Points may coincide (a call shorter than β, a point event): their changes add up.
    """
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    first, last = np.asarray(first, np.int64), np.asarray(last, np.int64)
    into_start = starts - first_start  # l and u relative to the first window's start
    into_end = ends - first_start
    offset = slide * first  # S_k − S_first = slide·k − offset
    after = last + 1
    ends_after = np.clip(first + (into_end - range_) // slide + 1, first, after)  # first window ending after u
    starts_after = np.clip(first + into_start // slide + 1, first, after)  # first window starting after l
    constants = (range_ - offset - into_start, into_end - range_ + offset, offset + into_start, -into_end - offset)
    return (first, ends_after, starts_after, after), constants


def occupancy_sums(rows: tuple[np.ndarray, ...], constants: tuple[np.ndarray, ...], windows: np.ndarray,
                   slide: int) -> np.ndarray:  # fmt: skip
    """The occupancy of each row of a table of windows: ``rows`` are ``occupancy_points``' points as rows of it
    (each event's windows on consecutive rows), ``windows`` the window number of each row."""
    n = len(windows)
    constant = np.zeros(n + 1, np.int64)
    slope = np.zeros(n + 1, np.int64)
    for row, value, step in zip(rows, constants, SLOPE_STEPS, strict=True):
        np.add.at(constant, row, value)
        slope += step * np.bincount(row, minlength=n + 1)
    with np.errstate(over="ignore"):  # exact modulo 2^64, hence exact (above)
        return np.cumsum(constant[:n]) + slide * np.asarray(windows, np.int64) * np.cumsum(slope[:n])


def window_occupancy(
    starts: np.ndarray, ends: np.ndarray, first: np.ndarray, last: np.ndarray, first_start: np.ndarray,
    slide: int, range_: int, n_windows: int,
) -> np.ndarray:  # fmt: skip
    """Σ over the events whose run ``first..last`` (in ``0..n_windows - 1``) holds window j of the time they
    spend inside it, per window j (int64, exact)."""
    points, constants = occupancy_points(starts, ends, first, last, first_start, slide, range_)
    return occupancy_sums(points, constants, np.arange(n_windows, dtype=np.int64), slide)
