"""FlatFIT, the flat and fast index traverser (Shein et al., §2.2, §4.1; Shein and Chrysanthis, §2.2, Fig. 7).

Two circular arrays interconnected by their indices, *Partials* and *Pointers*, and a stack *Positions*.
The value arriving at position p is stored as ``Partials[p]`` with ``Pointers[p] = p + 1``; throughout,
``Partials[p]`` is the aggregate x_p ⊗ ... ⊗ x_{Pointers[p]-1}, so a pointer says how far ahead a query
may skip. A query starting at position s follows the pointers from s, pushing each visited position on
*Positions*, until it reaches the node whose span ends at the newest value (the example of Shein and
Chrysanthis, §2.2, Fig. 7: 8 -> 1 -> 5, pushing 8 and 1). It then pops the stack, folding right to left
(so ⊗ need not be commutative), and stores every suffix aggregate back with its pointer moved to the end
of the window: later queries reuse these intermediate results and skip over them. Evict does no ⊗: the
oldest slot is freed.

Pointers hold absolute positions (slot ``p & mask``; Python ints do not overflow). This keeps the
pointer structure untouched when the buffer is resized and removes the full-buffer ambiguity of
circular indices. The window is dynamic, so the buffer doubles when an insert finds it full and halves
when an evict leaves it a quarter full (Tangwongsan et al., §7, describe the same adaptation); resizes do no ⊗.

Costs (⊗ calls; each is one call of the user's function in Python): insert and evict 0 (plus the
amortised O(1) copying of resizes); a query costs one ⊗ per pushed position: up to n - 1 in the
*window reset* that periodically recomputes every suffix of the window, typically 1 or 2 otherwise;
amortised 3 per slide for a single fixed-size query (§4.1: (n - 1) + 2(n - 2) + 2 per n + 1 slides).
``query(range_=r)`` starts at the r-th newest value and shares the stored partials between ranges.
Space: 2·cap (cap < 4n) plus the stack.

>>> swag = FlatFIT(lambda a, b: a + b, "")
>>> for x in "abcde": swag.insert(x)
>>> swag.evict(); swag.evict(); swag.insert("f")
>>> swag.query(), swag.query(range_=2), len(swag)
('cdef', 'ef', 4)
"""

from __future__ import annotations

from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities


class FlatFIT:
    name = "flatfit"
    capabilities = SwagCapabilities(range_queries=True)

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.mask = 0  # capacity - 1, the capacity being a power of two
        self.partials: list = [identity]  # Partials[p & mask] = x_p ⊗ ... ⊗ x_{Pointers[p & mask] - 1}
        self.pointers: list[int] = [0]  # Pointers: absolute position just past the span of Partials
        self.positions: list[int] = []  # Positions: the stack, reused across queries
        self.start = 0  # absolute position of the oldest value
        self.end = 0  # absolute position of the next insert (the newest is end - 1)

    def len(self) -> int:
        return self.end - self.start

    __len__ = len

    def insert(self, x: Any) -> None:
        end = self.end
        if end - self.start > self.mask:
            self._resize(2 * (self.mask + 1))
        slot = end & self.mask
        self.partials[slot] = x
        self.pointers[slot] = end + 1
        self.end = end + 1

    def evict(self) -> None:
        start = self.start
        if start == self.end:
            raise EmptyWindowError
        self.partials[start & self.mask] = self.identity  # drop the reference
        start += 1
        if start == self.end:
            self.start = self.end = 0  # empty: restart the positions
        else:
            self.start = start
        cap = self.mask + 1
        if cap > 1 and 4 * (self.end - self.start) <= cap:
            self._resize(cap // 2)

    def query(self, range_: int | None = None) -> Any:
        """The aggregate of the ``range_`` newest values (all of them when None or longer than the window)."""
        end = self.end
        n = end - self.start
        if range_ is None or range_ >= n:
            if n == 0:
                return self.identity
            i = self.start
        elif range_ < 1:
            raise ValueError(f"a query range counts values and must be at least 1, not {range_!r}")
        else:
            i = end - range_
        partials, pointers, mask, stack = self.partials, self.pointers, self.mask, self.positions
        if stack:
            stack.clear()  # left over only if a ⊗ raised during an earlier query
        nxt = pointers[i & mask]
        while nxt != end:  # follow the Pointers, pushing the visited positions
            stack.append(i)
            i = nxt
            nxt = pointers[i & mask]
        acc = partials[i & mask]
        if stack:
            combine = self.combine
            while stack:  # pop and fold right to left, storing each suffix aggregate for reuse
                slot = stack.pop() & mask
                acc = combine(partials[slot], acc)
                partials[slot] = acc
                pointers[slot] = end
        return acc

    def _resize(self, cap: int) -> None:
        """Copy the live slots into arrays of ``cap`` slots (array doubling/halving); pointers unchanged."""
        old_mask, mask = self.mask, cap - 1
        partials, pointers = self.partials, self.pointers
        new_partials = [self.identity] * cap
        new_pointers = [0] * cap
        for p in range(self.start, self.end):
            new_partials[p & mask] = partials[p & old_mask]
            new_pointers[p & mask] = pointers[p & old_mask]
        self.partials, self.pointers, self.mask = new_partials, new_pointers, mask
