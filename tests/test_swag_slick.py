"""SlickDeque, FlatFAT and FlatFIT (Shein et al.; Shein and Chrysanthis, §2.2): against Recalc, per-range
queries, the worked examples of Shein et al., Figures 8-9, and the operation counts the paper quotes or derives."""

from __future__ import annotations

import math
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.swag.flatfat import FlatFAT
from spanning.swag.flatfit import FlatFIT
from spanning.swag.protocol import EmptyWindowError
from spanning.swag.recalc import Recalc
from spanning.swag.slickdeque import SlickDeque, SlickDequeInv, SlickDequeNonInv
from tests.budget import examples
from tests.swag_harness import MONOIDS, CountingMonoid, check_against_recalc, operations

NEG_INF, POS_INF = float("-inf"), float("inf")


class Counted:
    """Wraps a binary operation and counts its calls (the paper's "operations")."""

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, a, b):
        self.calls += 1
        return self.fn(a, b)


# --- every algorithm against Recalc (shared harness) ---------------------------------------------


@pytest.mark.parametrize("cls", [FlatFAT, FlatFIT])
@pytest.mark.parametrize("monoid", ["concat", "sum", "max"])
@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_tree_and_index_against_recalc(cls, monoid, data):
    ops = data.draw(operations(MONOIDS[monoid][3]))
    check_against_recalc(lambda c, i, inv: cls(c, i), monoid, ops)


@settings(max_examples=examples(200), deadline=None)
@given(ops=operations(MONOIDS["max"][3]))
def test_slickdeque_non_invertible_max_against_recalc(ops):
    check_against_recalc(lambda c, i, inv: SlickDeque(c, i), "max", ops)


@settings(max_examples=examples(200), deadline=None)
@given(ops=operations(MONOIDS["sum"][3]))
def test_slickdeque_invertible_sum_against_recalc(ops):
    check_against_recalc(lambda c, i, inv: SlickDeque(c, i, inverse=inv), "sum", ops)


@settings(max_examples=examples(200), deadline=None)
@given(ops=operations(MONOIDS["sum"][3]), ranges=st.lists(st.integers(1, 12), max_size=4))
def test_slickdeque_invertible_with_registered_ranges_against_recalc(ops, ranges):
    """Registered ranges change the bookkeeping of insert/evict, never the whole-window answer."""
    check_against_recalc(lambda c, i, inv: SlickDeque(c, i, inverse=inv, ranges=ranges), "sum", ops)


def run_against(swag, reference, ops) -> None:
    """The harness loop, for monoids the shared table does not list."""
    for op in ops:
        if op[0] == "insert":
            swag.insert(op[1])
            reference.insert(op[1])
        elif op[0] == "evict" and reference.len():
            swag.evict()
            reference.evict()
        assert swag.len() == reference.len() == len(swag)
        assert swag.query() == reference.query()


@settings(max_examples=examples(200), deadline=None)
@given(ops=operations(st.integers(-50, 50)))
def test_slickdeque_non_invertible_min_against_recalc(ops):
    run_against(SlickDeque(min, POS_INF), Recalc(min, POS_INF), ops)


def first_max(a, b):
    """Selective, associative, not commutative: the earliest of the largest (value, tag) pairs."""
    return b if b[0] > a[0] else a


@settings(max_examples=examples(200), deadline=None)
@given(ops=operations(st.tuples(st.integers(-3, 3), st.integers(0, 5))))
def test_slickdeque_non_invertible_non_commutative_selective(ops):
    identity = (NEG_INF, -1)
    run_against(SlickDeque(first_max, identity), Recalc(first_max, identity), ops)


# --- per-range queries (shared plans) ------------------------------------------------------------


def range_operations(values):
    return st.lists(
        st.one_of(
            st.tuples(st.just("insert"), values),
            st.just(("evict",)),
            st.tuples(st.just("range"), st.integers(1, 12)),
            st.tuples(st.just("ranges"), st.lists(st.integers(1, 12), max_size=5)),
        ),
        max_size=200,
    )


def fold(combine, identity, values):
    result = identity
    for x in values:
        result = combine(result, x)
    return result


