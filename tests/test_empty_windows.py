"""``empty_windows="skip"`` of ``spanning.aggregate`` and ``aggregate_many``: the oracle's windows that have members.

A window is skipped when no event is a member of it (docs/SEMANTICS.md: overlapping and arrived while it was
open), as ``spanning run`` skips it by default. The batch path reduces over the covered windows alone when they
are outnumbered by the windows of the keys' series (``spanning.engines.chunks._covered_chunk``), else it drops
the empty ones after; the per-event techniques and the aggregates of the windows' bounds drop them after too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
from spanning.engines import chunks
from spanning.kernels import compiled, threads
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import (
    ALL_AGGREGATES,
    DISTINCT_AGGREGATES,
    assert_same_windows,
    frame_windows,
    streams,
    to_frame,
    window_specs,
)

BOUNDS = {"n": "count", "occ": "occupancy", "sum_x": "sum:x"}  # occupancy: an aggregate of the windows' bounds


def with_members(expected: dict, count: str = "n") -> dict:
    """The oracle's windows that have members (its count ``count`` above 0)."""
    return {k: [w for w in ws if w[2][count] > 0] for k, ws in expected.items()}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(max_events=50, keys=4), shared=st.booleans(), spread=st.sampled_from([1, 7]))
def test_skipped_empty_windows_are_the_oracles_windows_with_members(spec, events, shared, spread):
    """``spread`` 7 stretches the events' times apart, so that the keys' windows outnumber the events."""
    events = [(k, s * spread, e * spread + (e > s), row) for k, s, e, row in events]
    frame = to_frame(events)
    aggregates = {**ALL_AGGREGATES, **DISTINCT_AGGREGATES}
    expected, expected_late = oracle(events, *spec, aggregates)
    with pytest.MonkeyPatch.context() as patch:
        if shared:  # each kernel cut into three shares, the aggregates side by side
            patch.setattr(threads, "SHARED_FROM", 1)
            patch.setattr(threads, "available_cores", lambda: 3)
        out = spanning.aggregate(frame, *spec, aggregates=aggregates, key="key", empty_windows="skip")
    assert (out["n"] > 0).all()
    assert_same_windows(frame_windows(out, aggregates), with_members(expected))
    late = out.attrs["late"]
    assert dict(zip(late.index.tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(max_events=30, keys=3),
       technique=st.sampled_from(["se-ml-slicing", "tuple-buckets", "aggregate-buckets"]))  # fmt: skip
def test_skipped_empty_windows_of_the_per_event_techniques_and_of_the_bounds_aggregates(spec, events, technique):
    frame = to_frame(events)
    expected, _ = oracle(events, *spec, ALL_AGGREGATES)
    out = spanning.aggregate(frame, *spec, aggregates=ALL_AGGREGATES, key="key", technique=technique,
                             empty_windows="skip")  # fmt: skip
    assert "__spanning_events__" not in out
    assert_same_windows(frame_windows(out, ALL_AGGREGATES), with_members(expected))
    bounds, _ = oracle(events, *spec, BOUNDS)
    out = spanning.aggregate(frame, *spec, aggregates=BOUNDS, key="key", empty_windows="skip")
    assert_same_windows(frame_windows(out, BOUNDS), with_members(bounds))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(window_specs(), min_size=2, max_size=3), events=streams(max_events=30, keys=3),
       technique=st.sampled_from(["se-slicing", "se-ml-slicing"]))  # fmt: skip
def test_aggregate_many_skips_the_empty_windows_of_every_spec(specs, events, technique):
    frame = to_frame(events)
    aggregates = {"sum_x": "sum:x", "max_y": "max:y"}  # no count: the skip counts for itself
    window_specs_ = [spanning.WindowSpec(*spec) for spec in specs]
    out = spanning.aggregate_many(frame, window_specs_, aggregates, key="key", technique=technique,
                                  empty_windows="skip")  # fmt: skip
    assert list(out.columns) == ["key", "window", "window_start", "window_end", "sum_x", "max_y"]
    for spec, label in zip(specs, spanning.engines.batch.window_labels(window_specs_), strict=True):
        expected, _ = oracle(events, *spec, {**aggregates, "n": "count"})
        kept = {k: [(s, e, {n: v[n] for n in aggregates}) for s, e, v in ws]
                for k, ws in with_members(expected).items()}  # fmt: skip
        assert_same_windows(frame_windows(out[out["window"] == label], aggregates), kept)


