"""DABA Lite (Tangwongsan et al., §6): DABA keeping one partial per element plus aggRA and aggB, n + 2 in all.

The same six pointers F ≤ L ≤ R ≤ A ≤ B ≤ E and the same fixup cases as DABA (§5), but only the
left-aggregated sublists (the front part [F, L), l_L = [L, R), l_A = [A, B)) hold suffix aggregates;
the right-aggregated ones (l_R = [R, A), l_B = [B, E)) hold raw values, summarised by aggRA
(Π over [R, B), valid while L ≠ R) and aggB (Π over [B, E)). Since l_R and l_A together keep the
same span during a shrink, aggRA needs no update, which saves DABA's Π_R ⊗ step.

Worst-case ⊗ counts (Theorem 6.2): query 1, insert 3, evict 2 (on average 2 and 1): no loop runs
over the window, so there is no flip spike. In Python every operation does constant work; the price
is the pointer bookkeeping, and the deque is a list with a moving head F, compacted by one C-level
memmove when the dead prefix outgrows the live part (amortised O(1) pointer copies, no ⊗).

>>> swag = DABALite(lambda a, b: a + b, "")
>>> for x in "abcd": swag.insert(x)
>>> swag.evict(); swag.query()
'bcd'
>>> swag.insert("e"); swag.query(), len(swag)
('bcde', 4)
"""

from __future__ import annotations

from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities

_COMPACT_MIN = 64  # dead prefix length below which the list is never compacted


class DABALite:
    name = "daba-lite"
    capabilities = SwagCapabilities()

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.items: list = []  # the deque; E = len(self.items)
        # F, L, R, A, B as absolute list indices (entries before F are dead, set to None)
        self.f = self.l = self.r = self.a = self.b = 0
        self.agg_ra = identity  # aggRA
        self.agg_b = identity  # aggB

    def query(self) -> Any:
        front = self.items[self.f] if self.f != self.b else self.identity  # Π_F
        return self.combine(front, self.agg_b)

    def insert(self, x: Any) -> None:
        self.items.append(x)  # E ← E + 1
        self.agg_b = self.combine(self.agg_b, x)
        self._fixup()

    def evict(self) -> None:
        f = self.f
        if f == len(self.items):
            raise EmptyWindowError
        self.items[f] = None  # deque.popFront()
        self.f = f + 1  # F ← F + 1
        self._fixup()
        if self.f >= _COMPACT_MIN and 2 * self.f >= len(self.items):
            self._compact()

    def _fixup(self) -> None:
        f, b = self.f, self.b
        e = len(self.items)  # E
        if f == b:  # singleton: l_F was empty and l_B holds one value (or the window is now empty)
            self.l = self.r = self.a = self.b = e
            self.agg_ra = self.agg_b = self.identity
            return
        left, r = self.l, self.r  # L, R
        if left == b:  # flip: l_F, l_B become l_L, l_R (L = R = A = B before it)
            left, b = f, e
            self.l, self.a, self.b = left, e, e
            self.agg_ra, self.agg_b = self.agg_b, self.identity
        a = self.a  # A
        if left == r:  # shift: L = R = A move right together (aggRA is not read again until the next flip)
            self.l, self.r, self.a = left + 1, r + 1, a + 1
        else:  # shrink: l_L's first element joins the front, l_R's last joins l_A
            combine, items = self.combine, self.items
            items[left] = combine(items[left], self.agg_ra)  # Π_L ⊗ aggRA (l_L non-empty)
            items[a - 1] = combine(items[a - 1], items[a] if a != b else self.identity)  # *(A-1) ⊗ Π_A
            self.l, self.a = left + 1, a - 1

    def _compact(self) -> None:
        f = self.f
        del self.items[:f]
        self.f, self.l, self.r, self.a, self.b = 0, self.l - f, self.r - f, self.a - f, self.b - f

    def len(self) -> int:
        return len(self.items) - self.f

    __len__ = len
