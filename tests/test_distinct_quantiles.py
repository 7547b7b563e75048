"""Distinct counts and quantiles on the Python paths: exact == oracle, sketches within their bounds and one
answer on every technique, engine and SWAG; merged window sketches == one sketch over the union."""

from __future__ import annotations

import datasketches
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

import spanning
from spanning.aggregates import parse_aggregate
from spanning.aggregates.distinct import order_free
from spanning.swag import ALGORITHMS, NEEDS_INVERSE
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import DISTINCT_AGGREGATES, assert_same_windows, frame_windows, streams, to_frame, window_specs
from tests.test_techniques import assert_technique_equals_oracle

SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXACT = DISTINCT_AGGREGATES
SKETCHED = {"a_x": "approx_count_distinct:x", "a_z": "approx_count_distinct:z:5", "q_y": "approx_percentile:y:0.9"}
SLICING = sorted(set(spanning.TECHNIQUES) - {"sweeping"})


def _values(events, key, ws, we, ttp, column):
    """The window's non-null values, from the oracle's members (those that overlap it and were in time)."""
    clock, members = None, []
    for k, lo, up, row in events:
        if k != key:
            continue
        up = up if up > lo else lo + 1
        clock = up if clock is None else max(clock, up)
        if lo < we and up > ws and clock <= we + ttp and row[column] is not None:
            members.append(row[column])
    return members


@pytest.mark.parametrize("technique", SLICING)
@SETTINGS
@given(spec=window_specs(), events=streams())
def test_exact_aggregates_equal_oracle(technique, spec, events):
    assert_technique_equals_oracle(technique, spec, events, EXACT, height=2)  # the per-event engines
    out = spanning.aggregate(to_frame(events), *spec, aggregates=EXACT, key="key", technique=technique)
    assert_same_windows(frame_windows(out, EXACT), oracle(events, *spec, EXACT)[0])  # the batch path


@SETTINGS
@given(spec=window_specs(), events=streams())
def test_sketches_within_bounds_and_one_answer(spec, events):
    """Each technique gives the same estimates; each lies within its sketch's bounds around the exact value."""
    aggregates = {**SKETCHED, "h_x": "hll_sketch:x", "k_y": "kll_sketch:y"}
    answers = []
    for technique in SLICING:
        out = spanning.aggregate(to_frame(events), *spec, aggregates=aggregates, key="key", technique=technique)
        answers.append(frame_windows(out, SKETCHED))
    for other in answers[1:]:
        assert other == answers[0]
    exact, _ = oracle(events, *spec, {"a_x": "count_distinct:x", "a_z": "count_distinct:z"})
    for key, windows in exact.items():
        for (_, _, values), (_, _, estimates) in zip(windows, answers[0].get(key, []), strict=True):
            for name in ("a_x", "a_z"):  # few values: the sketch is in its exact (coupon) mode
                assert estimates[name] == values[name]
    for row in out.to_dict("records"):  # the written sketches: bounds around the exact answers
        ys = sorted(_values(events, row["key"], row["window_start"], row["window_end"], spec[2], "y"))
        if row["k_y"] is None:
            assert not ys and row["q_y"] is None
            continue
        kll = datasketches.kll_doubles_sketch.deserialize(row["k_y"])
        assert kll.n == len(ys) and kll.get_quantile(0.9) == row["q_y"]
        rank = sum(v <= row["q_y"] for v in ys) / len(ys)  # the inclusive rank of the answer
        assert rank >= 0.9 - kll.normalized_rank_error(False) - 1e-12
        hll = datasketches.hll_sketch.deserialize(row["h_x"])
        xs = set(_values(events, row["key"], row["window_start"], row["window_end"], spec[2], "x"))
        assert hll.get_lower_bound(2) <= len(xs) <= hll.get_upper_bound(2)


def test_merged_window_sketches_equal_one_sketch_over_the_union():
    """Cells' window sketches merged (a region) == one sketch over the region's calls, as Spark's hll_union_agg."""
    calls = pd.DataFrame({
        "cell": [c for c in range(4) for _ in range(600)],
        "start": [i % 300 for i in range(2400)], "end": [i % 300 + 200 for i in range(2400)],
        "subscriber": [(i * 7919) % 1500 for i in range(2400)],  # shared between cells
    })  # fmt: skip
    aggregates = {"subs": "hll_sketch:subscriber", "d": "count_distinct:subscriber"}
    out = spanning.aggregate(calls, range=300, slide=100, ttp=10_000, start="start", end="end", key="cell",
                             aggregates=aggregates)  # fmt: skip
    for window_start, cells in out.groupby("window_start"):
        union = datasketches.hll_union(12)
        for sketch in cells["subs"]:
            union.update(datasketches.hll_sketch.deserialize(sketch))
        merged = union.get_result(datasketches.tgt_hll_type.HLL_8)
        as_merged = merged.get_estimate()  # a union of coupon-mode sketches may estimate by HIP (order-dependent)
        merged = datasketches.hll_sketch.deserialize(order_free(merged.serialize_updatable()))
        region = calls[(calls["start"] < window_start + 300) & (calls["end"] > window_start)]
        whole = spanning.aggregate(region.assign(cell=0), range=300, slide=100, ttp=10_000, start="start",
                                   end="end", key="cell", aggregates={"subs": "hll_sketch:subscriber"})  # fmt: skip
        one = datasketches.hll_sketch.deserialize(whole.set_index("window_start").loc[window_start, "subs"])
        assert merged.get_estimate() == pytest.approx(one.get_estimate(), rel=1e-12)
        distinct = region["subscriber"].nunique()
        assert merged.get_lower_bound(3) <= distinct <= merged.get_upper_bound(3)
        assert merged.get_lower_bound(3) <= as_merged <= merged.get_upper_bound(3)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams())
