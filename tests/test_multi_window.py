"""Several window specs over one stream, one slice sequence: shared == independent == oracle."""

from __future__ import annotations

import operator

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
import spanning.planning.specs
from spanning import PairsSlicer, WindowSpec
from spanning.engines.multi_window import MultiEngine
from spanning.kernels.windows import UnionSlicer
from spanning.swag import MULTI_RANGE
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import ALL_AGGREGATES, assert_same_windows, frame_windows, streams, to_frame, window_specs

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(specs=st.lists(window_specs(), min_size=1, max_size=3))
def test_union_slicer_cuts_at_every_window_edge(specs):
    specs = [WindowSpec(*s) for s in specs]
    slicer = UnionSlicer(specs)
    bounds = [slicer.bounds(i) for i in range(-30, 30)]
    for (a, b), (c, _) in zip(bounds, bounds[1:], strict=False):
        assert a < b == c
    edges = {b[0] for b in bounds}
    lo, hi = bounds[0][0], bounds[-1][1]
    for spec in specs:  # every window edge inside the covered span is a slice edge, and nothing else is
        for k in range(-200, 200):
            for t in spec.window(k):
                if lo <= t < hi:
                    assert t in edges
    window_edges = {t for spec in specs for k in range(-400, 400) for t in spec.window(k)}
    assert edges <= window_edges
    for i in range(-30, 30):
        assert slicer.slice_of(slicer.bounds(i)[0]) == i == slicer.slice_of(slicer.bounds(i)[1] - 1)
    if len(specs) == 1:
        pairs = PairsSlicer(specs[0])
        assert {pairs.bounds(i) for i in range(-60, 60)} >= set(bounds[5:-5])


def run_shared(specs, events, aggregates, **kwargs):
    eng = MultiEngine([WindowSpec(*s) for s in specs], aggregates, **kwargs)
    got = {i: [] for i in range(len(specs))}
    for seq, (_, lo, up, row) in enumerate(events):
        for i, w in eng.insert(lo, up, row, seq=seq):
            got[i].append((w.start, w.end, w.values))
    for i, w in eng.flush():
        got[i].append((w.start, w.end, w.values))
    late = {i: {} for i in range(len(specs))}
    for i, ev in eng.late:
        late[i][ev.seq] = ev.windows_missed
    return got, late


@pytest.mark.parametrize(("technique", "height"), [("se-slicing", 1), ("se-ml-slicing", 3)])
@SETTINGS
@given(specs=st.lists(window_specs(), min_size=1, max_size=3), events=streams(keys=1))
def test_shared_slices_equal_oracle_per_spec(technique, height, specs, events):
    got, late = run_shared(specs, events, ALL_AGGREGATES, technique=technique, height=height)
    for i, spec in enumerate(specs):
        expected, expected_late = oracle(events, *spec, ALL_AGGREGATES)
        assert_same_windows({0: got[i]} if events else {}, expected)
        assert late[i] == expected_late


@pytest.mark.parametrize("swag", sorted(MULTI_RANGE))
@SETTINGS
@given(specs=st.lists(window_specs(), min_size=1, max_size=3), ttp=st.sampled_from([0, 4, 30]), events=streams(keys=1))
def test_shared_point_plan_equals_oracle(swag, specs, ttp, events):
    specs = [(r, s, ttp, o) for r, s, _, o in specs]  # one stream, one TTP
    events = [(k, lo, lo, row) for k, lo, _, row in events]
    aggregates = {"n": "count", "mean_x": "mean:x", "max_y": "max:y", "argmin_x": "argmin:x"}
    if swag != "slickdeque":
        aggregates = {**aggregates, "sum_x": "sum:x", "sd_y": "stddev:y"}
    got, late = run_shared(specs, events, aggregates, swag=swag)
    for i, spec in enumerate(specs):
        expected, expected_late = oracle(events, *spec, aggregates)
        assert_same_windows({0: got[i]} if events else {}, expected)
        assert late[i] == expected_late


STREAM = [6, 5, 0, 1, 3, 4, 2, 7]  # Shein et al., Examples 2 and 3 (Figures 8-9): ranges 3 and 5, slide 1


@pytest.mark.parametrize(("swag", "example"), [("slickdeque", "sum"), ("slickdeque", "max"), ("flatfit", "max"),
                                               ("flatfat", "sum"), ("recalc", "max")])  # fmt: skip
