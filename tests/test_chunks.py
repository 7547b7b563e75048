"""Chunked streaming (what each Spark partition runs) == aggregate() == oracle, whatever the chunking."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
from spanning.aggregates.distinct import ApproxCountDistinct, ApproxPercentile
from spanning.engines import streams as streams_module
from spanning.engines.engine import build_aggregates
from spanning.engines.streams import HELD_ROWS, SortedStreamAggregator
from spanning.kernels import threads
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

SKETCHED = {"a_x": "approx_count_distinct:x:4", "a_z": "approx_count_distinct:z", "q_y": "approx_percentile:y:0.9"}


def sorted_by_key_and_end(events):
    order = sorted(range(len(events)), key=lambda i: (events[i][0], events[i][2], i))
    return [events[i] for i in order]


def run_chunked(frame, spec, aggregates, cuts, series_start=None, fill_nulls=False):
    names, aggs = build_aggregates(aggregates)
    frame = frame.assign(seq=np.arange(len(frame)))
    if fill_nulls:  # what the Spark job sends: values with nulls filled, plus a validity column
        frame = frame.assign(x__valid=frame["x"].notna(), x=frame["x"].fillna(0).astype(np.int64))
    stream = SortedStreamAggregator(spanning.WindowSpec(*spec), aggs, names, keys=["key"], series_start=series_start)
    return feed_in_chunks(stream, frame, cuts)


def feed_in_chunks(stream, frame, cuts):
    """Feed ``frame`` to a sorted-stream aggregator in chunks cut at ``cuts``; all windows and late events."""
    windows, late = [], []
    bounds = sorted({0, len(frame), *[c % (len(frame) + 1) for c in cuts]})
    for a, b in zip(bounds, bounds[1:], strict=False):
        w, lt = stream.feed(frame.iloc[a:b])
        windows.append(w)
        late.append(lt)
    final, final_late = stream.finish()
    windows.append(final)
    late.append(final_late)
    nonempty = [w for w in windows if len(w)]
    late = pd.concat(late, ignore_index=True) if late else pd.DataFrame({"seq": [], "windows_missed": []})
    return (pd.concat(nonempty, ignore_index=True) if nonempty else windows[0]), late


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=window_specs(),
    events=streams(max_events=50),
    cuts=st.lists(st.integers(0, 60), max_size=8),
    fill_nulls=st.booleans(),
    shared=st.booleans(),
)
def test_chunked_stream_equals_aggregate_and_oracle(spec, events, cuts, fill_nulls, shared):
    # ``shared``: each chunk's runs and extremes cut into three shares over threads (spanning.kernels.threads)
    events = sorted_by_key_and_end(events)
    frame = to_frame(events)
    expected, expected_late = oracle(events, *spec, ALL_AGGREGATES)
    with pytest.MonkeyPatch.context() as patch:
        if shared:
            patch.setattr(threads, "SHARED_FROM", 1)
            patch.setattr(threads, "available_cores", lambda: 3)
        windows, late = run_chunked(frame, spec, ALL_AGGREGATES, cuts, fill_nulls=fill_nulls)
        out = spanning.aggregate(frame, *spec, aggregates=ALL_AGGREGATES, key="key")
    assert_same_windows(frame_windows(windows, ALL_AGGREGATES), expected)
    assert dict(zip(late["seq"].tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late
    assert_same_windows(frame_windows(out, ALL_AGGREGATES), expected)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(max_events=50), cuts=st.lists(st.integers(0, 60), max_size=8),
       held=st.sampled_from([0, 4, HELD_ROWS]))  # fmt: skip
def test_chunked_distinct_counts_and_quantiles_lowered_from_runs_and_from_carried_partials(spec, events, cuts, held):
    """A key cut across chunks (its rows held back for the next chunk up to ``held`` of them): its windows
    merged with carried ones go through partials, the others are lowered straight from the runs
    (``Aggregate.window_results``). The exact ones equal the oracle, late events included; the sketched ones
    (lgK 4: HLL mode from 8 values) what the windows' own sketches give."""
    events = sorted_by_key_and_end(events)
    frame = to_frame(events)
    aggregates = {**DISTINCT_AGGREGATES, **SKETCHED}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(streams_module, "HELD_ROWS", held)
        windows, late = run_chunked(frame, spec, aggregates, cuts)
        expected, expected_late = oracle(events, *spec, DISTINCT_AGGREGATES)
        assert_same_windows(frame_windows(windows, DISTINCT_AGGREGATES), expected)
        assert dict(zip(late["seq"].tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late
        for sketch in (ApproxCountDistinct, ApproxPercentile):
            patch.setattr(sketch, "window_results", lambda self, *args: None)
        reference, _ = run_chunked(frame, spec, aggregates, cuts)  # the same query: x is read as numbers
    assert frame_windows(windows, SKETCHED) == frame_windows(reference, SKETCHED)


@settings(max_examples=examples(100), deadline=None)
@given(spec=window_specs(), events=streams(max_events=40), cuts=st.lists(st.integers(0, 50), max_size=6))
def test_chunked_earliest_series_start_equals_aggregate(spec, events, cuts):
    events = sorted_by_key_and_end(events)
    frame = to_frame(events)
    frame["series"] = frame.groupby("key")["start"].transform("min")
    aggregates = {"n": "count", "sum_x": "sum:x", "max_y": "max:y", "sd_y": "stddev:y"}
    windows, late = run_chunked(frame, spec, aggregates, cuts, series_start="series")
    out = spanning.aggregate(frame, *spec, aggregates=aggregates, key="key", series_start="earliest")
    assert_same_windows(frame_windows(windows, aggregates), frame_windows(out, aggregates))
    expected_late = out.attrs["late"]
    assert late["seq"].tolist() == expected_late.index.tolist()
    assert late["windows_missed"].tolist() == expected_late["windows_missed"].tolist()
    for key, key_events in pd.Series(events, dtype=object).groupby(np.array([e[0] for e in events])):  # vs the oracle
        start = min(e[1] for e in key_events)
        expected, _ = oracle(list(key_events), *spec, aggregates, series_start=start)
        got = frame_windows(out[out["key"] == key], aggregates)
        assert_same_windows(got, expected)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=window_specs(),
    events=streams(max_events=40),
    cuts=st.lists(st.integers(0, 50), max_size=6),
    height=st.integers(1, 5),
)
def test_chunked_per_event_engine_equals_aggregate(spec, events, cuts, height):
    """The Spark job's path for techniques other than se-slicing: Engine per key over sorted chunks."""
    from spanning.engines.streams import SortedEngineStream

    events = sorted_by_key_and_end(events)
    frame = to_frame(events).assign(seq=lambda f: np.arange(len(f)))
    names, aggs = build_aggregates(ALL_AGGREGATES)
    stream = SortedEngineStream(
        spanning.WindowSpec(*spec), aggs, names, keys=["key"], technique="se-ml-slicing", height=height
    )
    got, late = feed_in_chunks(stream, frame, cuts)
    expected, expected_late = oracle(events, *spec, ALL_AGGREGATES)
    assert_same_windows(frame_windows(got, ALL_AGGREGATES), expected)
    assert dict(zip(late["seq"].tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late


@settings(max_examples=examples(200), deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 40), st.integers(0, 3)), max_size=60),
    clocks=st.lists(st.one_of(st.just(np.iinfo(np.int64).min), st.integers(-60, 90)), min_size=4, max_size=4),
    cores=st.integers(1, 5),
    window=st.tuples(st.integers(1, 5), st.integers(-3, 3), st.integers(1, 12), st.sampled_from([0, 2, 30])),
)
def test_event_runs_cut_into_shares_are_one_pass_s(rows, clocks, cores, window):
    # chunks._runs_in_shares: each share of the rows starts from its keys' clocks after the shares before it
    # (_shares_and_clocks), so that its runs and late rows are those of one pass over the chunk, in order: also for
    # events out of end order within a key, which the engines' sorted chunks never give (so only this test sees
    # a share started from a wrong clock)
    from spanning.engines import chunks
    from spanning.kernels.compiled import chunk_runs

    starts = np.array([s for s, _, _ in rows], np.int64)
    ends = starts + np.array([length for _, length, _ in rows], np.int64)
    groups = np.array([g for _, _, g in rows], np.int64)
    start_clock = np.array(clocks, np.int64)
    range_from = np.full(4, -20, np.int64)
    shift = np.array([0, 100, 200, 300], np.int64)
    expected = chunk_runs(starts, ends, groups, start_clock, range_from, shift, *window)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threads, "SHARED_FROM", 1)
        patch.setattr(threads, "available_cores", lambda: cores)
        bounds, share_clocks = chunks._shares_and_clocks(ends, groups, start_clock)
        got = chunks._runs_in_shares(starts, ends, groups, bounds, share_clocks, range_from, shift, window)
    assert len(bounds) - 1 == max(1, min(cores, len(rows)))
    assert [a.tolist() for a in got] == [a.tolist() for a in expected]
    final = start_clock.copy()
    for end, g in zip(ends, groups, strict=True):
        final[g] = max(final[g], end)
    assert share_clocks[-1].tolist() == final.tolist()


