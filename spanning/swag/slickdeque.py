"""SlickDeque (Shein et al., §3.2, Algorithms 1-2): one SWAG, two algorithms picked by invertibility.

``SlickDeque(combine, identity, inverse=...)`` builds the invertible form (Algorithm 1, "Panes (Inv)"
extended to several ranges); ``SlickDeque(combine, identity)`` the non-invertible form (Algorithm 2)
for *selective* operations, where ``combine(a, b)`` always equals ``a`` or ``b`` (max, min, argmax...).

**Invertible form** (:class:`SlickDequeInv`). Keeps the window's values (the paper's ``partials``), a
running aggregate of the whole window (``total``) and, per range ``qR`` shorter than the window, a
running answer ``answers[qR]`` (the aggregate of the ``qR`` newest values). ``inverse(total, x)`` removes
``x`` from the front of ``total`` (``x ⊗ rest -> rest``), as for :class:`~spanning.swag.soe.SOE`.
insert: one ⊗ for the total plus line 24's ``ans ⊗ new ⊖ expiring`` (one ⊗ and one ⊖) per range
shorter than the window; evict: one ⊖. A range at least as long as the window is answered by the total,
so an entry is created (one ⊖) when the window outgrows it and dropped when it no longer does. Query:
O(1), no ⊗. Single query: exactly 2 operations per slide (insert + evict), as §4.1 states. Ranges are
registered with ``ranges=`` or on their first ``query(range_=r)`` (which then folds r values once).

**Non-invertible form** (:class:`SlickDequeNonInv`). The deque ``d`` of nodes (pos, val), held as two
parallel lists with a moving head index. Insert pops the tail while ``tail.val ⊗ new == new`` (line 16;
one ⊗ per test) then pushes the new node; evict pops the head when its position expires (line 13; no
⊗); query returns the head's value (no ⊗). Every value is tested at most twice in its lifetime (when it
arrives, when a newer value removes it), so the amortised cost is < 2 ⊗ per slide and the worst case is
n (a descending window followed by a new maximum), §4.1. The values on the deque go from the head (the
window's aggregate) to the tail (the newest value); correctness needs selectivity, not commutativity.

Positions are absolute arrival numbers (Python ints do not overflow), so the paper's wrap of ``currPos``
at ``wSize`` and the two *Answer Loops* (boundary crossed or not) collapse into one rule: a range-r
query skips every node whose position is ``<= startPos = currPos - r`` -- with ``<=``, not the ``<``
printed in Algorithm 2 (a known slip of Shein et al., see docs/REFERENCES.md; their Figure 9 needs ``<=``).

In Python each ⊗/⊖ is one call of the user's function; the deque and the value buffer are plain lists
with a head index, compacted once the dead prefix is at least half the list (amortised O(1)).

>>> swag = SlickDeque(max, float("-inf"))
>>> for x in (6, 5, 0, 1): swag.insert(x)
>>> swag.query(), swag.query(range_=3), swag.query_ranges([5, 3, 1])
(6, 5, [6, 5, 1])
>>> sums = SlickDeque(lambda a, b: a + b, 0, inverse=lambda total, x: total - x, ranges=(3,))
>>> for x in (6, 5, 0, 1): sums.insert(x)
>>> sums.evict(); sums.query(), sums.query(range_=2)
(6, 1)
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, Inverse, SwagCapabilities

_COMPACT_AT = 64  # compact a list once its dead prefix holds at least this many entries and half the list


def _check_range(range_: int) -> int:
    if range_ < 1:
        raise ValueError(f"a query range counts values and must be at least 1, not {range_!r}")
    return range_


class SlickDeque:
    """SlickDeque: the invertible form when ``inverse`` is given, else the selective (deque) form."""

    name = "slickdeque"
    # Algorithm 1 when given an inverse, else Algorithm 2 (selective aggregates only)
    capabilities = SwagCapabilities(inverse=Inverse.OR_SELECTIVE, range_queries=True)

    def __new__(
        cls, combine: Combine, identity: Any, inverse: Combine | None = None, ranges: Iterable[int] = ()
    ) -> SlickDeque:
        if cls is SlickDeque:
            cls = SlickDequeNonInv if inverse is None else SlickDequeInv
        return super().__new__(cls)

    def insert(self, x: Any) -> None:
        raise NotImplementedError

    def evict(self) -> None:
        raise NotImplementedError

    def query(self, range_: int | None = None) -> Any:
        raise NotImplementedError

    def query_ranges(self, ranges: Sequence[int]) -> list:
        """The answers for several ranges (in the order given), as a shared plan asks them at one slide."""
        return [self.query(r) for r in ranges]

    def len(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.len()


class SlickDequeInv(SlickDeque):
    """Algorithm 1: running answers per range, updated with ⊗ on arrival and ⊖ on expiry."""

    def __init__(
        self, combine: Combine, identity: Any, inverse: Combine | None = None, ranges: Iterable[int] = ()
    ) -> None:
        if inverse is None:
            raise ValueError("the invertible SlickDeque needs inverse=")
        self.combine, self.identity, self.inverse = combine, identity, inverse
        self.values: list = []  # partials: the window, oldest at values[head]
        self.head = 0
        self.total = identity  # the answer of every range >= len (the whole window)
        self.ranges: list[int] = sorted({_check_range(r) for r in ranges})  # registered qR, ascending
        self.answers: dict[int, Any] = {}  # qR -> ans, present exactly for the registered qR < len

    def len(self) -> int:
        return len(self.values) - self.head

    __len__ = len

    def insert(self, x: Any) -> None:
        values, head = self.values, self.head
        n = len(values) - head
        total = self.total = self.combine(self.total, x)
        if self.ranges:
            combine, inverse, answers = self.combine, self.inverse, self.answers
            for r in self.ranges:
                if r < n:  # line 24: ans = ans ⊕ newPartial ⊖ partials[startPos]
                    answers[r] = inverse(combine(answers[r], x), values[head + n - r])
                elif r == n:  # the window outgrows r: its answer leaves the total
                    answers[r] = inverse(total, values[head])
                else:
                    break
        values.append(x)

    def evict(self) -> None:
        values, head = self.values, self.head
        n = len(values) - head
        if n == 0:
            raise EmptyWindowError
        oldest = values[head]
        values[head] = None  # drop the reference
        head += 1
        if n == 1:
            self.total = self.identity  # no drift once empty
            values.clear()
            head = 0
        else:
            self.total = self.inverse(self.total, oldest)
            self.answers.pop(n - 1, None)  # range n - 1 now covers the whole window: answered by total
            if head >= _COMPACT_AT and 2 * head >= len(values):
                del values[:head]
                head = 0
        self.head = head

    def query(self, range_: int | None = None) -> Any:
        """The aggregate of the ``range_`` newest values (all of them when None or longer than the window)."""
        if range_ is None:
            return self.total
        n = len(self.values) - self.head
        if _check_range(range_) >= n:
            if range_ not in self.ranges:
                self._register(range_)
            return self.total
        if range_ not in self.answers:  # a registered range shorter than the window always has its entry
            self._register(range_)
        return self.answers[range_]

    def _register(self, r: int) -> None:
        """Add range r to the answers map (Algorithm 1 line 12); if shorter than the window, fold it once."""
        ranges = self.ranges
        ranges.append(r)
        ranges.sort()
        values, n = self.values, len(self.values) - self.head
        if r < n:
            combine = self.combine
            acc = values[-r]
            for x in values[len(values) - r + 1 :]:
                acc = combine(acc, x)
            self.answers[r] = acc


class SlickDequeNonInv(SlickDeque):
    """Algorithm 2: a deque of (pos, val) nodes whose head holds the window's aggregate."""

    def __init__(
        self, combine: Combine, identity: Any, inverse: Combine | None = None, ranges: Iterable[int] = ()
    ) -> None:
        self.combine, self.identity = combine, identity
        for r in ranges:  # no per-range state: every range is answered from the deque
            _check_range(r)
        self.poss: list[int] = []  # Node.pos, absolute arrival numbers, increasing from head to tail
        self.vals: list = []  # Node.val
        self.head = 0  # list index of d.front
        self.start = 0  # arrival number of the oldest value in the window
        self.end = 0  # arrival number of the next insert (currPos + 1)

    def len(self) -> int:
        return self.end - self.start

    __len__ = len

    def nodes(self) -> list[tuple[int, Any]]:
        """The deque from head to tail as (pos, val) pairs (for tests and inspection)."""
        return list(zip(self.poss[self.head :], self.vals[self.head :], strict=True))

    def insert(self, x: Any) -> None:
        combine, vals, head = self.combine, self.vals, self.head
        popped = False
        while len(vals) > head and combine(vals[-1], x) == x:  # line 16: d.back.val ⊕ newPartial == newPartial
            vals.pop()
            popped = True
        if popped:
            del self.poss[len(vals) :]
        vals.append(x)
        self.poss.append(self.end)
        self.end += 1

    def evict(self) -> None:
        start = self.start
        if start == self.end:
            raise EmptyWindowError
        head = self.head
        if self.poss[head] == start:  # line 13: the head node expires
            self.vals[head] = None
            head += 1
            if head == len(self.vals):  # the window becomes empty
                self.vals.clear()
                self.poss.clear()
                head = 0
            elif head >= _COMPACT_AT and 2 * head >= len(self.vals):
                del self.vals[:head]
                del self.poss[:head]
                head = 0
            self.head = head
        self.start = start + 1

    def query(self, range_: int | None = None) -> Any:
        """The aggregate of the ``range_`` newest values (all of them when None or longer than the window)."""
        head = self.head
        if head == len(self.vals):
            if range_ is not None:
                _check_range(range_)
            return self.identity
        if range_ is None or _check_range(range_) >= self.end - self.start:
            return self.vals[head]
        # Answer Loop: skip the nodes with pos <= startPos = currPos - range_, i.e. pos < end - range_
        return self.vals[bisect_left(self.poss, self.end - range_, head)]

    def query_ranges(self, ranges: Sequence[int]) -> list:
        """Answers for several ranges in one pass over the deque, longest range first (lines 21-41)."""
        out = [self.identity] * len(ranges)
        for r in ranges:
            _check_range(r)
        head = self.head
        if head == len(self.vals):
            return out
        poss, vals, end, n = self.poss, self.vals, self.end, self.end - self.start
        i = head  # i = d.firstNode, kept across the queries
        for k in sorted(range(len(ranges)), key=ranges.__getitem__, reverse=True):
            r = ranges[k]
            if r < n:
                start_pos = end - 1 - r  # startPos = currPos - q.range
                while poss[i] <= start_pos:  # the `<=` fix of Algorithm 2's answer loops
                    i += 1
            out[k] = vals[i]
        return out
