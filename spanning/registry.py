"""Technique names -> implementations, shared by ``Engine``, ``aggregate`` and the CLI."""

from __future__ import annotations

from collections.abc import Sequence

from spanning.aggregates import Aggregate
from spanning.se_ml_slicing import SEMLSlicing
from spanning.se_slicing import SESlicing
from spanning.technique import Technique, TechniqueFactory
from spanning.windows import WindowSpec

TECHNIQUES: dict[str, TechniqueFactory] = {
    "se-slicing": SESlicing,
    "se-ml-slicing": SEMLSlicing,
}


def _baselines() -> None:
    """Register the baselines (their packages sit beside spanning and implement the same protocol)."""
    from buckets.aggregate_buckets import AggregateBuckets
    from buckets.tuple_buckets import TupleBuckets
    from sweeping.plane_sweeping import PlaneSweeping

    TECHNIQUES.update({"tuple-buckets": TupleBuckets, "aggregate-buckets": AggregateBuckets, "sweeping": PlaneSweeping})


_baselines()


def make_technique(name: str, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int) -> Technique:
    """Build the technique ``name``, with a clear error for unknown names and bad heights."""
    if name not in TECHNIQUES:
        raise ValueError(f"unknown technique {name!r}: available are {', '.join(sorted(TECHNIQUES))}")
    if isinstance(height, bool) or not isinstance(height, int) or height < 1:
        raise ValueError(f"height must be an integer >= 1, got {height!r}")
    return TECHNIQUES[name](spec, aggregates, height)
