"""Never print a wrong number: exact integer sums, int64 boundaries, null keys and NaN values.

Every path must agree: the vectorised batch path (``aggregate``), the per-event path (``aggregate``
with another technique, and ``Engine``), and the chunked ``SortedStreamAggregator`` (what each Spark
partition runs) with the key's open windows carried from chunk to chunk. Expected values are written
out by hand; the property test compares with Python-int sums from the oracle.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
from spanning.engines.engine import build_aggregates
from spanning.engines.streams import SortedEngineStream, SortedStreamAggregator
from spanning.kernels import threads
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import assert_same_windows, frame_windows

TOP = 2**63 - 1  # 9223372036854775807, the largest int64
BOTTOM = -(2**63)  # -9223372036854775808, the smallest int64
PATHS = ["vectorised", "tuple-buckets", "engine", "chunked", "chunked-engine"]
SPEC = (10, 10, 0, 0)  # tumbling windows [0, 10), [10, 20), ...


def run_path(path, events, aggregates, spec=SPEC, cuts=None, flags=None):
    """Windows of one key's ``events`` [(start, end, {column: value})] through one path, as
    [(window_start, window_end, {name: value})] with plain Python values (None for null).

    ``cuts``: chunk boundaries for the chunked paths (default: every event its own chunk).
    ``flags``: {column: [bool]} validity columns, sent the way the Spark job sends them.
    """
    columns = sorted({c for _, _, row in events for c in row})
    frame = pd.DataFrame(
        {
            "key": ["k"] * len(events),
            "start": np.array([e[0] for e in events], dtype=np.int64),
            "end": np.array([e[1] for e in events], dtype=np.int64),
            **{c: _column([e[2][c] for e in events]) for c in columns},
        }
    )
    if path == "engine":
        eng = spanning.Engine(spanning.WindowSpec(*spec), aggregates)
        windows = []
        for start, end, row in events:
            windows += eng.insert(start, end, row)
        windows += eng.flush()
        return [(w.start, w.end, {k: _plain(v) for k, v in w.values.items()}) for w in windows]
    if path in ("vectorised", "tuple-buckets"):
        technique = "se-slicing" if path == "vectorised" else "tuple-buckets"
        out = spanning.aggregate(frame, *spec, aggregates=aggregates, key="key", technique=technique)
        return frame_windows(out, aggregates).get("k", [])
    frame["seq"] = np.arange(len(frame), dtype=np.int64)
    for c, valid in (flags or {}).items():
        frame[f"{c}__valid"] = np.array(valid, dtype=bool)
    names, aggs = build_aggregates(aggregates)
    stream_type = SortedStreamAggregator if path == "chunked" else SortedEngineStream
    extra = {} if path == "chunked" else {"technique": "tuple-buckets"}
    stream = stream_type(spanning.WindowSpec(*spec), aggs, names, keys=["key"], **extra)
    bounds = sorted({0, len(frame), *(range(len(frame)) if cuts is None else cuts)})
    parts = [stream.feed(frame.iloc[a:b])[0] for a, b in zip(bounds, bounds[1:], strict=False)]
    parts.append(stream.finish()[0])
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    return frame_windows(out, aggregates).get("k", [])


def _column(values):
    """Python ints as int64 (Int64 when some are null), anything else as pandas infers it."""
    if all(v is None or type(v) is int for v in values):
        return pd.array(values, dtype="Int64")
    return values


def _plain(v):
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def one_window(values, column="bytes"):
    """Point events at times 0, 1, 2, ... (all in window [0, 10)), one value each."""
    return [(i, i + 1, {column: v}) for i, v in enumerate(values)]


# ------------------------------------------------------------------------------------------------
# integer sums: exact, never wrapped


@pytest.mark.parametrize("path", PATHS)
def test_sum_at_the_int64_maximum_fits(path):
    got = run_path(path, one_window([TOP]), {"s": "sum:bytes"})
    assert got == [(0, 10, {"s": 9223372036854775807})]
    got = run_path(path, one_window([2**62, 2**62 - 1]), {"s": "sum:bytes"})
    assert got == [(0, 10, {"s": 9223372036854775807})]
    got = run_path(path, one_window([BOTTOM + 1, -1]), {"s": "sum:bytes"})
    assert got == [(0, 10, {"s": -9223372036854775808})]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("values", [[TOP, 1], [BOTTOM, -1], [2**62, 2**62], [TOP, TOP, TOP]])
def test_sum_past_int64_raises_naming_the_column(path, values):
    with pytest.raises(spanning.SumOverflowError, match="'bytes'") as err:
        run_path(path, one_window(values), {"n": "count", "s": "sum:bytes"})
    assert isinstance(err.value, ValueError)
    assert "64-bit range" in str(err.value) and "never wraps" in str(err.value)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([TOP, 1, -1], 9223372036854775807),  # passes 2^63 on the way, ends in range
        ([TOP, TOP, -TOP], 9223372036854775807),
        ([BOTTOM, -1, 1], -9223372036854775808),
        ([TOP, TOP, BOTTOM, BOTTOM, 5], 3),  # 2(2^63 - 1) - 2^64 + 5
        ([2**62, 2**62, 2**62, -(2**62), -(2**62), 7], 4611686018427387911),  # 2^62 + 7
    ],
)
def test_sum_that_passes_the_limit_and_comes_back_is_exact(path, values, expected):
    assert run_path(path, one_window(values), {"s": "sum:bytes"}) == [(0, 10, {"s": expected})]


@pytest.mark.parametrize("cuts", [[1], [2], [1, 2], [1, 2, 3]])
@pytest.mark.parametrize("path", ["chunked", "chunked-engine"])
def test_carried_key_keeps_an_exact_sum_across_chunks(path, cuts):
    # the open window [0, 10) is carried from chunk to chunk: its partial passes 2^63 between chunks
    events = one_window([TOP, 1, 1, -2])
    got = run_path(path, events, {"n": "count", "s": "sum:bytes", "m": "mean:bytes"}, cuts=cuts)
    assert got == [(0, 10, {"n": 4, "s": 9223372036854775807, "m": 2305843009213693952.0})]  # 2^61 (float)
    with pytest.raises(spanning.SumOverflowError, match="'bytes'"):
        run_path(path, one_window([TOP, 1, 1, -1]), {"s": "sum:bytes"}, cuts=cuts)


@pytest.mark.parametrize("path", PATHS)
def test_only_the_window_past_the_limit_matters(path):
    # sliding windows of 10 every 5: [-5, 5) holds TOP, [0, 10) holds TOP + 1 - 1, [5, 15) holds 1 - 1
    events = [(0, 1, {"b": TOP}), (6, 7, {"b": 1}), (7, 8, {"b": -1})]
    got = run_path(path, events, {"s": "sum:b"}, spec=(10, 5, 0, 0))
    assert got == [(-5, 5, {"s": TOP}), (0, 10, {"s": TOP}), (5, 15, {"s": 0})]
    events = [(0, 1, {"b": TOP}), (6, 7, {"b": 1}), (12, 13, {"b": -1})]  # [0, 10) holds TOP + 1
    with pytest.raises(spanning.SumOverflowError, match="'b'"):
        run_path(path, events, {"s": "sum:b"}, spec=(10, 5, 0, 0))


def test_engine_sums_numpy_ints_exactly():
    eng = spanning.Engine(spanning.WindowSpec(10, 10), {"s": "sum:bytes", "m": "mean:bytes"})
    eng.insert(0, 1, {"bytes": np.int64(TOP)})
    eng.insert(1, 2, {"bytes": np.int64(TOP)})
    eng.insert(2, 3, {"bytes": np.int64(-TOP)})
    (window,) = eng.flush()
    assert window.values == {"s": 9223372036854775807, "m": 3074457345618258432.0}  # TOP / 3, rounded once
    eng = spanning.Engine(spanning.WindowSpec(10, 10), {"s": "sum:bytes"})
    eng.insert(0, 1, {"bytes": np.int64(TOP)})
    eng.insert(1, 2, {"bytes": np.int64(1)})
    with pytest.raises(spanning.SumOverflowError, match="'bytes'"):
        eng.flush()


@pytest.mark.parametrize("path", PATHS)
def test_mean_of_huge_integers_uses_the_exact_sum(path):
    aggs = {"m": "mean:bytes"}
    assert run_path(path, one_window([2**62] * 3), aggs) == [(0, 10, {"m": 4611686018427387904.0})]
    assert run_path(path, one_window([TOP] * 4), aggs) == [(0, 10, {"m": 9223372036854775808.0})]
    assert run_path(path, one_window([BOTTOM] * 2), aggs) == [(0, 10, {"m": -9223372036854775808.0})]
    assert run_path(path, one_window([TOP, TOP, 2, 0]), aggs) == [(0, 10, {"m": 4611686018427387904.0})]


def test_sum_of_floats_stays_a_float():
    got = run_path("vectorised", one_window([1e300, 1e300]), {"s": "sum:bytes"})
    assert got == [(0, 10, {"s": 2e300})]


@pytest.mark.parametrize("path", ["vectorised", "chunked"])
def test_unsigned_values_past_int64_are_refused_not_wrapped(path):
    frame_values = pd.Series([2**63, 1], dtype=np.uint64)
    frame = pd.DataFrame({"key": ["k", "k"], "start": [0, 1], "end": [1, 2], "seq": [0, 1], "u": frame_values})
    with pytest.raises(ValueError, match="'u'"):
        if path == "vectorised":
            spanning.aggregate(frame, 10, 10, aggregates={"s": "max:u"}, key="key")
        else:
            names, aggs = build_aggregates({"s": "max:u"})
            SortedStreamAggregator(spanning.WindowSpec(10, 10), aggs, names, ["key"]).feed(frame)
    small = frame.assign(u=pd.Series([5, 7], dtype=np.uint64))
    out = spanning.aggregate(small, 10, 10, aggregates={"s": "sum:u"}, key="key")
    assert out["s"].tolist() == [12]


# ------------------------------------------------------------------------------------------------
# min / max / arg / count of the extreme at the int64 boundaries

EXTREMES = {
    "lo": "min:v",
    "hi": "max:v",
    "arg_lo": "argmin:v",
    "arg_hi": "argmax:v",
    "n_lo": "mincount:v",
    "n_hi": "maxcount:v",
}


@pytest.mark.parametrize("path", PATHS)
def test_extremes_at_the_int64_boundaries(path):
    got = run_path(path, one_window([BOTTOM, TOP, BOTTOM, 0, TOP], "v"), EXTREMES)
    expected = {"lo": BOTTOM, "hi": TOP, "arg_lo": 0, "arg_hi": 1, "n_lo": 2, "n_hi": 2}
    assert got == [(0, 10, expected)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("value", [BOTTOM, TOP, BOTTOM + 1, TOP - 1, 0])
def test_a_single_boundary_value_is_a_value_not_a_null(path, value):
    got = run_path(path, one_window([value], "v"), EXTREMES)
    assert got == [(0, 10, {"lo": value, "hi": value, "arg_lo": 0, "arg_hi": 0, "n_lo": 1, "n_hi": 1})]


@pytest.mark.parametrize("path", PATHS)
def test_extremes_carried_across_windows_and_chunks(path):
    # sliding windows of 10 every 5; [-5, 5) holds BOTTOM only, [0, 10) holds BOTTOM, TOP, -1, [5, 15) TOP, -1
    events = [(0, 1, {"v": BOTTOM}), (6, 7, {"v": TOP}), (8, 9, {"v": -1})]
    got = run_path(path, events, {"lo": "min:v", "hi": "max:v", "n_hi": "maxcount:v"}, spec=(10, 5, 0, 0))
    assert got == [
        (-5, 5, {"lo": BOTTOM, "hi": BOTTOM, "n_hi": 1}),
        (0, 10, {"lo": BOTTOM, "hi": TOP, "n_hi": 1}),
        (5, 15, {"lo": -1, "hi": TOP, "n_hi": 1}),
    ]


@pytest.mark.parametrize("path", ["vectorised", "tuple-buckets", "engine"])
def test_infinite_floats_are_values(path):
    got = run_path(path, one_window([-math.inf], "v"), {"lo": "min:v", "hi": "max:v", "a": "argmax:v"})
    assert got == [(0, 10, {"lo": -math.inf, "hi": -math.inf, "a": 0})]
    got = run_path(path, one_window([math.inf, 1.0], "v"), {"lo": "min:v", "hi": "max:v", "n": "maxcount:v"})
    assert got == [(0, 10, {"lo": 1.0, "hi": math.inf, "n": 1})]


# ------------------------------------------------------------------------------------------------
# NaN is null in value columns

NAN_AGGREGATES = {
    "n": "count",
    "n_v": "count:v",
    "s": "sum:v",
    "m": "mean:v",
    "lo": "min:v",
    "hi": "max:v",
    "sd": "stddev:v",
    "sdp": "stddev_pop:v",
    "arg_lo": "argmin:v",
    "arg_hi": "argmax:v",
    "n_lo": "mincount:v",
}


@pytest.mark.parametrize("path", PATHS)
def test_nan_is_null(path):
    values = [math.nan, 1.5, math.nan, 2.5, math.nan]
    got = run_path(path, one_window(values, "v"), NAN_AGGREGATES)
    expected = {
        "n": 5,
        "n_v": 2,
        "s": 4.0,
        "m": 2.0,
        "lo": 1.5,
        "hi": 2.5,
        "sd": math.sqrt(0.5),  # sample: ((0.5² + 0.5²) / 1) ** 0.5
        "sdp": 0.5,
        "arg_lo": 1,
        "arg_hi": 3,
        "n_lo": 1,
    }
    ((start, end, row),) = got
    assert (start, end) == (0, 10)
    assert row.keys() == expected.keys()
    for name, value in expected.items():
        assert row[name] == pytest.approx(value, rel=1e-12), name


@pytest.mark.parametrize("path", PATHS)
def test_only_nans_give_nulls(path):
    got = run_path(path, one_window([math.nan, math.nan], "v"), NAN_AGGREGATES)
    nulls = dict.fromkeys(["s", "m", "lo", "hi", "sd", "sdp", "arg_lo", "arg_hi", "n_lo"])
    assert got == [(0, 10, {"n": 2, "n_v": 0, **nulls})]


@pytest.mark.parametrize("path", ["chunked", "chunked-engine"])
def test_nan_flagged_present_is_still_null(path):
    # the Spark job sends a validity column; Spark's NaN is not null, so NaN arrives flagged present
    got = run_path(path, one_window([1.0, math.nan, 3.0], "v"), NAN_AGGREGATES, flags={"v": [True, True, True]})
    ((_, _, row),) = got
    assert (row["n_v"], row["s"], row["lo"], row["hi"], row["arg_hi"]) == (2, 4.0, 1.0, 3.0, 2)


# ------------------------------------------------------------------------------------------------
# null keys: one group; "" its own group


def key_frame(keys):
    n = len(keys)
    return pd.DataFrame({"cell": keys, "start": np.arange(n), "end": np.arange(n) + 1, "x": np.arange(1, n + 1)})


def by_key(out):
    """{key or None: [(window_start, n, s)]} of an aggregate() result."""
    got: dict = {}
    for row in out.to_dict("records"):
        key = None if _plain(row["cell"]) is None else row["cell"]
        got.setdefault(key, []).append((row["window_start"], row["n"], row["s"]))
    return got


KEY_COLUMNS = {
    "string": lambda keys: pd.array(keys, dtype="string"),
    "object-mixed-nulls": lambda keys: pd.array(
        [[None, np.nan, pd.NA][i % 3] if k is None else k for i, k in enumerate(keys)], dtype=object
    ),
    "categorical": lambda keys: pd.Categorical(keys),
}


@pytest.mark.parametrize("technique", ["se-slicing", "tuple-buckets"])
@pytest.mark.parametrize("kind", sorted(KEY_COLUMNS))
@pytest.mark.parametrize(
    "keys",
    [
        ["a", None, None, "", "", "b"],  # grouped runs: the fast path
        [None, "a", None, "", "a", None, ""],  # interleaved: the hashing path
        [None, None, None],
        ["", None, ""],
    ],
)
def test_null_keys_form_one_group_and_empty_string_another(technique, kind, keys):
    frame = key_frame(KEY_COLUMNS[kind](keys))
    out = spanning.aggregate(frame, 100, 100, aggregates={"n": "count", "s": "sum:x"}, key="cell", technique=technique)
    expected: dict = {}
    for i, k in enumerate(keys):  # one window [0, 100) per key: count and sum of x = row + 1
        n, s = expected.get(k, (0, 0))
        expected[k] = (n + 1, s + i + 1)
    got = by_key(out)
    assert got == {k: [(0, n, s)] for k, (n, s) in expected.items()}
    firsts = list(dict.fromkeys(keys))  # keys in order of first appearance
    assert [None if _plain(v) is None else v for v in out["cell"]] == firsts


@pytest.mark.parametrize("technique", ["se-slicing", "tuple-buckets"])
def test_null_keys_by_hand(technique):
    cells = pd.array(["a", pd.NA, "", pd.NA, "a", ""], dtype="string")  # as read_csv(dtype_backend="numpy_nullable")
    frame = key_frame(cells)
    out = spanning.aggregate(frame, 100, 100, aggregates={"n": "count", "s": "sum:x"}, key="cell", technique=technique)
    assert by_key(out) == {"a": [(0, 2, 6)], None: [(0, 2, 6)], "": [(0, 2, 9)]}
    assert out["cell"].isna().tolist() == [False, True, False]


BIG = 2**53 + 1  # a float64 would merge it with 2^53


@pytest.mark.parametrize("technique", ["se-slicing", "tuple-buckets"])
@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ([2**53, 2**53, None, None, BIG], {2**53: [(0, 2, 3)], None: [(0, 2, 7)], BIG: [(0, 1, 5)]}),  # runs
        ([2**53, 2**53, None, BIG, None], {2**53: [(0, 2, 3)], None: [(0, 2, 8)], BIG: [(0, 1, 4)]}),  # hashed
    ],
)
def test_nullable_integer_keys_stay_exact(technique, keys, expected):
    cells = pd.array(keys, dtype="Int64")
    out = spanning.aggregate(
        key_frame(cells), 100, 100, aggregates={"n": "count", "s": "sum:x"}, key="cell", technique=technique
    )
    assert by_key(out) == expected
    assert [_plain(v) for v in out["cell"]] == [2**53, None, BIG]


@pytest.mark.parametrize("kind", ["table", "record batch"])
def test_nullable_integer_keys_of_arrow_rows_stay_exact(kind):
    """An Arrow int64 key column with nulls: ``to_pandas`` alone would make it float64, and 2**62 + 1 and
    2**62 + 3 one key (``inputs.arrow_frame``)."""
    import pyarrow as pa

    keys = [2**62 + 1, 2**62 + 3, None, 2**62 + 1, None]
    table = pa.table({"cell": pa.array(keys, pa.int64()), "start": np.arange(5), "end": np.arange(5) + 1,
                      "x": np.arange(1, 6)})  # fmt: skip
    rows = table if kind == "table" else table.to_batches()[0]
    out = spanning.aggregate(rows, 100, 100, aggregates={"n": "count", "s": "sum:x"}, key="cell")
    assert str(out["cell"].dtype) == "Int64"
    assert by_key(out) == {2**62 + 1: [(0, 2, 5)], 2**62 + 3: [(0, 1, 2)], None: [(0, 2, 8)]}


@pytest.mark.parametrize("technique", ["se-slicing", "tuple-buckets"])
def test_null_keys_in_several_key_columns(technique):
    frame = key_frame(pd.array(["a", None, None, "", None], dtype="string"))
    frame["zone"] = pd.array([1, None, None, None, 2], dtype="Int64")
    out = spanning.aggregate(
        frame, 100, 100, aggregates={"n": "count", "s": "sum:x"}, key=["cell", "zone"], technique=technique
    )
    rows = [(_plain(r["cell"]), _plain(r["zone"]), r["n"], r["s"]) for r in out.to_dict("records")]
    assert rows == [("a", 1, 1, 1), (None, None, 2, 5), ("", None, 1, 4), (None, 2, 1, 5)]


@pytest.mark.parametrize("stream_type", [SortedStreamAggregator, SortedEngineStream])
@pytest.mark.parametrize("cuts", [[], [1], [2], [3], [1, 2, 3, 4, 5]])
def test_chunked_null_key_carried_across_chunks(stream_type, cuts):
    # sorted by key: "" , then the null key (None, pd.NA, NaN alike) over three chunks, then "b"
    cells = pd.array(["", "", None, pd.NA, np.nan, "b"], dtype=object)
    frame = key_frame(cells).assign(seq=np.arange(6))
    names, aggs = build_aggregates({"n": "count", "s": "sum:x"})
    stream = stream_type(spanning.WindowSpec(100, 100), aggs, names, keys=["cell"])
    bounds = sorted({0, 6, *cuts})
    parts = [stream.feed(frame.iloc[a:b])[0] for a, b in zip(bounds, bounds[1:], strict=False)]
    parts.append(stream.finish()[0])
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    assert by_key(out) == {"": [(0, 2, 3)], None: [(0, 3, 12)], "b": [(0, 1, 6)]}


@pytest.mark.parametrize("stream_type", [SortedStreamAggregator, SortedEngineStream])
def test_chunked_string_keys_with_na(stream_type):
    cells = pd.array(["a", pd.NA, pd.NA, "b"], dtype="string")
    frame = key_frame(cells).assign(seq=np.arange(4))
    names, aggs = build_aggregates({"n": "count", "s": "sum:x"})
    stream = stream_type(spanning.WindowSpec(100, 100), aggs, names, keys=["cell"])
    parts = [stream.feed(frame.iloc[:2])[0], stream.feed(frame.iloc[2:])[0], stream.finish()[0]]
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    assert by_key(out) == {"a": [(0, 1, 1)], None: [(0, 2, 5)], "b": [(0, 1, 4)]}


# ------------------------------------------------------------------------------------------------
# property: exact sums, or SumOverflowError exactly when a Python-int sum leaves int64

HUGE = st.one_of(
    st.integers(-5, 5),
    st.integers(BOTTOM, TOP),
    st.sampled_from([TOP, BOTTOM, TOP - 1, BOTTOM + 1, 2**62, -(2**62), 2**32, -(2**32) - 1]),
)


@st.composite
def huge_streams(draw, max_events=25):
    """(key, start, end, {"x": value}) in arrival order, values up to the int64 limits (some null)."""
    n = draw(st.integers(1, max_events))
    events = []
    for _ in range(n):
        start = draw(st.integers(0, 40))
        length = draw(st.integers(0, 15))
        x = draw(st.one_of(st.none(), HUGE, HUGE))
        events.append((draw(st.integers(0, 1)), start, start + length, {"x": x}))
    jitter = [draw(st.integers(0, draw(st.sampled_from([0, 3])))) for _ in events]
    order = sorted(range(n), key=lambda i: events[i][2] + jitter[i])
    return [events[i] for i in order]


def frame_of(events):
    return pd.DataFrame(
        {
            "key": np.array([e[0] for e in events], dtype=np.int64),
            "start": np.array([e[1] for e in events], dtype=np.int64),
            "end": np.array([e[2] for e in events], dtype=np.int64),
            "x": pd.array([e[3]["x"] for e in events], dtype="Int64"),
        }
    )


def out_of_range(expected):
    return any(
        v is not None and not BOTTOM <= v <= TOP for ws in expected.values() for _, _, row in ws for v in row.values()
    )


def check_sums(run, events, spec):
    """``run()`` gives the oracle's windows exactly, or raises SumOverflowError iff some exact sum leaves int64."""
    expected, _ = oracle(events, *spec, {"s": "sum:x"})
    if out_of_range(expected):
        with pytest.raises(spanning.SumOverflowError, match="'x'"):
            run()
    else:
        assert_same_windows(run(), expected)