def test_seed_000_examples_2_and_3_multi_range(swag, example):
    """Sum (Example 2) and max (Example 3) over the 3 and the 5 newest values, on one shared plan."""
    if example == "sum":
        agg = spanning.UserAggregate("sum", identity=0, lift=lambda row: row["v"], combine=operator.add,
                                     inverse=operator.sub)  # fmt: skip
        fold = sum
    else:
        agg = spanning.UserAggregate("max", identity=float("-inf"), lift=lambda row: row["v"], combine=max,
                                     duplicate_sensitive=False)  # fmt: skip
        fold = max
    eng = MultiEngine([WindowSpec(3, 1), WindowSpec(5, 1)], {"a": agg}, swag=swag)
    answers = {}
    for t, v in enumerate(STREAM):  # count-based: the t-th value is the point [t, t + 1)
        for i, w in eng.insert(t, t, {"v": v}):
            answers[(i, w.end)] = w.values["a"]
    for i, w in eng.flush():
        answers[(i, w.end)] = w.values["a"]
    for step in range(1, len(STREAM) + 1):
        assert answers[(0, step)] == fold(STREAM[max(0, step - 3) : step])
        assert answers[(1, step)] == fold(STREAM[max(0, step - 5) : step])
    assert [answers[(0, s)] for s in range(1, 9)] == ([6, 11, 11, 6, 4, 8, 9, 13] if example == "sum" else
                                                      [6, 6, 6, 5, 3, 4, 4, 7])  # fmt: skip


def test_shared_plan_errors():
    specs = [WindowSpec(10, 5), WindowSpec(20, 5)]
    with pytest.raises(ValueError, match="answers one range"):
        MultiEngine(specs, {"n": "count"}, swag="daba")
    with pytest.raises(ValueError, match="same ttp"):
        MultiEngine([WindowSpec(10, 5, ttp=1), WindowSpec(20, 5)], {"n": "count"}, swag="flatfit")
    with pytest.raises(ValueError, match="sharing slices needs"):
        MultiEngine(specs, {"n": "count"}, technique="sweeping")
    eng = MultiEngine(specs, {"s": "sum:bytes"})
    with pytest.raises(ValueError, match="row has no column 'bytes'"):
        eng.insert(0, 3, {"volume": 1})
    with pytest.raises(ValueError, match="event end 3 is before its start 7"):
        eng.insert(7, 3, {"bytes": 1})


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(window_specs(), min_size=1, max_size=3, unique=True), events=streams(max_events=30),
       sharing=st.sampled_from(["all", "none", "weaveshare"]))  # fmt: skip
def test_aggregate_many_equals_one_aggregate_per_spec(specs, events, sharing):
    frame = to_frame(events)
    windows = [WindowSpec(*s) for s in specs]
    aggregates = {"n": "count", "sum_x": "sum:x", "max_y": "max:y"}
    batch = spanning.aggregate_many(frame, windows, aggregates, key="key")
    shared = spanning.aggregate_many(frame, windows, aggregates, key="key", technique="se-ml-slicing", height=2,
                                     sharing=sharing)  # fmt: skip
    checked = 0
    for spec, label in zip(windows, spanning.planning.specs.window_labels(windows), strict=True):
        alone = spanning.aggregate(frame, spec.range, spec.slide, spec.ttp, spec.offset, aggregates, key="key")
        for out in (batch, shared):
            mine = out[out["window"] == label].drop(columns="window").reset_index(drop=True)
            assert_same_windows(frame_windows(mine, aggregates), frame_windows(alone, aggregates))
            checked += len(mine)
    assert checked == 2 * len(batch)  # every row of both results was compared
    assert list(batch.columns) == ["key", "window", "window_start", "window_end", *aggregates]
    late = shared.attrs["late"]
    expected_late = pd.concat(
        [
            spanning.aggregate(frame, s.range, s.slide, s.ttp, s.offset, aggregates, key="key")
            .attrs["late"]
            .assign(window=spanning.planning.specs.window_label(s))
            for s in windows
        ]  # fmt: skip
    )
    assert sorted(zip(late.index, late["window"], late["windows_missed"], strict=True)) == sorted(
        zip(expected_late.index, expected_late["window"], expected_late["windows_missed"], strict=True)
    )
