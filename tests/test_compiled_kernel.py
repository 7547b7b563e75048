"""The compiled kernel (``spanning.kernels.compiled``) against the definitions, evaluated event by window.

Each kernel reduces runs of windows ``first..last`` into one value per window; the reference here walks every
(event, window) pair in Python. Runs are short and long, drawn apart for each branch of ``run_extremes`` (its loop,
its sparse table), and each example checks the branch it took; values reach the ends of int64 (sums are exact
modulo 2^64), and keys are few or many with spans dense or sparse (so ``run_cells`` takes both its layouts).
"""

from __future__ import annotations

import linecache
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spanning.engines.window_ranges import aggregate_runs
from spanning.kernels import compiled
from tests.budget import examples

INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def runs(draw, table: bool | None = None, windows: int = 40):
    """Runs of windows ``first..last`` that ``run_extremes`` reduces by its loop (``table`` False) or by its sparse
    table (True); None: either. Its test checks the branch each took (``_run_extremes_branch``).

    The table is taken when the runs hold more than ``2·runs + windows·levels`` windows in all (levels: 1 +
    ⌊log2 L⌋, L the longest run's windows; at most 6 of 40). Loop: m ≤ 26 runs of at most 4 windows and k ≤ 4 of
    any length hold at most k·L + 4·m, no more than 2·(k + m) + 40·levels since k·(L − 2) + 2·m ≤ 4·38 + 52 < 240
    for L of 32-40 (and likewise for shorter L). Table: k = 14-24 runs of at least 21 windows among m ≤ 6 of any
    length hold at least 21·k + m, more than 2·(k + m) + 240 since 19·14 > 240 + 6.
    """
    if table is None:
        table = draw(st.booleans())
    any_run = st.tuples(st.integers(0, windows - 1), st.integers(0, windows))  # (first, windows after it)
    if table:
        long_run = st.tuples(st.integers(0, windows // 2 - 1), st.integers(windows // 2, windows))
        drawn = draw(st.lists(long_run, min_size=14, max_size=24)) + draw(st.lists(any_run, max_size=6))
    else:
        short_run = st.tuples(st.integers(0, windows - 1), st.integers(0, 3))
        drawn = draw(st.lists(short_run, max_size=26)) + draw(st.lists(any_run, max_size=4))
    drawn = draw(st.permutations(drawn))  # long and short runs in any order
    first = [f for f, _ in drawn]
    last = [min(f + length, windows - 1) for f, length in drawn]
    return np.array(first, np.int64), np.array(last, np.int64), windows


@st.composite
def slotted_runs(draw):
    """Runs that ``run_extremes`` reduces by a slot per first window and length (``_slotted_extremes``): at least
    ``SLOTS`` runs a window (``windows · SLOTS ≤ runs``), of 3 or 4 windows but a few longer (a block of ``SLOTS``
    and more), at most ``SLOTS / 2`` windows a run on average, so more than ``2·runs + windows·levels`` windows in
    all (the loop would take 3·runs > 2·runs + 24·5 from 8·16 runs on)."""
    windows = draw(st.integers(16, 16 + compiled.SLOTS))
    n = draw(st.integers(windows * compiled.SLOTS, windows * compiled.SLOTS + 16))
    long = draw(st.integers(1, n // 64))
    lengths = draw(st.lists(st.integers(3, 4), min_size=n - long, max_size=n - long))
    lengths += draw(st.lists(st.integers(compiled.SLOTS + 1, windows), min_size=long, max_size=long))
    assume(2 * sum(lengths) <= compiled.SLOTS * n)
    lengths = draw(st.permutations(lengths))
    first = [draw(st.integers(0, windows - length)) for length in lengths]
    last = [f + length - 1 for f, length in zip(first, lengths, strict=True)]
    return np.array(first, np.int64), np.array(last, np.int64), windows


def _pairs(first, last):
    return [(e, w) for e in range(len(first)) for w in range(first[e], last[e] + 1)]


def _run_extremes_branch(*arguments) -> str:
    """The branch ``run_extremes`` takes for these arguments: ``run_extremes_into``'s Python source (what numba
    compiled) run under a tracer, "table" when it returns having built the sparse table, "slots" when it ran
    ``_slotted_extremes``, else "loop"."""
    code, taken, lines = compiled.run_extremes_into.py_func.__code__, [], set()

    def trace(frame, event, arg):
        if frame.f_code is not code:
            return None
        if event == "line":
            lines.add(linecache.getline(code.co_filename, frame.f_lineno).strip())
        if event == "return":
            slots = any(line.startswith("_slotted_extremes(") for line in lines)
            taken.append("table" if "table" in frame.f_locals else "slots" if slots else "loop")
        return trace

    before = sys.gettrace()
    sys.settrace(trace)
    try:
        first, last, windows, values, sentinel, largest = arguments
        compiled.run_extremes_into.py_func(first, last, values, largest, np.full(windows, sentinel, values.dtype))
    finally:
        sys.settrace(before)
    assert len(taken) == 1, taken
    return taken[0]


@pytest.mark.parametrize("branch", ["loop", "table", "slots"])
@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_counts_sums_and_extremes_are_the_explode(branch, data):
    """Every kernel of runs against the explode, on runs drawn for each branch of ``run_extremes``: every example
    takes the branch it was drawn for, so each test run checks all three."""
    drawn = slotted_runs() if branch == "slots" else runs(table=branch == "table")
    first, last, windows = data.draw(drawn, label="runs")
    n = len(first)
    ints = np.array(data.draw(st.lists(INT64, min_size=n, max_size=n)), np.int64)
    floats = np.array(data.draw(st.lists(st.floats(-1e9, 1e9), min_size=n, max_size=n)), np.float64)
    counts, sums, float_sums = [0] * windows, [0] * windows, [0.0] * windows
    best_int, least_float = [None] * windows, [None] * windows
    for e, w in _pairs(first, last):  # event order within each window: the explode's
        counts[w] += 1
        sums[w] += int(ints[e])
        float_sums[w] += float(floats[e])
        best_int[w] = ints[e] if best_int[w] is None else max(best_int[w], ints[e])
        least_float[w] = floats[e] if least_float[w] is None else min(least_float[w], floats[e])
    assert compiled.run_counts(first, last, windows).tolist() == counts
    wrapped = [(s + 2**63) % 2**64 - 2**63 for s in sums]  # exact modulo 2^64
    assert compiled.run_sums_int(first, last, windows, ints).tolist() == wrapped
    assert compiled.run_sums_float(first, last, windows, floats).tolist() == float_sums
    low = np.int64(-(2**63))
    for values, sentinel, largest, best in ((ints, low, True, best_int), (floats, np.inf, False, least_float)):
        assert _run_extremes_branch(first, last, windows, values, sentinel, largest) == branch
        got = compiled.run_extremes(first, last, windows, values, sentinel, largest).tolist()
        assert got == [sentinel if b is None else b for b in best]
    event, window = compiled.run_windows(first, last)
    assert list(zip(event.tolist(), window.tolist(), strict=True)) == _pairs(first, last)


@settings(max_examples=examples(100), deadline=None)
@given(case=runs(), slide=st.integers(1, 7), range_=st.integers(1, 30), data=st.data())
def test_occupancy_is_the_overlap_of_each_event_and_window(case, slide, range_, data):
    first, last, windows = case
    n = len(first)
    starts = np.array(data.draw(st.lists(st.integers(-50, 300), min_size=n, max_size=n)), np.int64)
    ends = starts + np.array(data.draw(st.lists(st.integers(0, 100), min_size=n, max_size=n)), np.int64)
    first_start = first * slide - 20
    want = [0] * windows
    for e, w in _pairs(first, last):
        window_start = int(first_start[e]) + (w - int(first[e])) * slide
        want[w] += min(int(ends[e]), window_start + range_) - max(int(starts[e]), window_start)
    got = compiled.run_occupancy(first, last, windows, starts, ends, first_start, slide, range_)
    assert got.tolist() == want


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data(), keys=st.sampled_from([1, 3, 40]), spread=st.sampled_from([10, 10_000]))
def test_runs_of_several_keys_reduce_per_key_and_window(data, keys, spread):
    """``aggregate_runs`` (``run_cells`` dense or by stretches, then the range kernels) against a dictionary
    per (key, window): counts, an integer sum with absent values, a float max."""
    n = data.draw(st.integers(1, 40))
    codes = np.array(data.draw(st.lists(st.integers(0, keys - 1), min_size=n, max_size=n)), np.int64)
    first = np.array(data.draw(st.lists(st.integers(-spread, spread), min_size=n, max_size=n)), np.int64)
    last = first + np.array(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)), np.int64)
    ints = np.array(data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n)), np.int64)
    has = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    floats = np.array(data.draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n)), np.float64)
    got = aggregate_runs(codes, first, last, [(np.ones(n, np.int64), None, "sum"), (ints, has, "sum"),
                                              (floats, None, "max")])  # fmt: skip
    want: dict = {}
    for e in range(n):
        for w in range(first[e], last[e] + 1):
            cell = want.setdefault((int(codes[e]), w), [0, 0, 0, -np.inf])
            cell[0] += 1
            cell[1] += int(ints[e]) if has[e] else 0
            cell[2] += int(has[e])
            cell[3] = max(cell[3], floats[e])
    cells = [(int(codes[r]), int(w)) for r, w in zip(got.key_row, got.window, strict=True)]
    assert cells == sorted(want)  # one row per covered (key, window), in (key, window) order
    assert got.values[0].tolist() == [want[c][0] for c in cells]
    assert got.values[2].tolist() == [want[c][3] for c in cells]
    present = got.present[1]
    assert present.tolist() == [want[c][2] > 0 for c in cells]
    assert got.values[1][present].tolist() == [want[c][1] for c in cells if want[c][2]]
    for e in range(n):  # each event's run starts on its first window's row, the rest on the rows after it
        row = int(got.run_row[e])
        assert cells[row : row + last[e] - first[e] + 1] == [(int(codes[e]), w) for w in range(first[e], last[e] + 1)]


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data(), slide=st.integers(1, 9), range_=st.integers(1, 40), offset=st.integers(-5, 5),
       ttp=st.sampled_from([0, 3, 50, 10_000]), series=st.one_of(st.none(), st.integers(-100, 100)))  # fmt: skip
