"""The FIFO sliding-window aggregator (SWAG) interface every module of ``spanning.swag`` implements.

A SWAG holds a window of values in arrival order over a monoid (``combine`` associative, ``identity``
neutral; commutativity is never assumed; Tangwongsan et al., §2.1-2.2):

* ``cls(combine, identity)`` builds it (``inverse=`` too, for the algorithms that take one);
* ``insert(x)`` appends the newest value, ``evict()`` drops the oldest;
* ``query()`` returns ``x_oldest ⊗ ... ⊗ x_newest`` (the identity when empty);
* ``len()`` (and ``len(swag)``) is the number of values held.

Each class declares in ``capabilities`` what it needs of the aggregate and what it answers; code that picks
or builds a SWAG asks these and never checks a name:

>>> from spanning.swag import ALGORITHMS
>>> ALGORITHMS["soe"].capabilities.needs_inverse, ALGORITHMS["flatfat"].capabilities.range_queries
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol

Combine = Callable[[Any, Any], Any]


class Inverse(Enum):
    """What a SWAG does with an inverse ``inverse(total, oldest)`` of the aggregate."""

    UNUSED = "unused"  # built from combine and identity only: any aggregate
    REQUIRED = "required"  # built with inverse= always: invertible aggregates only (soe, Tangwongsan et al., §8.3)
    OR_SELECTIVE = "or-selective"  # inverse= when the aggregate has one, else a selective combine (SlickDeque)


@dataclass(frozen=True)
class SwagCapabilities:
    """What a SWAG class needs of the aggregate (``inverse``) and whether it answers range queries."""

    inverse: Inverse = Inverse.UNUSED
    range_queries: bool = False  # query(range_=r) answers the newest r values: one SWAG serves several windows

    @property
    def needs_inverse(self) -> bool:
        """Only an invertible aggregate runs on it."""
        return self.inverse is Inverse.REQUIRED

    @property
    def takes_inverse(self) -> bool:
        """Built with ``inverse=`` whenever the aggregate has one."""
        return self.inverse is not Inverse.UNUSED


class SWAG(Protocol):
    capabilities: ClassVar[SwagCapabilities]

    def insert(self, x: Any) -> None: ...

    def evict(self) -> None: ...

    def query(self) -> Any: ...

    def len(self) -> int: ...

    def __len__(self) -> int: ...


class EmptyWindowError(IndexError):
    """``evict()`` on an empty window."""

    def __init__(self) -> None:
        super().__init__("evict() on an empty window")
