"""Multi-query sharing (Shein and Chrysanthis, TKDE): composite slides and edges (Eq. 2), the
technique-aware Ω (Eq. 3-7), WeaveShare, and the deque-length term of Eq. 7 measured on SlickDeque."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.sharing import (
    TECHNIQUES,
    average_partials,
    composite_slide,
    edge_positions,
    edges,
    edges_closed,
    edges_enumerated,
    expected_deque_length,
    f1,
    harmonic,
    inverse_factorial_sum,
    max_sharing,
    no_sharing,
    omega,
    omega_per_edge,
    plan_cost,
    technique_name,
    weave_share,
    window_partials,
)
from spanning.swag.slickdeque import SlickDeque
from tests.budget import examples

queries_st = st.tuples(st.integers(1, 60), st.integers(1, 12))
groups_st = st.lists(queries_st, min_size=1, max_size=5).map(tuple)


def brute_force_edges(group, pairs=True) -> list[int]:
    """Positions 1..LCM marked by some query: a slide multiple, or (Pairs) a window start -r mod s."""
    lcm = math.lcm(*(s for _, s in group))
    return [p for p in range(1, lcm + 1) if any(p % s == 0 or (pairs and r % s and (p + r) % s == 0) for r, s in group)]


# --- composite slide and edges: by hand ------------------------------------------------------------------


def test_composite_slide_is_lcm():
    assert composite_slide(((6, 2), (8, 4))) == 4
    assert composite_slide(((10, 4), (9, 6), (5, 5))) == 60
    assert composite_slide((7, 3)) == 3  # a lone query is a singleton group


def test_edges_by_hand():
    # slides 2 and 3, ranges divisible: multiples 2, 3, 4, 6 of the composite slide 6
    assert edge_positions(((4, 2), (6, 3))) == (2, 3, 4, 6)
    assert edges(((4, 2), (6, 3))) == 4
    # F1 (Eq. 2) by hand: 6 (1/2 + 1/3) - 6 (1/6) = 3 + 2 - 1
    assert f1([2, 3]) == 4
    # Pairs (5, 3): f2 = 2, f1 = 1, so each slide of 3 has edges at offsets 1 and 3
    assert edge_positions((5, 3)) == (1, 3)
    assert edge_positions((5, 3), pairs=False) == (3,)
    # (5, 3) with (4, 2): LCM 6; (5,3) marks 1, 3, 4, 6; (4,2) marks 2, 4, 6
    assert edge_positions(((5, 3), (4, 2))) == (1, 2, 3, 4, 6)
    assert edges(((5, 3), (4, 2)), method="closed") == 5
    # identical queries add nothing; a slide dividing another subsumes its multiples (composite slide 4: 2, 4)
    assert edges(((8, 4), (8, 4), (6, 2))) == edges(((8, 4), (6, 2))) == 2


def test_f1_g1_shape():
    """Eq. 2 with three slides; G_1(3, 2) = 1/LCM(s1,s2) + 1/LCM(s1,s3) + 1/LCM(s2,s3) (the paper's example)."""
    s = (4, 6, 10)
    lcm = math.lcm(*s)
    g1_1 = Fraction(1, 4) + Fraction(1, 6) + Fraction(1, 10)
    g1_2 = Fraction(1, math.lcm(4, 6)) + Fraction(1, math.lcm(4, 10)) + Fraction(1, math.lcm(6, 10))
    g1_3 = Fraction(1, lcm)
    assert f1(s) == lcm * (g1_1 - g1_2 + g1_3) == len(brute_force_edges(tuple((x, x) for x in s)))


@settings(max_examples=examples(300), deadline=None)
@given(group=groups_st, pairs=st.booleans())
def test_edges_closed_form_matches_enumeration(group, pairs):
    brute = brute_force_edges(group, pairs)
    assert edge_positions(group, pairs=pairs) == tuple(brute)
    assert edges_enumerated(group, pairs=pairs) == edges_closed(group, pairs=pairs) == len(brute)
    assert edges(group, pairs=pairs) == len(brute)
    if not pairs:  # Eq. 2 as printed counts slide multiples only
        assert f1([s for _, s in group]) == len(brute)


@settings(max_examples=examples(200), deadline=None)
@given(group=groups_st)
def test_edges_bounds(group):
    lcm = composite_slide(group)
    e = edges(group)
    assert lcm // min(s for _, s in group) <= e <= lcm
    assert e <= sum((lcm // s) * (2 if r % s else 1) for r, s in set(group))


@settings(max_examples=examples(200), deadline=None)
@given(q=queries_st)
def test_pairs_partials_per_window_table_1(q):
    """Table 1, Pairs: r/s partials when r % s = 0, else 2⌊r/s⌋ + 1, in every window."""
    r, s = q
    expected = r // s if r % s == 0 else 2 * (r // s) + 1
    assert window_partials((q,)) == {q: frozenset({expected})}


def test_paper_example_2():
    """Example 2 (Fig. 15): slides 2 and 4 -> composite slide 4, edges at 2 and 4; windows of 3 and 4 partials."""
    ex2 = ((6, 2), (8, 4))
    assert composite_slide(ex2) == 4
    assert edge_positions(ex2) == (2, 4)
    assert edges(ex2) == 2 == f1([2, 4])
    assert [average_partials(q, ex2) for q in ex2] == [3, 4]
    assert window_partials(ex2) == {(6, 2): {3}, (8, 4): {4}}


def test_paper_pairs_figure_3_and_example_1():
    """Fig. 3: Pairs with range 14, slide 8: f2 = 14 % 8 = 6, f1 = 2, 2⌊14/8⌋ + 1 = 3 partials per window."""
    assert edge_positions((14, 8)) == (2, 8)  # fragments f1 = 2 then f2 = 6
    assert window_partials((14, 8)) == {(14, 8): {3}}
    # Example 1 (range 5 s, slide 3 s): f2 = 2, f1 = 1, 2·1 + 1 = 3 partials
    assert edge_positions((5, 3)) == (1, 3)
    assert window_partials((5, 3)) == {(5, 3): {3}}


def test_paper_panes_figure_2():
    """Fig. 2: Panes, range 4 slide 1: each final aggregation runs over 4 partials, Ω = r/s = 4 (Eq. 3)."""
    assert window_partials((4, 1)) == {(4, 1): {4}}
    assert omega_per_edge((4, 1), "Panes") == 4 == omega_per_edge((4, 1), "naive")


# --- Ω (Eq. 3-7) ------------------------------------------------------------------------------------------------


def test_single_query_omegas():
    """§4.1: one query: SlickDeque (Inv) Ω = 2, FlatFIT Ω = 3, Panes Ω = r/s."""
    q = (12, 3)
    assert omega_per_edge(q, "SlickDeque (Inv)") == 2
    assert omega_per_edge(q, "FlatFIT") == 3
    assert omega_per_edge(q, "Panes") == 4


def test_multi_query_omegas_by_hand():
    g = ((4, 1), (11, 1), (4, 1), (2, 1))  # one duplicate: Q = 3 unique ACQs, P_i = 4, 11, 2
    assert omega_per_edge(g, "panes") == 4 + 11 + 2  # Eq. 3
    assert omega_per_edge(g, "flatfit") == 9  # Eq. 5
    assert omega_per_edge(g, "slickdeque-inv") == 6  # Eq. 6
    # Eq. 4: P=4 -> 1 + 3/4; P=11 -> 3 + 10/8; P=2 -> 0 + 1/2
    assert omega_per_edge(g, "flatfat") == Fraction(7, 4) + Fraction(17, 4) + Fraction(1, 2)
    # Eq. 7: 2 - 2/11 + 3 + Σ_{i=1..11} 1/i!  (or H_11)
    assert omega_per_edge(g, "slickdeque-noninv") == 5 - Fraction(2, 11) + inverse_factorial_sum(11)
    assert omega_per_edge(g, "slickdeque-noninv", deque_length="harmonic") == 5 - Fraction(2, 11) + harmonic(11)


def test_eq7_single_query_window_4():
    # 2 - 2/4 + 1 + (1 + 1/2 + 1/6 + 1/24) = 101/24; harmonic: 5/2 + 25/12 = 55/12
    assert omega_per_edge((4, 1), "slickdeque-noninv") == Fraction(101, 24)
    assert omega_per_edge((4, 1), "slickdeque-noninv", deque_length="harmonic") == Fraction(55, 12)


@pytest.mark.parametrize("k", range(1, 8))
def test_flatfat_eq4_matches_quick_estimate_at_powers_of_two(k):
    """§4.1: Ω ≈ log2(P_i - 1) + 1 per query; Eq. 4 equals it exactly when P_i - 1 is a power of two."""
    p = 2**k + 1
    assert omega_per_edge((p, 1), "FlatFAT") == k + 1


def test_deque_length_terms():
    assert inverse_factorial_sum(3) == Fraction(5, 3)
    assert harmonic(4) == Fraction(25, 12)
    assert abs(float(inverse_factorial_sum(30)) - (math.e - 1)) < 1e-12
    assert expected_deque_length(1, "paper") == expected_deque_length(1, "harmonic") == 1
    with pytest.raises(ValueError):
        expected_deque_length(3, "median")  # type: ignore[arg-type]


def test_slickdeque_inv_exact_running_aggregates():
    ex2 = ((6, 2), (8, 4))
    assert omega_per_edge(ex2, "slickdeque-inv", running_aggregates="exact") == 4  # counts {3, 4}
    g = ((5, 3), (4, 2))  # composite slide 6, edges 1,2,3,4,6: windows of varying partial counts
    counts = set().union(*window_partials(g).values())
    assert omega_per_edge(g, "slickdeque-inv", running_aggregates="exact") == 2 * len(counts)


def test_omega_units_and_rate():
    ex2 = ((6, 2), (8, 4))
    # time units: λ + (2/4) Ω; count units: λ + λ (2/4) Ω
    assert omega(ex2, "panes", input_rate=10) == 10 + Fraction(1, 2) * 5
    assert omega(ex2, "panes", input_rate=10, units="count") == 10 + 10 * Fraction(1, 2) * 5
    assert plan_cost(no_sharing(ex2), "panes") == omega((6, 2), "panes") + omega((8, 4), "panes")


def test_technique_names_and_validation():
    assert technique_name("SlickDeque (Non-Inv)") == "slickdeque-noninv"
    assert technique_name("flatFAT") == "flatfat"
    with pytest.raises(ValueError):
        technique_name("daba")
    with pytest.raises(ValueError):
        omega((0, 1), "panes")
    with pytest.raises(TypeError):
        omega((1.5, 1), "panes")


# --- plans and WeaveShare ---------------------------------------------------------------------------------------


def test_no_and_max_sharing():
    qs = [(6, 2), (8, 4), (5, 3)]
    assert no_sharing(qs) == [((6, 2),), ((8, 4),), ((5, 3),)]
    assert max_sharing(qs) == [((6, 2), (8, 4), (5, 3))]
    assert max_sharing([]) == []


def test_weave_share_selective_sharing():
    """§3.1.1: maximum sharing is not always best. Slides 10 and 7 share few edges; sharing saves one partial
    aggregation (λ) but almost doubles the edges: worth it at λ = 1, not at λ = 1/100."""
    qs = [(10, 10), (7, 7)]
    high = weave_share(qs, "panes", input_rate=1)
    assert high.groups == [((10, 10), (7, 7))]
    assert high.cost == 1 + Fraction(16, 70) * 2
    low = weave_share(qs, "panes", input_rate=Fraction(1, 100))
    assert low.groups == [((10, 10),), ((7, 7),)]
    assert low.cost == plan_cost(no_sharing(qs), "panes", input_rate=Fraction(1, 100))
    assert low.cost < plan_cost(max_sharing(qs), "panes", input_rate=Fraction(1, 100))


plan_st = st.lists(st.tuples(st.integers(1, 40), st.sampled_from([1, 2, 3, 4, 5, 6, 8, 10, 12])), max_size=7)


@settings(max_examples=examples(60), deadline=None)
@given(qs=plan_st, technique=st.sampled_from(TECHNIQUES), rate=st.sampled_from([Fraction(1, 50), 1, 20]))
def test_weave_share_properties(qs, technique, rate):
    plan = weave_share(qs, technique, input_rate=rate)
    assert isinstance(plan.cost, Fraction)
    assert plan.cost == plan_cost(plan.groups, technique, input_rate=rate)
    assert plan.cost <= plan_cost(no_sharing(qs), technique, input_rate=rate)
    assert sorted(q for g in plan.groups for q in g) == sorted(qs)  # a partition of the queries
    # greedy stops only when no pair of trees gains from a merge
    for i in range(len(plan.groups)):
        for j in range(i + 1, len(plan.groups)):
            a, b = plan.groups[i], plan.groups[j]
            gain = omega(a, technique, input_rate=rate) + omega(b, technique, input_rate=rate)
            assert gain - omega(a + b, technique, input_rate=rate) <= 0


@settings(max_examples=examples(100), deadline=None)
@given(
    q=queries_st,
    technique=st.sampled_from(TECHNIQUES),
    rate=st.sampled_from([Fraction(1, 1000), 1, 7]),
    deque=st.sampled_from(["paper", "harmonic"]),
)
def test_merging_identical_queries_helps(q, technique, rate, deque):
    one = omega(q, technique, input_rate=rate, deque_length=deque)
    assert isinstance(one, Fraction)
    assert omega((q, q), technique, input_rate=rate, deque_length=deque) < 2 * one
    plan = weave_share([q, q, q], technique, input_rate=rate, deque_length=deque)
    assert plan.groups == [(q, q, q)] and plan.cost == one


# --- Eq. 7's deque-length term against the project's SlickDeque (Non-Inv) --------------------------------------


class CountingMax:
    """max as the ⊗ of SlickDeque, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, a, b):
        self.calls += 1
        return max(a, b)


def measure_slickdeque(n: int, slides: int, seed: int) -> tuple[float, float]:
    """Average deque length and ⊗ per slide over i.i.d. uniform input with a window of n (evict, then insert)."""
    rng = random.Random(seed)
    op = CountingMax()
    swag = SlickDeque(op, float("-inf"))
    for _ in range(n):
        swag.insert(rng.random())
    op.calls, total_len = 0, 0
    for _ in range(slides):
        swag.evict()
        swag.insert(rng.random())
        total_len += len(swag.nodes())
    return total_len / slides, op.calls / slides


@pytest.mark.parametrize("n", [8, 64, 512, 4096])
def test_harmonic_deque_length_beats_paper_term(n):
    avg_len, ops = measure_slickdeque(n, slides=max(20_000, 10 * n), seed=n)
    h, paper = float(harmonic(n)), float(inverse_factorial_sum(n))
    print(f"n={n}: deque length {avg_len:.4f}, H_n {h:.4f}, Σ1/i! {paper:.4f}; ⊗/slide {ops:.5f}, 2-2/n {2 - 2 / n}")
    assert abs(avg_len - h) < abs(avg_len - paper)
    assert abs(avg_len - h) / h < 0.05
    if n >= 64:
        assert avg_len > 2 * paper  # the paper's term (→ e - 1) is off by a growing factor
    # the update part of Eq. 7, 2 - 2/P_max, is right: one pop per value not expiring, one failed test unless
    # the new value is the window's maximum
    assert abs(ops - (2 - 2 / n)) < 0.01