def test_event_runs_follow_the_ttp_definition(data, slide, range_, offset, ttp, series):
    """Each event arriving at its own end u: it counts in the windows that overlap [l, u), are not released
    (their end + δ ≥ u) and begin the series or after; it is late when it overlaps a window it cannot count in."""
    n = data.draw(st.integers(1, 20))
    start = np.array(data.draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n)), np.int64)
    end = start + np.array(data.draw(st.lists(st.integers(-3, 60), min_size=n, max_size=n)), np.int64)
    accepted = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    checked = accepted.copy()
    a, b, late = compiled.event_runs(start, end, checked, slide, offset, range_, ttp, series or 0, series is not None)
    for i in range(n):
        if end[i] < start[i]:
            assert not checked[i]
            continue
        assert checked[i] == accepted[i]
        begin, u = int(start[i]), max(int(end[i]), int(start[i]) + 1)
        overlapping = [k for k in range(-200, 250) if offset + k * slide < u and offset + k * slide + range_ > begin]
        counted = [k for k in overlapping if offset + k * slide + range_ + ttp >= u
                   and (series is None or offset + k * slide + range_ > series)]  # fmt: skip
        assert list(range(a[i], b[i] + 1)) == counted
        # (ω < β leaves gaps between windows: an event inside one overlaps none, and is never late)
        assert bool(late[i]) == (accepted[i] and bool(overlapping) and overlapping[0] not in counted)