PROPERTY = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPECS = st.tuples(st.integers(1, 12), st.integers(1, 6), st.sampled_from([0, 2, 30]), st.integers(-3, 3))


@PROPERTY
@given(spec=SPECS, events=huge_streams())
def test_exact_sums_equal_python_ints_batch_and_engine(spec, events):
    frame = frame_of(events)
    for technique in ("se-slicing", "tuple-buckets"):
        check_sums(
            lambda t=technique: frame_windows(
                spanning.aggregate(frame, *spec, aggregates={"s": "sum:x"}, key="key", technique=t), {"s": 0}
            ),
            events,
            spec,
        )


@PROPERTY
@given(spec=SPECS, events=huge_streams(), cuts=st.lists(st.integers(0, 25), max_size=6))
def test_exact_sums_equal_python_ints_chunked(spec, events, cuts):
    events = sorted(events, key=lambda e: (e[0], max(e[2], e[1] + 1)))  # as the Spark job feeds them: key, then u
    frame = frame_of(events).assign(seq=np.arange(len(events), dtype=np.int64))
    names, aggs = build_aggregates({"s": "sum:x"})

    def run():
        stream = SortedStreamAggregator(spanning.WindowSpec(*spec), aggs, names, keys=["key"])
        bounds = sorted({0, len(frame), *[c % (len(frame) + 1) for c in cuts]})
        parts = [stream.feed(frame.iloc[a:b])[0] for a, b in zip(bounds, bounds[1:], strict=False)]
        parts.append(stream.finish()[0])
        nonempty = [p for p in parts if len(p)]
        return frame_windows(pd.concat(nonempty, ignore_index=True), {"s": 0}) if nonempty else {}

    check_sums(run, events, spec)