def check_ranges(swag, combine, identity, ops) -> None:
    """Every ``query(range_=r)`` / ``query_ranges`` equals the recalculation over the r newest values."""
    window: list = []
    for op in ops:
        if op[0] == "insert":
            swag.insert(op[1])
            window.append(op[1])
        elif op[0] == "evict":
            if not window:
                with pytest.raises(EmptyWindowError):
                    swag.evict()
                continue
            swag.evict()
            window.pop(0)
        elif op[0] == "range":
            assert swag.query(range_=op[1]) == fold(combine, identity, window[-op[1] :])
        elif hasattr(swag, "query_ranges"):
            expected = [fold(combine, identity, window[-r:]) for r in op[1]]
            assert swag.query_ranges(op[1]) == expected
        assert swag.query() == fold(combine, identity, window)
        assert len(swag) == len(window)


@settings(max_examples=examples(200), deadline=None)
@given(ops=range_operations(st.integers(-50, 50)))
def test_slickdeque_non_invertible_ranges(ops):
    check_ranges(SlickDeque(max, NEG_INF), max, NEG_INF, ops)


@settings(max_examples=examples(200), deadline=None)
@given(ops=range_operations(st.integers(-1000, 1000)), ranges=st.lists(st.integers(1, 12), max_size=3))
def test_slickdeque_invertible_ranges(ops, ranges):
    check_ranges(SlickDeque(operator.add, 0, inverse=operator.sub, ranges=ranges), operator.add, 0, ops)


@pytest.mark.parametrize("cls", [FlatFAT, FlatFIT])
@settings(max_examples=examples(200), deadline=None)
@given(ops=range_operations(st.text(alphabet="abcdefgh", min_size=1, max_size=2)))
def test_tree_and_index_ranges_keep_order(cls, ops):
    check_ranges(cls(operator.add, ""), operator.add, "", ops)


def test_construction_and_errors():
    assert isinstance(SlickDeque(max, NEG_INF), SlickDequeNonInv)
    assert isinstance(SlickDeque(operator.add, 0, inverse=operator.sub), SlickDequeInv)
    assert {SlickDeque.name, FlatFAT.name, FlatFIT.name} == {"slickdeque", "flatfat", "flatfit"}
    with pytest.raises(ValueError, match="inverse"):
        SlickDequeInv(operator.add, 0)
    for swag in (SlickDeque(max, NEG_INF), SlickDeque(operator.add, 0, inverse=operator.sub), FlatFAT(max, NEG_INF),
                 FlatFIT(max, NEG_INF)):  # fmt: skip
        with pytest.raises(EmptyWindowError):
            swag.evict()
        swag.insert(1)
        with pytest.raises(ValueError, match="at least 1"):
            swag.query(range_=0)


def test_buffers_grow_and_shrink_with_the_window():
    fat, fit = FlatFAT(operator.add, 0), FlatFIT(operator.add, 0)
    for swag in (fat, fit):
        for x in range(1000):
            swag.insert(x)
        swag.query()
        for _ in range(990):
            swag.evict()
        assert swag.query() == sum(range(990, 1000))
    assert fat.cap <= 4 * 10 and fit.mask + 1 <= 4 * 10


# --- Shein et al., Examples 2-3 (Figures 8-9): Q1 = range 3, Q2 = range 5, slide 1, wSize 5 ----------

STREAM = [6, 5, 0, 1, 3, 4, 2, 7]
FIG8_SUM = [(6, 6), (11, 11), (11, 11), (6, 12), (4, 15), (8, 13), (9, 10), (13, 17)]  # (Q1, Q2) per step
FIG9_MAX = [(6, 6), (6, 6), (6, 6), (5, 6), (3, 6), (4, 5), (4, 4), (7, 7)]
FIG9_DEQUE = [[6], [6, 5], [6, 5, 0], [6, 5, 1], [6, 5, 3], [5, 4], [4, 2], [7]]
W_SIZE, RANGES = 5, [5, 3]  # Q2 first: a shared plan orders a slide's queries by descending range


def naive(op, init_val):
    """The paper's Naive: a circular array of wSize partials set to initVal, each query folds its range."""
    partials, answers = [init_val] * W_SIZE, []
    for curr_pos, x in enumerate(STREAM):
        curr_pos %= W_SIZE
        partials[curr_pos] = x
        step = {}
        for r in RANGES:
            acc = partials[curr_pos]
            for k in range(1, r):  # r - 1 operations
                acc = op(partials[(curr_pos - k) % W_SIZE], acc)
            step[r] = acc
        answers.append((step[3], step[5]))
    return answers


