"""Sliding-window family and the Pairs stream slicer (Suzanne et al., §2.4 and §5.1-5.2).

Window ``k`` covers ``[k*slide + offset, k*slide + offset + range)`` for every integer ``k``,
aligned to the epoch the way Spark's ``window()`` is.

>>> spec = WindowSpec(range=15, slide=5)
>>> spec.window(2)
(10, 25)
>>> spec.first_window_ending_after(12), spec.last_window_starting_before(12)
(0, 2)
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["WindowSpec", "PairsSlicer", "UnionSlicer", "as_chronon", "event_ends"]


def as_chronon(value: object, what: str) -> int:
    """Return ``value`` as an int chronon, or raise a ValueError naming ``what``."""
    try:
        return operator.index(value)  # accepts int and numpy integers, refuses floats and strings
    except TypeError:
        pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{what} must be an integer chronon, got {value!r}")


def event_ends(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The ends u of events ``[start, end)`` (arrays of chronons, end >= start): a record with start == end is
    the point ``[start, start + 1)``. Events arrive in the order of u.

    >>> event_ends(np.array([3, 5]), np.array([9, 5])).tolist()
    [9, 6]

    From ``_COMPILED_ENDS_FROM`` events on, one compiled pass (``compiled.event_ends_into``) in place of numpy's two and
    their temporary: 1M events in about 1 ms against 3 ms.
    """
    ends, starts = np.asarray(ends, dtype=np.int64), np.asarray(starts, dtype=np.int64)
    if ends.ndim == starts.ndim == 1 and len(ends) == len(starts) >= _COMPILED_ENDS_FROM:
        from spanning.kernels.compiled import event_ends_into  # numba's import only where it pays

        out = np.empty(len(ends), dtype=np.int64)
        event_ends_into(np.ascontiguousarray(starts), np.ascontiguousarray(ends), out)
        return out
    return np.maximum(ends, starts + 1)


_COMPILED_ENDS_FROM = 100_000  # events from which ``event_ends`` runs compiled