@settings(max_examples=examples(100), deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 40), st.integers(0, 3)), max_size=60),
    cores=st.integers(1, 3),
    window=st.tuples(st.integers(1, 5), st.integers(-3, 3), st.integers(1, 12), st.sampled_from([0, 2, 30])),
)
def test_the_runs_marked_as_they_are_written_count_each_window_s_runs(rows, cores, window):
    # chunks._runs_in_shares with marks: each share marks its runs in its own row (compiled.chunk_runs_into), and
    # compiled.marked_counts sums the rows into each window's count of runs, as counting the written runs gives it
    from spanning.engines import chunks
    from spanning.kernels.compiled import marked_counts

    starts = np.array([s for s, _, _ in rows], np.int64)
    ends = starts + np.array([length for _, length, _ in rows], np.int64)
    groups = np.array([g for _, _, g in rows], np.int64)
    range_from = np.full(4, -20, np.int64)
    shift = np.array([20, 150, 280, 410], np.int64)  # each key's windows from -20 on at its own cells, none below 0
    total = 540
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threads, "SHARED_FROM", 1)
        patch.setattr(threads, "available_cores", lambda: cores)
        bounds, share_clocks = chunks._shares_and_clocks(ends, groups, np.full(4, np.iinfo(np.int64).min, np.int64))
        marks = np.zeros((len(bounds) - 1, total + 1), np.int32)
        _, first, last, _, _ = chunks._runs_in_shares(starts, ends, groups, bounds, share_clocks, range_from, shift,
                                                      window, marks)  # fmt: skip
    counts = np.empty(total, np.int64)
    marked_counts(marks, counts)
    expected = [0] * total
    for a, b in zip(first.tolist(), last.tolist(), strict=True):
        for w in range(a, b + 1):
            expected[w] += 1
    assert counts.tolist() == expected
