"""Several window specs over one stream in one pass, sharing one slice sequence (issue 7).

``MultiEngine`` is ``Engine`` for a list of ``WindowSpec``: Algorithm 1's window manager run for each
spec over one clock and one technique whose slices are cut at every window edge of every spec
(``UnionSlicer``). An event is inserted once; each spec releases its windows at u(w) + δ and reports
the windows it missed, as a single-spec ``Engine`` would. Releases across specs go in order of window
end, so the point-event plan can feed one FIFO SWAG and answer shorter windows with range queries
(Shein et al., §2.3: naive, FlatFAT, FlatFIT and SlickDeque answer several ranges).

>>> from spanning import WindowSpec
>>> eng = MultiEngine([WindowSpec(15, 5, ttp=20), WindowSpec(10, 10, ttp=20)], {"n": "count"})
>>> eng.insert(16, 34)
[]
>>> [(i, w.start, w.end, w.values["n"]) for i, w in eng.flush()][:3]
[(0, 5, 20, 1), (1, 10, 20, 1), (0, 10, 25, 1)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spanning.aggregates import Aggregate
from spanning.engines.engine import LateEvent, LiftingEngine, build_aggregates
from spanning.engines.manager import Window
from spanning.kernels.windows import UnionSlicer, WindowSpec, as_chronon
from spanning.techniques.point_windows import PointWindows
from spanning.techniques.registry import DEFAULT_TECHNIQUE
from spanning.techniques.se_ml_slicing import SEMLSlicing
from spanning.techniques.se_slicing import SESlicing

SHARED_TECHNIQUES = {"se-slicing": SESlicing, "se-ml-slicing": SEMLSlicing}


class MultiWindowManager:
    """Algorithm 1 for several window specs over one clock and one shared technique."""

    def __init__(self, specs: Sequence[WindowSpec], technique: Any, aggregates: Sequence[Aggregate],
                 names: Sequence[str], series_start: int | None = None) -> None:  # fmt: skip
        self.specs, self.technique = list(specs), technique
        self.aggregates, self.names = list(aggregates), list(names)
        self.clock: int | None = None
        self.next_release: list[int] = []  # per spec: oldest open window
        self.next_create: list[int] = []  # per spec: first window not yet begun
        if series_start is not None:
            self._begin_series(series_start)

    def _begin_series(self, t: int) -> None:
        self.next_release = [spec.first_window_ending_after(t) for spec in self.specs]
        self.next_create = list(self.next_release)

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> tuple[list, list[int]]:
        """Insert ``[start, end)``; return the released (spec index, window) pairs and the missed counts per spec."""
        if not self.next_release:
            self._begin_series(start)
        released = self.advance(end) if self.clock is None or end > self.clock else []
        missed, open_somewhere, horizon = [], False, None
        for spec, oldest_open in zip(self.specs, self.next_release, strict=True):
            first, last = spec.first_window_ending_after(start), spec.last_window_starting_before(end)
            missed.append(max(min(last + 1, oldest_open) - first, 0))
            open_somewhere |= last >= oldest_open
            edge = spec.window(oldest_open)[0]
            horizon = edge if horizon is None else min(horizon, edge)
        if open_somewhere:  # once, into the shared slices, from the oldest start any spec still needs
            self.technique.insert(max(start, horizon), end, lifted)
        return released, missed

    def advance(self, t: int) -> list[tuple[int, Window]]:
        if not self.next_release:
            raise ValueError("advance() before any event: give the engine a series start")
        if self.clock is not None and t <= self.clock:
            return []
        self.clock = t
        begins = []  # Algorithm 1, lines 5-6, for every spec: windows beginning before t
        for i, spec in enumerate(self.specs):
            while spec.window(self.next_create[i])[0] < t:
                begins.append(spec.window(self.next_create[i]))
                self.next_create[i] += 1
        for bounds in sorted(begins):  # in time order: the shared slices start at the earliest window
            self.technique.add_window(*bounds)
        due = []
        for i, spec in enumerate(self.specs):  # lines 7-8: τ > u(w) + δ
            k = self.next_release[i]
            while spec.window(k)[1] + spec.ttp < t:
                due.append((spec.window(k)[1], i, k))
                k += 1
        return self._release(due)

    def flush(self) -> list[tuple[int, Window]]:
        """Release every open window, of every spec, that starts before the clock."""
        if self.clock is None:
            return []
        due = [(spec.window(k)[1], i, k) for i, spec in enumerate(self.specs)
               for k in range(self.next_release[i], self.next_create[i])]  # fmt: skip
        return self._release(due)

    def _release(self, due: list) -> list[tuple[int, Window]]:
        out = []
        for end, i, k in sorted(due):  # in order of window end: FIFO for the point-event SWAGs
            start = self.specs[i].window(k)[0]
            partials = self.technique.query(start, end)
            values = {n: a.lower(p) for n, a, p in zip(self.names, self.aggregates, partials, strict=True)}
            out.append((i, Window(start, end, values)))
            self.next_release[i] = k + 1
            self.technique.evict(min(s.window(r)[0] for s, r in zip(self.specs, self.next_release, strict=True)))
        return out


class MultiEngine(LiftingEngine):
    """Sliding-window aggregates for several ``WindowSpec`` at once over one stream (shared slices).

    ``insert`` and ``flush`` return ``(spec index, Window)`` pairs; ``late`` holds
    ``(spec index, LateEvent)``. ``technique`` is se-slicing or se-ml-slicing (spanning events);
    ``swag=NAME`` runs point events through one SWAG per aggregate, answering each window with a range
    query when several specs share it (naive/``recalc``, ``flatfat``, ``flatfit``, ``slickdeque``).
    """

    def __init__(
        self,
        specs: Sequence[WindowSpec],
        aggregates: Mapping[str, str | Aggregate] | None = None,
        technique: str = DEFAULT_TECHNIQUE,
        height: int = 1,
        start: int | None = None,
        swag: str | None = None,
    ) -> None:
        specs = list(specs)
        if not specs or not all(isinstance(s, WindowSpec) for s in specs):
            raise ValueError("specs must be a non-empty list of WindowSpec")
        self.specs = specs
        self.names, self.aggregates = build_aggregates(aggregates)
        slicer = UnionSlicer(specs)
        if swag is not None:
            from spanning.swag import MULTI_RANGE

            if len(specs) > 1 and swag not in MULTI_RANGE:
                raise ValueError(f"swag {swag!r} answers one range; a shared plan needs one of {sorted(MULTI_RANGE)}")
            if len({s.ttp for s in specs}) > 1:
                raise ValueError(
                    "a shared point-event plan releases windows in end order: give every spec the same ttp"
                )
            self.technique = PointWindows(specs[0], self.aggregates, height, swag=swag, slicer=slicer)
        elif technique in SHARED_TECHNIQUES:
            self.technique = SHARED_TECHNIQUES[technique](specs[0], self.aggregates, height, slicer=slicer)
        else:
            raise ValueError(f"sharing slices needs se-slicing or se-ml-slicing, not {technique!r}")
        series = None if start is None else as_chronon(start, "series start")
        self._manager = MultiWindowManager(specs, self.technique, self.aggregates, self.names, series)
        self._lifts = [agg.lift for agg in self.aggregates]
        self._seq = 0
        self.late: list[tuple[int, LateEvent]] = []

    def _take(self, start: int, end: int, row: Any, lifted: list, seq: int) -> list[tuple[int, Window]]:
        released, missed = self._manager.insert(start, end, lifted)
        self.late += [(i, LateEvent(start, end, row, m, seq)) for i, m in enumerate(missed) if m]
        return released

    def advance(self, t: int) -> list:
        return self._manager.advance(as_chronon(t, "clock"))

    def flush(self) -> list:
        return self._manager.flush()