@PROPERTY
@given(spec=SPECS, events=huge_streams())
def test_mean_and_extremes_of_huge_ints_equal_the_oracle(spec, events):
    aggregates = {"m": "mean:x", "lo": "min:x", "hi": "max:x", "a": "argmin:x", "c": "maxcount:x", "n": "count:x"}
    expected, _ = oracle(events, *spec, aggregates)
    out = spanning.aggregate(frame_of(events), *spec, aggregates=aggregates, key="key")
    assert_same_windows(frame_windows(out, aggregates), expected)


KEY_OBJECTS = ["cell-1", "cell-2", "", None, "nan", "NA"]


@settings(max_examples=examples(200), deadline=None)
@given(
    runs=st.lists(st.tuples(st.sampled_from(KEY_OBJECTS), st.integers(1, 40), st.booleans()), min_size=1),
    per_row=st.booleans(),
)
def test_key_runs_by_object_identity_equals_hashing(runs, per_row):
    # key_runs settles neighbours by object address and compares only different objects. A run is one
    # object (as a file reader gives: one per distinct value), a new one of equal value when ``fresh``
    # (neighbouring runs of one key in two objects), or per_row: every row its own object (a frame built
    # row by row). All must give the codes hashing gives, nulls (None, NaN, pd.NA mixed) one key.
    from spanning.engines.inputs import key_runs

    nulls = [None, np.nan, pd.NA]
    values = []
    for key, length, fresh in runs:
        run_object = "".join(list(key)) if fresh and key else key  # "".join: a new object of equal value
        for _ in range(length):
            if key is None:
                values.append(nulls[len(values) % 3])
            else:
                values.append("".join(list(key)) if per_row and key else run_object)
    series = pd.Series(np.array(values + [None], dtype=object)[:-1])  # an object array, None kept
    expected = pd.factorize(series.where(series.notna(), None), use_na_sentinel=False)[0]
    got = key_runs(series)
    heads = [k for i, (k, _, _) in enumerate(runs) if i == 0 or runs[i - 1][0] != k]
    if got is None:  # some key in two runs: the caller hashes instead
        assert len(set(heads)) < len(heads)
        return
    codes, first_rows = got
    assert codes.tolist() == expected.tolist()
    assert first_rows.tolist() == [int(np.flatnonzero(expected == c)[0]) for c in range(expected.max() + 1)]


