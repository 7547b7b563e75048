"""``spanning.engines.window_ranges`` against the definition: per key and window, merge the events whose run
of windows [first, last] contains the window. Random runs cover the dense grid and the sorted points
(sparse keys, far-apart windows), integer and float columns, missing values, several keys."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.engines.window_ranges import aggregate_runs, key_codes
from tests.budget import examples

MERGE = {"sum": sum, "max": max, "min": min}


@st.composite
def runs(draw):
    n = draw(st.integers(1, 40))
    spread = draw(st.sampled_from([5, 50, 10**6, 2**40]))  # dense grid, points, far apart
    codes = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    first = draw(st.lists(st.integers(-spread, spread), min_size=n, max_size=n))
    lengths = draw(st.lists(st.one_of(st.integers(0, 3), st.integers(0, 70)), min_size=n, max_size=n))
    ints = draw(st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n))
    floats = draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=n, max_size=n))
    present = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return (np.array(codes), np.array(first), np.array(first) + np.array(lengths), np.array(ints),
            np.array(floats), np.array(present))  # fmt: skip


def brute_force(codes, first, last, column, present, merge):
    """{(code, window): merged value or None} over every covered window."""
    out = {}
    for i in range(len(codes)):
        for w in range(first[i], last[i] + 1):
            out.setdefault((int(codes[i]), int(w)), [])
            if present is None or present[i]:
                out[(int(codes[i]), int(w))].append(column[i].item())
    return {where: (MERGE[merge](v) if v else None) for where, v in out.items()}


@settings(max_examples=examples(200), deadline=None)
@given(case=runs())
def test_every_merge_equals_the_definition(case):
    codes, first, last, ints, floats, present = case
    columns = [(ints, None, "sum"), (ints, present, "sum"), (ints, present, "max"), (ints, present, "min"),
               (floats, present, "sum"), (floats, None, "max"), (floats, present, "min")]  # fmt: skip
    got = aggregate_runs(codes, first, last, columns)
    where = list(zip(codes[got.key_row].tolist(), got.window.tolist(), strict=True))
    assert where == sorted(set(where)), "one row per (key, window), in order"
    for (column, has, merge), values, shown in zip(columns, got.values, got.present, strict=True):
        want = brute_force(codes, first, last, column, has, merge)
        assert set(where) == set(want)
        for at, value, here in zip(where, values.tolist(), shown if shown is not None else [True] * len(where),
                                   strict=True):  # fmt: skip
            expected = want[at]
            if not here:
                assert expected is None, (at, merge)
                continue
            if merge == "sum" and expected is None:  # no present mask: a sum over no values is 0
                expected = 0
            elif isinstance(value, float):
                assert math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-6), (at, merge, value, expected)
            else:
                assert value == expected, (at, merge, value, expected)


def test_key_codes_treat_null_as_a_key_and_combine_columns():
    cells = pa.array(["a", None, "a", "b", None])
    kinds = pa.array([1, 1, 2, 1, 1])
    codes = key_codes([cells, kinds])
    assert codes[0] != codes[2] and codes[1] == codes[4] and len(set(codes.tolist())) == 4
    assert key_codes([cells]).tolist() == [0, 1, 0, 2, 1]


def test_no_events_give_no_windows():
    got = aggregate_runs(np.zeros(0), np.zeros(0), np.zeros(0), [(np.zeros(0), None, "max")])
    assert len(got.window) == 0 and len(got.values[0]) == 0
