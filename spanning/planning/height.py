"""Choosing the height d of SE-ML-Slicing: the cost model of Suzanne et al., §5.3 (Table 4) on measured data.

Per event, in slice-level operations:

    insert   E[⌈k/d⌉]                                 k = raw slices the event spans (from the data)
    release  (windows per event) · (d·n_ω + d(d-1)/2) the levels a release reads (§5.3.2); windows
                                                       are counted per key, each key being its own stream
    add      (windows per event) · d·n_β              the levels created per step

Insert falls with d, release and add grow with it; the recommended height minimises the sum.

>>> import numpy as np
>>> spec = WindowSpec(range=10_000, slide=200)
>>> ends = np.arange(5_000, 105_000)
>>> recommend_height(spec, ends - 5_000, ends)       # μ = 5000: events span ~26 slices of 200
9
>>> recommend_height(spec, ends - 16, ends)           # short events: one level is best
1
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from spanning.kernels.windows import PairsSlicer, WindowSpec, event_ends

__all__ = [
    "predict_costs",
    "recommend_height",
    "resolve_height",
    "spanned_slices",
    "synthetic_events",
    "windows_per_event",
    "MAX_HEIGHT",
]

MAX_HEIGHT = 64
# relative cost of one level operation of each kind: a least-squares fit of bench/bench_heights.py on the
# reference machine gave 0.31 µs per level written and 0.43 µs per level read (a read combines φ and ϕ);
# creating a level is an allocation, counted like a write. The recommendation is not sensitive to these.
WEIGHTS = {"insert": 1.0, "release": 1.4, "add": 1.0}


def spanned_slices(spec: WindowSpec, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Number of Pairs slices each event ``[start, end)`` overlaps (a point event: one)."""
    slicer = PairsSlicer(spec)
    starts = np.asarray(starts, dtype=np.int64)
    ends = event_ends(starts, ends)

    def slice_of(t: np.ndarray) -> np.ndarray:
        j, r = np.divmod(t - slicer.offset, slicer.slide)
        return 2 * j + (r >= slicer.epsilon) if slicer.epsilon else j

    return slice_of(ends - 1) - slice_of(starts) + 1


def windows_per_event(
    spec: WindowSpec, starts: np.ndarray, ends: np.ndarray, groups: np.ndarray | None = None
) -> float:
    """Windows released per event: each key (``groups``) is its own stream with its own windows."""
    starts, ends = np.asarray(starts), np.asarray(ends)
    if groups is None or len(starts) == 0:
        return max(int(np.max(ends)) - int(np.min(starts)), spec.slide) / spec.slide / max(len(starts), 1)
    frame = pd.DataFrame({"g": np.asarray(groups), "s": starts, "e": ends}).groupby("g")
    spans = np.maximum(frame["e"].max().to_numpy() - frame["s"].min().to_numpy(), spec.slide)
    return float(spans.sum()) / spec.slide / len(starts)


def predict_costs(
    spec: WindowSpec,
    starts: np.ndarray,
    ends: np.ndarray,
    heights: Iterable[int] | None = None,
    groups: np.ndarray | None = None,
) -> dict[int, float]:
    """Predicted cost per event for each height (Table 4 with the measured spans; ``groups``: key per event)."""
    spans = spanned_slices(spec, starts, ends)
    if len(spans) == 0:
        raise ValueError("no events to measure the event sizes from")
    slicer = PairsSlicer(spec)
    per_event = windows_per_event(spec, starts, ends, groups)
    costs = {}
    for d in heights or range(1, MAX_HEIGHT + 1):
        insert = float(np.mean(-(-spans // d)))  # E[⌈k/d⌉]
        release = per_event * (d * slicer.per_window + d * (d - 1) / 2)
        add = per_event * d * slicer.per_step
        costs[d] = WEIGHTS["insert"] * insert + WEIGHTS["release"] * release + WEIGHTS["add"] * add
    return costs


def recommend_height(
    spec: WindowSpec,
    starts: np.ndarray,
    ends: np.ndarray,
    max_height: int = MAX_HEIGHT,
    groups: np.ndarray | None = None,
) -> int:
    """The height with the lowest predicted cost (the smallest one among equals)."""
    costs = predict_costs(spec, starts, ends, range(1, max_height + 1), groups)
    best = min(costs.values())
    return min(d for d, c in costs.items() if c <= best * (1 + 1e-9))


def synthetic_events(n: int, mu: float, sigma: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The paper's synthetic stream: one event per chronon, lengths ~ normal(μ, σ), at least 1."""
    rng = np.random.default_rng(seed)
    lengths = np.maximum(np.rint(rng.normal(mu, sigma, n)), 1).astype(np.int64)
    ends = np.arange(1, n + 1, dtype=np.int64)
    return ends - lengths, ends


def resolve_height(height: int | str, technique: str, spec: WindowSpec, sample: tuple | None) -> int:
    """A height as given, or the recommended one for ``"auto"``, measured on ``sample = (starts, ends[, keys])``."""
    if height != "auto":
        return height
    if technique != "se-ml-slicing":
        return 1  # the other techniques have one level
    if sample is None:
        raise ValueError("height='auto' needs events to measure their sizes: pass sample_events=(starts, ends)")
    groups = np.asarray(sample[2]) if len(sample) > 2 and sample[2] is not None else None
    return recommend_height(spec, np.asarray(sample[0]), np.asarray(sample[1]), groups=groups)
