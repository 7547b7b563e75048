"""Recalc: keep the values, fold them at every query (the reference every SWAG is tested against).

Costs: insert O(1), evict O(1), query n-1 combines.

>>> swag = Recalc(lambda a, b: a + b, "")
>>> for x in "abc": swag.insert(x)
>>> swag.evict(); swag.query(), swag.len()
('bc', 2)
"""

from __future__ import annotations

from collections import deque
from typing import Any

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities


class Recalc:
    name = "recalc"
    capabilities = SwagCapabilities(range_queries=True)

    def __init__(self, combine: Combine, identity: Any) -> None:
        self.combine, self.identity = combine, identity
        self.values: deque = deque()

    def insert(self, x: Any) -> None:
        self.values.append(x)

    def evict(self) -> None:
        if not self.values:
            raise EmptyWindowError
        self.values.popleft()

    def query(self, range_: int | None = None) -> Any:
        """The whole window, or with ``range_=r`` its r newest values (the naive multi-range answer)."""
        values = self.values
        if range_ is not None and range_ < len(values):
            values = list(values)[len(values) - range_ :]
        result = self.identity
        for x in values:  # oldest to newest
            result = self.combine(result, x)
        return result

    def len(self) -> int:
        return len(self.values)

    __len__ = len
