"""DABA, the De-Amortized Banker's Aggregator (Tangwongsan et al., §5): Two-Stacks with the flip spread out.

One deque of (val, agg) pairs cut by six pointers F ≤ L ≤ R ≤ A ≤ B ≤ E into five sublists: the front
l_F = [F, B) (its leftmost part [F, L) and l_A = [A, B) hold suffix aggregates up to B-1), the inner
l_L = [L, R) (suffixes up to R-1) and l_R = [R, A) (prefixes from R), and the back l_B = [B, E) (prefixes
from B). Instead of flipping when the front runs empty, DABA flips when |l_F| = |l_B| by relabelling
l_F, l_B as l_L, l_R (no ⊗), then every insert/evict runs one step of the reversal (fixup: singleton,
flip, shift or shrink), so the front is ready before it empties. Space: 2n partials.

Worst-case ⊗ counts (Theorem 5.2): query 1, insert 4, evict 3 (on average 2.5 and 1.5): no loop runs
over the window, so there is no flip spike. In Python every operation does constant work; the price
is the pointer bookkeeping (a handful of attribute loads and stores per call), and the deque is a pair
of lists with a moving head F, compacted by one C-level memmove when the dead prefix outgrows the
live part (amortised O(1) pointer copies, no ⊗).

>>> swag = DABA(lambda a, b: a + b, "")
>>> for x in "abcd": swag.insert(x)
>>> swag.evict(); swag.query()
'bcd'
>>> swag.insert("e"); swag.query(), len(swag)
('bcde', 4)
"""

from __future__ import annotations

from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities

_COMPACT_MIN = 64  # dead prefix length below which the lists are never compacted


class DABA:
    name = "daba"
    capabilities = SwagCapabilities()

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.vals: list = []  # the deque's val fields; E = len(self.vals)
        self.aggs: list = []  # the deque's agg fields
        # F, L, R, A, B as absolute list indices (entries before F are dead, set to None)
        self.f = self.l = self.r = self.a = self.b = 0

    def query(self) -> Any:
        f, b, aggs = self.f, self.b, self.aggs
        front = aggs[f] if f != b else self.identity  # Π_F
        back = aggs[-1] if b != len(aggs) else self.identity  # Π_B = *(E-1).agg
        return self.combine(front, back)

    def insert(self, x: Any) -> None:
        aggs = self.aggs
        back = aggs[-1] if self.b != len(aggs) else self.identity  # Π_B
        aggs.append(self.combine(back, x))
        self.vals.append(x)  # E ← E + 1
        self._fixup()

    def evict(self) -> None:
        f = self.f
        if f == len(self.vals):
            raise EmptyWindowError
        self.vals[f] = self.aggs[f] = None  # deque.popFront()
        self.f = f + 1  # F ← F + 1
        self._fixup()
        if self.f >= _COMPACT_MIN and 2 * self.f >= len(self.vals):
            self._compact()

    def _fixup(self) -> None:
        f, b = self.f, self.b
        e = len(self.vals)  # E
        if f == b:  # singleton: l_F was empty and l_B holds one value (or the window is now empty)
            self.l = self.r = self.a = self.b = e
            return
        left, r = self.l, self.r  # L, R
        if left == b:  # flip: l_F, l_B become l_L, l_R (L = R = A = B before it)
            left, b = f, e
            self.l, self.a, self.b = left, e, e
        a = self.a  # A
        if left == r:  # shift: L = R = A move right together
            self.l, self.r, self.a = left + 1, r + 1, a + 1
        else:  # shrink: l_L's first element joins the front, l_R's last joins l_A
            combine, aggs = self.combine, self.aggs
            agg_a = aggs[a] if a != b else self.identity  # Π_A
            aggs[left] = combine(combine(aggs[left], aggs[a - 1]), agg_a)  # Π_L ⊗ Π_R ⊗ Π_A (l_L, l_R non-empty)
            aggs[a - 1] = combine(self.vals[a - 1], agg_a)  # *(A-1).val ⊗ Π_A
            self.l, self.a = left + 1, a - 1

    def _compact(self) -> None:
        f = self.f
        del self.vals[:f], self.aggs[:f]
        self.f, self.l, self.r, self.a, self.b = 0, self.l - f, self.r - f, self.a - f, self.b - f

    def len(self) -> int:
        return len(self.vals) - self.f

    __len__ = len
