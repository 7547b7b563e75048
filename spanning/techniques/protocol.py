"""The protocol between the window manager and a technique (slicing, buckets, sweeping).

A technique stores partial aggregates however it likes; it knows nothing of clocks, TTP or keys.
The window manager (``spanning.engines.manager``) calls, in the paper's Algorithm 1 order:

* ``add_window(start, end)`` when a window begins (line 5-6, ``add_slices``);
* ``insert(start, end, lifted)`` for an event that overlaps an open window (line 10). ``start`` is
  already clipped to the oldest open window; ``lifted[i]`` is ``aggregates[i].lift(row)``;
* ``query(start, end)`` at release: one partial per aggregate, combined oldest to newest (line 8);
* ``evict(before)`` once no open window needs time before ``before``.

A technique class may declare ``batch_form = True`` when, for a fixed set of events, it has a vectorised
form that the batch path runs instead (SE-Slicing, Suzanne et al., §3.2.2); see
``spanning.techniques.registry.has_batch_form``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from spanning.aggregates import Aggregate
from spanning.kernels.windows import WindowSpec


class Technique(Protocol):
    def add_window(self, start: int, end: int) -> None: ...

    def insert(self, start: int, end: int, lifted: Sequence[Any]) -> None: ...

    def query(self, start: int, end: int) -> list[Any]: ...

    def evict(self, before: int) -> None: ...


class TechniqueFactory(Protocol):
    def __call__(self, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int) -> Technique: ...
