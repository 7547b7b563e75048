"""The batch path's windows lowered straight from the runs (``Aggregate.window_results``) against the windows'
own partials and the library: each value's runs merged, each window's members sorted, HLL estimates with no
sketch per window, KLL quantiles read off the sorted values while a sketch would hold them all."""

from __future__ import annotations

import math

import datasketches as ds
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.aggregates import parse_aggregate
from spanning.aggregates.columns import BatchColumns
from spanning.aggregates.distinct import java_inclusive_rank, java_item
from spanning.kernels import hll
from spanning.kernels.hll import coupon_estimates, coupons, promotion_count, window_estimates
from spanning.kernels.ranges import range_count, sorted_members, union_runs
from tests.budget import examples


def _runs(rng, events: int, windows: int, longest: int) -> tuple[np.ndarray, np.ndarray]:
    first = rng.integers(0, windows, events)
    return first, np.minimum(first + rng.integers(-1, longest, events), windows - 1)  # some runs empty


def _members(first, last, w) -> np.ndarray:
    return np.flatnonzero((first <= w) & (w <= last))


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), events=st.integers(0, 200), ids=st.integers(1, 30),
       windows=st.integers(1, 40), longest=st.integers(1, 12))  # fmt: skip
def test_merged_runs_count_each_window_s_distinct_ids_and_members_come_sorted(seed, events, ids, windows, longest):
    rng = np.random.default_rng(seed)
    first, last = _runs(rng, events, windows, longest)
    present = last >= first
    id_ = rng.integers(-ids, ids, events)
    merged_first, merged_last, merged_id = union_runs(id_[present], first[present], last[present])
    for i in np.unique(merged_id):  # disjoint runs of each id
        mine = np.sort(merged_first[merged_id == i])
        assert (mine[1:] > merged_last[merged_id == i][np.argsort(merged_first[merged_id == i])][:-1]).all()
    counts = range_count(merged_first, merged_last, windows)
    values = rng.normal(size=events).round(1)  # ties included
    bounds, ordered = sorted_members(values[present], first[present], last[present], windows)
    for w in range(windows):
        members = _members(first, last, w)
        assert counts[w] == len(set(id_[members].tolist()))
        assert ordered[bounds[w]:bounds[w + 1]].tolist() == sorted(values[members].tolist())


def _library_estimate(values: list, lg_k: int) -> int:
    sketch = ds.hll_sketch(lg_k, ds.tgt_hll_type.HLL_8)
    for value in values:
        sketch.update(value)
    agg = parse_aggregate(f"approx_count_distinct:x:{lg_k}")
    return agg.lower(sketch.serialize_updatable())


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), distinct=st.integers(1, 900), lg_k=st.sampled_from([4, 6, 8, 9]),
       text=st.booleans(), blocks=st.booleans())  # fmt: skip
def test_window_estimates_are_the_library_s_around_the_promotion_count(seed, distinct, lg_k, text, blocks):
    """Windows below, at and past the promotion count (and the registers held all at once or a block of 2
    windows at a time): each estimate is the one the library's sketch of the window's values gives."""
    with pytest.MonkeyPatch.context() as patch:
        if blocks:
            patch.setattr(hll, "UNSORTED_BYTES", 0)
            patch.setattr(hll, "BLOCK", 2)
        _estimates_are_the_library_s(seed, distinct, lg_k, text)


def _estimates_are_the_library_s(seed, distinct, lg_k, text):
    rng = np.random.default_rng(seed)
    first, last = _runs(rng, 3000, 12, 6)
    present = last >= first
    drawn = rng.integers(0, distinct, 3000)
    values = [f"s{v}" for v in drawn] if text else drawn.tolist()
    coupon = coupons(values, ds).astype(np.int64)
    got = window_estimates(coupon[present], first[present], last[present], 12, lg_k, ds)
    for w in range(12):
        assert got[w] == _library_estimate([values[e] for e in _members(first, last, w)], lg_k)


@pytest.mark.parametrize("lg_k", [4, 8, 12])
def test_window_estimates_at_the_promotion_count(lg_k):
    """Windows of exactly one coupon fewer than the promotion count, the count, and one more (the library holds
    the first in a coupon mode, the others in HLL mode), with values repeated across windows and within."""
    threshold = promotion_count(lg_k)
    values = np.arange(10 * threshold)
    coupon = coupons(values.tolist(), ds).astype(np.int64)
    values = values[np.unique(coupon, return_index=True)[1]][: threshold + 1]  # distinct coupons
    sizes = [threshold - 1, threshold, threshold + 1]
    members = np.concatenate([values[:size] for size in sizes] + [values[:5]])  # window 2 again, from 5 runs
    first = np.r_[np.repeat([0, 1, 2], sizes), np.full(5, 2)]
    got = window_estimates(coupons(members.tolist(), ds).astype(np.int64), first, first, 3, lg_k, ds)
    assert got.tolist() == [_library_estimate(values[:size].tolist(), lg_k) for size in sizes]


