"""Half-open intervals ``[l, u)`` over integer chronons and the three predicates of Suzanne et al., §2.1.

>>> overlaps((16, 34), (30, 35)), ends_in((16, 34), (30, 35)), goes_beyond((16, 34), (20, 25))
(True, True, True)

Every overlap is either "ends in" or "goes beyond", never both (P∩ = P⌟ ∨ P→, P⌟ ∧ P→ = ⊥).
"""

from __future__ import annotations

__all__ = ["Interval", "overlaps", "ends_in", "goes_beyond"]

Interval = tuple[int, int]


def overlaps(a: Interval, b: Interval) -> bool:
    """P∩(a, b): a and b share at least one chronon."""
    return a[0] < b[1] and b[0] < a[1]


def ends_in(a: Interval, b: Interval) -> bool:
    """P⌟(a, b): a ends inside b, ℓ(b) < u(a) ≤ u(b)."""
    return b[0] < a[1] <= b[1]


def goes_beyond(a: Interval, b: Interval) -> bool:
    """P→(a, b): a overlaps b and continues after it, ℓ(a) < u(b) < u(a)."""
    return a[0] < b[1] < a[1]
