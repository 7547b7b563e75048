"""Technique-aware multi-query optimisation of sliding-window aggregates (Shein and Chrysanthis, TKDE).

A query (ACQ) is ``(r, s)``: range and slide as positive integers in one unit (time or tuples). A group is a
tuple of queries evaluated by one shared execution tree; a plan is a list of disjoint groups.

* **Shared plans** (§3.1; Shein et al., §2.3). The composite slide of a group is ``LCM_n``, the LCM of its
  slides (:func:`composite_slide`). Every slide multiple is an *edge*; with Pairs partial aggregation (§2.1,
  ``f2 = r % s``, ``f1 = s - f2``) every fragment boundary is one too: the boundary sits ``r % s`` before each
  slide multiple, i.e. at the positions ``≡ -r (mod s)``, where the windows start. :func:`edges` counts the
  distinct edges per composite slide, by enumeration or by a closed form: Eq. 2 (Formula F1,
  ``LCM_n Σ_i (-1)^{i+1} G_1(n, i)``, :func:`f1`) is inclusion-exclusion over the slide multiples; fragment
  boundaries are residue classes too, so the same inclusion-exclusion over residue classes (their
  intersections by the Chinese remainder theorem) gives the exact count with fragments (:func:`edges_closed`).
* **Cost of a plan** (Eq. 1): ``C = mλ + Σ_i E_i Ω_i``: every tree runs its own partial aggregation (``λ``
  operations per unit of time, one per tuple) and, at each edge, a final aggregation of ``Ω_i`` operations;
  ``E_i`` is the tree's edge rate. :func:`omega` returns one tree's term ``λ + E_i Ω_i``;
  :func:`omega_per_edge` returns the paper's ``Ω`` itself (§4.1, Eq. 3-7, Table 3):

  ======================  ===========================================================================
  Panes (Naive)           Eq. 3: ``Σ_i r_i / s_i``
  FlatFAT                 Eq. 4: ``Σ_i (⌊log2(P_i - 1)⌋ + (P_i - 1) / 2^⌊log2 P_i⌋)``
  FlatFIT                 Eq. 5: ``3 Q``
  SlickDeque (Inv)        Eq. 6: ``2 · #unique P_i``
  SlickDeque (Non-Inv)    Eq. 7: ``2 - 2/P_max + Q + D(P_max)``
  ======================  ===========================================================================

  ``P_i = r_i / (average partial length) = r_i · edges / LCM_n`` (§4.1), ``Q`` the number of unique queries.
  ``D(n)`` is the expected deque length: the paper prints ``Σ_{i=1..n} 1/i!`` (→ e - 1); the expected number of
  nodes of a max-deque over n i.i.d. continuous values is the number of right-to-left maxima, the harmonic
  number ``H_n = Σ_{i=1..n} 1/i`` (~ ln n). ``deque_length="paper"`` or ``"harmonic"`` picks one.
* **WeaveShare** (§3.1.1): start from the no-share plan and repeatedly merge the pair of trees whose merge
  lowers the plan cost the most, while some merge lowers it (:func:`weave_share`).

All costs are exact :class:`fractions.Fraction`.

>>> ex2 = ((6, 2), (8, 4))  # Example 2: max over range 6 / slide 2 and range 8 / slide 4 (tuples)
>>> composite_slide(ex2), edge_positions(ex2), edges(ex2), f1([2, 4])
(4, (2, 4), 2, 2)
>>> [average_partials(q, ex2) for q in ex2]  # "the last three partials ... the last 4"
[Fraction(3, 1), Fraction(4, 1)]
>>> omega_per_edge(ex2, "Panes"), omega_per_edge(ex2, "SlickDeque (Inv)")
(Fraction(5, 1), Fraction(4, 1))
>>> omega((6, 2), "slickdeque-inv") + omega((8, 4), "slickdeque-inv"), omega(ex2, "slickdeque-inv")
(Fraction(7, 2), Fraction(3, 1))
>>> weave_share(ex2, "slickdeque-inv")
Plan(groups=[((6, 2), (8, 4))], cost=Fraction(3, 1))
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from fractions import Fraction
from functools import lru_cache
from itertools import combinations
from typing import Literal, NamedTuple

Query = tuple[int, int]  # (r, s): range and slide
Group = tuple[Query, ...]  # the queries of one execution tree
DequeLength = Literal["paper", "harmonic"]
RunningAggregates = Literal["paper", "exact"]
Units = Literal["time", "count"]

TECHNIQUES: tuple[str, ...] = ("panes", "flatfat", "flatfit", "slickdeque-inv", "slickdeque-noninv")
_ALIASES = {
    "panes": "panes",
    "naive": "panes",  # §2.2: "Panes (which we consider to be Naive)"
    "flatfat": "flatfat",
    "flatfit": "flatfit",
    "slickdequeinv": "slickdeque-inv",
    "slickdequenoninv": "slickdeque-noninv",
}
ENUMERATION_LIMIT = 1 << 20  # edges(method="auto") enumerates when it marks at most this many positions


class Plan(NamedTuple):
    """An execution plan: disjoint groups (one execution tree each) and its cost C (Eq. 1) per unit of time."""

    groups: list[Group]
    cost: Fraction


# --- queries and groups ---------------------------------------------------------------------------------


def _query(q: Sequence[int]) -> Query:
    r, s = q
    if isinstance(r, bool) or isinstance(s, bool) or not isinstance(r, int) or not isinstance(s, int):
        raise TypeError(f"a query is (range, slide) as positive integers, not {q!r}")
    if r < 1 or s < 1:
        raise ValueError(f"range and slide must be positive, not {q!r}")
    return (r, s)


def _group(group: Query | Iterable[Sequence[int]]) -> Group:
    """A group as a tuple of queries; a lone (r, s) pair of ints is the singleton group."""
    if isinstance(group, tuple) and len(group) == 2 and all(isinstance(x, int) for x in group):
        return (_query(group),)
    out = tuple(_query(q) for q in group)
    if not out:
        raise ValueError("a group needs at least one query")
    return out


def _unique(group: Group) -> list[Query]:
    """The unique ACQs of a group (identical queries share one answer), in first-seen order."""
    return list(dict.fromkeys(group))


def composite_slide(group: Query | Iterable[Sequence[int]]) -> int:
    """LCM_n: the composite slide, the LCM of the group's slides (§3.1)."""
    return math.lcm(*(s for _, s in _group(group)))