def test_first_rows_give_each_codes_first_row_and_the_row_count_for_a_code_without_one():
    assert compiled.first_rows(np.array([1, 0, 1, 0], np.int64), 3).tolist() == [1, 0, 4]


def test_a_python_without_numba_is_told_the_package_in_one_line():
    """As on an executor without numba: the import fails at once, naming the package; the job's error line
    (``spark_jobs.sessions.errors.worker_error``) is that message."""
    blocked = "import sys; sys.modules['numba'] = None; import spanning.kernels.compiled"
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    from spark_jobs.sessions.errors import worker_error

    error = worker_error(done.stderr)
    assert error is not None and error.name == "ImportError", done.stderr[-2000:]
    assert "pip install numba" in error.line and "executors" in error.line


@pytest.mark.parametrize("variable", ["NUMBA_CACHE_DIR", "SPANNING_KERNEL_CACHE"])
def test_the_kernel_imported_from_a_zip_caches_beside_a_copy_on_disk(tmp_path, variable):
    """Imported from a zip (the engine shipped to bare executors), the kernel runs from a copy of its source in
    $SPANNING_KERNEL_CACHE, else $NUMBA_CACHE_DIR, so that numba caches there: a second process loads what the
    first compiled (numba's dispatcher counts it a cache hit, and no miss: it compiled nothing)."""
    import zipfile
    from pathlib import Path

    import spanning

    root = Path(spanning.__file__).parent.parent
    archive = tmp_path / "engine.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in (root / "spanning").rglob("*.py"):
            zipped.write(path, path.relative_to(root))
    probe = (f"import sys; sys.path.insert(0, {str(archive)!r}); import numpy as np;"
             " import spanning.kernels.compiled as c; counts = c.run_counts(np.array([0]), np.array([1]), 2);"
             " module = c.run_counts.__module__; stats = c.run_counts.stats;"
             " print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()),"
             " c.__file__, module, sys.modules[module].__file__, counts.tolist())")  # fmt: skip
    env = {variable: str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    outputs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=300) for _ in range(2)]  # fmt: skip
    loads = []
    for done in outputs:
        assert done.returncode == 0, done.stderr[-2000:]
        hits, misses, origin, module, copy, counts = done.stdout.split(" ", 5)
        assert "engine.zip" in origin and module.startswith("spanning_kernel_") and counts.strip() == "[1, 1]"
        assert Path(copy).parent.parent == tmp_path / "cache" and Path(copy).parent.name.startswith("spanning-kernel-")
        loads.append((int(hits), int(misses)))
    assert loads == [(0, 1), (1, 0)], loads  # (cache hits, misses): the first compiled, the second loaded it
    cached = list((tmp_path / "cache").rglob("*.nbi"))
    assert cached, list((tmp_path / "cache").rglob("*"))


