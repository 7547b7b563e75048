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


@st.composite
def partial_tables(draw):
    """A task's partial tables: each (key, window) once per table, keys with nulls, values with nulls."""
    tables = []
    for _ in range(draw(st.integers(1, 5))):
        cells = draw(st.lists(st.tuples(st.sampled_from([None, "a", "b"]), st.sampled_from([None, 1, 2]),
                                        st.integers(-3, 6)), max_size=12, unique=True))  # fmt: skip
        n = len(cells)
        values = draw(st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=n, max_size=n))
        doubles = draw(st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)), min_size=n, max_size=n))
        tables.append(pa.table({"cell": pa.array([c[0] for c in cells], pa.string()),
                                "zone": pa.array([c[1] for c in cells], pa.int64()),
                                "_k": pa.array([c[2] for c in cells], pa.int64()),
                                "n": pa.array(draw(st.lists(st.integers(1, 9), min_size=n, max_size=n)), pa.int64()),
                                "s": pa.array(values, pa.int64()), "hi": pa.array(values, pa.int64()),
                                "lo": pa.array(doubles, pa.float64())}))  # fmt: skip
    return tables, draw(st.integers(1, 40))


SPECS = [("n", "sum", "one", None), ("s", "sum", "value", "v"), ("hi", "max", "value", "v"),
         ("lo", "min", "double", "f")]  # fmt: skip


def merged_by_definition(tables) -> dict:
    """{(cell, zone, window): (n, s, hi, lo)}: every table's rows, merged as Spark merges partials (nulls skipped)."""
    out: dict = {}
    for table in tables:
        for row in table.to_pylist():
            out.setdefault((row["cell"], row["zone"], row["_k"]), []).append(row)
    merged = {}
    for where, rows in out.items():
        present = {c: [r[c] for r in rows if r[c] is not None] for c in ("s", "hi", "lo")}
        merged[where] = (sum(r["n"] for r in rows), sum(present["s"]) if present["s"] else None,
                         max(present["hi"], default=None), min(present["lo"], default=None))  # fmt: skip
    return merged


@settings(max_examples=examples(200), deadline=None)
@given(case=partial_tables())
def test_a_task_s_partials_merged_across_its_tables_are_what_spark_merges(case):
    from spanning.engines.window_ranges import merged_while_it_pays

    tables, most_rows = case
    out = list(merged_while_it_pays(tables, ["cell", "zone"], SPECS, most_rows))
    assert merged_by_definition(out) == merged_by_definition(tables)  # what the shuffle then merges: the same
    assert sum(t.num_rows for t in out) <= sum(t.num_rows for t in tables)
    if most_rows > sum(t.num_rows for t in tables):  # all held: one row per (key, window), or nothing
        assert [t.num_rows for t in out] == ([len(merged_by_definition(tables))] if merged_by_definition(tables)
                                             else [])  # fmt: skip
    for table in out:
        assert table.column_names == ["cell", "zone", "_k", "n", "s", "hi", "lo"]


def test_tables_of_collections_and_tables_that_share_few_windows_pass_as_they_come():
    from spanning.engines.window_ranges import KEPT_TO_MERGE, merged_while_it_pays

    apart = [pa.table({"cell": [1, 2], "_k": [i, i], "n": [1, 1]}) for i in range(6)]  # no window shared
    out = list(merged_while_it_pays(apart, ["cell"], [("n", "sum", "one", None)], most_rows=4))
    assert KEPT_TO_MERGE < 1 and [t.num_rows for t in out] == [4, 2, 2, 2, 2]  # one merge kept all: then as they come
    sets = [pa.table({"cell": [1], "_k": [0], "ids": [[i]]}) for i in range(3)]
    assert list(merged_while_it_pays(sets, ["cell"], [("ids", "set", "plain", "x")], most_rows=10)) == sets