@dataclass(frozen=True)
class WindowSpec:
    """Sliding windows of ``range`` chronons every ``slide`` chronons, released ``ttp`` after their end.

    ``range`` is ω, ``slide`` is β and ``ttp`` is δ in the paper.
    """

    range: int
    slide: int
    ttp: int = 0
    offset: int = 0

    def __post_init__(self) -> None:
        for name in ("range", "slide", "ttp", "offset"):
            value = getattr(self, name)
            if isinstance(value, bool):
                raise ValueError(f"window {name} must be an integer, got {value!r}")
            object.__setattr__(self, name, as_chronon(value, f"window {name}"))
        if self.range <= 0:
            raise ValueError(f"window range must be > 0, got {self.range}")
        if self.slide <= 0:
            raise ValueError(f"window slide must be > 0, got {self.slide}")
        if self.ttp < 0:
            raise ValueError(f"window ttp must be >= 0, got {self.ttp}")

    # Window k <-> time arithmetic. All of it is integer floor division, so negative times work too.
    def window(self, k: int) -> tuple[int, int]:
        """Bounds ``(start, end)`` of window ``k``."""
        start = k * self.slide + self.offset
        return start, start + self.range

    def first_window_ending_after(self, t: int) -> int:
        """Smallest k with end(k) > t: the first window a lifespan starting at ``t`` can overlap."""
        return (t - self.offset - self.range) // self.slide + 1

    def last_window_starting_before(self, t: int) -> int:
        """Largest k with start(k) < t: the last window a lifespan ending at ``t`` can overlap."""
        return (t - self.offset - 1) // self.slide

    def first_window_open_at(self, clock: int) -> int:
        """Smallest k not yet released at ``clock``: end(k) + ttp >= clock (docs/SEMANTICS.md §5)."""
        return -((self.offset + self.range + self.ttp - clock) // self.slide)


class PairsSlicer:
    """Pairs slicing (Suzanne et al., §5.2.1, Algorithm 2): per step β, a slice of ε = ω mod β, then one of β - ε.

    Slices are numbered so that arithmetic replaces the paper's list scans. With ε > 0, step j holds
    slices 2j = [jβ+o, jβ+o+ε) and 2j+1 = [jβ+o+ε, (j+1)β+o); with ε = 0, slice j is the whole step.

    >>> s = PairsSlicer(WindowSpec(range=7, slide=3))      # ε = 1: slices of 1 and 2 chronons
    >>> [s.bounds(i) for i in range(4)]
    [(0, 1), (1, 3), (3, 4), (4, 6)]
    >>> s.slice_of(5), s.window_slices(0)                  # window 0 = [0, 7) = slices 0..4
    (3, (0, 4))
    """

    __slots__ = ("spec", "slide", "offset", "epsilon", "per_step", "per_window", "_q")

    def __init__(self, spec: WindowSpec) -> None:
        self.spec = spec
        self.slide = spec.slide
        self.offset = spec.offset
        self.epsilon = spec.range % spec.slide  # ε of Algorithm 2
        self._q = spec.range // spec.slide
        self.per_step = 2 if self.epsilon else 1  # n_β
        self.per_window = 2 * self._q + 1 if self.epsilon else self._q  # n_ω (§5.2.1)

    def slice_of(self, t: int) -> int:
        """Number of the slice holding chronon ``t``."""
        j, r = divmod(t - self.offset, self.slide)
        if self.epsilon:
            return 2 * j + (r >= self.epsilon)
        return j

    def bounds(self, i: int) -> tuple[int, int]:
        """Time interval ``[start, end)`` of slice ``i``."""
        if not self.epsilon:
            start = i * self.slide + self.offset
            return start, start + self.slide
        j, odd = divmod(i, 2)
        step = j * self.slide + self.offset
        if odd:
            return step + self.epsilon, step + self.slide
        return step, step + self.epsilon

    def window_slices(self, k: int) -> tuple[int, int]:
        """First and last slice (inclusive) of window ``k``: n_ω consecutive slices."""
        first = self.per_step * k
        return first, first + self.per_window - 1


class UnionSlicer:
    """Slices shared by several window families: an edge at every window start and end of every spec.

    The edges repeat with the composite slide P = lcm(β_i) (shared plans, Shein et al., §2.3); slice numbers
    run j·m + q for period j and edge q of the m edges in [0, P). With one spec it cuts the Pairs
    slices. The (φ, ϕ) slice model does not depend on how slices are cut (Suzanne et al., §1), so SE-Slicing,
    SE-ML-Slicing and the point-event SWAG plans run unchanged on it.

    >>> s = UnionSlicer([WindowSpec(range=15, slide=5), WindowSpec(range=10, slide=10)])
    >>> s.period, s.edges
    (10, [0, 5])
    >>> [s.bounds(i) for i in range(3)], s.slice_of(12)
    ([(0, 5), (5, 10), (10, 15)], 2)
    """

    def __init__(self, specs: Sequence[WindowSpec]) -> None:
        if not specs:
            raise ValueError("give at least one WindowSpec")
        self.specs = list(specs)
        self.period = math.lcm(*(spec.slide for spec in specs))
        edges = set()
        for spec in specs:
            for k in range(self.period // spec.slide):
                edges.add((k * spec.slide + spec.offset) % self.period)
                edges.add((k * spec.slide + spec.offset + spec.range) % self.period)
        self.edges = sorted(edges)
        self._m = len(self.edges)

    def slice_of(self, t: int) -> int:
        j, r = divmod(t, self.period)
        return j * self._m + bisect_right(self.edges, r) - 1

    def bounds(self, i: int) -> tuple[int, int]:
        j, q = divmod(i, self._m)
        start = j * self.period + self.edges[q]
        end = j * self.period + (self.edges[q + 1] if q + 1 < self._m else self.period + self.edges[0])
        return start, end