class Text(str):
    """A str subclass: the compiled comparison leaves it to Python."""


def _fresh(value):
    """An equal object at another address where the type allows (so that the bytes, not the address, decide)."""
    if type(value) is str:
        return "".join(list(value)) if value else "".join([])
    if isinstance(value, float):
        return float(value)
    return value


OBJECTS = st.one_of(
    st.text(alphabet="ab\u00e9\u20ac\U0001f4de", max_size=20),  # ASCII, Latin-1, BMP and astral: four layouts
    st.sampled_from(["cell-1", "cell-2", "a" * 8, "a" * 9, "a" * 16, "a" * 7 + "b", ""]),  # the word-wise reads
    st.sampled_from([None, math.nan, 0, 1.0, np.str_("cell-1"), Text("cell-1"), b"cell-1"]),
)


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(st.tuples(OBJECTS, st.booleans()), min_size=2, max_size=60), shared=st.booleans(),
       compiled=st.booleans())  # fmt: skip
def test_neighbouring_keys_compared_in_memory_as_python_compares_them(values, shared, compiled):
    # _neighbours_differ reads compact ASCII strings' bytes where they lie (text_neighbours_differ), shared among
    # threads, and leaves every other pair to Python: it must give Python's ``!=`` for every pair, the same object
    # (a NaN too) being the same key. ``compiled`` False: the interpreter's layout unknown, Python compares all.
    from spanning.engines import inputs
    from spanning.kernels.compiled import text_layout

    assert text_layout() is not None  # this CPython's layout is known, so the compiled reads are what is tested
    column = np.empty(len(values), dtype=object)
    previous = None
    for i, (value, same_object) in enumerate(values):
        column[i] = previous if same_object and i else _fresh(value)
        previous = column[i]
    expected = [a is not b and bool(a != b) for a, b in zip(column[:-1], column[1:], strict=True)]
    with pytest.MonkeyPatch.context() as patch:
        if not compiled:
            patch.setattr(inputs, "text_layout", lambda: None)
        if shared:  # three shares, whatever this machine's cores
            patch.setattr(threads, "SHARED_FROM", 1)
            patch.setattr(threads, "available_cores", lambda: 3)
        assert inputs._neighbours_differ(column).tolist() == expected
        assert inputs._neighbours_differ(column[::-1]).tolist() == expected[::-1]  # strided columns, copied first
        assert inputs._neighbours_differ(column[::2]).tolist() == [
            a is not b and bool(a != b) for a, b in zip(column[:-2:2], column[2::2], strict=True)]


