"""Two-Stacks (Tangwongsan et al., §3): a FIFO queue as two stacks of (value, partial aggregate).

The back stack B takes inserts, each entry holding Π(B up to it) ⊗ v; the front stack F serves
evictions, its top holding v_oldest ⊗ ... (the aggregate of all of F). When F is empty, evict flips B
onto F, reversing the direction of aggregation. query and insert use exactly one ⊗; evict uses at most
n (the flip) and one amortised. Space: 2n partials. The flip is the latency spike DABA removes.

>>> swag = TwoStacks(lambda a, b: a + b, "")
>>> for x in "abcd": swag.insert(x)
>>> swag.evict(); swag.query()
'bcd'
"""

from __future__ import annotations

from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities


class TwoStacks:
    name = "two-stacks"
    capabilities = SwagCapabilities()

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.front_vals: list = []  # top (end of list) is the oldest value
        self.front_aggs: list = []
        self.back_vals: list = []  # top is the newest value
        self.back_aggs: list = []

    def _front(self) -> Any:  # Π_F
        return self.front_aggs[-1] if self.front_aggs else self.identity

    def _back(self) -> Any:  # Π_B
        return self.back_aggs[-1] if self.back_aggs else self.identity

    def query(self) -> Any:
        return self.combine(self._front(), self._back())

    def insert(self, x: Any) -> None:
        self.back_aggs.append(self.combine(self._back(), x))
        self.back_vals.append(x)

    def evict(self) -> None:
        if not self.front_vals:
            if not self.back_vals:
                raise EmptyWindowError
            while self.back_vals:  # flip
                v = self.back_vals.pop()
                self.back_aggs.pop()
                self.front_aggs.append(self.combine(v, self._front()))
                self.front_vals.append(v)
        self.front_vals.pop()
        self.front_aggs.pop()

    def len(self) -> int:
        return len(self.front_vals) + len(self.back_vals)

    __len__ = len
