"""Shared generators and checks for the SWAG tests: every algorithm against Recalc.

``CountingMonoid`` is a non-commutative monoid (string concatenation) that counts ⊗ invocations, for
the operation-count tests of the papers.
"""

from __future__ import annotations

import operator

from hypothesis import strategies as st

from spanning.swag.recalc import Recalc


class CountingMonoid:
    """String concatenation that counts its ⊗ calls; non-commutative, so order mistakes show."""

    identity = ""

    def __init__(self) -> None:
        self.calls = 0

    def combine(self, a: str, b: str) -> str:
        self.calls += 1
        return a + b


# name -> (combine, identity, inverse or None, value strategy)
MONOIDS = {
    "concat": (operator.add, "", None, st.text(alphabet="abcdefgh", min_size=1, max_size=2)),
    "sum": (operator.add, 0, operator.sub, st.integers(-1000, 1000)),
    "max": (max, float("-inf"), None, st.integers(-50, 50)),
}


# a sequence of operations: ("insert", value) / ("evict",) / ("query",), evictions only when non-empty
def operations(values: st.SearchStrategy, max_ops: int = 300):
    return st.lists(
        st.one_of(
            st.tuples(st.just("insert"), values),
            st.just(("evict",)),
            st.just(("query",)),
        ),
        max_size=max_ops,
    )


def check_against_recalc(make, monoid: str, ops) -> None:
    """Run ``ops`` on ``make(combine, identity[, inverse])`` and on Recalc; every query and len agree."""
    combine, identity, inverse, _ = MONOIDS[monoid]
    swag = make(combine, identity, inverse) if inverse is not None else make(combine, identity, None)
    reference = Recalc(combine, identity)
    for op in ops:
        if op[0] == "insert":
            swag.insert(op[1])
            reference.insert(op[1])
        elif op[0] == "evict":
            if reference.len() == 0:
                continue
            swag.evict()
            reference.evict()
        assert swag.len() == reference.len() == len(swag)
        assert swag.query() == reference.query(), (op, swag.query(), reference.query())
