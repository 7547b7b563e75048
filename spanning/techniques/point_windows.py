"""Point-event windows: Pairs slices as partials, a FIFO SWAG per aggregate for the final aggregation.

A point event at c is ``[c, c + 1)``: it lies in exactly one Pairs slice, so a slice keeps one partial
per aggregate (no (φ, ϕ) pair). Windows are released in order, so the SWAG of each aggregate holds the
partials of the slices of the window being released: at each release it evicts the slices before the
window and inserts those up to its end (Shein et al., §2; Tangwongsan et al., §2: slices as the SWAG's values).

A slice enters the SWAGs when the first window holding it is released; from then on it is fixed. A
point that arrives later for such a slice is late for that window (its end was more than δ ago) but
still counts in the later open windows: it is kept aside per slice and combined at their release.

Which SWAG serves which aggregate follows from their capabilities: algorithms that need an inverse
(``soe``, SlickDeque's invertible form) take the invertible aggregates (count, mean); SlickDeque without
inverse takes selective ones (min, max, argmin, argmax); the others take any aggregate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spanning.aggregates import Aggregate
from spanning.kernels.windows import PairsSlicer, UnionSlicer, WindowSpec
from spanning.techniques.slice_ring import SliceRing


def build_swag(name: str, agg: Aggregate) -> Any:
    """The SWAG ``name`` over one aggregate's partials, or a clear error when the pair does not fit."""
    from spanning.swag import ALGORITHMS, Inverse

    if name not in ALGORITHMS:
        raise ValueError(f"unknown swag {name!r}: available are {', '.join(sorted(ALGORITHMS))}")
    cls = ALGORITHMS[name]
    needs, caps = cls.capabilities.inverse, agg.capabilities
    general = ", ".join(sorted(n for n, c in ALGORITHMS.items() if c.capabilities.inverse is Inverse.UNUSED))
    if needs is not Inverse.UNUSED and caps.invertible:  # soe; SlickDeque's invertible form (Shein et al., §3.2)
        return cls(agg.combine, agg.identity(), inverse=agg.inverse)
    if needs is Inverse.REQUIRED:
        raise ValueError(f"swag {name!r} needs invertible aggregates (count, mean), not {agg.name!r}: use {general}")
    if needs is Inverse.OR_SELECTIVE and not caps.selective:  # SlickDeque's selective form takes max-like ones
        raise ValueError(
            f"{name} needs an invertible or a selective aggregate (max-like), not {agg.name!r}: use {general}"
        )
    return cls(agg.combine, agg.identity())


class PointWindows(SliceRing):
    """The technique for point-event streams (``Engine(..., swag=NAME)``)."""

    name = "swag"

    def __init__(
        self,
        spec: WindowSpec,
        aggregates: Sequence[Aggregate],
        height: int = 1,
        swag: str = "two-stacks",
        slicer: UnionSlicer | None = None,
    ):
        if height != 1:
            raise ValueError("point-event windows have no height")
        self.aggregates = list(aggregates)
        self.swags = [build_swag(swag, agg) for agg in aggregates]
        self._slots = [(j, agg.combine) for j, agg in enumerate(self.aggregates)]
        self._slices: list[list[Any]] = []  # one partial per aggregate per slice
        self._init_ring(slicer or PairsSlicer(spec), self._slices)  # a UnionSlicer for a shared plan
        self._in_swag = (0, 0)  # slice numbers [lo, hi) held by the SWAGs
        self._horizon = 0  # the oldest slice an open window (of any spec) may still need
        self._late: dict[int, list] = {}  # slice number -> lifted points that came after it entered the SWAGs

    def _new_slice(self) -> tuple:
        return ([agg.identity() for agg in self.aggregates],)

    def _reset(self, first: int) -> None:
        super()._reset(first)
        self._in_swag = (first, first)
        self._horizon = first

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None:
        if end != start + 1:
            raise ValueError(f"point-event windows take point events [c, c + 1), got [{start}, {end})")
        s = self.slicer.slice_of(start)
        if s < self._in_swag[1]:  # the slice is already in the SWAGs: keep the point aside
            self._late.setdefault(s, []).append(lifted)
            return
        if s >= self._next:
            self._ensure(s)
        partials = self._slices[s - self._first]
        for j, combine in self._slots:
            partials[j] = combine(partials[j], lifted[j])

    def query(self, start: int, end: int) -> list[Any]:
        a, b = self.slicer.slice_of(start), self.slicer.slice_of(end - 1)
        lo, hi = self._in_swag
        if lo == hi:  # nothing held: start at the horizon (for one spec, the window's start)
            lo = hi = max(lo, self._horizon)
        while hi <= b:  # insert the slices up to the window's end (identity where none was created)
            i = hi - self._first
            partials = self._slices[i] if 0 <= i < len(self._slices) else None
            for j, swag in enumerate(self.swags):
                swag.insert(partials[j] if partials is not None else self.aggregates[j].identity())
            hi += 1
        self._in_swag = (lo, hi)
        if lo < a:  # the SWAGs also hold older slices another window spec still needs: a range query
            result = [swag.query(range_=b - a + 1) for swag in self.swags]
        else:
            result = [swag.query() for swag in self.swags]
        for s in range(a, b + 1):  # points that came after their slice entered the SWAGs
            for lifted in self._late.get(s, ()):
                for j, combine in self._slots:
                    result[j] = combine(result[j], lifted[j])
        return result

    def evict(self, before: int) -> None:
        if self._next is None:
            return
        keep_from = self.slicer.slice_of(before)
        self._horizon = keep_from
        lo, hi = self._in_swag
        while lo < min(keep_from, hi):  # no open window needs these slices: out of the SWAGs (FIFO)
            for swag in self.swags:
                swag.evict()
            lo += 1
        self._in_swag = (lo, max(lo, hi))
        for s in [s for s in self._late if s < keep_from]:
            del self._late[s]
        super().evict(before)

    @property
    def state_size(self) -> int:
        return self.live_slices * len(self.aggregates) + sum(s.len() for s in self.swags)
