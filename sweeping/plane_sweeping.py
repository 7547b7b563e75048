"""Plane Sweeping (Piatov & Helmer, SSTD'17), extended to streams as in Suzanne et al., §5.3.3 and Table 4.

Sorted endpoint indexes (sortedcontainers) hold every event's start and end and every window's bounds.
A sweep line moves with the releases: at the release of ``[L, U)`` the start index is read up to
``U`` (events starting before U join the active set) and the end index up to ``L`` (events ended by
L leave it, and leave the indexes: no open window needs them). The active set is then exactly the
events that overlap the window.

* Cumulative form (count, sum, mean, stddev): counters of the events started minus those ended, kept
  exactly (integers, and floats as fractions), so the subtraction loses nothing.
* Selective form (min, max, argmin, argmax, mincount, maxcount): the values of the active events in a
  sorted list, whose first or last entry is the answer.

An event that arrives after the sweep line passed its start (out of order) joins the active set at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from sortedcontainers import SortedList

from spanning.aggregates import Aggregate, ArgExtreme, Count, Extreme, ExtremeCount, Mean, StdDev, Sum
from spanning.windows import WindowSpec

_INF = float("inf")


def _exact(value: Any) -> Any:
    return Fraction(value) if isinstance(value, float) else value


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, Fraction) else value


class _Counters:
    """Cumulative form: n, Σx and Σx² of the active events, added at start and subtracted at end."""

    def __init__(self, agg: Aggregate) -> None:
        self.agg = agg
        self.n = self.total = self.squares = 0
        if isinstance(agg, Count):  # (counted?, x) from the aggregate's lifted form, chosen once
            self._value = lambda lifted: (lifted, None)
        elif isinstance(agg, Sum):
            self._value = lambda lifted: (0, None) if lifted is None else (1, _exact(lifted))
        elif isinstance(agg, Mean):
            self._value = lambda lifted: (lifted[1], _exact(lifted[0]))
        else:  # StdDev: (1, x, 0.0)
            self._value = lambda lifted: (lifted[0], _exact(lifted[1]))

    def update(self, lifted: Any, event: int, sign: int) -> None:
        counted, x = self._value(lifted)
        if counted:
            self.n += sign
            if x is not None:
                self.total += sign * x
                self.squares += sign * x * x

    def partial(self) -> Any:
        agg, n = self.agg, self.n
        if isinstance(agg, Count):
            return n
        if isinstance(agg, Sum):
            return _plain(self.total) if n else None
        if isinstance(agg, Mean):
            return (_plain(self.total), n)
        if not n:
            return agg.identity()
        mean = Fraction(self.total) / n
        return (n, float(mean), float(self.squares - mean * self.total))  # (n, mean, M2), exact until here


class _Extremes:
    """Selective form: the active events' values in a sorted list."""

    def __init__(self, agg: Aggregate) -> None:
        self.agg = agg
        self.values = SortedList()

    def _entry(self, lifted: Any, event: int) -> tuple | None:
        if lifted is None:
            return None
        if isinstance(self.agg, ArgExtreme):  # ties go to the first arrival: (value, -seq) is largest for max
            value, seq, _ = lifted
            key = (value, -seq) if self.agg.largest else (value, seq)
            return (key, event, lifted)
        value = lifted[0] if isinstance(self.agg, ExtremeCount) else lifted
        return (value, event)

    def update(self, lifted: Any, event: int, sign: int) -> None:
        entry = self._entry(lifted, event)
        if entry is not None:
            self.values.add(entry) if sign > 0 else self.values.remove(entry)

    def partial(self) -> Any:
        if not self.values:
            return None
        agg, values = self.agg, self.values
        best = values[-1] if agg.largest else values[0]
        if isinstance(agg, ArgExtreme):
            return best[2]
        if isinstance(agg, Extreme):
            return best[0]
        v = best[0]  # ExtremeCount: how many entries hold the extreme value
        return (v, values.bisect_right((v, _INF)) - values.bisect_left((v,)))


class PlaneSweeping:
    name = "sweeping"

    def __init__(self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int = 1) -> None:
        if height != 1:
            raise ValueError("sweeping has no height; use technique 'se-ml-slicing' for height > 1")
        states = []
        for agg in aggregates:
            if isinstance(agg, (Count, Sum, Mean, StdDev)):
                states.append(_Counters(agg))
            elif isinstance(agg, (Extreme, ArgExtreme, ExtremeCount)):
                states.append(_Extremes(agg))
            else:
                raise ValueError(f"sweeping supports the built-in aggregates only, not {agg.name!r}")
        self.states = states
        self._updates = [state.update for state in states]
        self.starts = SortedList()  # (start, event id)
        self.ends = SortedList()  # (end, event id)
        self.windows = SortedList()  # (start, end) of the open windows
        self.events: dict[int, tuple] = {}  # event id -> (start, end, lifted)
        self.active: set[int] = set()
        self.swept = -_INF  # the sweep line: events starting before it are active
        self._next_id = 0

    def add_window(self, start: int, end: int) -> None:
        self.windows.add((start, end))

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None:
        event = self._next_id
        self._next_id += 1
        self.events[event] = (start, end, lifted)
        self.starts.add((start, event))
        self.ends.add((end, event))
        if start < self.swept:  # out of order: the sweep line is already past its start
            self._activate(event, +1)

    def _activate(self, event: int, sign: int) -> None:
        lifted = self.events[event][2]
        for update, value in zip(self._updates, lifted, strict=True):
            update(value, event, sign)
        self.active.add(event) if sign > 0 else self.active.discard(event)

    def query(self, start: int, end: int) -> list[Any]:
        for _, event in list(self.starts.irange((self.swept,), (end,), inclusive=(True, False))):
            if event not in self.active:
                self._activate(event, +1)
        self.swept = max(self.swept, end)
        self._retire(start)
        return [state.partial() for state in self.states]

    def _retire(self, before: int) -> None:
        """Events ended by ``before`` leave the active set and the indexes."""
        for end, event in list(self.ends.irange(maximum=(before, _INF))):
            if event in self.active:
                self._activate(event, -1)
            start, _, _ = self.events.pop(event)
            self.starts.remove((start, event))
            self.ends.remove((end, event))

    def evict(self, before: int) -> None:
        self._retire(before)
        while self.windows and self.windows[0][0] < before:
            self.windows.pop(0)

    @property
    def state_size(self) -> int:
        """Stored items: two index entries per event kept, two per open window."""
        return 2 * len(self.events) + 2 * len(self.windows)
