"""Point-event windows through every SWAG == oracle (time- and count-based), and their errors."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

import spanning
from spanning.swag import ALGORITHMS, NEEDS_INVERSE
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import ALL_AGGREGATES, assert_same_windows, frame_windows, streams, to_frame, window_specs
from tests.test_properties import run_engines


def aggregates_for(name: str) -> dict:
    if name in NEEDS_INVERSE:
        return {"n": "count", "n_x": "count:x", "mean_x": "mean:x", "mean_y": "mean:y"}
    if name == "slickdeque":  # invertible form for count/mean, selective form for the max-like ones
        return {"n": "count", "mean_x": "mean:x", "max_y": "max:y", "min_x": "min:x", "argmax_y": "argmax:y:z"}
    return ALL_AGGREGATES


def as_points(events):
    return [(key, start, start, row) for key, start, _, row in events]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams())
def test_point_windows_equal_oracle(name, spec, events):
    events = as_points(events)
    aggregates = aggregates_for(name)
    expected, expected_late = oracle(events, *spec, aggregates)
    engines = {}
    got = {}
    for seq, (key, lo, up, row) in enumerate(events):
        if key not in engines:
            engines[key] = spanning.Engine(spanning.WindowSpec(*spec), aggregates, swag=name)
            got[key] = []
        got[key] += engines[key].insert(lo, up, row, seq=seq)
    late = {}
    for key, engine in engines.items():
        got[key] += engine.flush()
        late.update({ev.seq: ev.windows_missed for ev in engine.late})
    assert_same_windows({k: [(w.start, w.end, w.values) for w in ws] for k, ws in got.items()}, expected)
    assert late == expected_late
    out = spanning.aggregate(to_frame(events), *spec, aggregates=aggregates, key="key", point_events=True, swag=name)
    assert_same_windows(frame_windows(out, aggregates), expected)


@settings(max_examples=examples(80), deadline=None)
@given(spec=window_specs(), events=streams())
def test_count_based_windows(spec, events):
    """Count-based: a row's time is its arrival number within its key; windows count arrivals."""
    seen: dict = {}
    counted = []
    for key, _, _, row in events:
        counted.append((key, seen.get(key, 0), seen.get(key, 0), row))
        seen[key] = seen.get(key, 0) + 1
    expected, _ = oracle(counted, *spec, {"n": "count", "s": "sum:x", "m": "max:y"})
    frame = to_frame(events)
    for swag in (None, "daba-lite"):
        out = spanning.aggregate(
            frame, *spec, aggregates={"n": "count", "s": "sum:x", "m": "max:y"}, key="key",
            point_events=True, count_based=True, swag=swag,
        )  # fmt: skip
        assert_same_windows(frame_windows(out, ["n", "s", "m"]), expected)
    got, _ = run_engines(counted, spec, {"n": "count"})
    assert_same_windows(got, {k: [(s, e, {"n": v["n"]}) for s, e, v in ws] for k, ws in expected.items()})


def test_point_window_errors():
    spec = spanning.WindowSpec(10, 5)
    with pytest.raises(ValueError, match="swag 'soe' needs invertible aggregates"):
        spanning.Engine(spec, {"s": "sum:x"}, swag="soe")
    with pytest.raises(ValueError, match="unknown swag 'fast'"):
        spanning.Engine(spec, {"n": "count"}, swag="fast")
    eng = spanning.Engine(spec, {"n": "count"}, swag="two-stacks")
    with pytest.raises(ValueError, match="take point events"):
        eng.insert(0, 5)
    frame = pd.DataFrame({"start": [1, 2], "end": [3, 4]})
    with pytest.raises(ValueError, match="give point_events=True"):
        spanning.aggregate(frame, 10, 5, swag="daba")
    with pytest.raises(ValueError, match="give point_events=True"):
        spanning.aggregate(frame, 10, 5, count_based=True)
