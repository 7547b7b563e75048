"""Bad input gets a clear exception naming the problem; nothing is dropped silently."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import spanning
from spanning import Engine, WindowSpec

CALLS = pd.DataFrame({"start": [0, 5, 9], "end": [4, 12, 9], "bytes": [1, 2, 3]})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"range": 0, "slide": 5}, "range must be > 0"),
        ({"range": 10, "slide": -1}, "slide must be > 0"),
        ({"range": 10, "slide": 5, "ttp": -3}, "ttp must be >= 0"),
        ({"range": 10.5, "slide": 5}, "window range must be an integer"),
        ({"range": "15m", "slide": 5}, "window range must be an integer"),
    ],
)
def test_window_spec_out_of_domain(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WindowSpec(**kwargs)
    with pytest.raises(ValueError, match=message):
        spanning.aggregate(CALLS, **kwargs)


def test_end_before_start():
    eng = Engine(WindowSpec(10, 5), {"n": "count"})
    with pytest.raises(ValueError, match="event end 3 is before its start 7"):
        eng.insert(7, 3)
    bad = pd.DataFrame({"start": [0, 7], "end": [4, 3]})
    with pytest.raises(ValueError, match="row 1: event end 3 is before its start 7"):
        spanning.aggregate(bad, 10, 5)


def test_non_integer_and_null_times():
    eng = Engine(WindowSpec(10, 5), {"n": "count"})
    with pytest.raises(ValueError, match="event start must be an integer chronon"):
        eng.insert(1.5, 3)
    with pytest.raises(ValueError, match="non-integer time 2.5 at row 1"):
        spanning.aggregate(pd.DataFrame({"start": [0.0, 2.5], "end": [4.0, 5.0]}), 10, 5)
    with pytest.raises(ValueError, match="has a null at row 1"):
        spanning.aggregate(pd.DataFrame({"start": [0.0, np.nan], "end": [4, 5]}), 10, 5)
    with pytest.raises(ValueError, match="must hold integer chronons"):
        spanning.aggregate(pd.DataFrame({"start": ["a"], "end": ["b"]}), 10, 5)


def test_unknown_aggregate_column_and_technique():
    with pytest.raises(ValueError, match="unknown aggregate 'median:bytes'"):
        spanning.aggregate(CALLS, 10, 5, aggregates={"m": "median:bytes"})
    with pytest.raises(ValueError, match="bad aggregate 'sum'"):
        Engine(WindowSpec(10, 5), {"s": "sum"})
    with pytest.raises(ValueError, match="unknown column 'volume'"):
        spanning.aggregate(CALLS, 10, 5, aggregates={"s": "sum:volume"})
    with pytest.raises(ValueError, match="unknown column 'cell'"):
        spanning.aggregate(CALLS, 10, 5, key="cell")
    with pytest.raises(ValueError, match="unknown technique 'fast'"):
        spanning.aggregate(CALLS, 10, 5, technique="fast")
    with pytest.raises(ValueError, match="row has no column 'bytes'"):
        Engine(WindowSpec(10, 5), {"s": "sum:bytes"}).insert(0, 3, {"volume": 1})


def test_non_numeric_values_in_aggregated_column():
    frame = CALLS.assign(bytes=["1", "lots", None])
    with pytest.raises(ValueError, match="column 'bytes' must be numeric: row 1 holds 'lots'"):
        spanning.aggregate(frame, 10, 5, aggregates={"s": "sum:bytes"})


def test_late_events_are_reported_not_dropped():
    # ω = 10, β = 5, δ = 0. The call [20, 30) arrives at 30 and first releases [15, 25) (25 + 0 < 30),
    # so with no TTP it misses that window; [1, 3) arrives after [-5, 5) and [0, 10) were released.
    frame = pd.DataFrame({"start": [0, 20, 1], "end": [5, 30, 3]})
    out = spanning.aggregate(frame, 10, 5, ttp=0)
    late = out.attrs["late"]
    assert late.index.tolist() == [1, 2] and late["windows_missed"].tolist() == [1, 2]
    assert out["window_start"].tolist() == [-5, 0, 5, 10, 15, 20, 25]
    assert out["count"].tolist() == [1, 1, 0, 0, 0, 1, 1]  # windows are final once released
    # δ = 10 covers the 10-chronon call, so [15, 25) counts it; [1, 3) is still too late (10 + 10 < 30)
    out = spanning.aggregate(frame, 10, 5, ttp=10)
    assert out.attrs["late"].index.tolist() == [2]
    assert out["count"].tolist() == [1, 1, 0, 0, 1, 1, 1]
    # δ = 25 covers the disorder too: nothing is late
    out = spanning.aggregate(frame, 10, 5, ttp=25)
    assert out.attrs["late"].empty
    assert out["count"].tolist() == [2, 2, 0, 0, 1, 1, 1]
