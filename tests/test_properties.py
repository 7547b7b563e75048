"""Engine == aggregate == oracle on random streams, for every built-in aggregate, late reports included."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
from spanning.engines.keyed import KeyedBatch, KeyedDriver, PerEventKeys
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import ALL_AGGREGATES, assert_same_windows, frame_windows, streams, to_frame, window_specs

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_engines(events, spec, aggregates, technique="se-slicing", height=1, series_start=None):
    """One Engine per key (the keyed driver), fed in arrival order; returns windows and late reports like the oracle."""
    codes = {}
    for key, *_ in events:
        codes.setdefault(key, len(codes))
    groups = np.array([codes[key] for key, *_ in events], dtype=np.int64)
    starts, ends = (np.array([e[i] for e in events], dtype=np.int64) for i in (1, 2))
    batch = KeyedBatch.in_key_order(groups, starts, ends, [e[3] for e in events], None)
    spec = spanning.WindowSpec(*spec)
    driver = KeyedDriver(
        PerEventKeys(
            lambda _: spanning.Engine(spec, aggregates, technique=technique, height=height, start=series_start)
        )
    )
    _, result = driver.feed(batch)
    released, late_events = result or ([], [])
    released += driver.finish() or []
    keys = list(codes)
    windows = {key: [] for key in keys}
    for g, w in released:
        windows.setdefault(keys[g], []).append((w.start, w.end, w.values))
    return windows, {ev.seq: ev.windows_missed for ev in late_events}


@SETTINGS
@given(spec=window_specs(), events=streams())
def test_engine_equals_oracle(spec, events):
    expected, expected_late = oracle(events, *spec, ALL_AGGREGATES)
    got, late = run_engines(events, spec, ALL_AGGREGATES)
    assert_same_windows(got, expected)
    assert late == expected_late


@SETTINGS
@given(spec=window_specs(), events=streams())
def test_aggregate_equals_oracle(spec, events):
    expected, expected_late = oracle(events, *spec, ALL_AGGREGATES)
    out = spanning.aggregate(to_frame(events), *spec, aggregates=ALL_AGGREGATES, key="key")
    assert list(out.columns) == ["key", "window_start", "window_end", *ALL_AGGREGATES]
    assert_same_windows(frame_windows(out, ALL_AGGREGATES), expected)
    late = out.attrs["late"]
    assert dict(zip(late.index.tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late


@SETTINGS
@given(spec=window_specs(), events=streams(keys=1), series_start=st.integers(-30, 60))
def test_explicit_series_start(spec, events, series_start):
    aggregates = {"n": "count", "sum_x": "sum:x", "max_y": "max:y"}
    expected, expected_late = oracle(events, *spec, aggregates, series_start=series_start)
    got, late = run_engines(events, spec, aggregates, series_start=series_start)
    assert_same_windows(got, expected)
    assert late == expected_late
    out = spanning.aggregate(to_frame(events), *spec, aggregates=aggregates, series_start=series_start)
    assert_same_windows(frame_windows(out, aggregates, key=None), {None: expected.get(0, [])} if events else {})


@settings(max_examples=examples(60), deadline=None)
@given(spec=window_specs(), events=streams())
def test_user_aggregate_runs_per_event_path(spec, events):
    """A user-defined aggregate makes aggregate() fall back to the per-event engine: same answers."""
    total = spanning.UserAggregate(
        "sum_x",
        identity=None,
        lift=lambda row: row["x"],
        combine=lambda a, b: b if a is None else a if b is None else a + b,
        columns=("x",),
    )
    frame = to_frame(events)
    frame["x"] = frame["x"].astype(object).where(frame["x"].notna(), None)
    out = spanning.aggregate(frame, *spec, aggregates={"n": "count", "sum_x": total, "argmin_x": "argmin:x"}, key="key")
    expected, expected_late = oracle(events, *spec, {"n": "count", "sum_x": "sum:x", "argmin_x": "argmin:x"})
    assert_same_windows(frame_windows(out, ["n", "sum_x", "argmin_x"]), expected)
    late = out.attrs["late"]
    assert dict(zip(late.index.tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late


@settings(max_examples=examples(40), deadline=None)
@given(spec=window_specs(), events=streams())
def test_arrow_table_input(spec, events):
    frame = to_frame(events)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    aggregates = {"n": "count", "sum_x": "sum:x", "argmax_y": "argmax:y:z"}
    a = spanning.aggregate(table, *spec, aggregates=aggregates, key="key")
    b = spanning.aggregate(frame, *spec, aggregates=aggregates, key="key")
    assert_same_windows(frame_windows(a, aggregates), frame_windows(b, aggregates))