def algorithm2_as_printed(op, strict: bool):
    """Algorithm 2 transcribed line by line (circular positions, two answer loops).

    ``strict=True`` keeps the printed ``<`` of the answer loops, ``False`` the ``<=`` the figure needs."""
    deque: list[list] = []  # [pos, val] nodes
    curr_pos, answers = 0, []
    for new in STREAM:
        if deque and deque[0][0] == curr_pos:
            deque.pop(0)
        while deque and op(deque[-1][1], new) == new:
            deque.pop()
        deque.append([curr_pos, new])
        i, step = 0, {}
        for r in RANGES:
            start_pos, crossed = curr_pos - r, False
            if start_pos < 0:
                start_pos, crossed = start_pos + W_SIZE, True

            def before(pos, start_pos=start_pos):
                return pos < start_pos if strict else pos <= start_pos

            if not crossed:
                while before(deque[i][0]) or deque[i][0] > curr_pos:  # Answer Loop 1
                    i += 1
            else:
                while before(deque[i][0]) and deque[i][0] > curr_pos:  # Answer Loop 2
                    i += 1
            step[r] = deque[i][1]
        answers.append((step[3], step[5]))
        curr_pos = (curr_pos + 1) % W_SIZE
    return answers


def drive(swag, pad=None):
    """Run the example on a SWAG as the shared plan would: window of wSize, evict the expiring partial, insert
    the new one, answer Q2 then Q1. ``pad`` first fills the window with wSize initVal partials, as Algorithm 1's
    preparation does (lines 8-10). Returns the (Q1, Q2) answers per step."""
    if pad is not None:
        for _ in range(W_SIZE):
            swag.insert(pad)
    answers = []
    for x in STREAM:
        if len(swag) == W_SIZE:
            swag.evict()
        swag.insert(x)
        q2, q1 = swag.query_ranges(RANGES)
        assert (q2, q1) == (swag.query(range_=5), swag.query(range_=3))
        answers.append((q1, q2))
    return answers


def test_figure_9_slickdeque_non_invertible():
    """Example 3 / Figure 9 (Max): the answers and the deque contents after each step."""
    swag = SlickDeque(max, NEG_INF)
    deques = []
    for x in STREAM:
        if len(swag) == W_SIZE:
            swag.evict()
        swag.insert(x)
        deques.append([val for _, val in swag.nodes()])
    assert deques == FIG9_DEQUE
    assert drive(SlickDeque(max, NEG_INF)) == FIG9_MAX


def test_figure_9_needs_le_in_algorithm_2():
    """The known slip: with the printed ``<`` Q1 at step 4 answers 6 (node pos 0 == startPos is not skipped)."""
    assert algorithm2_as_printed(max, strict=False) == FIG9_MAX
    printed = algorithm2_as_printed(max, strict=True)
    assert printed[3] == (6, 6) != FIG9_MAX[3]


def test_figure_8_slickdeque_invertible():
    """Example 2 / Figure 8 (Sum), with and without the initVal padding of Algorithm 1's preparation."""
    assert drive(SlickDeque(operator.add, 0, inverse=operator.sub, ranges=(3, 5))) == FIG8_SUM
    assert drive(SlickDeque(operator.add, 0, inverse=operator.sub, ranges=(3, 5)), pad=0) == FIG8_SUM
    assert drive(SlickDeque(operator.add, 0, inverse=operator.sub)) == FIG8_SUM  # ranges registered lazily


def test_naive_counts_48_operations():
    """Example 2: "Naive had to execute a total of 48 Sum operations"; Example 3: "48 Max operations".

    Every step folds the 3 and the 5 newest array cells, initVal included: (2 + 4) x 8 steps = 48."""
    for op, init_val, expected in ((operator.add, 0, FIG8_SUM), (max, NEG_INF, FIG9_MAX)):
        counted = Counted(op)
        assert naive(counted, init_val) == expected
        assert counted.calls == 48


def test_slickdeque_non_invertible_counts_11_operations():
    """Example 3: "SlickDeque (Non-Inv) executed 11" Max operations.

    They are the ⊕ of line 16 only (the answer loops compare positions, not values). Per step:
    0, 1, 1, 2, 2, 2, 1, 2 = 11; the printed transcription agrees."""
    counted = Counted(max)
    drive(SlickDeque(counted, NEG_INF))
    assert counted.calls == 11
    counted = Counted(max)
    algorithm2_as_printed(counted, strict=False)
    assert counted.calls == 11


