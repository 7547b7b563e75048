"""Technique names -> implementations, shared by ``Engine``, ``aggregate`` and the CLI.

The baselines (``buckets``, ``sweeping``) sit beside ``spanning`` and implement the same protocol. They
are registered here by name, as ``"module:attribute"``, and imported when their factory is first asked
for: ``import spanning`` needs neither package (nor ``sortedcontainers``, which plane sweeping uses),
while every name is listed, checked and offered in the error for an unknown name.

>>> list(TECHNIQUES)
['se-slicing', 'se-ml-slicing', 'tuple-buckets', 'aggregate-buckets', 'sweeping']
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence

from spanning.aggregates import Aggregate
from spanning.kernels.windows import WindowSpec
from spanning.techniques.protocol import Technique, TechniqueFactory
from spanning.techniques.se_ml_slicing import SEMLSlicing
from spanning.techniques.se_slicing import SESlicing


class TechniqueRegistry(MutableMapping[str, TechniqueFactory]):
    """Names -> technique factories, in registration order; a factory given as ``"module:attribute"`` is
    imported on first use (``registry[name]``), not when the name is listed or tested with ``in``."""

    def __init__(self, factories: Mapping[str, TechniqueFactory | str]) -> None:
        self._factories: dict[str, TechniqueFactory | str] = dict(factories)

    def __getitem__(self, name: str) -> TechniqueFactory:
        factory = self._factories[name]
        if isinstance(factory, str):  # registered by name: import it now, once
            module, _, attribute = factory.partition(":")
            factory = self._factories[name] = getattr(importlib.import_module(module), attribute)
        return factory

    def __setitem__(self, name: str, factory: TechniqueFactory | str) -> None:
        self._factories[name] = factory

    def __delitem__(self, name: str) -> None:
        del self._factories[name]

    def __contains__(self, name: object) -> bool:
        return name in self._factories  # without importing a baseline

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self._factories)})"


TECHNIQUES = TechniqueRegistry(
    {
        "se-slicing": SESlicing,
        "se-ml-slicing": SEMLSlicing,
        "tuple-buckets": "buckets.tuple_buckets:TupleBuckets",  # the baselines of Suzanne et al., §5.3.3
        "aggregate-buckets": "buckets.aggregate_buckets:AggregateBuckets",
        "sweeping": "sweeping.plane_sweeping:PlaneSweeping",
    }
)


def make_technique(name: str, spec: WindowSpec, aggregates: Sequence[Aggregate], height: int) -> Technique:
    """Build the technique ``name``, with a clear error for unknown names and bad heights."""
    if name not in TECHNIQUES:
        raise ValueError(f"unknown technique {name!r}: available are {', '.join(sorted(TECHNIQUES))}")
    if isinstance(height, bool) or not isinstance(height, int) or height < 1:
        raise ValueError(f"height must be an integer >= 1, got {height!r}")
    return TECHNIQUES[name](spec, aggregates, height)


#: the technique ``Engine``, ``aggregate`` and the CLI run when none is named
DEFAULT_TECHNIQUE = "se-slicing"


def has_batch_form(name: str) -> bool:
    """Whether technique ``name`` declares a vectorised batch form (``batch_form = True`` on its class).

    A technique registered by name (the baselines) has none, and is not imported to find out.
    """
    factory = TECHNIQUES._factories.get(name)
    return not isinstance(factory, str) and bool(getattr(factory, "batch_form", False))
