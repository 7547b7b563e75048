"""FlatFAT, the flat fixed-sized aggregator (Shein et al., §2.2; Shein and Chrysanthis, §2.2; Tangwongsan et al., §8.1).

A complete binary tree stored pointer-less in one list: ``tree[1]`` is the root, node i has children
2i and 2i+1, and the ``cap`` leaves ``tree[cap:2*cap]`` form a circular buffer of the window's values
(insert writes the leaf after the newest, evict resets the oldest leaf to the identity). Each internal
node holds the aggregate of its two children, refreshed bottom-up along the written leaf's path.

The window is dynamic, so ``cap`` (a power of two) doubles when an insert finds the buffer full and
halves when an evict leaves it a quarter full; a resize copies the values to leaves 0..n-1 and rebuilds
only the internal nodes above them (about n ⊗).

Costs (⊗ calls; each is one call of the user's function in Python):

* insert and evict: log2(cap) ⊗ (the leaf-to-root path), plus the amortised O(1) of the resizes; a
  resize is the O(n) worst case;
* ``query()``: 0 ⊗ while the window does not wrap around the buffer (the dead leaves hold the identity,
  so the root is the answer); when it wraps, the root would put the newest values first, so the answer is
  the aggregate of the suffix [head, cap) followed by that of the prefix [0, tail), each the minimal set
  of nodes covering it (≤ 2 log2(cap) ⊗ in all). Order is kept, so ⊗ need not be commutative;
* ``query(range_=r)`` (the r newest values, for shared plans): the minimal node cover of that leaf range,
  again split in two where it wraps (O(log cap) ⊗).

Space: 2·cap partials, cap < 4n after a shrink check (2n when n is a power of two, Shein et al., §4.2).

>>> swag = FlatFAT(lambda a, b: a + b, "")
>>> for x in "abcde": swag.insert(x)
>>> swag.evict(); swag.evict(); swag.insert("f"); swag.insert("g")
>>> swag.query(), swag.query(range_=3), len(swag)
('cdefg', 'efg', 5)
"""

from __future__ import annotations

from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities

_NOTHING = object()  # "no node folded yet" (avoids spending ⊗ on the identity)


class FlatFAT:
    name = "flatfat"
    capabilities = SwagCapabilities(range_queries=True)

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.cap = 1  # number of leaves, a power of two
        self.tree: list = [identity, identity]  # tree[1] is the root, leaves are tree[cap : 2 * cap]
        self.head = 0  # leaf slot of the oldest value (the front of the circular buffer)
        self.n = 0  # number of values in the window

    def len(self) -> int:
        return self.n

    __len__ = len

    def insert(self, x: Any) -> None:
        if self.n == self.cap:
            self._resize(2 * self.cap)
        cap, tree, combine = self.cap, self.tree, self.combine
        i = cap + ((self.head + self.n) & (cap - 1))
        tree[i] = x
        self.n += 1
        i >>= 1
        while i:  # update: walk bottom-up to the root
            tree[i] = combine(tree[2 * i], tree[2 * i + 1])
            i >>= 1

    def evict(self) -> None:
        n = self.n
        if n == 0:
            raise EmptyWindowError
        cap = self.cap
        i = cap + self.head
        self.n = n - 1
        self.head = (self.head + 1) & (cap - 1) if n > 1 else 0
        if cap > 1 and 4 * (n - 1) <= cap:
            self._resize(cap // 2)  # rebuilds from the live leaves only: no need to clear leaf i first
            return
        tree, combine = self.tree, self.combine
        tree[i] = self.identity
        i >>= 1
        while i:
            tree[i] = combine(tree[2 * i], tree[2 * i + 1])
            i >>= 1

    def query(self, range_: int | None = None) -> Any:
        """The aggregate of the ``range_`` newest values (all of them when None or longer than the window)."""
        n, cap = self.n, self.cap
        if range_ is not None and range_ < 1:
            raise ValueError(f"a query range counts values and must be at least 1, not {range_!r}")
        if range_ is None or range_ >= n:
            if n == 0:
                return self.identity
            start, count = self.head, n
            if start + count <= cap:
                return self.tree[1]  # root: the dead leaves hold the identity
        else:
            start, count = (self.head + n - range_) & (cap - 1), range_
        stop = start + count
        if stop <= cap:
            return self._fold(start, stop)
        return self.combine(self._fold(start, cap), self._fold(0, stop - cap))  # wrapped: suffix, then prefix

    def _fold(self, lo: int, hi: int) -> Any:
        """Aggregate of leaf slots lo..hi-1 (lo < hi) from the minimal set of covering nodes, in order."""
        tree, combine = self.tree, self.combine
        lo += self.cap
        hi += self.cap
        left = right = _NOTHING
        while lo < hi:
            if lo & 1:
                left = tree[lo] if left is _NOTHING else combine(left, tree[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                right = tree[hi] if right is _NOTHING else combine(tree[hi], right)
            lo >>= 1
            hi >>= 1
        if right is _NOTHING:
            return left
        if left is _NOTHING:
            return right
        return combine(left, right)

    def _resize(self, cap: int) -> None:
        """Move the window to a tree with ``cap`` leaves, values at slots 0..n-1 (array doubling/halving)."""
        old, old_cap, head, n = self.tree, self.cap, self.head, self.n
        first = old_cap + head
        if head + n <= old_cap:
            values = old[first : first + n]
        else:
            values = old[first : 2 * old_cap] + old[old_cap : old_cap + head + n - old_cap]
        tree = [self.identity] * (2 * cap)
        tree[cap : cap + n] = values
        combine = self.combine
        lo, hi = cap, cap + n  # the nodes of this level above live leaves: [lo, hi)
        while lo > 1:
            lo >>= 1
            hi = (hi + 1) >> 1
            for i in range(lo, hi):
                tree[i] = combine(tree[2 * i], tree[2 * i + 1])
        self.tree, self.cap, self.head = tree, cap, 0