def test_a_key_column_that_is_a_strided_view_is_read_as_its_own_values():
    # A frame made from a 2-D object array holds each column as a strided view of it. key_runs once read such a
    # column's pointers as if they were in a row, i.e. other columns' objects: here "kind" repeats "cell", so the
    # first 100 pointers are the first 50 rows' cells twice over, and every row went to cell-a. By the definition:
    # 50 calls of each cell, all inside the one window [0, 1000).
    cells = ["cell-a"] * 50 + ["cell-b"] * 50
    frame = pd.DataFrame(np.array([[c, c] for c in cells], dtype=object), columns=["cell", "kind"])
    assert frame["cell"].to_numpy().strides != (8,)  # the case: not a contiguous column
    frame["start"] = np.arange(100) * 10
    frame["end"] = frame["start"] + 5
    out = spanning.aggregate(frame, 1000, 1000, 10_000, aggregates={"n": "count"}, key="cell")
    assert out[out["n"] > 0][["cell", "window_start", "n"]].values.tolist() == [["cell-a", 0, 50], ["cell-b", 0, 50]]


def test_the_compiled_comparison_decides_ascii_text_and_leaves_the_rest():
    # text_neighbours_differ's own answers (a kernel that left every pair to Python would pass the property above):
    # 0 the same key, 1 different texts, 2 left to Python
    import sys

    from spanning.kernels.compiled import text_layout, text_neighbours_differ

    def fresh(text):
        return "".join(list(text)) if text else "".join([])

    interned = sys.intern("cell-" + "7")
    cases = [  # a list, not a dict: equal keys (np.str_ and str) would be one entry
        (fresh("cell-1"), fresh("cell-1"), 0),  # two objects, one text
        (fresh(""), fresh(""), 0),
        (fresh("a" * 100), fresh("a" * 100), 0),  # long: word by word
        (interned, fresh("cell-7"), 0),  # the interned bits of the state differ, the text does not
        (fresh("cell-1"), fresh("cell-12"), 1),  # lengths
        (fresh("a" * 8 + "b"), fresh("a" * 8 + "c"), 1),  # the words agree, the last byte does not
        (fresh("a" * 15 + "b"), fresh("a" * 15 + "c"), 1),
        (fresh("a" * 99 + "b"), fresh("a" * 99 + "c"), 1),
        (fresh("b" + "a" * 99), fresh("c" + "a" * 99), 1),
        (fresh("cell-1"), np.str_("cell-1"), 2),  # not str itself
        (fresh("cell-1"), Text("cell-1"), 2),
        (fresh("cell-1"), None, 2),
        (fresh("c\u00e9ll"), fresh("c\u00e9ll"), 2),  # compact, not ASCII
        (fresh("cell"), fresh("c\u00e9ll"), 2),
        (fresh("cell-1"), 1, 2),
    ]
    layout = text_layout()
    assert layout is not None
    for a, b, code in cases:
        pair = np.array([id(a), id(b)], np.int64)  # a and b held by ``cases`` while the kernel reads them
        assert text_neighbours_differ(pair, *layout).tolist() == [code], (a, b)
    same = fresh("cell-1")
    assert text_neighbours_differ(np.array([id(same), id(same)], np.int64), *layout).tolist() == [0]
    assert text_neighbours_differ(np.array([0, id(same), 0], np.int64), *layout).tolist() == [2, 2]  # null pointers


