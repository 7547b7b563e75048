"""Tuple Buckets (Suzanne et al., §5.3.3, Table 4): each open window keeps references to its events.

Insert appends a reference to the event's lifted partials to the bucket of every open window the
event overlaps (cost: the windows it meets); release combines the bucket (cost N). Duplicates cannot
happen, as each bucket is one window, so every aggregate takes the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from buckets.ring import BucketRing
from spanning.aggregates import Aggregate
from spanning.kernels.windows import WindowSpec


class TupleBuckets:
    name = "tuple-buckets"

    def __init__(self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int = 1) -> None:
        if height != 1:
            raise ValueError("tuple-buckets has no height; use technique 'se-ml-slicing' for height > 1")
        self.aggregates = list(aggregates)
        self.ring = BucketRing(spec, list)

    def add_window(self, start: int, end: int) -> None:
        self.ring.add(start)

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None:
        for bucket in self.ring.buckets_for(start, end):
            bucket.append(lifted)  # a reference: the event is stored once, whatever its windows

    def query(self, start: int, end: int) -> list[Any]:
        bucket = self.ring.get(start) or []
        result = [agg.identity() for agg in self.aggregates]
        for lifted in bucket:
            for j, agg in enumerate(self.aggregates):
                result[j] = agg.combine(result[j], lifted[j])
        return result

    def evict(self, before: int) -> None:
        self.ring.drop_before(before)

    @property
    def state_size(self) -> int:
        """Stored items: one reference per (window, event)."""
        return sum(len(bucket) for bucket in self.ring.buckets)
