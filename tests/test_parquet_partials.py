"""``spanning.engines.parquet_partials``: row groups read and reduced by the task that reads them.

Against the definition (each accepted event counted in every window of its run, rows rejected for the reader
contract's reasons, late events those that missed a window), on random tables with bad rows, nulls, several
keys, timestamps and integer times; and a worker's memory, which must not grow with the hottest key's rows.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.engines.parquet_partials import COUNTS, ReadPlan, pieces, reduce_rows, task_batches
from tests.budget import examples

PARTIALS = [("_n", "sum", "one", None), ("_nv", "sum", "valid", "_v0"), ("_h", "sum", "high", "_v0"),
            ("_l", "sum", "low", "_v0"), ("_maxf", "max", "value", "_v1"), ("_minf", "min", "value", "_v1"),
            ("_sf", "sum", "value", "_v1")]  # fmt: skip


@st.composite
def tables(draw):
    n = draw(st.integers(1, 30))
    starts = draw(st.lists(st.one_of(st.none(), st.integers(-50, 200)), min_size=n, max_size=n))
    lengths = draw(st.lists(st.integers(-5, 120), min_size=n, max_size=n))  # < 0: end before start
    ends = [None if s is None or draw(st.integers(0, 20)) == 0 else s + d for s, d in zip(starts, lengths, strict=True)]
    values = draw(st.lists(st.one_of(st.none(), st.integers(-(2**62), 2**62)), min_size=n, max_size=n))
    floats = draw(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64)),
                           min_size=n, max_size=n))  # fmt: skip
    cells = draw(st.lists(st.sampled_from(["a", "b", None]), min_size=n, max_size=n))
    window = draw(st.sampled_from([(10, 5), (7, 3), (1, 1), (30, 30)]))
    ttp = draw(st.sampled_from([0, 4, 1000]))
    series = draw(st.sampled_from([None, -20, 60]))
    timestamps = draw(st.booleans())
    return cells, starts, ends, values, floats, window, ttp, series, timestamps


def _as_table(cells, starts, ends, values, floats, timestamps):
    kind = pa.timestamp("ms", tz="UTC") if timestamps else pa.int64()
    scale = 1_000 if timestamps else 1  # chronons are seconds: 1,000 ms each (plus a fraction that floors away)
    times = [lambda xs: pa.array([None if x is None else x * scale + (999 if timestamps else 0) for x in xs], kind)]
    return pa.table({"cell": cells, "start": times[0](starts), "end": times[0](ends), "v": pa.array(values, pa.int64()),
                     "f": pa.array(floats, pa.float64())})  # fmt: skip


@settings(max_examples=examples(150), deadline=None)
@given(case=tables())
def test_partials_and_counts_equal_the_definition(case):
    cells, starts, ends, values, floats, (w, s), ttp, series, timestamps = case
    plan = ReadPlan("start", "end", "s", ["cell"], {"v": ("_v0", "integer"), "f": ("_v1", "float")}, w, s, 0, ttp,
                    series, PARTIALS)  # fmt: skip
    got, counts = reduce_rows(_as_table(cells, starts, ends, values, floats, timestamps), plan)
    want, rejected, late = {}, 0, 0
    for cell, lo, u, v, f in zip(cells, starts, ends, values, floats, strict=True):
        if lo is None or u is None or u < lo or (f is not None and math.isinf(f)):
            rejected += 1
            continue
        u = max(u, lo + 1)
        first = (lo - w) // s + 1
        a = max(first, -((w + ttp - u) // s), *([] if series is None else [(series - w) // s + 1]))
        b = (u - 1) // s
        late += min(b + 1, a) > first
        f = None if f is None or math.isnan(f) else f
        for k in range(a, b + 1):
            entry = want.setdefault((cell, k), {"n": 0, "v": [], "f": []})
            entry["n"] += 1
            entry["v"] += [] if v is None else [v]
            entry["f"] += [] if f is None else [f]
    assert counts == (len(cells), rejected, late)
    rows = got.to_pylist()
    assert sorted((r["cell"] or "", r["_k"]) for r in rows) == sorted((c or "", k) for c, k in want)
    for r in rows:
        entry = want[(r["cell"], r["_k"])]
        assert r["_n"] == entry["n"] and r["_nv"] == len(entry["v"])
        assert (r["_h"] << 32) + r["_l"] == sum(entry["v"])  # the exact sum's two parts
        if entry["f"]:
            assert r["_maxf"] == max(entry["f"]) and r["_minf"] == min(entry["f"])
            assert math.isclose(r["_sf"], sum(entry["f"]), rel_tol=1e-9, abs_tol=1e-3)
        else:
            assert r["_maxf"] is None and r["_minf"] is None and r["_sf"] is None


@pytest.mark.parametrize("most_rows", [1, 100])
def test_a_task_s_batches_merge_its_parts_windows_and_put_its_counts_on_a_row_of_their_own(tmp_path, most_rows):
    path = tmp_path / "calls.parquet"
    pq.write_table(pa.table({"cell": [1, 1, 1, 2, 2, 2], "start": [0, 5, 3, 9, 3, None],
                             "end": [4, 6, 7, 12, 2, 8]}), path, row_group_size=6)  # fmt: skip
    plan = ReadPlan("start", "end", "s", ["cell"], {}, 10, 5, 0, 100, None, [("_n", "sum", "one", None)])
    schema = pa.schema([("cell", pa.int64()), ("_k", pa.int64()), ("_n", pa.int64()),
                        *[(c, pa.int64()) for c in COUNTS]])  # fmt: skip
    parts = pieces([(str(path), 0, 6)], cores=1, most=2)
    assert parts == [(str(path), 0, 0, 3), (str(path), 0, 1, 3), (str(path), 0, 2, 3)]  # of 2 rows each
    rows = pa.Table.from_batches(list(task_batches(parts, plan, schema, most_rows))).to_pylist()
    windows = [r for r in rows if r["_k"] is not None]
    counts = [r for r in rows if r["_k"] is None]
    assert len(counts) == 1 and [counts[0][c] for c in COUNTS] == [6, 2, 0]  # reversed and null-start rows rejected
    assert counts[0]["cell"] is None and counts[0]["_n"] is None
    assert all(r[c] is None for r in windows for c in COUNTS)
    by_window = {}
    for r in windows:  # key 1's windows from two parts: merged in the task (most_rows 100), or by Spark (1)
        by_window[(r["cell"], r["_k"])] = by_window.get((r["cell"], r["_k"]), 0) + r["_n"]
    # windows [5k, 5k + 10): [0, 4] in -1 and 0, [5, 6] in 0 and 1, [3, 7] in -1, 0 and 1; [9, 12] in 0, 1 and 2
    assert by_window == {(1, -1): 2, (1, 0): 3, (1, 1): 2, (2, 0): 1, (2, 1): 1, (2, 2): 1}
    assert len(windows) == (6 if most_rows == 100 else 9)  # key 1's three windows once when merged, else twice


def _peak_bytes(path, chunk_rows: int) -> int:
    plan = ReadPlan("start", "end", "s", ["cell"], {"v": ("_v0", "integer")}, 900, 60, 0, 7 * 86_400, None,
                    [("_n", "sum", "one", None), ("_s", "sum", "value", "_v0"), ("_m", "max", "value", "_v0")])
    schema = pa.schema([("cell", pa.int64()), ("_k", pa.int64()), ("_n", pa.int64()), ("_s", pa.int64()),
                        ("_m", pa.int64()), *[(c, pa.int64()) for c in COUNTS]])  # fmt: skip
    meta = pq.ParquetFile(path).metadata
    groups = [(str(path), g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    tracemalloc.start()
    try:
        for _ in task_batches(pieces(groups, cores=2, most=chunk_rows), plan, schema, most_rows=chunk_rows):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_worker_s_memory_does_not_grow_with_the_hottest_key_s_rows(tmp_path):
    """One key holds every row; four times the rows (in one row group) must not need more memory: a task
    reduces one piece of at most ``most`` rows, whatever a key or a row group holds."""
    peaks = []
    for rows in (100_000, 400_000):
        rng = np.random.default_rng(rows)
        starts = np.sort(rng.integers(0, 30 * 3_600, rows))
        path = tmp_path / f"hot-{rows}.parquet"
        pq.write_table(pa.table({"cell": np.zeros(rows, np.int64), "start": starts,
                                 "end": starts + rng.integers(1, 300, rows), "v": rng.integers(0, 10**6, rows)}),
                       path, row_group_size=rows)  # fmt: skip
        peaks.append(_peak_bytes(path, chunk_rows=20_000))
    assert peaks[1] < 1.3 * peaks[0], peaks
    assert peaks[1] < 40 * 20_000 * 8, peaks  # a few dozen arrays of a chunk's length, not of the key's rows
