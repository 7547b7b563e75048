"""Key codes against a brute-force reference: ``group_codes`` (``spanning.aggregate``'s keys, pandas) and
``key_codes`` (the Spark tasks' keys, Arrow) give each key a code in order of first appearance, nulls (None, NaN,
pandas NA in any mix) one key, whatever the column's type and the rows' order (grouped by key or arrival order),
in linear time (a table over a short integer span, else hashing: no sort).

The reference numbers the keys with a dict as it meets them. The choices that only change the speed (is the
column grouped, do the first rows span too wide, does the column hold one object per distinct key) look at the
first ``SAMPLE_ROWS`` rows: tests shrink that to a few rows so that a misleading sample is drawn too."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spanning
from spanning.engines import inputs
from spanning.engines.inputs import arrow_frame, group_codes
from spanning.engines.window_ranges import key_codes
from spanning.kernels.compiled import appearance_codes
from tests.budget import examples

NULL = object()  # the reference's one null key
INT64 = st.integers(-(2**63), 2**63 - 1)


def is_null(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def reference(*columns: list) -> tuple[list[int], list[int]]:
    """Codes in order of first appearance (a dict as the rows come) and the row where each key first appears."""
    seen: dict = {}
    codes, first = [], []
    for row, key in enumerate(zip(*columns, strict=True)):
        key = tuple(NULL if is_null(v) else v for v in key)
        if key not in seen:
            seen[key] = len(seen)
            first.append(row)
        codes.append(seen[key])
    return codes, first


@st.composite
def key_lists(draw, values, null_share=True):
    """A key column's values: a few distinct keys (repeated, as keys are), maybe some nulls, in arrival order or
    grouped by key (sorted, nulls together), and a sample size for the speed choices."""
    pool = draw(st.lists(values, min_size=1, max_size=8, unique=True))
    if null_share and draw(st.booleans()):
        pool.append(None)
    keys = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=80))
    if draw(st.booleans()):  # grouped by key, as sorted input is; the order of the groups as drawn
        order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        keys = sorted(keys, key=order.__getitem__)
    return keys, draw(st.sampled_from([1, 2, 3, 8, 4096]))


def codes_of(frame: pd.DataFrame, keys: list[str], sample: int) -> tuple[list[int], list[int]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inputs, "SAMPLE_ROWS", sample)
        codes, first = group_codes(frame, keys)
    assert codes.dtype == np.int64 and first.dtype == np.int64
    return codes.tolist(), first.tolist()


INTEGER_POOLS = st.one_of(
    INT64,  # wide: hashed
    st.integers(-50, 50),  # a short span: the table
    st.sampled_from([-(2**63), 2**63 - 1, 0, -1, 2**62 + 1, 2**62 + 3]),  # the span past int64, values 2 apart
)


@settings(max_examples=examples(300), deadline=None)
@given(drawn=key_lists(INTEGER_POOLS), kind=st.sampled_from(["int64", "Int64", "arrow", "int32", "uint64"]))
def test_integer_keys_are_coded_in_order_of_first_appearance(drawn, kind):
    keys, sample = drawn
    if kind == "int64":  # no nulls in a numpy column: the nulls become one more integer
        keys = [-7 if k is None else k for k in keys]
        column = pd.Series(np.array(keys, dtype=np.int64))
    elif kind == "int32":
        keys = [k % 2**31 if k is not None else -(2**31) for k in keys]
        column = pd.Series(np.array(keys, dtype=np.int32))
    elif kind == "uint64":  # past 2**63 - 1: read as int64, one to one
        keys = [k % 2**64 if k is not None else 2**64 - 1 for k in keys]
        column = pd.Series(np.array(keys, dtype=np.uint64))
    elif kind == "Int64":
        column = pd.Series(pd.array(keys, dtype="Int64"))
    else:  # an Arrow table's integers with nulls: Int64, exact (arrow_frame)
        column = arrow_frame(pa.table({"cell": pa.array(keys, pa.int64())}))["cell"]
    assert codes_of(pd.DataFrame({"cell": column}), ["cell"], sample) == reference(keys)


TEXTS = st.one_of(st.text(alphabet="ab\u00e9", max_size=4), st.sampled_from(["cell-1", "cell-2", "", "nan", "NA"]))


@settings(max_examples=examples(300), deadline=None)
@given(drawn=key_lists(TEXTS), objects=st.sampled_from(["per key", "per row"]),
       null=st.sampled_from(["None", "NaN", "NA", "mixed"]),
       kind=st.sampled_from(["object", "string", "category"]))  # fmt: skip
def test_text_keys_are_coded_in_order_of_first_appearance(drawn, objects, null, kind):
    # "per key": one object per distinct text, as a file reader gives (the addresses are hashed); "per row": a new
    # object each row, as a frame built row by row holds
    keys, sample = drawn
    column = np.empty(len(keys), dtype=object)
    nulls = {"None": [None], "NaN": [math.nan], "NA": [pd.NA], "mixed": [None, math.nan, pd.NA]}[null]
    for i, key in enumerate(keys):
        if key is None:
            column[i] = nulls[i % len(nulls)]
        else:
            column[i] = key if objects == "per key" else "".join(list(key))
    series = pd.Series(column)
    if kind != "object":
        series = series.astype(kind)
    assert codes_of(pd.DataFrame({"cell": series}), ["cell"], sample) == reference(keys)


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None, "c"]), st.sampled_from([None, 2**62 + 1, 2**62, -1]),
                               st.sampled_from([0, 1, 3])), min_size=1, max_size=60),
       sample=st.sampled_from([1, 3, 4096]), grouped=st.booleans(), third=st.booleans())  # fmt: skip
def test_composite_keys_with_nulls_are_coded_in_order_of_first_appearance(rows, sample, grouped, third):
    if grouped:
        rows = sorted(rows, key=lambda r: tuple((v is None, v if v is not None else 0) for v in r))
    texts, numbers, small = (list(c) for c in zip(*rows, strict=True))
    frame = pd.DataFrame({"a": pd.Series(texts, dtype=object), "b": pd.array(numbers, dtype="Int64"),
                          "c": np.array(small, dtype=np.int64)})  # fmt: skip
    keys = ["a", "b", "c"] if third else ["b", "a"]
    assert codes_of(frame, keys, sample) == reference(*(frame[k].tolist() for k in keys))


@settings(max_examples=examples(300), deadline=None)
@given(drawn=key_lists(INTEGER_POOLS), texts=key_lists(TEXTS), composite=st.booleans(),
       width=st.sampled_from([pa.int64(), pa.uint64(), pa.int8()]))  # fmt: skip
def test_key_codes_of_arrow_columns_follow_first_appearance(drawn, texts, composite, width):
    keys, _ = drawn
    if width == pa.uint64():
        keys = [None if k is None else k % 2**64 for k in keys]
    elif width == pa.int8():
        keys = [None if k is None else k % 128 for k in keys]
    numbers = pa.array(keys, width)
    if not composite:
        assert key_codes([numbers]).tolist() == reference(keys)[0]
        assert key_codes([pa.chunked_array([numbers[:1], numbers[1:]])]).tolist() == reference(keys)[0]
        return
    words = (texts[0] * len(keys))[: len(keys)]
    got = key_codes([pa.array(words, pa.string()), numbers, numbers])
    assert got.dtype == np.int64 and got.tolist() == reference(words, keys, keys)[0]


def test_spans_past_the_table_s_bound_and_past_int64_are_hashed():
    codes, first = appearance_codes(np.array([9, -3, 9, 4, -3], np.int64), np.zeros(0, bool), 100)
    assert codes.tolist() == [0, 1, 0, 2, 1] and first.tolist() == [0, 1, 3]
    nulls = np.array([False, True, False, True, False])  # the rows' values under the mask are no keys
    codes, first = appearance_codes(np.array([5, 0, 6, 1000, 5], np.int64), nulls, 100)
    assert codes.tolist() == [0, 1, 2, 1, 0] and first.tolist() == [0, 1, 2]
    for values in ([-(2**63), 2**63 - 1, -(2**63)], [0, 1000, 0]):  # past int64, past the bound of 100: hashed
        codes, first = appearance_codes(np.array(values, np.int64), np.zeros(0, bool), 100)
        assert codes.tolist() == [0, 1, 0] and first.tolist() == [0, 1]


@settings(max_examples=examples(60), deadline=None)
@given(distinct=st.integers(1, 3000), rows=st.integers(1, 12_000), seed=st.integers(0, 2**32 - 1),
       spacing=st.sampled_from(["random", "2^54 apart", "2^32 apart", "consecutive"]),
       null_share=st.sampled_from([0, 0.1]))  # fmt: skip
def test_wide_integer_keys_are_hashed_through_every_growth_of_the_table(distinct, rows, seed, spacing, null_share):
    # the hash table starts at 1,024 slots and grows as it fills to half: thousands of distinct keys, spaced so that
    # their hashes crowd (multiples of a power of two), with nulls, against the reference's dict
    rng = np.random.default_rng(seed)
    if spacing == "random":
        pool = rng.integers(-(2**63), 2**63 - 1, distinct, dtype=np.int64)
    else:
        step = {"2^54 apart": 2**54, "2^32 apart": 2**32, "consecutive": 1}[spacing]
        pool = np.arange(distinct, dtype=np.int64) * np.int64(step) - np.int64(2**62)  # wraps past 2^9 values at 2^54
    values = pool[rng.integers(0, distinct, rows)]
    null = rng.random(rows) < null_share if null_share else np.zeros(0, bool)
    codes, first = appearance_codes(values, null, 4)  # a bound of 4: any span of 4 or more is hashed
    keys = [None if len(null) and null[i] else int(v) for i, v in enumerate(values)]
    want_codes, want_first = reference(keys)
    assert codes.tolist() == want_codes and first.tolist() == want_first


def test_keys_in_arrival_order_give_the_windows_of_the_same_keys_as_text():
    # the same calls keyed by int64 ids (hashed: wide), by small ids (the table) and by text: the same windows,
    # key by key, in the same order (keys in order of first appearance)
    rng = np.random.default_rng(5)
    n = 5000
    cell = rng.choice(40, size=n, p=np.r_[0.38, np.full(39, 0.62 / 39)])
    starts = np.sort(rng.integers(0, 20_000, n))
    calls = pd.DataFrame({"start": starts, "end": starts + rng.integers(0, 900, n), "v": rng.integers(0, 9, n)})
    calls = calls.sort_values("end", kind="stable").reset_index(drop=True)  # arrival order: by end, keys mixed
    wide = rng.integers(2**40, 2**62, 40)
    outs = []
    for column in (wide[cell], cell.astype(np.int64), np.char.add("c", cell.astype(str)).astype(object)):
        out = spanning.aggregate(calls.assign(cell=column), 900, 300, 10_000, aggregates={"n": "count", "s": "sum:v"},
                                 key="cell", series_start="earliest")  # fmt: skip
        outs.append(out)
    names = {int(w): f"c{i}" for i, w in enumerate(wide)} | {i: f"c{i}" for i in range(40)}
    text = outs[2].drop(columns="cell")
    for out in outs[:2]:
        assert [names[int(c)] for c in out["cell"]] == outs[2]["cell"].tolist()
        pd.testing.assert_frame_equal(out.drop(columns="cell"), text)
    assert outs[2]["cell"].drop_duplicates().tolist() == list(dict.fromkeys(np.char.add("c", cell.astype(str))))


def test_a_key_that_is_also_a_summed_text_column_is_keyed_by_its_numbers_with_or_without_rejected_rows():
    # the text "1", "01" and "1.0" are one number, 1.0, as the key column of the output shows them: one key
    calls = pd.DataFrame({"start": [0, 1, 2, 3], "end": [1, 2, 3, 4], "k": ["1", "01", "1.0", "1"]})
    for frame in (calls, pd.concat([calls, pd.DataFrame({"start": [5], "end": [-5], "k": ["1"]})], ignore_index=True)):
        out = spanning.aggregate(frame, range=10, slide=10, aggregates={"n": "count", "s": "sum:k"}, key="k")
        assert out["k"].tolist() == [1.0] and out["n"].tolist() == [4] and out["s"].tolist() == [4.0], out