def _classes(group: Group, pairs: bool) -> list[tuple[int, int]]:
    """The edges as residue classes (a mod m): slide multiples (0 mod s) and Pairs fragment boundaries (-r mod s)."""
    out: set[tuple[int, int]] = set()
    for r, s in group:
        out.add((0, s))  # every slide multiple is an edge
        if pairs and r % s:
            out.add(((-r) % s, s))  # f2 = r % s before each slide multiple: where the windows start
    # drop a class contained in another one (its modulus a multiple of the other's): the union is unchanged
    kept = [(a, m) for a, m in out if not any((b, d) != (a, m) and m % d == 0 and a % d == b for b, d in out)]
    return sorted(kept, key=lambda c: (c[1], c[0]))


# --- edges (Eq. 2) -----------------------------------------------------------------------------------------


def edge_positions(group: Query | Iterable[Sequence[int]], *, pairs: bool = True) -> tuple[int, ...]:
    """The edges of one composite slide as positions 1..LCM_n (position LCM_n is the composite slide's end)."""
    g = _group(group)
    lcm = composite_slide(g)  # LCM_n
    marked: set[int] = set()
    for a, m in _classes(g, pairs):
        marked.update(range(a, lcm, m))
    return tuple(sorted(p or lcm for p in marked))


def edges_enumerated(group: Query | Iterable[Sequence[int]], *, pairs: bool = True) -> int:
    """Edges per composite slide by marking every slide multiple and fragment boundary (the Bit Set way)."""
    return len(edge_positions(group, pairs=pairs))


def f1(slides: Iterable[int]) -> int:
    """Eq. 2 (Formula F1) as printed: ``LCM_n Σ_{i=1..n} (-1)^{i+1} G_1(n, i)``, edges from slide multiples only.

    ``G_1(n, i)`` is the sum of ``1 / LCM`` over every i-subset of the n slides. O(2^n).
    """
    ss = list(slides)
    if not ss or any(s < 1 for s in ss):
        raise ValueError("F1 needs one or more positive slides")
    lcm_n = math.lcm(*ss)  # LCM_n
    total = Fraction(0)
    for i in range(1, len(ss) + 1):
        g1 = sum((Fraction(1, math.lcm(*c)) for c in combinations(ss, i)), Fraction(0))  # G_1(n, i)
        total += (-1) ** (i + 1) * g1
    count = lcm_n * total
    assert count.denominator == 1
    return int(count)


