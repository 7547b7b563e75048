"""Plane Sweeping (Piatov & Helmer, SSTD'17), extended to streams as in Suzanne et al., §5.3.3 and Table 4.

Sorted endpoint indexes (sortedcontainers) hold every event's start and end and every window's bounds.
A sweep line moves with the releases: at the release of ``[L, U)`` the start index is read up to
``U`` (events starting before U join the active set) and the end index up to ``L`` (events ended by
L leave it, and leave the indexes: no open window needs them). The active set is then exactly the
events that overlap the window.

* Aggregates of the power-sums form (``Form.POWER_SUMS``: count, sum, mean, stddev): counters n, Σx and Σx²
  of the events started minus those ended, kept exactly (integers, and floats as fractions), so the
  subtraction loses nothing.
* Aggregates of the order form (``Form.ORDER``: min, max, argmin, argmax, mincount, maxcount): the active
  events in a sorted list by the aggregate's order key, whose first or last entry is the answer.

An event that arrives after the sweep line passed its start (out of order) joins the active set at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from sortedcontainers import SortedList

from spanning.aggregates import Aggregate, Form
from spanning.kernels.windows import WindowSpec

_INF = float("inf")


def _exact(value: Any) -> Any:
    return Fraction(value) if isinstance(value, float) else value


class _Counters:
    """Power-sums form: n, Σx and Σx² of the active events, added at start and subtracted at end."""

    def __init__(self, agg: Aggregate) -> None:
        self.agg = agg
        self.n = self.total = self.squares = 0
        self._terms = agg.power_terms  # (counted?, x) from the aggregate's lifted form

    def update(self, lifted: Any, event: int, sign: int) -> None:
        counted, x = self._terms(lifted)
        if counted:
            self.n += sign
            if x is not None:
                x = _exact(x)
                self.total += sign * x
                self.squares += sign * x * x

    def partial(self) -> Any:
        return self.agg.from_power_sums(self.n, self.total, self.squares)


class _Extremes:
    """Order form: the active events as (order key, event, lifted) in a sorted list."""

    def __init__(self, agg: Aggregate) -> None:
        self.agg = agg
        self.values = SortedList()
        self._key = agg.order_key

    def update(self, lifted: Any, event: int, sign: int) -> None:
        if lifted is None:  # no value
            return
        entry = (self._key(lifted), event, lifted)
        self.values.add(entry) if sign > 0 else self.values.remove(entry)

    def partial(self) -> Any:
        values = self.values
        if not values:
            return self.agg.identity()
        key, _, lifted = values[-1] if self.agg.largest else values[0]
        return self.agg.from_best(lifted, lambda: values.bisect_right((key, _INF)) - values.bisect_left((key,)))


class PlaneSweeping:
    name = "sweeping"

    def __init__(self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int = 1) -> None:
        if height != 1:
            raise ValueError("sweeping has no height; use technique 'se-ml-slicing' for height > 1")
        states = []
        for agg in aggregates:
            form = agg.capabilities.form
            if form is Form.POWER_SUMS:
                states.append(_Counters(agg))
            elif form is Form.ORDER:
                states.append(_Extremes(agg))
            else:
                raise ValueError(
                    f"sweeping supports the built-in aggregates only, not {agg.name!r} (plane sweeping needs values"
                    " that can leave a running form): use technique se-slicing, se-ml-slicing, tuple-buckets or"
                    " aggregate-buckets"
                )
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
