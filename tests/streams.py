"""Random spanning-event streams for the property tests (shared by every technique's tests)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import strategies as st

# every built-in aggregate, over an int column with nulls (x), a float column with nulls and ties (y)
# and a label column (z)
ALL_AGGREGATES = {
    "n": "count",
    "n_x": "count:x",
    "sum_x": "sum:x",
    "sum_y": "sum:y",
    "mean_x": "mean:x",
    "mean_y": "mean:y",
    "min_x": "min:x",
    "max_y": "max:y",
    "max_x": "max:x",
    "min_y": "min:y",
    "sd_y": "stddev:y",
    "sdp_x": "stddev_pop:x",
    "argmin_x": "argmin:x",
    "argmax_y": "argmax:y:z",
    "mincount_x": "mincount:x",
    "maxcount_y": "maxcount:y",
}
# the exact distinct counts and quantiles (the oracle evaluates them; the sketches are checked against bounds)
DISTINCT_AGGREGATES = {
    "d_x": "count_distinct:x",
    "d_z": "count_distinct:z",
    "p50_x": "percentile:x:0.5",
    "p95_y": "percentile:y:0.95",
    "p0_y": "percentile:y:0",
}


@st.composite
def window_specs(draw, max_range=30):
    slide = draw(st.integers(1, 10))
    multiple = draw(st.booleans())  # ω mod β = 0 and ≠ 0
    if multiple:
        range_ = slide * draw(st.integers(1, 4))
    else:
        range_ = draw(st.integers(1, max_range))
    ttp = draw(st.sampled_from([0, 1, 3, 8, 20, 60]))  # smaller and larger than the longest event
    offset = draw(st.integers(-6, 6))
    return range_, slide, ttp, offset


@st.composite
def streams(draw, max_events=40, keys=3):
    """(key, start, end, row) in arrival order: short and long events, point events, bounded disorder."""
    n = draw(st.integers(0, max_events))
    events = []
    for _ in range(n):
        start = draw(st.integers(-20, 120))
        length = draw(st.one_of(st.integers(0, 3), st.integers(0, 12), st.integers(10, 70)))
        key = draw(st.integers(0, keys - 1))
        x = draw(st.one_of(st.none(), st.integers(-5, 5)))
        y = draw(st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0, 3.0, 1e3])))
        z = draw(st.one_of(st.none(), st.sampled_from(["a", "b", "c"])))
        events.append((key, start, start + length, {"x": x, "y": y, "z": z}))
    disorder = draw(st.sampled_from([0, 0, 2, 10, 40]))
    jitter = [draw(st.integers(0, disorder)) for _ in events]
    order = sorted(range(len(events)), key=lambda i: events[i][2] + jitter[i])  # arrive near their end
    return [events[i] for i in order]


def to_frame(events) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": pd.array([e[0] for e in events], dtype="Int64"),
            "start": np.array([e[1] for e in events], dtype=np.int64),
            "end": np.array([e[2] for e in events], dtype=np.int64),
            "x": pd.array([e[3]["x"] for e in events], dtype="Int64"),
            "y": np.array([np.nan if e[3]["y"] is None else e[3]["y"] for e in events], dtype=np.float64),
            "z": pd.array([e[3]["z"] for e in events], dtype=object),
        }
    )


def frame_windows(frame: pd.DataFrame, names, key="key") -> dict:
    """aggregate()'s output in the oracle's form {key: [(start, end, {name: value})]}."""
    out: dict = {}
    for row in frame.to_dict("records"):
        values = {name: _plain(row[name]) for name in names}
        k = row[key] if key else None
        out.setdefault(k, []).append((row["window_start"], row["window_end"], values))
    return out


def _plain(v):
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def assert_same_windows(got: dict, expected: dict) -> None:
    """Same keys, same windows, same values (floats to 1e-9 relative: sums may differ in the last bits)."""
    expected = {k: ws for k, ws in expected.items() if ws}  # a frame has no row for a key without windows
    got = {k: ws for k, ws in got.items() if ws}
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for k in expected:
        g, e = got[k], expected[k]
        assert [(w[0], w[1]) for w in g] == [(w[0], w[1]) for w in e], f"key {k}: window bounds differ"
        for (ws, we, gv), (_, _, ev) in zip(g, e, strict=True):
            assert gv.keys() == ev.keys()
            for name in ev:
                a, b = _plain(gv[name]), ev[name]
                if isinstance(b, float) or isinstance(a, float):
                    assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (
                        f"key {k} window [{ws},{we}) {name}: got {a}, expected {b}"
                    )
                else:
                    assert a == b, f"key {k} window [{ws},{we}) {name}: got {a!r}, expected {b!r}"
