"""The aggregate protocol, lift / combine / lower (Suzanne et al., §2.3, §3.1, Table 1), and user aggregates.

An aggregate has a scalar face (``identity``, ``lift``, ``combine``, ``lower``) for the per-event path, where a
partial is a small Python value. When ``capabilities.vectorised`` it also has an array face
(``window_partials``, ``merge``, ``lower_partials``; ``spanning.aggregates.arrays``) for the batch path, where a
partial is a tuple of numpy arrays with one entry per window. Both faces give the same results.

``capabilities`` (``spanning.aggregates.capabilities``) says what the aggregate is; ``inverse`` exists exactly when
it is invertible, and the methods of ``capabilities.form`` exactly when it has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from spanning.aggregates.capabilities import Capabilities, ResultKind
from spanning.aggregates.columns import BatchColumns, no_columns

__all__ = ["Aggregate", "UserAggregate"]

_LEGACY_FLAGS = ("duplicate_sensitive", "vectorised", "inverse")


class Aggregate:
    """Protocol of every aggregate. Subclasses fill in the scalar face, and the array face when vectorised."""

    name: str = "aggregate"
    columns: tuple[str, ...] = ()
    numeric_columns: tuple[str, ...] = ()  # columns the batch path must read as numbers
    result_column: str | None = None  # the column whose type the result has (ResultKind.INPUT, RESULT_COLUMN)
    capabilities: Capabilities = Capabilities()
    inverse: Callable[[Any, Any], Any] | None = None  # inverse(total, oldest) -> total without its oldest part

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that sets the old flags instead of ``capabilities`` gets the capabilities they mean."""
        super().__init_subclass__(**kwargs)
        if "capabilities" in cls.__dict__:
            return
        flags = {k: cls.__dict__[k] for k in _LEGACY_FLAGS if k in cls.__dict__}
        if "duplicate_sensitive" in flags:
            delattr(cls, "duplicate_sensitive")  # the property below answers from the capabilities
        if "vectorised" in flags:
            delattr(cls, "vectorised")
        cls.capabilities = replace(
            cls.capabilities,
            invertible=flags["inverse"] is not None if "inverse" in flags else cls.capabilities.invertible,
            selective=not flags.get("duplicate_sensitive", cls.capabilities.cumulative),
            vectorised=flags.get("vectorised", cls.window_partials is not Aggregate.window_partials),
        )

    @property
    def duplicate_sensitive(self) -> bool:
        """Cumulative, ``not capabilities.selective``: the flag code read before capabilities were declared."""
        return self.capabilities.cumulative

    @duplicate_sensitive.setter
    def duplicate_sensitive(self, value: bool) -> None:
        self.capabilities = replace(self.capabilities, selective=not value)

    @property
    def vectorised(self) -> bool:
        """``capabilities.vectorised``: the flag code read before capabilities were declared."""
        return self.capabilities.vectorised

    @vectorised.setter
    def vectorised(self, value: bool) -> None:
        self.capabilities = replace(self.capabilities, vectorised=value)

    # --- scalar face (per-event path) -------------------------------------------------------
    def identity(self) -> Any:
        raise NotImplementedError

    def lift(self, row: Mapping[str, Any] | None, seq: int) -> Any:
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def lower(self, partial: Any) -> Any:
        raise NotImplementedError

    # --- array face (batch path), when capabilities.vectorised ------------------------------
    def window_partials(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> tuple:
        raise NotImplementedError

    def merge(self, a: tuple, b: tuple) -> tuple:
        """Combine two partial arrays window by window, ``a`` holding the older events."""
        raise NotImplementedError

    def identity_partials(self, n: int) -> tuple:
        """Partial arrays of ``n`` windows no event reached."""
        none = np.zeros(0, dtype=np.int64)
        return self.window_partials(no_columns(), none, none, n)

    def lower_partials(self, partials: tuple) -> Any:
        raise NotImplementedError

    def window_results(self, cols: BatchColumns, first: np.ndarray, last: np.ndarray, n: int) -> Any | None:
        """What ``lower_partials(window_partials(...))`` gives, without the partials, where an aggregate has a
        faster way (distinct counts and quantiles: no set or sketch per window); None where it has not. The
        batch path asks it for the windows that no other chunk's events reach."""
        return None

    # --- capabilities.form is Form.POWER_SUMS -----------------------------------------------
    def power_terms(self, lifted: Any) -> tuple[int, Any]:
        """(1, x) for a lifted event with value x, (1, None) for one counted without a value, (0, None) else."""
        raise NotImplementedError

    def from_power_sums(self, n: int, total: Any, squares: Any) -> Any:
        """The partial of values whose power sums are n, Σx and Σx², exact (ints or fractions.Fraction)."""
        raise NotImplementedError

    # --- capabilities.form is Form.ORDER (with ``largest``: the best value is the largest key) --
    def order_key(self, lifted: Any) -> Any:
        """The key under which a lifted event (not None) competes for the best value."""
        raise NotImplementedError

    def from_best(self, lifted: Any, ties: Callable[[], int]) -> Any:
        """The partial from the best lifted event; ``ties()`` counts the events that share its key."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<aggregate {self.name}>"


class UserAggregate(Aggregate):
    """An aggregate from your own functions (paper Table 1 categories decide ``duplicate_sensitive``).

    ``lift(row)`` gets the event's row (a mapping); ``combine(older, newer)`` must be associative with
    ``identity`` as neutral element. The batch path runs such aggregates on the per-event engine.
    ``inverse(total, oldest)``, when given, makes it invertible (for ``soe`` and SlickDeque's invertible form).

    >>> longest_name = UserAggregate("longest", identity="", lift=lambda row: row["name"],
    ...                              combine=lambda a, b: max(a, b, key=len), lower=lambda p: p or None,
    ...                              duplicate_sensitive=False, columns=("name",))
    >>> longest_name.lower(longest_name.combine(longest_name.lift({"name": "ab"}, 0), "abc"))
    'abc'
    >>> longest_name.capabilities.selective, longest_name.capabilities.invertible, longest_name.vectorised
    (True, False, False)
    """

    capabilities = Capabilities(result=ResultKind.ANY)

    def __init__(
        self,
        name: str,
        *,
        identity: Any,
        lift: Callable[[Mapping[str, Any]], Any],
        combine: Callable[[Any, Any], Any],
        lower: Callable[[Any], Any] = lambda partial: partial,
        duplicate_sensitive: bool = True,
        columns: tuple[str, ...] = (),
        inverse: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.name = name
        self.inverse = inverse
        self._identity = identity
        self._lift = lift
        self.combine = combine  # type: ignore[method-assign]
        self.lower = lower  # type: ignore[method-assign]
        self.columns = tuple(columns)
        self.capabilities = Capabilities(
            result=ResultKind.ANY, invertible=inverse is not None, selective=not duplicate_sensitive
        )

    def identity(self):
        return self._identity

    def lift(self, row, seq):
        return self._lift(row)
