"""Buckets of the open windows, indexed by window number in a deque (append new, pop released)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from spanning.kernels.windows import WindowSpec


class BucketRing:
    """One bucket per created, unreleased window; ``buckets_for(start, end)`` finds those an event meets."""

    def __init__(self, spec: WindowSpec, new_bucket: Callable[[], Any]) -> None:
        self.spec = spec
        self.new_bucket = new_bucket
        self.buckets: deque = deque()
        self.first: int | None = None  # window number of buckets[0]

    def add(self, start: int) -> None:
        k = (start - self.spec.offset) // self.spec.slide
        if self.first is None or not self.buckets:
            self.first = k
        while self.first + len(self.buckets) <= k:
            self.buckets.append(self.new_bucket())

    def get(self, start: int) -> Any | None:
        i = (start - self.spec.offset) // self.spec.slide - (self.first or 0)
        return self.buckets[i] if self.first is not None and 0 <= i < len(self.buckets) else None

    def buckets_for(self, start: int, end: int) -> Iterator[Any]:
        """The buckets of the windows that overlap ``[start, end)``."""
        if self.first is None:
            return iter(())
        lo = max(self.spec.first_window_ending_after(start) - self.first, 0)
        hi = min(self.spec.last_window_starting_before(end) - self.first, len(self.buckets) - 1)
        return (self.buckets[i] for i in range(lo, hi + 1))

    def drop_before(self, start: int) -> None:
        """Release the buckets of windows starting before ``start``."""
        while self.buckets and self.spec.window(self.first)[0] < start:
            self.buckets.popleft()
            self.first += 1
        if not self.buckets:
            self.first = None
