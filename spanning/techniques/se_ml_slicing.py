"""SE-ML-Slicing: multi-level slices of height d (Suzanne et al., §4, §5.2.2, Algorithms 5-8, Definition 5).

Slice i has d levels; level k (1-based) covers the raw slices i-k+1 .. i (Eq. 1), each level with the
(φ, ϕ) pair of Definition 4 (``ended``, ``ongoing``) and one selective partial.

Insertion (Algorithm 7). An event overlapping raw slices lo .. hi is cut into pieces that it covers
completely, taken greedily from its end: level min(d, remaining) of slice hi, then of slice hi - d, ...
so it touches ⌈(hi - lo + 1) / d⌉ slice levels. The piece holding its end gets it in φ (it ends there,
P⌟), the others in ϕ (it goes beyond them, P→). The pieces of one event are disjoint (P3, P4).
Deviation from the pseudocode: Algorithm 7 counts slices from the newest slice, which assumes the event
is in order; here the scan starts at the slice holding the event's end and counts with slice arithmetic,
so out-of-order events (and ω mod β ≠ 0, two slices per step) are inserted the same way.

Release (Algorithm 8, derived from Definition 5 and P3/P4 rather than from its combine*). For a window
over raw slices a .. b, every overlapping event is counted exactly once:

* events ending in the window: their φ piece sits at a slice in a .. b, so φ of all levels of a .. b;
* events going beyond the window cover slice b, and exactly one of their pieces covers it: ϕ of all
  levels of slice b, and φ and ϕ of the levels of slices b+1 .. b+d-1 that reach back to b.

A selective aggregate combines every piece that meets the window (the same levels): pieces hold only
events that cover them whole, so no event outside the window gets in. The reads are d·n_ω + d(d-1)/2
levels, the §5.3.2 count (Table 4 prints d(ω/β + d - 1); the text's derivation gives this one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spanning.aggregates import Aggregate
from spanning.kernels.windows import PairsSlicer, UnionSlicer, WindowSpec
from spanning.techniques.slice_ring import SliceRing


class SEMLSlicing(SliceRing):
    """The SE-ML-Slicing technique with height ``d`` (d = 1 is SE-Slicing)."""

    name = "se-ml-slicing"
    batch_form = False  # runs per event (its levels have no batch form here)

    def __init__(
        self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int = 1, slicer: UnionSlicer | None = None
    ) -> None:
        self.height = height
        self._split_aggregates(aggregates)
        # per slice, per level (index k - 1): φ, ϕ and the selective partials
        self._ended: list[list[list[Any]]] = []
        self._ongoing: list[list[list[Any]]] = []
        self._selected: list[list[list[Any]]] = []
        # a UnionSlicer when several window specs share the slices
        self._init_ring(slicer or PairsSlicer(spec), self._ended, self._ongoing, self._selected)
        self.updates = 0  # operation counters: slice levels written at insert, read at release
        self.reads = 0

    # Algorithms 5-6 (create_slice, add_slices): a slice with d levels, created as time reaches it.
    def _new_slice(self) -> tuple:
        d = self.height
        return (
            [[a.identity() for a in self._cum_aggs] for _ in range(d)],
            [[a.identity() for a in self._cum_aggs] for _ in range(d)],
            [[a.identity() for a in self._sel_aggs] for _ in range(d)],
        )

    # Algorithm 7 (insert_event), from the slice holding the event's end.
    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None:
        slice_of, first = self.slicer.slice_of, self._first
        i = slice_of(end - 1) - first  # hi: list index of the slice holding the end
        if i >= len(self._ended):
            self._ensure(i + first)
        lo = slice_of(start) - first
        if lo < self._head:
            lo = self._head
        remaining, d = i - lo + 1, self.height
        parts = self._ended  # the first piece holds the event's end: φ; the earlier ones ϕ
        while remaining > 0:
            k = d if remaining >= d else remaining  # highest level that stays inside the event
            self.updates += 1
            if self._cum_slots:
                level = parts[i][k - 1]
                for j, src, combine in self._cum_slots:
                    level[j] = combine(level[j], lifted[src])
            if self._sel_slots:
                level = self._selected[i][k - 1]
                for j, src, combine in self._sel_slots:
                    level[j] = combine(level[j], lifted[src])
            parts = self._ongoing
            i -= k  # hop to the slice just before the piece (line 13)
            remaining -= k

    # Algorithm 8 (release_window), with the level set derived in the module docstring.
    def query(self, start: int, end: int) -> list[Any]:
        offset = -self._first
        a = max(self.slicer.slice_of(start) + offset, self._head)
        b = self.slicer.slice_of(end - 1) + offset
        created = len(self._ended)
        d = self.height
        # (slice, lowest level index, with ϕ?) of every level to read
        plan = [(i, 0, False) for i in range(a, min(b, created - 1) + 1)]
        if plan and b < created:
            plan[-1] = (b, 0, True)
        plan += [(b + j, j, True) for j in range(1, d) if b + j < created]
        cum_result = [a_.identity() for a_ in self._cum_aggs]
        sel_result = [a_.identity() for a_ in self._sel_aggs]
        for i, lowest, with_ongoing in plan:
            self.reads += d - lowest
            ended, ongoing, selected = self._ended[i], self._ongoing[i], self._selected[i]
            for level in range(lowest, d):
                for j, agg in enumerate(self._cum_aggs):
                    cum_result[j] = agg.combine(cum_result[j], ended[level][j])
                    if with_ongoing:
                        cum_result[j] = agg.combine(cum_result[j], ongoing[level][j])
                for j, agg in enumerate(self._sel_aggs):
                    sel_result[j] = agg.combine(sel_result[j], selected[level][j])
        result: list[Any] = [None] * len(self.aggregates)
        for j, i in enumerate(self.cumulative):
            result[i] = cum_result[j]
        for j, i in enumerate(self.selective):
            result[i] = sel_result[j]
        return result