def test_slickdeque_invertible_counts_32_operations():
    """Example 2: "SlickDeque (Inv) executed a total of 32 operations (Sum and Subtract)".

    Algorithm 1 line 24 spends one ⊕ and one ⊖ per range per step, 2 x 2 x 8 = 32 (16 Sum, 16 Subtract),
    counting the subtractions of the initVal zeros that fill ``partials`` at first. Driven the same way --
    the window prepared with wSize initVal partials (lines 8-10), counted from step 1 -- SlickDequeInv does
    exactly that: per step, the total (Q2, range = wSize) takes ⊕ new and ⊖ expiring, Q1's answer ⊕ new
    and ⊖ the value leaving its range.

    On the bare stream (no padding: our windows are dynamic and start empty) it spends 20: the total 8 ⊕ +
    3 ⊖ (evictions at steps 6-8 only, the 5 ⊖ of initVal are not needed), Q1 nothing at steps 1-3 (the
    window is not longer than 3, Q1 = total), 1 ⊖ at step 4 (Q1 = total ⊖ 6) and 2 per step at steps 5-8.
    """
    plus, minus = Counted(operator.add), Counted(operator.sub)
    swag = SlickDeque(plus, 0, inverse=minus, ranges=(3, 5))
    for _ in range(W_SIZE):
        swag.insert(0)
    plus.calls = minus.calls = 0
    assert drive(swag) == FIG8_SUM
    assert (plus.calls, minus.calls) == (16, 16)

    plus, minus = Counted(operator.add), Counted(operator.sub)
    assert drive(SlickDeque(plus, 0, inverse=minus, ranges=(3, 5))) == FIG8_SUM
    assert (plus.calls, minus.calls) == (8 + 4, 3 + 1 + 4)  # 12 + 8 = 20: see the docstring


# --- the costs of Shein et al., §4.1 ---------------------------------------------------------------


def test_slickdeque_invertible_single_query_two_operations_per_slide():
    plus, minus = Counted(operator.add), Counted(operator.sub)
    swag = SlickDeque(plus, 0, inverse=minus)
    for x in range(100):
        swag.insert(x)
    for x in range(1000):
        before = plus.calls + minus.calls
        swag.evict()
        swag.insert(x)
        swag.query()
        assert plus.calls + minus.calls - before == 2


@settings(max_examples=examples(100), deadline=None)
@given(values=st.lists(st.integers(0, 30), min_size=1, max_size=300), n=st.integers(1, 40))
def test_slickdeque_non_invertible_fewer_than_two_operations_per_slide(values, n):
    """Every partial is tested at most twice in its lifetime (§4.1): ⊗ calls < 2 per inserted value."""
    counted = Counted(max)
    swag = SlickDeque(counted, NEG_INF)
    for x in values:
        if len(swag) == n:
            swag.evict()
        swag.insert(x)
        swag.query()
    assert counted.calls < 2 * len(values)


@pytest.mark.parametrize("n", [5, 8, 16, 33])
def test_flatfit_period_of_n_plus_1_slides_costs_3_n_minus_1(n):
    """§4.1: a window reset of n - 1 operations, surrounded by two 1-operation slides, the other slides 2:
    (n - 1) + 2(n - 2) + 2 = 3(n - 1) per n + 1 slides of a single query over a window of n."""
    counting = CountingMonoid()
    swag = FlatFIT(counting.combine, counting.identity)
    for x in range(n):
        swag.insert(str(x % 10))
    swag.query()
    per_slide = []
    for x in range(4 * (n + 1)):
        before = counting.calls
        swag.evict()
        swag.insert(str(x % 10))
        swag.query()
        per_slide.append(counting.calls - before)
    period = per_slide[: n + 1]
    assert per_slide == period * 4
    assert sorted(period) == [1, 1] + [2] * (n - 2) + [n - 1]
    assert sum(period) == 3 * (n - 1)


def test_flatfat_update_walks_log2_levels_and_unwrapped_query_is_free():
    counting = CountingMonoid()
    swag = FlatFAT(counting.combine, counting.identity)
    for x in range(16):
        swag.insert("ab"[x % 2])
    assert swag.cap == 16
    before = counting.calls
    swag.query()
    assert counting.calls == before  # not wrapped: the root
    for x in range(40):
        before = counting.calls
        swag.evict()
        swag.insert("ab"[x % 2])
        assert counting.calls - before == 2 * int(math.log2(swag.cap))  # two leaf-to-root paths
        before = counting.calls
        assert swag.query() == ("ab" * 8 if x % 2 else "ba" * 8)
        assert counting.calls - before <= 2 * int(math.log2(swag.cap))  # wrapped: suffix then prefix
