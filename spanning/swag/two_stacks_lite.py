"""Two-Stacks Lite (Tangwongsan et al., §4): one deque of partials plus aggB, n + 1 partials in all.

The deque holds the front sublist [F, B) as suffix aggregates (entry i: v_i ⊗ ... ⊗ v_{B-1}) and the
back sublist [B, E) as raw values; aggB is the aggregate of the back sublist. When the front is empty,
evict flips: it rewrites the back values in place into suffix aggregates (B - F - 1 combines).
query and insert use exactly one ⊗; evict at most n and one amortised.

>>> swag = TwoStacksLite(lambda a, b: a + b, "")
>>> for x in "abcd": swag.insert(x)
>>> swag.evict(); swag.query()
'bcd'
"""

from __future__ import annotations

from collections import deque
from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities


class TwoStacksLite:
    name = "two-stacks-lite"
    capabilities = SwagCapabilities()

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.items: deque = deque()
        self.front = 0  # number of front entries (suffix aggregates) at the start of items: B - F
        self.agg_back = identity

    def query(self) -> Any:
        front = self.items[0] if self.front else self.identity  # Π_F
        return self.combine(front, self.agg_back)

    def insert(self, x: Any) -> None:
        self.items.append(x)
        self.agg_back = self.combine(self.agg_back, x)

    def evict(self) -> None:
        items = self.items
        if not items:
            raise EmptyWindowError
        if self.front == 0:  # flip: suffix aggregates, right to left (on a list: deque indexing is not O(1))
            flipped = list(items)
            for i in range(len(flipped) - 2, -1, -1):
                flipped[i] = self.combine(flipped[i], flipped[i + 1])
            self.items = items = deque(flipped)
            self.front = len(items)
            self.agg_back = self.identity
        items.popleft()
        self.front -= 1

    def len(self) -> int:
        return len(self.items)

    __len__ = len
