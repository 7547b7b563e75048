"""DABA and DABA Lite (Tangwongsan et al., §5-§6): against Recalc, their invariants, worst-case ⊗ counts, the
paper's trace."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.swag.daba import DABA
from spanning.swag.daba_lite import DABALite
from spanning.swag.protocol import EmptyWindowError
from tests.budget import examples
from tests.swag_harness import MONOIDS, CountingMonoid, check_against_recalc, operations

CLASSES = [DABA, DABALite]
# worst-case ⊗ per operation: Theorem 5.2 (DABA) and Theorem 6.2 (DABA Lite)
BOUNDS = {DABA: {"query": 1, "insert": 4, "evict": 3}, DABALite: {"query": 1, "insert": 3, "evict": 2}}
# average ⊗ per insert / evict on a non-empty window (same theorems)
AVERAGES = {DABA: {"insert": 2.5, "evict": 1.5}, DABALite: {"insert": 2.0, "evict": 1.0}}


# --- against Recalc -------------------------------------------------------------------------------


@pytest.mark.parametrize("monoid", list(MONOIDS))
@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_daba_against_recalc(monoid, data):
    ops = data.draw(operations(MONOIDS[monoid][3]))
    check_against_recalc(lambda c, i, inv: DABA(c, i), monoid, ops)


@pytest.mark.parametrize("monoid", list(MONOIDS))
@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_daba_lite_against_recalc(monoid, data):
    ops = data.draw(operations(MONOIDS[monoid][3]))
    check_against_recalc(lambda c, i, inv: DABALite(c, i), monoid, ops)


@pytest.mark.parametrize("cls", CLASSES)
def test_long_runs_against_recalc_cross_compaction(cls):
    """Windows well past the compaction threshold, grown and drained in waves."""
    rng = random.Random(7)
    ops = []
    for _ in range(12):
        p_insert = rng.choice([0.2, 0.5, 0.8])
        ops += [("insert", rng.choice("abcdefgh")) if rng.random() < p_insert else ("evict",) for _ in range(400)]
    check_against_recalc(lambda c, i, inv: cls(c, i), "concat", ops)


# --- the paper's invariants (§5 "DABA Invariants", §6 "DABA Lite Invariants") ---------------------


def _cat(values, lo, hi):  # v_lo ⊗ ... ⊗ v_{hi-1} for the concatenation monoid
    return "".join(values[lo:hi])


def _check_size_invariants(s):
    f, left, r, a, b = s.f, s.l, s.r, s.a, s.b
    e = f + s.len()
    assert f <= left <= r <= a <= b <= e
    empty = b - f == 0 and e - b == 0
    assert empty or ((r - left) + (a - r) + (b - a) + 1 == (b - f) - (e - b) and r - left == a - r)


def _check_daba_invariants(s, window):
    _check_size_invariants(s)
    f, left, r, a, b = s.f, s.l, s.r, s.a, s.b
    v = window
    assert s.vals[f:] == v  # values invariants
    for k in range(len(v)):
        i = f + k
        if i < left:
            expected = _cat(v, k, b - f)
        elif i < r:
            expected = _cat(v, k, r - f)
        elif i < a:
            expected = _cat(v, r - f, k + 1)
        elif i < b:
            expected = _cat(v, k, b - f)
        else:
            expected = _cat(v, b - f, k + 1)
        assert s.aggs[i] == expected, (k, (left - f, r - f, a - f, b - f), s.aggs[f:])


def _check_daba_lite_invariants(s, window):
    _check_size_invariants(s)
    f, left, r, a, b = s.f, s.l, s.r, s.a, s.b
    v = window
    for k in range(len(v)):
        i = f + k
        if i < left:
            expected = _cat(v, k, b - f)
        elif i < r:
            expected = _cat(v, k, r - f)
        elif i < a:
            expected = v[k]
        elif i < b:
            expected = _cat(v, k, b - f)
        else:
            expected = v[k]
        assert s.items[i] == expected, (k, (left - f, r - f, a - f, b - f), s.items[f:])
    assert left == r or s.agg_ra == _cat(v, r - f, b - f)
    assert s.agg_b == _cat(v, b - f, len(v))


CHECKERS = {DABA: _check_daba_invariants, DABALite: _check_daba_lite_invariants}


@pytest.mark.parametrize("cls", CLASSES)
@settings(max_examples=examples(200), deadline=None)
@given(ops=operations(MONOIDS["concat"][3]))
def test_invariants_hold_after_every_operation(cls, ops):
    s, window = cls(lambda x, y: x + y, ""), []
    for op in ops:
        if op[0] == "insert":
            s.insert(op[1])
            window.append(op[1])
        elif op[0] == "evict" and window:
            s.evict()
            window.pop(0)
        CHECKERS[cls](s, window)


@pytest.mark.parametrize("cls", CLASSES)
def test_empty_window(cls):
    s = cls(lambda x, y: x + y, "")
    assert s.query() == "" and s.len() == 0 == len(s)
    with pytest.raises(EmptyWindowError):
        s.evict()
    s.insert("a")
    s.evict()
    assert s.query() == "" and len(s) == 0
    with pytest.raises(EmptyWindowError):
        s.evict()
    s.insert("b")
    assert s.query() == "b"


# --- worst-case and average ⊗ counts (Theorems 5.2 and 6.2) ----------------------------------------


def _run_counting(cls, ops):
    """Per operation kind, the list of ⊗ calls each operation made (with a query after every update)."""
    monoid = CountingMonoid()
    s, window = cls(monoid.combine, monoid.identity), []
    counts = {"query": [], "insert": [], "evict": []}
    for op in ops:
        before = monoid.calls
        if op[0] == "insert":
            s.insert(op[1])
            window.append(op[1])
        else:
            s.evict()
            window.pop(0)
        counts[op[0]].append(monoid.calls - before)
        before = monoid.calls
        assert s.query() == "".join(window)
        counts["query"].append(monoid.calls - before)
    return counts


def _random_ops(seed, n):
    rng, size, ops = random.Random(seed), 0, []
    while len(ops) < n:
        p_insert = rng.choice([0.3, 0.5, 0.7])  # phases that grow, hold and shrink the window
        for _ in range(rng.randrange(1, 200)):
            if size == 0 or rng.random() < p_insert:
                ops.append(("insert", rng.choice("abcdefgh")))
                size += 1
            else:
                ops.append(("evict",))
                size -= 1
    return ops


@pytest.mark.parametrize("cls", CLASSES)
def test_worst_case_counts_random(cls):
    counts = _run_counting(cls, _random_ops(seed=2024, n=20_000))
    maxima = {kind: max(calls) for kind, calls in counts.items()}
    assert all(maxima[kind] <= BOUNDS[cls][kind] for kind in maxima), maxima
    assert maxima == BOUNDS[cls]  # the bounds are tight: a faithful implementation reaches them


@pytest.mark.parametrize("cls", CLASSES)
def test_worst_case_counts_fill_then_drain(cls):
    n = 3000
    ops = [("insert", "abcdefgh"[i % 8]) for i in range(n)] + [("evict",)] * n
    counts = _run_counting(cls, ops)
    maxima = {kind: max(calls) for kind, calls in counts.items()}
    assert all(maxima[kind] <= BOUNDS[cls][kind] for kind in maxima), maxima


@pytest.mark.parametrize("cls", CLASSES)
def test_average_counts_static_window(cls):
    n, rounds = 100, 5000
    ops = [("insert", "abcdefgh"[i % 8]) for i in range(n)]
    for i in range(rounds):
        ops += [("evict",), ("insert", "abcdefgh"[i % 8])]
    counts = _run_counting(cls, ops)
    for kind in ("insert", "evict"):
        steady = counts[kind][-rounds:]
        assert sum(steady) / len(steady) == pytest.approx(AVERAGES[cls][kind], abs=0.02)


# --- the §5 worked trace (Figs. 5/6 and 7/8) -------------------------------------------------------
# The figures did not survive the text extraction; the trace is rebuilt from §5 "DABA Intuitive View":
# from an empty window, insert a..g then evict (Two-Stacks' Fig. 2 flips 7 aggregates at (H)→(I)),
# the cases are (A) singleton, from (B) [flip shrink shift], from (D) [flip shrink shrink shift shift],
# from (H) [flip shrink shrink shrink shift shift shift], then the next flip.

TRACE = [
    # op, fixup case, window after, front sublist l_F = [F, B) after, back sublist l_B after
    ("a", "singleton", "a", "a", ""),
    ("b", "flip shrink", "ab", "ab", ""),
    ("c", "shift", "abc", "ab", "c"),
    ("d", "flip shrink", "abcd", "abcd", ""),
    ("e", "shrink", "abcde", "abcd", "e"),
    ("f", "shift", "abcdef", "abcd", "ef"),
    ("g", "shift", "abcdefg", "abcd", "efg"),
    ("-", "flip shrink", "bcdefg", "bcdefg", ""),  # (H): |l_F| = |l_B| = 3 after the eviction
    ("h", "shrink", "bcdefgh", "bcdefg", "h"),
    ("i", "shrink", "bcdefghi", "bcdefg", "hi"),
    ("j", "shift", "bcdefghij", "bcdefg", "hij"),
    ("-", "shift", "cdefghij", "cdefg", "hij"),
    ("-", "shift", "defghij", "defg", "hij"),
    ("-", "flip shrink", "efghij", "efghij", ""),
]

# DABA agg fields after each step of TRACE (the Fig. 6 rows): suffixes in blue sublists, prefixes in green
DABA_AGGS = [
    ["a"],
    ["ab", "b"],
    ["ab", "b", "c"],
    ["abcd", "b", "c", "d"],
    ["abcd", "bcd", "cd", "d", "e"],
    ["abcd", "bcd", "cd", "d", "e", "ef"],
    ["abcd", "bcd", "cd", "d", "e", "ef", "efg"],
    ["bcdefg", "cd", "d", "e", "ef", "g"],
    ["bcdefg", "cdefg", "d", "e", "fg", "g", "h"],
    ["bcdefg", "cdefg", "defg", "efg", "fg", "g", "h", "hi"],
    ["bcdefg", "cdefg", "defg", "efg", "fg", "g", "h", "hi", "hij"],
    ["cdefg", "defg", "efg", "fg", "g", "h", "hi", "hij"],
    ["defg", "efg", "fg", "g", "h", "hi", "hij"],
    ["efghij", "fg", "g", "h", "hi", "j"],
]

# DABA Lite deque after each step of TRACE (the Fig. 8 rows): suffixes in blue sublists, raw values in green
LITE_ITEMS = [
    ["a"],
    ["ab", "b"],
    ["ab", "b", "c"],
    ["abcd", "b", "c", "d"],
    ["abcd", "bcd", "cd", "d", "e"],
    ["abcd", "bcd", "cd", "d", "e", "f"],
    ["abcd", "bcd", "cd", "d", "e", "f", "g"],
    ["bcdefg", "cd", "d", "e", "f", "g"],
    ["bcdefg", "cdefg", "d", "e", "fg", "g", "h"],
    ["bcdefg", "cdefg", "defg", "efg", "fg", "g", "h", "i"],
    ["bcdefg", "cdefg", "defg", "efg", "fg", "g", "h", "i", "j"],
    ["cdefg", "defg", "efg", "fg", "g", "h", "i", "j"],
    ["defg", "efg", "fg", "g", "h", "i", "j"],
    ["efghij", "fg", "g", "h", "i", "j"],
]


def _case(s, b_before, calls, is_insert):
    fixup_calls = calls - 1 if is_insert else calls
    if s.l == s.r == s.a == s.b == s.f + s.len() and s.b - s.f <= 1:
        return "singleton"
    flip = "flip " if s.b != b_before else ""
    return flip + ("shrink" if fixup_calls else "shift")


@pytest.mark.parametrize("cls", CLASSES)
def test_paper_trace(cls):
    monoid = CountingMonoid()
    s, window = cls(monoid.combine, monoid.identity), []
    for step, (op, case, after, front, back) in enumerate(TRACE):
        b_before, before = s.b, monoid.calls
        if op == "-":
            s.evict()
            window.pop(0)
        else:
            s.insert(op)
            window.append(op)
        assert _case(s, b_before, monoid.calls - before, op != "-") == case, step
        assert "".join(window) == after and s.query() == after
        f, b = s.f, s.b
        stored = s.aggs if cls is DABA else s.items
        assert (stored[f] if f != b else "") == front  # Π_F
        assert "".join(window[b - f :]) == back
        if cls is DABA:
            assert s.aggs[f:] == DABA_AGGS[step], step
        else:  # DABA Lite: green sublists hold raw values, their aggregates sit in aggRA / aggB
            assert s.items[f:] == LITE_ITEMS[step], step
            assert s.agg_b == back
        CHECKERS[cls](s, window)