def test_point_events_through_every_swag(name, spec, events):
    events = [(key, start, start, row) for key, start, _, row in events]
    if name in NEEDS_INVERSE or name == "slickdeque":  # no inverse, and not a selection (max-like)
        with pytest.raises(ValueError, match="needs invertible|needs an invertible"):
            spanning.Engine(spanning.WindowSpec(*spec), EXACT, swag=name)
        return
    expected, _ = oracle(events, *spec, EXACT)
    out = spanning.aggregate(to_frame(events), *spec, aggregates=EXACT, key="key", point_events=True, swag=name)
    assert_same_windows(frame_windows(out, EXACT), expected)


def test_sweeping_names_the_techniques_that_take_them():
    with pytest.raises(ValueError, match="use technique se-slicing, se-ml-slicing"):
        spanning.Engine(spanning.WindowSpec(10, 5), {"d": "count_distinct:x"}, technique="sweeping")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("percentile:x", "write it as 'percentile:column:q'"),
        ("percentile:x:1.5", "the quantile must be a number from 0 to 1"),
        ("approx_percentile:x:half", "the quantile must be a number from 0 to 1"),
        ("approx_count_distinct:x:30", "lgK must be an integer from 4 to 21"),
        ("kll_sketch:x:4", "K must be an integer from 8 to 65535"),
        ("count_distinct", "write it as 'count_distinct:column'"),
    ],
)
def test_bad_forms_say_the_right_one(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_aggregate(spec)


def test_percentile_follows_spark_interpolation():
    agg = parse_aggregate("percentile:x:0.25")
    partial = agg.identity()
    for value in [40, 10, 30, 20]:
        partial = agg.combine(partial, agg.lift({"x": value}, 0))
    assert partial == (10, 20, 30, 40)
    assert agg.lower(partial) == 17.5  # position 0.75: 10 + 0.75·(20 − 10)
    assert agg.lower(agg.combine(partial, agg.lift({"x": float("nan")}, 1))) == 17.5


def test_quantiles_of_a_column_share_one_sketch_per_window():
    """On the batch path, approx_percentile at several q and kll_sketch of one column (same K) build one KLL
    per window, and each lowers it to its own answer."""
    import numpy as np

    from spanning.aggregates import BatchColumns

    values = np.array([5.0, 1.0, 9.0, 3.0, 7.0])
    cols = BatchColumns({"y": (values, np.array([True, True, True, False, True]))}, np.arange(5))
    first, last = np.array([0, 0, 1, 1, 2]), np.array([1, 2, 2, 3, 3])
    aggs = [parse_aggregate(s) for s in ("approx_percentile:y:0.5", "approx_percentile:y:1", "kll_sketch:y")]
    partials = [agg.window_partials(cols, first, last, 4) for agg in aggs]
    assert partials[0] is partials[1] is partials[2]
    medians, tops, sketches = (agg.lower_partials(p) for agg, p in zip(aggs, partials, strict=True))
    windows = [[5.0, 1.0], [5.0, 1.0, 9.0], [1.0, 9.0, 7.0], [7.0]]  # the valid values whose runs cover each
    assert list(medians) == [min(w) if len(w) == 2 else sorted(w)[len(w) // 2] if len(w) > 1 else w[0]
                             for w in windows]  # fmt: skip
    assert list(tops) == [max(w) for w in windows]
    assert [datasketches.kll_doubles_sketch.deserialize(s).n for s in sketches] == [len(w) for w in windows]


def test_the_command_names_what_cannot_take_them():
    """One usage line each, before any engine runs: sweeping, and a sketch column in CSV."""
    from spanning.app.jobspec import (
        EventFields,
        Execution,
        InputFiles,
        OutputOptions,
        RunConfig,
        UsageError,
        WindowQuery,
    )

    def config(aggregate, **options):
        return RunConfig(InputFiles(["calls.csv"]), EventFields("start", "end"), WindowQuery(900, 300, 0, [aggregate]),
                         **options)  # fmt: skip

    with pytest.raises(UsageError, match="--technique sweeping cannot compute count_distinct:caller.*use se-slicing"):
        config("count_distinct:caller", execution=Execution(technique="sweeping"))
    with pytest.raises(UsageError, match="--agg hll_sketch:caller writes a sketch .* use --format parquet"):
        config("hll_sketch:caller", output=OutputOptions(format="csv"))
    assert config("approx_count_distinct:caller", output=OutputOptions(format="csv"))  # an estimate is a number
