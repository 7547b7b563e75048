"""Vectorised range updates over window numbers: the kernels of the batch path.

In the batch path every event ``e`` contributes to a contiguous run of windows ``first[e]..last[e]``
(inclusive, local window numbers ``0 .. n_windows-1``). Each function here reduces the events into
one value per window without a Python loop over events or windows.

>>> import numpy as np
>>> first, last = np.array([0, 1, 1]), np.array([2, 1, 3])
>>> range_count(first, last, 4).tolist()
[1, 3, 2, 1]
>>> range_max(first, last, 4, np.array([5, 9, 1]), -1).tolist()
[5, 9, 5, 1]
"""

from __future__ import annotations

import numpy as np

__all__ = ["range_count", "range_sum_int", "explode", "range_max"]


def range_count(first: np.ndarray, last: np.ndarray, n_windows: int) -> np.ndarray:
    """Number of runs covering each window: a difference array and one prefix sum."""
    diff = np.bincount(first, minlength=n_windows + 1)
    diff[: n_windows + 1] -= np.bincount(last + 1, minlength=n_windows + 1)[: n_windows + 1]
    return np.cumsum(diff[:n_windows])


def range_sum_int(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray) -> np.ndarray:
    """Exact integer sum per window (int64 arithmetic wraps, so intermediate overflow cancels out)."""
    diff = np.zeros(n_windows + 1, dtype=np.int64)
    with np.errstate(over="ignore"):
        np.add.at(diff, first, values)
        np.subtract.at(diff, last + 1, values)
        return np.cumsum(diff[:n_windows])


def explode(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (event, window) pair, events in input order: the SQL "explode" done with arrays.

    Used where a sum must be sequential per window (floats) or needs the window's own result
    (centred squares, counts of the extreme). Its size is Σ (last - first + 1).
    """
    lengths = last - first + 1
    event = np.repeat(np.arange(len(first)), lengths)
    run_start = np.cumsum(lengths) - lengths
    window = first[event] + (np.arange(len(event)) - run_start[event])
    return event, window


def range_max(first: np.ndarray, last: np.ndarray, n_windows: int, values: np.ndarray, sentinel: object) -> np.ndarray:
    """Maximum per window over the runs covering it (``sentinel`` where none does).

    Sparse-table trick: a run of length L is two (overlapping) blocks of length 2^j, j = ⌊log2 L⌋;
    each block is scattered once with ``maximum.at``, then every level pushes down into the two halves
    below it. O(n + W log W), independent of how long the events are.
    """
    if n_windows == 0:
        return np.empty(0, dtype=values.dtype)
    lengths = last - first + 1
    levels = int(lengths.max()).bit_length() if len(lengths) else 1
    table = np.full((levels, n_windows), sentinel, dtype=values.dtype)
    level = np.zeros(len(lengths), dtype=np.int64)
    if levels > 1:
        level = np.floor(np.log2(lengths)).astype(np.int64)
        # guard the float log against rounding at exact powers of two
        level -= (np.left_shift(1, level) > lengths).astype(np.int64)
        level += (np.left_shift(1, level + 1) <= lengths).astype(np.int64)
    flat = table.reshape(-1)
    np.maximum.at(flat, level * n_windows + first, values)
    np.maximum.at(flat, level * n_windows + last - np.left_shift(1, level) + 1, values)
    for j in range(levels - 1, 0, -1):
        half = 1 << (j - 1)
        below, above = table[j - 1], table[j]
        np.maximum(below, above, out=below)
        np.maximum(below[half:], above[: n_windows - half], out=below[half:])
    return table[0]