def test_sparse_windows_are_reduced_over_the_covered_ones_alone(monkeypatch):
    """Two keys, each with two calls an hour apart, 1-minute slides: 4 calls cover 8 of 127 windows. The covered
    path runs (only when skipping), and gives the dense path's non-empty rows."""
    frame = pd.DataFrame({"key": [1, 2, 1, 2], "start": [0, 30, 3600, 3630], "end": [100, 130, 3700, 3730],
                          "v": [5, 6, 7, 8]})  # fmt: skip
    calls = []
    covered_chunk = chunks._covered_chunk
    monkeypatch.setattr(chunks, "_covered_chunk", lambda *a: calls.append(a) or covered_chunk(*a))
    aggregates = {"n": "count", "s": "sum:v", "m": "max:v"}
    skipped = spanning.aggregate(frame, 120, 60, aggregates=aggregates, key="key", empty_windows="skip")
    assert len(calls) == 1
    emitted = spanning.aggregate(frame, 120, 60, aggregates=aggregates, key="key")
    assert len(calls) == 1 and len(emitted) > 4 * len(skipped)
    dense = emitted[emitted["n"] > 0].reset_index(drop=True)
    skipped.attrs.clear()
    dense.attrs.clear()
    pd.testing.assert_frame_equal(skipped, dense, check_exact=True)
    # the windows of 120 s that a call overlaps and that are open at its end (TTP 0): [0, 100) is in [0, 120) and
    # [60, 180), not in [-60, 60), which its arrival closed
    assert skipped["window_start"].tolist() == [0, 60, 3600, 3660, 60, 120, 3660, 3720]
    assert skipped["n"].tolist() == [1] * 8


def test_windows_outnumbered_by_the_events_are_dropped_after(monkeypatch):
    """The same calls and 300 short ones inside the first: 304 events for 127 windows. The covered path does not
    run; the empty windows are dropped after the dense path, by the counts that count and sum share."""
    frame = pd.DataFrame({"key": [1, 2, 1, 2], "start": [0, 30, 3600, 3630], "end": [100, 130, 3700, 3730],
                          "v": [5, 6, 7, 8]})  # fmt: skip
    short = pd.DataFrame({"key": 1, "start": np.arange(300) % 90, "v": 1}).assign(end=lambda f: f["start"] + 10)
    frame = pd.concat([short, frame], ignore_index=True)  # first: not late
    monkeypatch.setattr(chunks, "_covered_chunk", lambda *a: pytest.fail("the covered path ran"))
    for aggregates in ({"n": "count", "s": "sum:v", "m": "max:v"}, {"m": "max:v"}):  # counted by the skip alone
        skipped = spanning.aggregate(frame, 120, 60, aggregates=aggregates, key="key", empty_windows="skip")
        emitted = spanning.aggregate(frame, 120, 60, aggregates=aggregates, key="key")
        assert len(emitted) == 127 and len(skipped) == 9  # [-60, 60) holds short calls
        dense = emitted[emitted["m"].notna()].reset_index(drop=True)  # a window with a member has a max of v
        skipped.attrs.clear()
        dense.attrs.clear()
        pd.testing.assert_frame_equal(skipped, dense, check_exact=True)


