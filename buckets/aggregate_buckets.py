"""Aggregate Buckets (Suzanne et al., §5.3.3, Table 4): each open window keeps one partial per aggregate.

Insert combines the event into the bucket of every open window it overlaps (cost: the windows it
meets); release lowers one bucket (cost 1). Memory is bounded by the number of open windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from buckets.ring import BucketRing
from spanning.aggregates import Aggregate
from spanning.kernels.windows import WindowSpec


class AggregateBuckets:
    name = "aggregate-buckets"

    def __init__(self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int = 1) -> None:
        if height != 1:
            raise ValueError("aggregate-buckets has no height; use technique 'se-ml-slicing' for height > 1")
        self.aggregates = list(aggregates)
        self._slots = [(j, agg.combine) for j, agg in enumerate(self.aggregates)]
        self.ring = BucketRing(spec, lambda: [agg.identity() for agg in self.aggregates])

    def add_window(self, start: int, end: int) -> None:
        self.ring.add(start)

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None:
        for bucket in self.ring.buckets_for(start, end):
            for j, combine in self._slots:
                bucket[j] = combine(bucket[j], lifted[j])

    def query(self, start: int, end: int) -> list[Any]:
        bucket = self.ring.get(start)
        return list(bucket) if bucket is not None else [agg.identity() for agg in self.aggregates]

    def evict(self, before: int) -> None:
        self.ring.drop_before(before)

    @property
    def state_size(self) -> int:
        """Stored items: one partial per aggregate per open window."""
        return len(self.ring.buckets) * len(self.aggregates)
