"""Slices kept in parallel Python lists indexed by slice number: the storage of the slice techniques.

Slice number ``s`` lives at list index ``s - _first``; slices are created lazily as time reaches them
(``_ensure``), so Pairs slices and slices shared by several window specs are handled alike. Eviction
moves a head index and compacts the lists once the dead prefix is large: append and evict are O(1)
amortised, a ring buffer without wrap-around. A technique lists its parallel lists and says what one
new slice holds (``_new_slice``); it keeps direct references to the lists for its hot paths.
"""

from __future__ import annotations

from typing import Any

_COMPACT_AT = 512  # drop evicted slices from the lists once this many accumulate


class SliceRing:
    """Base of SE-Slicing, SE-ML-Slicing and the point-event windows: slice creation and eviction."""

    def _init_ring(self, slicer: Any, *lists: list) -> None:
        self.slicer = slicer
        self._lists = lists  # the technique's parallel per-slice lists (cleared in place, never replaced)
        self._head = 0  # list index of the oldest live slice
        self._first = 0  # slice number at list index 0
        self._next: int | None = None  # next slice number to create

    def _split_aggregates(self, aggregates: Any) -> None:
        """Cumulative aggregates take the (φ, ϕ) pair, selective ones one partial (paper §3.2)."""
        self.aggregates = list(aggregates)
        self.cumulative = [i for i, a in enumerate(aggregates) if a.duplicate_sensitive]
        self.selective = [i for i, a in enumerate(aggregates) if not a.duplicate_sensitive]
        self._cum_aggs = [aggregates[i] for i in self.cumulative]
        self._sel_aggs = [aggregates[i] for i in self.selective]
        # (slot in the slice, index in the lifted event, combine) for the insert loops
        self._cum_slots = [(j, i, aggregates[i].combine) for j, i in enumerate(self.cumulative)]
        self._sel_slots = [(j, i, aggregates[i].combine) for j, i in enumerate(self.selective)]

    def _new_slice(self) -> tuple:
        """One new (identity) entry per list."""
        raise NotImplementedError

    # Algorithm 2 (add_slices): a window begins; its slices are created as time reaches them.
    def add_window(self, start: int, end: int) -> None:
        first_new = self.slicer.slice_of(start)
        if self._next is None:
            self._reset(first_new)
        self._ensure(first_new)

    def _ensure(self, upto: int) -> None:
        """Create the slices up to slice number ``upto``."""
        while self._next <= upto:
            for lst, item in zip(self._lists, self._new_slice(), strict=True):
                lst.append(item)
            self._next += 1

    def _reset(self, first: int) -> None:
        """Start empty at slice ``first`` (at the start, and when every slice held is evicted)."""
        for lst in self._lists:
            lst.clear()
        self._head, self._first, self._next = 0, first, first

    # Algorithm 4, line 4: delete the slices no open window needs.
    def evict(self, before: int) -> None:
        if self._next is None:
            return
        keep_from = self.slicer.slice_of(before)
        drop_to = keep_from - self._first  # list index of the slice holding `before`
        if drop_to >= len(self._lists[0]):
            self._reset(keep_from)
            return
        self._head = max(self._head, drop_to)
        if self._head >= _COMPACT_AT and self._head * 2 >= len(self._lists[0]):
            for lst in self._lists:
                del lst[: self._head]
            self._first += self._head
            self._head = 0

    @property
    def live_slices(self) -> int:
        """Number of slices held (for memory tests)."""
        return len(self._lists[0]) - self._head