def test_shared_sketches_are_built_once_when_the_aggregates_run_side_by_side(monkeypatch):
    """approx_percentile answers from the windows' KLL sketches that kll_sketch writes (``shared_as``, through
    ``BatchColumns.memo``). With the aggregates in two threads ([ap, n] | [k]) both asked for them at once; the memo
    had no lock, so both built them, and a KLL past K values compacts at random. Slowed down here, so that the two
    threads surely meet."""
    import threading
    import time

    from spanning.aggregates.distinct import ObjectArrays

    monkeypatch.setattr(threads, "SHARED_FROM", 1)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    built = []
    build = ObjectArrays._window_partials

    def slowly(self, *args):
        built.append(threading.current_thread().name)
        time.sleep(0.2)
        return build(self, *args)

    monkeypatch.setattr(ObjectArrays, "_window_partials", slowly)
    rng = np.random.default_rng(0)
    starts = np.sort(rng.integers(0, 2000, 3000))
    frame = pd.DataFrame({"start": starts, "end": starts + 500, "y": rng.random(3000)})
    aggregates = {"ap": "approx_percentile:y:0.5", "n": "count", "k": "kll_sketch:y"}
    for empty_windows in ("emit", "skip"):
        built.clear()
        out = spanning.aggregate(frame, 600, 300, 10**6, aggregates=aggregates, empty_windows=empty_windows)
        assert len(built) == 1 and out["n"].max() > 1000, built


def test_the_covered_windows_arrays_are_sized_by_the_events_not_by_the_series():
    """Two calls 10^7 s apart in one key at 60/1 s: a series of 10^7 windows, 121 of them covered. The result's
    columns are slices of arrays the covered path allocated: at most the runs' windows, not the series'."""
    frame = pd.DataFrame({"start": [0, 10**7], "end": [1, 10**7 + 1]})
    out = spanning.aggregate(frame, 60, 1, 10**8, aggregates={"n": "count"}, empty_windows="skip")
    assert len(out) == 120 and out["n"].tolist() == [1] * 120
    for name in ("window_start", "window_end", "n"):
        column = out[name].to_numpy()
        assert (column.base if column.base is not None else column).size <= 121, name


def test_an_aggregate_named_as_the_skips_own_count_is_kept():
    frame = pd.DataFrame({"start": [0, 100], "end": [5, 105], "x": [1, 2]})
    aggregates = {"__spanning_events__": "sum:x", "n": "count"}
    out = spanning.aggregate(frame, 10, 5, aggregates=aggregates, technique="se-ml-slicing", empty_windows="skip")
    assert out.columns.tolist() == ["window_start", "window_end", "__spanning_events__", "n"]
    assert out["__spanning_events__"].tolist() == [1, 1, 2, 2] and out["n"].tolist() == [1, 1, 1, 1]


def test_empty_windows_takes_emit_or_skip():
    frame = pd.DataFrame({"start": [0], "end": [5]})
    with pytest.raises(ValueError, match="empty_windows must be 'emit' or 'skip', got 'drop'"):
        spanning.aggregate(frame, 10, 5, empty_windows="drop")
    assert np.array_equal(spanning.aggregate(frame, 10, 5, empty_windows="skip")["count"], [1, 1])


