"""SE-Slicing: single-level slices for spanning events (Suzanne et al., §3.2, §5.2.1, Algorithms 2-4, Table 2).

Each Pairs slice keeps, per aggregate:

* duplicate-sensitive ("cumulative") aggregates: the pair (φ, ϕ) of Definition 4. Here φ is
  ``ended`` (events that end in the slice, P⌟) and ϕ is ``ongoing`` (events that overlap the slice and
  go beyond it, P→). ``lift*`` puts an event into ``ended`` of the slice holding its end and into
  ``ongoing`` of every earlier slice it overlaps.
* duplicate-insensitive ("selective") aggregates: one partial, combined into every slice the event
  overlaps (§3.2.1).

At release (``combine*``, Table 2) a window is Σ ``ended`` over its slices plus ``ongoing`` of its last
slice: an event that overlaps the window either ends in one of its slices or goes beyond the last one.

Slices live in parallel Python lists (``spanning.techniques.slice_ring``): O(1) amortised append and evict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spanning.aggregates import Aggregate
from spanning.kernels.windows import PairsSlicer, UnionSlicer, WindowSpec
from spanning.techniques.slice_ring import SliceRing


class SESlicing(SliceRing):
    """The SE-Slicing technique (height 1)."""

    name = "se-slicing"
    batch_form = True  # for a fixed set of events it has a vectorised form (§3.2.2): spanning.engines.chunks

    def __init__(
        self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int = 1, slicer: UnionSlicer | None = None
    ) -> None:
        if height != 1:
            raise ValueError("se-slicing has height 1; use technique 'se-ml-slicing' for height > 1")
        self._split_aggregates(aggregates)
        self._ended: list[list[Any]] = []  # φ per slice
        self._ongoing: list[list[Any]] = []  # ϕ per slice
        self._selected: list[list[Any]] = []  # the single partial of selective aggregates
        # a UnionSlicer when several window specs share the slices
        self._init_ring(slicer or PairsSlicer(spec), self._ended, self._ongoing, self._selected)
        self.updates = 0  # operation counters: slices written at insert, read at release
        self.reads = 0

    def _new_slice(self) -> tuple:
        return (
            [a.identity() for a in self._cum_aggs],
            [a.identity() for a in self._cum_aggs],
            [a.identity() for a in self._sel_aggs],
        )

    # Algorithm 3 (insert_event), started at the slice holding the event's end rather than at the
    # newest slice, so out-of-order events cost the same as in-order ones. The paper's backward scan
    # "while P∩(e, Γ[i])" is replaced by slice arithmetic: the overlapped slices are exactly
    # slice_of(start) .. slice_of(end - 1).
    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None:
        slice_of, first = self.slicer.slice_of, self._first
        last = slice_of(end - 1) - first  # list index of the slice holding the event's end
        if last >= len(self._ended):
            self._ensure(last + first)
        lo = slice_of(start) - first
        if lo < self._head:
            lo = self._head
        self.updates += last - lo + 1
        if self._cum_slots:
            ended = self._ended[last]  # lift* gives (φ = lift(e), ϕ = 0) where e ends
            for j, i, combine in self._cum_slots:
                ended[j] = combine(ended[j], lifted[i])
            if lo < last:
                for ongoing in self._ongoing[lo:last]:  # and (φ = 0, ϕ = lift(e)) where it goes beyond
                    for j, i, combine in self._cum_slots:
                        ongoing[j] = combine(ongoing[j], lifted[i])
        if self._sel_slots:
            if lo == last:  # the common case: the event lies in one slice
                selected = self._selected[last]
                for j, i, combine in self._sel_slots:
                    selected[j] = combine(selected[j], lifted[i])
                return
            for selected in self._selected[lo : last + 1]:
                for j, i, combine in self._sel_slots:
                    selected[j] = combine(selected[j], lifted[i])

    # Algorithm 4 (release_window), lines 1-3: combine* over the window's n_ω slices.
    def query(self, start: int, end: int) -> list[Any]:
        offset = -self._first  # list index = slice number - number of the slice at index 0
        first = max(self.slicer.slice_of(start) + offset, self._head)
        last_slice = self.slicer.slice_of(end - 1) + offset
        last = min(last_slice, len(self._ended) - 1)  # slices not created yet (flush) are empty
        self.reads += max(last - first + 1, 0)
        result: list[Any] = [None] * len(self.aggregates)
        for j, agg in enumerate(self._cum_aggs):
            ended = agg.identity()
            for s in range(first, last + 1):
                ended = agg.combine(ended, self._ended[s][j])
            if last == last_slice:  # ϕ of the most recent slice only (Table 2 combine*)
                ended = agg.combine(ended, self._ongoing[last][j])
            result[self.cumulative[j]] = ended
        for j, agg in enumerate(self._sel_aggs):
            selected = agg.identity()
            for s in range(first, last + 1):
                selected = agg.combine(selected, self._selected[s][j])
            result[self.selective[j]] = selected
        return result

    @property
    def state_size(self) -> int:
        """Stored items: (φ, ϕ) per cumulative and one per selective aggregate, per live slice."""
        return self.live_slices * (2 * len(self.cumulative) + len(self.selective))
