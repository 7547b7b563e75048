"""Every SWAG == Recalc on random insert/evict/query sequences (concat, max, sum), and the shared contract."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.swag import ALGORITHMS, NEEDS_INVERSE, EmptyWindowError
from tests.budget import examples
from tests.swag_harness import MONOIDS, CountingMonoid, check_against_recalc, operations


def make(name):
    cls = ALGORITHMS[name]
    if name in NEEDS_INVERSE:
        return lambda combine, identity, inverse: cls(combine, identity, inverse=inverse)
    return lambda combine, identity, inverse: cls(combine, identity)


def monoids_for(name):
    if name in NEEDS_INVERSE:
        return ["sum"]
    if name == "slickdeque":  # without an inverse: the selective form
        return ["max"]
    return ["concat", "sum", "max"]


CASES = [(name, monoid) for name in sorted(ALGORITHMS) for monoid in monoids_for(name)]


@pytest.mark.parametrize(("name", "monoid"), CASES)
@settings(max_examples=examples(120), deadline=None)
@given(data=st.data())
def test_equals_recalc(name, monoid, data):
    check_against_recalc(make(name), monoid, data.draw(operations(MONOIDS[monoid][3])))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_contract(name):
    monoid = CountingMonoid()
    if name in NEEDS_INVERSE:
        swag = ALGORITHMS[name](lambda a, b: a + b, 0, inverse=lambda t, x: t - x)
        values = [3, 4, 5]
        expected = [3, 7, 12, 9, 5, 0]
    elif name == "slickdeque":  # without an inverse it is the selective form: max
        swag = ALGORITHMS[name](max, float("-inf"))
        values = [3, 1, 2]
        expected = [3, 3, 3, 2, 2, float("-inf")]
    else:
        swag = make(name)(monoid.combine, monoid.identity, None)
        values = ["a", "b", "c"]
        expected = ["a", "ab", "abc", "bc", "c", ""]
    assert swag.query() == {"soe": 0, "slickdeque": float("-inf")}.get(name, "") and swag.len() == 0
    got = []
    for v in values:
        swag.insert(v)
        got.append(swag.query())
    for _ in values:
        swag.evict()
        got.append(swag.query())
    assert got == expected and len(swag) == 0
    with pytest.raises(EmptyWindowError):
        swag.evict()