def _crt(a: int, m: int, b: int, n: int) -> tuple[int, int] | None:
    """x ≡ a (mod m) and x ≡ b (mod n) as one class (x mod lcm), or None when they never meet."""
    g = math.gcd(m, n)
    if (b - a) % g:
        return None
    mg, ng = m // g, n // g
    k = (b - a) // g * pow(mg, -1, ng) % ng if ng > 1 else 0
    lcm = mg * n
    return ((a + m * k) % lcm, lcm)


def edges_closed(group: Query | Iterable[Sequence[int]], *, pairs: bool = True) -> int:
    """Edges per composite slide by inclusion-exclusion over the edge residue classes (F1 extended to fragments).

    With slide multiples only this is Eq. 2 (each class ``0 mod s_i``, any intersection ``0 mod LCM``); a
    fragment class ``-r mod s`` meets another class in a class mod their LCM or nowhere (CRT). A subset whose
    classes never meet adds nothing, and neither does any superset of it, so that branch is pruned.
    """
    g = _group(group)
    lcm_n = composite_slide(g)  # LCM_n
    classes = _classes(g, pairs)
    total = 0

    def extend(start: int, a: int, m: int, sign: int) -> None:
        nonlocal total
        for j in range(start, len(classes)):
            met = _crt(a, m, *classes[j])
            if met is not None:
                total += sign * (lcm_n // met[1])
                extend(j + 1, met[0], met[1], -sign)

    extend(0, 0, 1, 1)
    return total


def edges(
    group: Query | Iterable[Sequence[int]],
    *,
    pairs: bool = True,
    method: Literal["auto", "enumerate", "closed"] = "auto",
) -> int:
    """Number of distinct edges (partials) per composite slide: slide multiples and, with ``pairs``, fragment ends.

    ``method="auto"`` enumerates the composite slide when that marks at most ``ENUMERATION_LIMIT`` positions,
    else uses the closed form; both are exact.
    """
    g = _group(group)
    if method == "enumerate":
        return edges_enumerated(g, pairs=pairs)
    if method == "closed":
        return edges_closed(g, pairs=pairs)
    if method != "auto":
        raise ValueError(f"method must be 'auto', 'enumerate' or 'closed', not {method!r}")
    lcm_n = composite_slide(g)
    work = sum(lcm_n // m for _, m in _classes(g, pairs))
    return edges_enumerated(g, pairs=pairs) if work <= ENUMERATION_LIMIT else edges_closed(g, pairs=pairs)


def edge_rate(group: Query | Iterable[Sequence[int]], *, pairs: bool = True) -> Fraction:
    """Edges per unit of the queries' own unit (time or tuples): edges / LCM_n."""
    g = _group(group)
    return Fraction(edges(g, pairs=pairs), composite_slide(g))


def average_partials(query: Sequence[int], group: Query | Iterable[Sequence[int]], *, pairs: bool = True) -> Fraction:
    """P_i: the query's range over the group's average partial length (LCM_n / edges), at least 1 (§4.1)."""
    r, _ = _query(query)
    return max(Fraction(1), r * edge_rate(group, pairs=pairs))


def window_partials(group: Query | Iterable[Sequence[int]], *, pairs: bool = True) -> dict[Query, frozenset[int]]:
    """For each unique query, every number of partials its answers aggregate over one composite slide.

    A query answers at each multiple t of its slide over the window (t - r, t]; its partials are the edges in
    that window (the shared plan's partials end at edges). Enumerates the composite slide.
    """
    g = _group(group)
    lcm_n = composite_slide(g)
    residues = sorted(p % lcm_n for p in edge_positions(g, pairs=pairs))
    per_slide = len(residues)

    def upto(y: int) -> int:  # edges at positions <= y
        q, rem = divmod(y, lcm_n)
        return q * per_slide + bisect_right(residues, rem)

    return {(r, s): frozenset(upto(t) - upto(t - r) for t in range(s, lcm_n + 1, s)) for r, s in _unique(g)}


# --- Ω (Eq. 3-7) -----------------------------------------------------------------------------------------------


def technique_name(technique: str) -> str:
    """The canonical name of a technique: 'panes' (or 'naive'), 'flatfat', 'flatfit', 'slickdeque-inv/-noninv'."""
    key = "".join(ch for ch in technique.lower() if ch.isalnum())
    try:
        return _ALIASES[key]
    except KeyError:
        raise ValueError(f"unknown technique {technique!r}; expected one of {TECHNIQUES}") from None


def _floor_log2(x: Fraction) -> int:
    """⌊log2 x⌋ exactly, for x > 0."""
    k = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** k > x:
        k -= 1
    return k


@lru_cache(maxsize=256)
def inverse_factorial_sum(n: int) -> Fraction:
    """Σ_{i=1..n} 1/i!: the paper's expected deque length (Eq. 7); tends to e - 1."""
    num, fact = 0, 1
    for i in range(1, n + 1):  # Σ n!/i! over n!, by Horner: num = num * i + 1
        num, fact = num * i + 1, fact * i
    return Fraction(num, fact)


@lru_cache(maxsize=256)
def harmonic(n: int) -> Fraction:
    """H_n = Σ_{i=1..n} 1/i: the expected number of right-to-left maxima of n i.i.d. continuous values."""
    return sum((Fraction(1, i) for i in range(1, n + 1)), Fraction(0))


def expected_deque_length(n: int, deque_length: DequeLength = "paper") -> Fraction:
    """The deque-length term of Eq. 7 for a window of n partials: Σ 1/i! ("paper") or H_n ("harmonic")."""
    if n < 0:
        raise ValueError("n must be non-negative")
    if deque_length == "paper":
        return inverse_factorial_sum(n)
    if deque_length == "harmonic":
        return harmonic(n)
    raise ValueError(f"deque_length must be 'paper' or 'harmonic', not {deque_length!r}")


def _flatfat_term(p: Fraction) -> Fraction:
    """Eq. 4's summand ⌊log2(P_i - 1)⌋ + (P_i - 1) / 2^⌊log2 P_i⌋; 0 where it is undefined or negative (P_i < 2)."""
    if p <= 1:
        return Fraction(0)  # one partial: nothing to combine (log2 0 is undefined)
    term = _floor_log2(p - 1) + (p - 1) / Fraction(2) ** _floor_log2(p)
    return max(Fraction(0), term)


def omega_per_edge(
    group: Query | Iterable[Sequence[int]],
    technique: str,
    *,
    pairs: bool = True,
    deque_length: DequeLength = "paper",
    running_aggregates: RunningAggregates = "paper",
) -> Fraction:
    """Ω: the final-aggregation operations per edge (per new partial) of one tree (§4.1, Eq. 3-7, Table 3).

    Identical queries in a group count once (Q is the number of unique ACQs). ``running_aggregates="exact"``
    counts SlickDeque (Inv)'s running aggregates by iterating over the composite slide, as §4.1 describes,
    instead of Eq. 6's approximation by unique P_i.
    """
    g = _group(group)
    name = technique_name(technique)
    queries = _unique(g)
    q = len(queries)  # Q: unique ACQs
    if name == "panes":
        return sum((Fraction(r, s) for r, s in queries), Fraction(0))  # Eq. 3: Σ r_i / s_i
    if name == "flatfit":
        return Fraction(3 * q)  # Eq. 5: 3 Q
    rate = edge_rate(g, pairs=pairs)  # 1 / average partial length
    p = [max(Fraction(1), r * rate) for r, _ in queries]  # P_i
    if name == "flatfat":
        return sum((_flatfat_term(pi) for pi in p), Fraction(0))  # Eq. 4
    if name == "slickdeque-inv":
        if running_aggregates == "paper":
            return Fraction(2 * len(set(p)))  # Eq. 6: 2 · #unique P_i
        if running_aggregates == "exact":
            counts = set().union(*window_partials(g, pairs=pairs).values())
            return Fraction(2 * len(counts))
        raise ValueError(f"running_aggregates must be 'paper' or 'exact', not {running_aggregates!r}")
    p_max = max(p)  # P_max
    deque = expected_deque_length(math.ceil(p_max), deque_length)  # Σ_{i=1..P_max} 1/i!, or H_{P_max}
    return 2 - 2 / p_max + q + deque  # Eq. 7


def omega(
    group: Query | Iterable[Sequence[int]],
    technique: str,
    *,
    input_rate: int | Fraction = 1,
    units: Units = "time",
    pairs: bool = True,
    deque_length: DequeLength = "paper",
    running_aggregates: RunningAggregates = "paper",
) -> Fraction:
    """Cost of one execution tree per unit of time: its term ``λ + E_i Ω_i`` of Eq. 1.

    ``λ`` (``input_rate``, tuples per unit of time) is the partial aggregation, one operation per tuple;
    ``E_i`` the edge rate (edges / LCM_n per unit of time, times λ when ``units="count"``: ranges and slides in
    tuples); ``Ω_i`` is :func:`omega_per_edge`.
    """
    lam = Fraction(input_rate)  # λ
    if lam < 0:
        raise ValueError("input_rate must be non-negative")
    g = _group(group)
    rate = edge_rate(g, pairs=pairs)
    if units == "count":
        rate *= lam
    elif units != "time":
        raise ValueError(f"units must be 'time' or 'count', not {units!r}")
    om = omega_per_edge(g, technique, pairs=pairs, deque_length=deque_length, running_aggregates=running_aggregates)
    return lam + rate * om  # λ + E_i Ω_i


# --- plans and WeaveShare -------------------------------------------------------------------------------------


def no_sharing(queries: Iterable[Sequence[int]]) -> list[Group]:
    """The no-share plan: one execution tree per query."""
    return [(_query(q),) for q in queries]


def max_sharing(queries: Iterable[Sequence[int]]) -> list[Group]:
    """The maximum-sharing plan: every query in a single execution tree."""
    qs = tuple(_query(q) for q in queries)
    return [qs] if qs else []


def plan_cost(
    groups: Iterable[Iterable[Sequence[int]]],
    technique: str,
    *,
    input_rate: int | Fraction = 1,
    units: Units = "time",
    pairs: bool = True,
    deque_length: DequeLength = "paper",
    running_aggregates: RunningAggregates = "paper",
) -> Fraction:
    """C = mλ + Σ_i E_i Ω_i (Eq. 1): the sum of :func:`omega` over the plan's trees."""
    return sum(
        (
            omega(
                g,
                technique,
                input_rate=input_rate,
                units=units,
                pairs=pairs,
                deque_length=deque_length,
                running_aggregates=running_aggregates,
            )
            for g in groups
        ),
        Fraction(0),
    )


def weave_share(
    queries: Iterable[Sequence[int]],
    technique: str,
    *,
    input_rate: int | Fraction = 1,
    units: Units = "time",
    pairs: bool = True,
    deque_length: DequeLength = "paper",
    running_aggregates: RunningAggregates = "paper",
) -> Plan:
    """WeaveShare (§3.1.1): greedy merging of execution trees, with the technique-aware Ω of §4.1.

    Starts from the no-share plan; at each step merges the pair of trees (a, b) with the largest cost reduction
    Ω(a) + Ω(b) - Ω(a ∪ b) (here Ω is the per-time cost of :func:`omega`), while that reduction is positive.
    Ties go to the pair met first (trees ordered by their first query's index). Returns the trees (queries in
    input order, trees ordered by their first query) and the plan cost C (Eq. 1).
    """
    qs = [_query(q) for q in queries]
    cache: dict[tuple[int, ...], Fraction] = {}

    def cost(members: tuple[int, ...]) -> Fraction:  # keyed by sorted query indices
        if members not in cache:
            cache[members] = omega(
                tuple(qs[i] for i in members),
                technique,
                input_rate=input_rate,
                units=units,
                pairs=pairs,
                deque_length=deque_length,
                running_aggregates=running_aggregates,
            )
        return cache[members]

    trees: list[tuple[int, ...]] = [(i,) for i in range(len(qs))]
    while True:
        best: tuple[int, int] | None = None
        best_gain = Fraction(0)
        for x, y in combinations(range(len(trees)), 2):
            merged = tuple(sorted(trees[x] + trees[y]))
            gain = cost(trees[x]) + cost(trees[y]) - cost(merged)
            if gain > best_gain:
                best, best_gain = (x, y), gain
        if best is None:
            break
        x, y = best
        merged = tuple(sorted(trees[x] + trees[y]))
        trees = [t for k, t in enumerate(trees) if k not in best]
        trees.append(merged)
        trees.sort()
    total = sum((cost(t) for t in trees), Fraction(0))
    return Plan([tuple(qs[i] for i in t) for t in trees], total)
