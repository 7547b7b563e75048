"""Subtract-on-Evict (SOE): a running aggregate, undone with the inverse at evict (invertible only).

Costs: one combine per insert, one inverse per evict, query O(1). With ``inverse(total, x)`` removing
the oldest value ``x`` from the front of ``total`` (``x ⊗ rest -> rest``).

>>> swag = SOE(lambda a, b: a + b, 0, inverse=lambda total, x: total - x)
>>> for x in (3, 4, 5): swag.insert(x)
>>> swag.evict(); swag.query()
9
"""

from __future__ import annotations

from collections import deque
from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, Inverse, SwagCapabilities


class SOE:
    name = "soe"
    capabilities = SwagCapabilities(inverse=Inverse.REQUIRED)  # invertible aggregates only

    def __init__(self, combine: Combine, identity: Any, inverse: Combine | None = None) -> None:
        if inverse is None:
            raise ValueError("soe needs an invertible aggregate: pass inverse=")
        self.combine, self.identity, self.inverse = combine, identity, inverse
        self.values: deque = deque()
        self.total = identity

    def insert(self, x: Any) -> None:
        self.values.append(x)
        self.total = self.combine(self.total, x)

    def evict(self) -> None:
        if not self.values:
            raise EmptyWindowError
        self.total = self.inverse(self.total, self.values.popleft())
        if not self.values:
            self.total = self.identity  # no drift once empty

    def query(self) -> Any:
        return self.total

    def len(self) -> int:
        return len(self.values)

    __len__ = len