def test_coupon_estimates_are_read_from_the_library_count_by_count():
    table = coupon_estimates(12, ds)
    assert len(table) == promotion_count(12) and table[0] == 0 and table[1] == 1
    rng = np.random.default_rng(3)
    for size in (1, 7, 8, 100, 384):  # a list, a set, and the last count before HLL mode
        values = rng.integers(0, 2**40, size).tolist()
        assert table[len(set(coupons(values, ds).tolist()))] == _library_estimate(values, 12)


def test_java_item_is_java_inclusive_rank_s_item():
    for n in (1, 2, 19, 20, 199, 200, 10_000_001):
        for q in (0.0, 0.05, 0.1, 0.5, 0.9, 0.95, 0.99, 1.0):
            assert java_item(q, n) == round(java_inclusive_rank(q, n) * n + 0.5)
            assert (java_item(q, np.array([n, n])) == java_item(q, n)).all()


def _columns(values: np.ndarray) -> BatchColumns:
    return BatchColumns({"x": (values, ~np.isnan(values))}, np.arange(len(values)))


def _exact(spec: str, members: list) -> float:
    """The exact aggregate of a window's non-null values, by brute force: ``count_distinct``, the number of
    distinct values; ``percentile:x:q``, Spark's (``spanning.aggregates.distinct``): position q·(n − 1) of the
    sorted values, linear between its two neighbours; NaN for no value."""
    if spec == "count_distinct:x":
        return float(len(set(members)))
    if not members:
        return np.nan
    ordered, q = sorted(members), float(spec.split(":")[2])
    position = q * (len(ordered) - 1)
    lower, higher = math.floor(position), math.ceil(position)
    if lower == higher:
        return ordered[lower]
    return (higher - position) * ordered[lower] + (position - lower) * ordered[higher]


@pytest.mark.parametrize("spec", ["count_distinct:x", "percentile:x:0.3", "percentile:x:1",
                                  "approx_count_distinct:x:5", "approx_percentile:x:0.95",
                                  "approx_percentile:x:0:8"])  # fmt: skip
def test_window_results_are_the_lowered_window_partials(spec):
    """Nulls, empty windows, empty runs, windows of more than K values: the results with no partial are the
    partials' lowered (for KLL past K, a window's answer is random: within the library's rank bound), and the exact
    ones are each window's members' distinct count or percentile, by brute force."""
    rng = np.random.default_rng(11)
    first, last = _runs(rng, 400, 30, 8)
    first[-10:], last[-10:] = 31, 30  # runs past every window (empty)
    values = rng.integers(0, 60, 400).astype(np.float64)
    values[rng.random(400) < 0.1] = np.nan
    agg = parse_aggregate(spec)
    cols = _columns(values)
    got = _floats(agg.window_results(cols, first, last, 32))
    want = _floats(agg.lower_partials(agg.window_partials(_columns(values), first, last, 32)))
    assert len(got) == len(want) == 32 and (np.isnan(got) == np.isnan(want)).all()
    k = getattr(agg, "size", 0)
    checked = 0
    for w in range(32):
        members = values[_members(first, last, w)]
        members = members[~np.isnan(members)]
        if not spec.startswith("approx"):  # exact: the members' own answer, and the partials' the same
            exact = _exact(spec, members.tolist())
            assert [got[w], want[w]] == [exact, exact] or np.isnan([got[w], want[w], exact]).all(), (w, got[w], exact)
            continue
        members = np.sort(members)
        if spec.startswith("approx_percentile") and len(members) > k:
            rank = np.searchsorted(members, got[w], side="right") / len(members)
            assert abs(rank - agg.q) <= ds.kll_doubles_sketch(k).normalized_rank_error(False) + 1 / len(members)
            checked += 1
        else:
            assert got[w] == want[w] or np.isnan(got[w]) and np.isnan(want[w])
    assert checked > 0 if spec.endswith(":8") else checked == 0  # K 8: windows past K; K 200: none


def _floats(results) -> np.ndarray:
    return pd.Series(results, dtype="Float64").to_numpy(dtype=float, na_value=np.nan)


@pytest.mark.parametrize("spec", ["hll_sketch:x", "kll_sketch:x"])
def test_the_written_sketches_keep_their_partials(spec):
    assert parse_aggregate(spec).window_results(_columns(np.ones(3)), np.zeros(3, int), np.zeros(3, int), 1) is None


def test_quantiles_of_a_column_past_k_share_one_sketch_per_window(monkeypatch):
    """Two quantiles of one column (K 8): each window of more than K values gets one sketch for both, so
    their answers come from the same compaction (one sketch built per such window, not two)."""
    from spanning.aggregates.distinct import ApproxPercentile

    built = []
    original = ApproxPercentile._sketch_of
    monkeypatch.setattr(ApproxPercentile, "_sketch_of", lambda self, values: built.append(1) or original(self, values))
    rng = np.random.default_rng(5)
    first, last = _runs(rng, 300, 20, 6)
    cols = _columns(rng.normal(size=300))
    low, high = parse_aggregate("approx_percentile:x:0.1:8"), parse_aggregate("approx_percentile:x:0.9:8")
    answers = [_floats(agg.window_results(cols, first, last, 20)) for agg in (low, high)]
    sizes = np.array([len(_members(first, last, w)) for w in range(20)])
    assert 0 < len(built) == (sizes > 8).sum()
    assert (answers[0][sizes > 0] <= answers[1][sizes > 0]).all()