def test_the_read_side_s_warm_up_leaves_a_worker_s_first_piece_nothing_to_import():
    """``parquet_partials.warm_up`` (what ``warm_python_workers`` runs in each Python worker) runs in a fresh
    interpreter, and after it reducing a piece of rows imports no module that was not loaded already."""
    code = (
        "import sys, pyarrow as pa\n"
        "from spanning.engines import parquet_partials as pp\n"
        "pp.warm_up()\n"
        "loaded = set(sys.modules)\n"
        "plan = pp.ReadPlan('s', 'e', 's', ['k'], {'v': ('_v', 'integer')}, 900, 60, 0, 600, None,\n"
        "                   [('_n', 'sum', 'one', None), ('_s', 'max', 'value', '_v')])\n"
        "rows = pa.table({'k': [1, 2, 1], 's': pa.array([0, 10**6, 3 * 10**6], pa.timestamp('us', 'UTC')),\n"
        "                 'e': pa.array([9 * 10**7, 2 * 10**6, 4 * 10**6], pa.timestamp('us', 'UTC')),\n"
        "                 'v': [5, None, 7]})\n"
        "partials, counts = pp.reduce_rows(rows, plan)\n"
        "assert counts == (3, 0, 0) and partials.num_rows > 0, (counts, partials)\n"
        "print(sorted(set(sys.modules) - loaded))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout


def test_workers_compiling_together_each_take_a_share_of_whole_kernels_and_all_are_warmed():
    """``warm_up(part=i, parts=n)``: the shares of ``warm_up_shares`` hold every kernel once, whole (all of its
    types in one process: numba keeps them in one index file), of about equal compile time; and every compiled
    function of the module is in the warm-up, with a measured cost."""
    calls = compiled._warm_up_calls(every=True)
    kernels = {name for name in compiled.__all__ if hasattr(getattr(compiled, name), "signatures")}
    assert set(calls) == kernels == set(compiled.COMPILE_SECONDS)
    assert calls.keys() == compiled._warm_up_calls(every=False).keys()
    for parts in (1, 2, 3, 4):
        shares = compiled.warm_up_shares(parts)
        assert len(shares) == parts and sorted(n for share in shares for n in share) == sorted(kernels)
        loads = [sum(compiled.COMPILE_SECONDS[n] for n in share) for share in shares]
        assert max(loads) - min(loads) <= max(compiled.COMPILE_SECONDS.values()), (parts, shares)
    first, second = compiled.warm_up_shares(2)
    longest, next_longest = sorted(compiled.COMPILE_SECONDS, key=compiled.COMPILE_SECONDS.__getitem__)[:-3:-1]
    assert (longest in first) != (next_longest in first), (first, second)  # the two longest compiles apart
    for part in (0, 1):  # each share runs (loaded from this checkout's cache, or compiled)
        assert compiled.warm_up(every=True, part=part, parts=2) >= 0


NEAR_EXACT_BOUND = st.integers(-(2**20), 2**20).map(lambda k: k + compiled.EXACT_IN_FLOAT * (1 if k % 2 else -1))


@settings(max_examples=examples(300), deadline=None)
@given(
    a=st.one_of(st.integers(-(2**62), 2**62), st.integers(-(10**7), 10**7), NEAR_EXACT_BOUND,
                st.integers(1_500_000_000, 1_800_000_000)),
    d=st.one_of(st.integers(1, 10**4), st.integers(1, 2**40), st.sampled_from([60, 300, 900, 3600, 86_400])),
)
def test_the_runs_floor_division_by_a_float_inverse_is_python_s_floor_division(a: int, d: int):
    """``_floor_div`` (the runs' kernels' division by the slide) gives ``a // d`` exactly, negative numbers, the float
    estimate's edge (2^52) and numbers beyond it included."""
    assert compiled._floor_div(a, d, 1.0 / d) == a // d


def test_the_runs_floor_division_is_exact_at_every_remainder_around_an_epoch_time():
    """Every remainder of a few divisors around today's epoch seconds and milliseconds and around 0: the quotients where
    the float estimate is off by one are corrected."""
    for d in (7, 60, 300, 86_400, 10**6 + 3):
        for base in (0, 1_764_000_000, 1_764_000_000_000, compiled.EXACT_IN_FLOAT - 3 * d):
            a = np.arange(base - 3 * d, base + 3 * d, dtype=np.int64)
            got = np.array([compiled._floor_div(int(x), d, 1.0 / d) for x in a[:: max(1, d // 50)]])
            assert (got == a[:: max(1, d // 50)] // d).all(), (d, base)