def test_row_built_text_keys_are_compared_in_memory_in_shares():
    # 1M rows' worth of shares is too slow for a property; one 600k-row column of fresh objects per row, runs of
    # varied lengths, compared in memory over the cores, against Python's comparison
    from spanning.engines import inputs

    rng = np.random.default_rng(5)
    keys = np.repeat([f"cell-{k}" * (1 + k % 3) for k in range(300)], rng.integers(1, 4000, 300))[:600_000]
    column = np.array(keys, dtype=str).astype(object)  # one str object per row
    column[rng.integers(0, len(column), 50)] = None
    assert len(column) >= 2 * threads.SHARED_FROM
    expected = (column[1:] != column[:-1]).tolist()
    assert inputs._neighbours_differ(column).tolist() == expected
    for cores in (1, 2, 3):  # one share, and shares over threads, whatever this machine's cores
        assert inputs._text_pairs(_addresses(column), inputs.text_layout(), cores).tolist() == [
            0 if a is b else 2 if a is None or b is None else int(a != b)
            for a, b in zip(column[:-1], column[1:], strict=True)]  # fmt: skip


def _addresses(column):
    """The object pointers of a contiguous object array, as int64 (read while ``column`` holds them)."""
    import ctypes

    return np.ctypeslib.as_array((ctypes.c_ssize_t * len(column)).from_address(column.ctypes.data)).view(np.int64)