@pytest.mark.parametrize("technique", ["se-slicing", "tuple-buckets"])
def test_a_result_of_no_window_has_the_dtypes_of_a_result_with_windows(technique):
    """Every aggregate form, sketches and arg-aggregates among them, over no event (and over rows that are all
    rejected) gives its columns the dtypes the same call gives them over two events: the dtype is declared by the
    aggregate (``ResultKind``) and its input column, not read from values there are none of. (Over one event a
    sample standard deviation is null in every window: its column is Float64 there too.)"""
    aggregates = {**ALL_AGGREGATES, **DISTINCT_AGGREGATES, "hll": "hll_sketch:z", "kll": "kll_sketch:y",
                  "ad": "approx_count_distinct:z", "arg": "argmax:x", "arg_y": "argmax:x:y"}  # fmt: skip
    if technique != "se-slicing":  # the per-event path takes the exact forms
        aggregates = {k: v for k, v in aggregates.items() if not v.startswith(("hll", "kll", "approx"))}
    two = to_frame([(1, 0, 4, {"x": 3, "y": 2.5, "z": "a"}), (1, 1, 6, {"x": 4, "y": 0.5, "z": "b"})])
    one = two.iloc[:1]
    bad = two.assign(end=[-1, -1])  # ends before it starts: rejected

    def dtypes(frame: pd.DataFrame) -> dict:
        windows = spanning.aggregate(frame, 10, 5, 100, aggregates=aggregates, key="key", technique=technique)
        return windows.dtypes.to_dict()

    some = dtypes(two)
    assert some["sd_y"] == pd.Float64Dtype() and some["arg_y"] == pd.Float64Dtype()
    assert technique != "se-slicing" or some["hll"] == np.dtype(object)  # a sketch's bytes
    assert dtypes(two.iloc[:0]) == some
    assert dtypes(bad) == some
    assert dtypes(one) == some


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_covered_windows_in_shares_are_the_windows_some_run_covers(data):
    """``_covered_chunk``'s covered windows, one share (``compiled.covered_windows``) or several
    (``chunks._covered_in_shares``), against their definition: the windows, in order, that at least one run
    covers, each with its count of runs, its key and its bounds, and each run's first and last window numbered
    among them. Keys of up to 150 windows (shares end at key bounds), some with no run; runs in any order; the
    shares side by side, and one after the other from the last (none writes where another does)."""
    n_windows = np.array(data.draw(st.lists(st.integers(0, 150), min_size=1, max_size=10)), dtype=np.int64)
    base = np.cumsum(n_windows) - n_windows
    total = int(n_windows.sum())
    keyed = [g for g in range(len(n_windows)) if n_windows[g]]
    runs = []
    if keyed:
        for g in data.draw(st.lists(st.sampled_from(keyed), max_size=40)):
            a = data.draw(st.integers(0, int(n_windows[g]) - 1))
            reach = data.draw(st.sampled_from([0, 3, 40, None]))  # None: to the key's last window, next to a share's
            last_window = int(n_windows[g]) - 1
            b = last_window if reach is None else data.draw(st.integers(a, min(last_window, a + reach)))
            runs.append((int(base[g]) + a, int(base[g]) + b))
    first = np.array([a for a, _ in runs], dtype=np.int64)
    last = np.array([b for _, b in runs], dtype=np.int64)
    range_from = np.array(data.draw(st.lists(st.integers(-5, 5), min_size=len(n_windows),
                                             max_size=len(n_windows))), dtype=np.int64)  # fmt: skip
    slide, offset, range_ = 7, 3, 21
    # the definition, window by window
    key_of = np.repeat(np.arange(len(n_windows)), n_windows)
    cover = np.array([sum(a <= w <= b for a, b in runs) for w in range(total)], dtype=np.int64)
    covered = [w for w in range(total) if cover[w] > 0]
    number = {w: i for i, w in enumerate(covered)}
    starts = [(int(range_from[key_of[w]]) + w - int(base[key_of[w]])) * slide + offset for w in covered]

    most = min(total, int((last - first + 1).sum()))

    def backwards(work, count):  # the shares one after the other, the last first: each may run before the others
        return [work(k) for k in reversed(range(count))][::-1]

    for shares, order in ((1, None), (2, None), (3, None), (4, None), (2, backwards), (3, backwards)):
        marks = np.zeros(total + 1, dtype=np.int32)
        outputs = tuple(np.full(most + 1, -1, dtype=np.int64) for _ in range(4))
        numbered = (np.full(len(runs), -1, dtype=np.int64), np.full(len(runs), -1, dtype=np.int64))
        labels = (n_windows, range_from, slide, offset, range_, marks)
        if shares == 1:
            count = compiled.covered_windows(first, last, *labels, *outputs, *numbered)
        else:
            with pytest.MonkeyPatch.context() as patch:
                if order is not None:
                    patch.setattr(threads, "in_shares", order)
                count = chunks._covered_in_shares(first, last, labels, shares, outputs, numbered)
        counts, group, start, end = (a[:count] for a in outputs)
        assert count == len(covered), shares
        assert counts.tolist() == [int(cover[w]) for w in covered], shares
        assert group.tolist() == [int(key_of[w]) for w in covered], shares
        assert start.tolist() == starts and end.tolist() == [s + range_ for s in starts], shares
        assert numbered[0].tolist() == [number[a] for a, _ in runs], shares
        assert numbered[1].tolist() == [number[b] for _, b in runs], shares
