"""The window manager: clock, TTP-delayed release, eviction and lateness (Suzanne et al., Algorithm 1).

It drives any technique through ``spanning.techniques.protocol.Technique`` and knows nothing of how partials
are stored. Semantics are those of docs/SEMANTICS.md:

* the clock τ is the largest event end seen so far (an event arrives at its end, Suzanne et al., §2.2);
* window w is released once τ > u(w) + δ, *before* the event that moved the clock is inserted;
* an event overlapping released windows still counts in the open ones, and reports how many it
  missed (windows before the series start count as missed: they are never computed);
* the series starts with the first window ending after the start of the first event, or after an
  explicit ``series_start``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from spanning.aggregates import Aggregate
from spanning.kernels.windows import WindowSpec
from spanning.techniques.protocol import Technique


class Window(NamedTuple):
    """A released window: bounds and one value per aggregate, in the order they were given."""

    start: int
    end: int
    values: dict[str, Any]


class WindowManager:
    """Algorithm 1 around a technique, for one stream (one key)."""

    def __init__(
        self,
        spec: WindowSpec,
        technique: Technique,
        aggregates: Sequence[Aggregate],
        names: Sequence[str],
        series_start: int | None = None,
    ) -> None:
        self.spec = spec
        self.technique = technique
        self.aggregates = list(aggregates)
        self.names = list(names)
        self.clock: int | None = None  # τ
        self.next_release: int | None = None  # oldest open window
        self.next_create: int | None = None  # first window not yet begun
        self._release_at: int | None = None  # u(w) + δ of the oldest open window
        self._quiet_until = -(2**63)  # clocks up to this begin and release nothing (a cached bound)
        if series_start is not None:
            self._begin_series(series_start)

    def _begin_series(self, t: int) -> None:
        self.next_release = self.next_create = self.spec.first_window_ending_after(t)
        self._release_at = self.spec.window(self.next_release)[1] + self.spec.ttp

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> tuple[list[Window], int]:
        """Insert the event ``[start, end)``; return the windows it released and how many it missed."""
        if self.next_release is None:
            self._begin_series(start)
        clock = self.clock
        if clock is None or end > clock:
            if end <= self._quiet_until:  # no window begins or is released: only the clock moves
                self.clock = end
                released = []
            else:
                released = self.advance(end)
        else:
            released = []
        spec = self.spec
        o, s = spec.offset, spec.slide
        first = (start - o - spec.range) // s + 1  # spec.first_window_ending_after(start), inlined
        last = (end - o - 1) // s  # spec.last_window_starting_before(end)
        oldest_open = self.next_release
        missed = min(last + 1, oldest_open) - first
        if last >= oldest_open:
            horizon = oldest_open * s + o  # start of the oldest open window
            self.technique.insert(start if start > horizon else horizon, end, lifted)
        return released, (missed if missed > 0 else 0)

    def advance(self, t: int) -> list[Window]:
        """Move the clock to ``t`` (if later): begin and release windows accordingly."""
        if self.next_release is None:
            raise ValueError("advance() before any event: give the engine a series start")
        if self.clock is not None and t <= self.clock:
            return []
        self.clock = t
        spec, technique = self.spec, self.technique
        while self.next_create * spec.slide + spec.offset < t:  # Algorithm 1, lines 5-6
            technique.add_window(*spec.window(self.next_create))
            self.next_create += 1
        released = []
        while self._release_at < t:  # lines 7-8: τ > u(w) + δ
            released.append(self._release())
        self._quiet_until = min(self.next_create * spec.slide + spec.offset, self._release_at)
        return released

    def flush(self) -> list[Window]:
        """Release every open window that starts before the clock."""
        if self.clock is None:
            return []
        released = []
        while self.next_release < self.next_create:
            released.append(self._release())
        return released

    def _release(self) -> Window:
        spec = self.spec
        start, end = spec.window(self.next_release)
        partials = self.technique.query(start, end)
        values = {name: agg.lower(p) for name, agg, p in zip(self.names, self.aggregates, partials, strict=True)}
        self.next_release += 1
        self._release_at = end + spec.slide + spec.ttp
        self.technique.evict(start + spec.slide)  # the next window's start: older time is not needed
        return Window(start, end, values)
