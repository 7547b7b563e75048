"""``Engine``: the per-event entry point (one stream, one event at a time).

>>> from spanning import Engine, WindowSpec
>>> eng = Engine(WindowSpec(range=15, slide=5, ttp=20), {"n": "count", "longest": "max:duration"})
>>> eng.insert(16, 34, {"duration": 18})
[]
>>> for w in eng.flush():
...     print(w.start, w.end, w.values)
5 20 {'n': 1, 'longest': 18}
10 25 {'n': 1, 'longest': 18}
15 30 {'n': 1, 'longest': 18}
20 35 {'n': 1, 'longest': 18}
25 40 {'n': 1, 'longest': 18}
30 45 {'n': 1, 'longest': 18}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from spanning.aggregates import Aggregate, parse_aggregate
from spanning.engines.manager import Window, WindowManager
from spanning.kernels.windows import WindowSpec, as_chronon
from spanning.planning.height import resolve_height
from spanning.techniques.point_windows import PointWindows
from spanning.techniques.registry import DEFAULT_TECHNIQUE, make_technique

__all__ = ["Engine", "LateEvent", "LiftingEngine", "Window", "build_aggregates"]


class LateEvent(NamedTuple):
    """An event that overlapped windows already released (it still counted in the open ones)."""

    start: int
    end: int
    row: Any
    windows_missed: int
    seq: int


def build_aggregates(aggregates: Mapping[str, str | Aggregate] | None) -> tuple[list[str], list[Aggregate]]:
    """Names and aggregate objects from the ``{"name": "kind:column"}`` form (default: a count)."""
    if aggregates is None:
        aggregates = {"count": "count"}
    if not isinstance(aggregates, Mapping) or not aggregates:
        raise ValueError("aggregates must be a non-empty dict like {'n': 'count', 'bytes': 'sum:bytes'}")
    names = [str(name) for name in aggregates]
    return names, [parse_aggregate(spec) for spec in aggregates.values()]


def per_event_refusal(aggregates: Sequence[Aggregate]) -> str | None:
    """Why the per-event engine cannot compute ``aggregates``, or None: an aggregate of the time inside each
    window (``capabilities.per_window``) has no per-event partial."""
    per_window = [a.name for a in aggregates if a.capabilities.per_window]
    if not per_window:
        return None
    return (f"{per_window[0]} needs each window's bounds, which only the batch path has: use the technique"
            " se-slicing (the default), without a SWAG")  # fmt: skip


def event_bounds(start: Any, end: Any) -> tuple[int, int]:
    """An event's ``[start, end)`` as int chronons; ``start == end`` is the point ``[start, start + 1)``."""
    start, end = as_chronon(start, "event start"), as_chronon(end, "event end")
    if end < start:
        raise ValueError(f"event end {end} is before its start {start}")
    return start, max(end, start + 1)


def row_error(aggregates: Sequence[Aggregate], row: Any) -> str:
    """What is wrong with a row the aggregates cannot lift (a user mistake, not a bug)."""
    needed = sorted({c for agg in aggregates for c in agg.columns})
    if not isinstance(row, Mapping):
        return f"row must be a mapping with the columns {needed}, got {row!r}"
    missing = [c for c in needed if c not in row]
    return f"row has no column {missing[0]!r}" if missing else f"row values cannot be aggregated: {row!r}"


class LiftingEngine:
    """What ``Engine`` and ``MultiEngine`` share: an event's bounds and arrival number, and its row lifted
    once per aggregate (Suzanne et al., §2.3: lift, combine, lower), before the window manager takes it."""

    aggregates: list[Aggregate]
    _lifts: list
    _seq: int

    def insert(self, start: int, end: int, row: Mapping[str, Any] | None = None, seq: int | None = None) -> list:
        """Insert one event; return the windows released by its arrival.

        ``seq`` is the event's arrival number (ties in argmin/argmax go to the lowest, and it is their
        result when no result column is named); it defaults to the number of events inserted before.
        """
        if seq is None:
            seq = self._seq
        self._seq += 1
        if type(start) is not int or type(end) is not int or end <= start:  # the common case skips the call
            start, end = event_bounds(start, end)
        try:
            lifted = [lift(row, seq) for lift in self._lifts]
        except (KeyError, TypeError) as err:
            raise ValueError(row_error(self.aggregates, row)) from err
        return self._take(start, end, row, lifted, seq)

    def _take(self, start: int, end: int, row: Any, lifted: list, seq: int) -> list:
        raise NotImplementedError


class Engine(LiftingEngine):
    """Sliding-window aggregates over one spanning-event stream, released as the clock passes u(w) + δ.

    ``insert(start, end, row)`` takes an event ``[start, end)`` (``start == end`` is the point event
    ``[start, start + 1)``) with its columns in ``row`` and returns the windows it released.
    Late events are kept in ``engine.late``. ``technique="se-ml-slicing"`` takes a ``height`` d, or
    ``"auto"`` with ``sample_events=(starts, ends)`` to pick d by the cost model (``spanning.planning.height``).
    ``swag="daba-lite"`` (any name of ``spanning.swag.ALGORITHMS``) aggregates point events through
    Pairs slices and that FIFO SWAG (``spanning.techniques.point_windows``).
    """

    def __init__(
        self,
        spec: WindowSpec,
        aggregates: Mapping[str, str | Aggregate] | None = None,
        technique: str = DEFAULT_TECHNIQUE,
        height: int | str = 1,
        start: int | None = None,
        sample_events: tuple | None = None,
        swag: str | None = None,
    ) -> None:
        if not isinstance(spec, WindowSpec):
            raise ValueError(f"spec must be a WindowSpec, got {spec!r}")
        self.spec = spec
        self.names, self.aggregates = build_aggregates(aggregates)
        refusal = per_event_refusal(self.aggregates)
        if refusal:
            raise ValueError(f"the per-event Engine cannot compute {refusal}")
        self.height = resolve_height(height, technique, spec, sample_events)  # "auto": Table 4 on the sample
        if swag is not None:  # point events: Pairs slices, and a FIFO SWAG for the final aggregation
            if technique != DEFAULT_TECHNIQUE:
                raise ValueError("swag= is the technique for point events: leave technique at its default")
            self.technique = PointWindows(spec, self.aggregates, self.height, swag=swag)
        else:
            self.technique = make_technique(technique, spec, self.aggregates, self.height)
        series_start = None if start is None else as_chronon(start, "series start")
        self._manager = WindowManager(spec, self.technique, self.aggregates, self.names, series_start)
        self._lifts = [agg.lift for agg in self.aggregates]
        self._seq = 0
        self.late: list[LateEvent] = []

    @property
    def clock(self) -> int | None:
        return self._manager.clock

    def _take(self, start: int, end: int, row: Any, lifted: list, seq: int) -> list[Window]:
        released, missed = self._manager.insert(start, end, lifted)
        if missed:
            self.late.append(LateEvent(start, end, row, missed, seq))
        return released

    def advance(self, t: int) -> list[Window]:
        """Move the clock to ``t`` without an event (a watermark)."""
        return self._manager.advance(as_chronon(t, "clock"))

    def flush(self) -> list[Window]:
        """Release every open window that starts before the clock (end of stream)."""
        return self._manager.flush()
