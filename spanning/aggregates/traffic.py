"""Traffic as telecom measures it: the time calls spend inside a window (occupancy) and its Erlangs.

An event counts in full in every window it overlaps for ``count``; here it counts for the part of it that lies
inside the window, ``|[l, u) ∩ [S, S + ω)|`` (docs/SEMANTICS.md, "Traffic"). ITU-T E.500 measures traffic
intensity as the mean number of busy resources over a period: the occupancy divided by the period, in Erlangs.

* ``occupancy``: Σ over the window's member events of the seconds they spend inside it; 0 over no events. It is
  summed in chronons (int64, exact) and reported in seconds (``parser.seconds_columns``): the int64 as is with the
  default ``time_unit="s"``, divided by 1000 into a float64 with ``"ms"``.
* ``erlang``: occupancy / ω, a float; 0.0 over no events.

Membership is the usual rule (TTP): a late event adds nothing to the windows it missed. Both need the
window's bounds, which a per-event partial does not have: the batch path computes them with
``spanning.kernels.ranges.window_occupancy`` (the compiled kernel's loop over each run), and the per-event
techniques refuse them.

>>> import pandas as pd
>>> from spanning import aggregate
>>> calls = pd.DataFrame({"start": [3, 14], "end": [12, 15]})  # a call of 9 s, then one of 1 s
>>> aggregate(calls, range=10, slide=5, ttp=10, aggregates={"n": "count", "busy": "occupancy", "erl": "erlang"})
   window_start  window_end  n  busy  erl
0            -5           5  1     2  0.2
1             0          10  1     7  0.7
2             5          15  2     8  0.8
3            10          20  2     3  0.3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spanning.aggregates.capabilities import Capabilities, ResultKind
from spanning.aggregates.columns import BatchColumns, nullable
from spanning.aggregates.protocol import Aggregate
from spanning.kernels.ranges import explode, range_count

__all__ = ["TRAFFIC", "Erlang", "Occupancy", "PeakConcurrent", "ProratedSum"]


class _Inside(Aggregate):
    """An aggregate of the time events spend inside the window: only the batch path has the window's bounds."""

    capabilities = Capabilities(result=ResultKind.COUNT, vectorised=True, per_window=True)

    def _refused(self, *_: Any) -> Any:
        raise TypeError(f"{self.name} needs each window's bounds: only the batch path (se-slicing) computes it")

    identity = lift = combine = lower = _refused  # no per-event face (Engine refuses capabilities.per_window first)

    def _occupancy(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> np.ndarray:
        if cols.spans is None:  # no events (identity_partials)
            return np.zeros(n, np.int64)
        # occupancy and erlang of one chunk: one kernel pass (the memo keeps first and last alive, so ids name them)
        return cols.memo(("occupancy", id(first), id(last), n),
                         lambda: (first, last, cols.spans.occupancy(first, last, n)))[2]  # fmt: skip


class Occupancy(_Inside):
    name = "occupancy"

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        return (self._occupancy(cols, first, last, n),)

    def merge(self, a: tuple, b: tuple) -> tuple:
        return (a[0] + b[0],)

    def lower_partials(self, partials: tuple) -> Any:
        return partials[0].astype(np.int64)


class Erlang(_Inside):
    """Partial (occupancy, ω): ω rides along because lowering sees no window."""

    capabilities = Capabilities(result=ResultKind.FLOAT, vectorised=True, per_window=True)
    name = "erlang"

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        range_ = 0 if cols.spans is None else cols.spans.range
        return self._occupancy(cols, first, last, n), np.full(n, range_, np.int64)

    def merge(self, a: tuple, b: tuple) -> tuple:
        return a[0] + b[0], np.maximum(a[1], b[1])

    def lower_partials(self, partials: tuple) -> Any:
        occupancy, range_ = partials
        erlangs = occupancy / np.where(range_ > 0, range_, 1)  # no events, no range: 0 / 1
        return nullable(erlangs.astype(np.float64), np.ones(len(occupancy), bool))


class ProratedSum(_Inside):
    """``prorated_sum:col``: Σ col · |[l, u) ∩ window| / (u − l) over the members with a value; null over none.

    Partial (sum, values). Each (event, window) pair adds its share, a float64 (the value times the exact
    occupancy, divided once), summed per window (``np.bincount``): as a float ``sum``, its error is that of
    adding the shares, at most about (values in the window) · 2^-53 of their total, and the paths may add them
    in other orders. Cost: one term per (event, window) pair, as the batch path's float sums.
    """

    capabilities = Capabilities(result=ResultKind.FLOAT, vectorised=True, per_window=True)

    def __init__(self, column: str) -> None:
        self.column = column
        self.columns = self.numeric_columns = (column,)
        self.name = f"prorated_sum:{column}"

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        if cols.spans is None or not len(first):
            return np.zeros(n, np.float64), np.zeros(n, np.int64)
        keep = cols.valid(self.column)
        event, window = explode(first[keep], last[keep])
        event = np.flatnonzero(keep)[event]
        lo, hi = cols.spans.inside(event, window)
        length = cols.spans.ends[event] - cols.spans.starts[event]
        share = cols.values(self.column)[event].astype(np.float64) * (hi - lo) / length
        return np.bincount(window, weights=share, minlength=n), range_count(first[keep], last[keep], n)

    def merge(self, a: tuple, b: tuple) -> tuple:
        return a[0] + b[0], a[1] + b[1]

    def lower_partials(self, partials: tuple) -> Any:
        return nullable(partials[0].astype(np.float64), partials[1] > 0)


class PeakConcurrent(_Inside):
    """``peak_concurrent``: the most members active at one instant of the window; 0 over none.

    Partial: per window, the members' parts inside it as a (2, m) array of ``[lo, hi)``; merging concatenates
    them (a peak of each part would not do: calls of two chunks overlap in time). Lowering sweeps every
    window's parts at once: +1 at each lo, −1 at each hi (ends first at one instant, as ``[l, u)`` is
    half-open), a running sum that is back to 0 at each window's end, and its maximum per window.
    """

    capabilities = Capabilities(result=ResultKind.COUNT, vectorised=True, per_window=True)
    name = "peak_concurrent"

    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        out = np.empty(n, dtype=object)
        out.fill(_NO_PARTS)
        if cols.spans is None or not len(first):
            return (out,)
        event, window = explode(first, last)
        lo, hi = cols.spans.inside(event, window)
        order = np.argsort(window, kind="stable")
        window, lo, hi = window[order], lo[order], hi[order]
        cuts = np.flatnonzero(np.r_[True, window[1:] != window[:-1]])
        for w, parts in zip(window[cuts].tolist(), np.split(np.stack([lo, hi]), cuts[1:], axis=1), strict=True):
            out[w] = parts
        return (out,)

    def merge(self, a: tuple, b: tuple) -> tuple:
        out = np.empty(len(a[0]), dtype=object)
        for i, (x, y) in enumerate(zip(a[0], b[0], strict=True)):  # element by element: numpy would stack them
            out[i] = x if not y.shape[1] else y if not x.shape[1] else np.concatenate([x, y], axis=1)
        return (out,)

    def lower_partials(self, partials: tuple) -> Any:
        parts = partials[0]
        sizes = np.array([p.shape[1] for p in parts], dtype=np.int64)
        peaks = np.zeros(len(parts), np.int64)
        if not sizes.sum():
            return peaks
        lo, hi = np.concatenate([p for p in parts if p.shape[1]], axis=1)
        window = np.repeat(np.arange(len(parts)), sizes)
        times = np.concatenate([hi, lo])
        steps = np.concatenate([-np.ones(len(hi), np.int64), np.ones(len(lo), np.int64)])
        windows = np.concatenate([window, window])
        order = np.lexsort((steps, times, windows))  # per window in time order, the ends of an instant first
        running = np.cumsum(steps[order])  # each window's steps sum to 0: the count restarts at each window
        windows = windows[order]
        starts = np.flatnonzero(np.r_[True, windows[1:] != windows[:-1]])
        peaks[windows[starts]] = np.maximum.reduceat(running, starts)
        return peaks


_NO_PARTS = np.zeros((2, 0), np.int64)


TRAFFIC = {"occupancy": Occupancy, "erlang": Erlang, "prorated_sum": ProratedSum,
           "peak_concurrent": PeakConcurrent}  # fmt: skip
ARITY = {"prorated_sum": 1}  # the others read only the events' start and end
