"""The FIFO sliding-window aggregator (SWAG) interface every module of ``spanning.swag`` implements.

A SWAG holds a window of values in arrival order over a monoid (``combine`` associative, ``identity``
neutral; commutativity is never assumed):

* ``cls(combine, identity)`` builds it (``inverse=`` too, for the algorithms that need one);
* ``insert(x)`` appends the newest value, ``evict()`` drops the oldest;
* ``query()`` returns ``x_oldest ⊗ ... ⊗ x_newest`` (the identity when empty);
* ``len()`` (and ``len(swag)``) is the number of values held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Combine = Callable[[Any, Any], Any]


class SWAG(Protocol):
    def insert(self, x: Any) -> None: ...

    def evict(self) -> None: ...

    def query(self) -> Any: ...

    def len(self) -> int: ...

    def __len__(self) -> int: ...


class EmptyWindowError(IndexError):
    """``evict()`` on an empty window."""

    def __init__(self) -> None:
        super().__init__("evict() on an empty window")
