"""The many-key state of the streaming job (OpenWindows) == the oracle, whatever the micro-batches.

A stream cut into micro-batches arrives batch after batch and, within a batch, each key's events in end
order (ties by arrival number): that order, given to the oracle, must give the same windows and late events,
with the state saved to bytes and read back between batches as the streaming job does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanning.engines.engine import build_aggregates
from spanning.engines.open_windows import OpenWindows, StateFormatError
from spanning.kernels import threads
from spanning.kernels.windows import WindowSpec
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


def micro_batches(events, cuts):
    """``events`` cut at ``cuts`` into batches; each batch in the order the stream takes it (end, then arrival)."""
    bounds = sorted({0, len(events), *[c % (len(events) + 1) for c in cuts]})
    return [sorted(events[a:b], key=lambda e: e[2] if e[2] > e[1] else e[1] + 1)
            for a, b in zip(bounds, bounds[1:], strict=False)]  # fmt: skip


def run_stream(batches, spec, aggregates, shuffle_seed, series_start=None):
    names, aggs = build_aggregates(aggregates)
    saved = None
    windows, late = [], {}
    seq = 0
    rng = np.random.default_rng(shuffle_seed)
    for batch in batches:
        state = OpenWindows(WindowSpec(*spec), aggs, names, keys=["key"], series_start=series_start)
        if saved is not None:  # the streaming job keeps the state as bytes between batches
            state.load_bytes(saved)
        frame = to_frame(batch).assign(seq=np.arange(seq, seq + len(batch)))
        seq += len(batch)
        frame = frame.iloc[rng.permutation(len(frame))]  # rows come in any order within a batch
        w, lt = state.feed(frame)
        windows.append(w)
        late.update(zip(frame["seq"].to_numpy()[lt["row"].to_numpy()].tolist(), lt["windows_missed"].tolist(),
                        strict=True))  # fmt: skip
        saved = state.to_bytes()
    state = OpenWindows(WindowSpec(*spec), aggs, names, keys=["key"], series_start=series_start)
    if saved is not None:
        state.load_bytes(saved)
    windows.append(state.flush())
    out = pd.concat(windows, ignore_index=True).sort_values(["key", "window_start"], kind="stable")
    return out, late


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=window_specs(),
    events=streams(max_events=50),
    cuts=st.lists(st.integers(0, 60), max_size=8),
    shuffle_seed=st.integers(0, 1000),
    explicit_start=st.booleans(),
    shared=st.booleans(),
)
def test_micro_batched_stream_equals_oracle(spec, events, cuts, shuffle_seed, explicit_start, shared):
    # ``shared``: each batch's runs and extremes cut into three shares over threads (spanning.kernels.threads),
    # from one row on, whatever this machine's cores
    with pytest.MonkeyPatch.context() as patch:
        if shared:
            patch.setattr(threads, "SHARED_FROM", 1)
            patch.setattr(threads, "available_cores", lambda: 3)
        assert_stream_equals_oracle(spec, events, cuts, shuffle_seed, explicit_start, ALL_AGGREGATES)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(max_events=50), cuts=st.lists(st.integers(0, 60), max_size=8),
       shuffle_seed=st.integers(0, 1000), explicit_start=st.booleans())  # fmt: skip
def test_micro_batched_distinct_counts_and_percentiles_equal_oracle(spec, events, cuts, shuffle_seed, explicit_start):
    """The state of spanning stream's Python processor holds sets and sorted values between batches."""
    assert_stream_equals_oracle(spec, events, cuts, shuffle_seed, explicit_start, DISTINCT_AGGREGATES)


def assert_stream_equals_oracle(spec, events, cuts, shuffle_seed, explicit_start, aggregates):
    series_start = -10 if explicit_start else None
    batches = micro_batches(events, cuts)
    arrival = [e for batch in batches for e in batch]
    windows, late = run_stream(batches, spec, aggregates, shuffle_seed, series_start)
    expected, expected_late = oracle(arrival, *spec, aggregates, series_start=series_start)
    assert_same_windows(frame_windows(windows, aggregates), expected)
    assert late == expected_late


def _one_key(spec, rows, aggregates=None):
    names, aggs = build_aggregates(aggregates or {"n": "count"})
    state = OpenWindows(spec, aggs, names, keys=["cell"])
    return state, pd.DataFrame(rows, columns=["cell", "start", "end", "seq"])


def test_window_released_exactly_when_the_clock_passes_end_plus_ttp():
    spec = WindowSpec(10, 10, ttp=5)  # window [0, 10) is released once a clock exceeds 15
    state, first = _one_key(spec, [("a", 1, 2, 0)])
    assert state.feed(first)[0].empty
    _, at_edge = _one_key(spec, [("a", 14, 15, 1)])
    windows, _ = state.feed(at_edge)
    assert windows.empty, "a clock equal to end + TTP releases nothing"
    _, past = _one_key(spec, [("a", 15, 16, 2)])
    windows, _ = state.feed(past)
    assert windows[["window_start", "n"]].values.tolist() == [[0, 1]], "released by the first clock past 15"


def test_advance_releases_like_a_clock_and_later_events_are_late():
    spec = WindowSpec(10, 10, ttp=5)
    state, first = _one_key(spec, [("a", 1, 2, 0), ("b", 3, 8, 1)])
    state.feed(first)
    assert state.advance(15).empty, "a watermark equal to end + TTP releases nothing"
    released = state.advance(16)
    assert sorted(released[["cell", "window_start", "n"]].values.tolist()) == [["a", 0, 1], ["b", 0, 1]]
    _, old = _one_key(spec, [("a", 4, 6, 2)])
    windows, late = state.feed(old)
    assert windows.empty
    assert late.values.tolist() == [[0, 1]], "the window it overlaps was released by the watermark"


def test_flush_releases_what_starts_before_the_clock_and_keeps_the_keys():
    spec = WindowSpec(10, 5, ttp=20)  # the clock alone releases nothing here
    state, calls = _one_key(spec, [("a", 0, 12, 0)])
    state.feed(calls)
    assert state.flush()[["window_start", "n"]].values.tolist() == [[-5, 1], [0, 1], [5, 1], [10, 1]]
    assert state.n_keys == 1 and state.held_windows == 0
    _, again = _one_key(spec, [("a", 11, 13, 1)])
    windows, late = state.feed(again)
    assert windows.empty
    assert late.values.tolist() == [[0, 2]], "windows [5, 15) and [10, 20) were flushed: late for both"
    assert state.flush().empty, "nothing starts between the flushed windows and the clock"


def test_state_is_bounded_by_open_windows_however_long_the_stream():
    spec = WindowSpec(900, 300, ttp=600)
    names, aggs = build_aggregates({"n": "count", "b": "sum:bytes"})
    state = OpenWindows(spec, aggs, names, keys=["cell"])
    held = []
    for batch in range(40):
        t0 = batch * 3600
        frame = pd.DataFrame({"cell": np.arange(50) % 10, "start": t0 + np.arange(50) * 60,
                              "end": t0 + np.arange(50) * 60 + 120, "seq": np.arange(50) + batch * 50,
                              "bytes": np.ones(50, dtype=np.int64)})  # fmt: skip
        state.feed(frame)
        held.append(state.held_windows)
    assert state.n_keys == 10
    assert max(held[5:]) <= 10 * ((900 + 600) // 300 + 2), held  # per key about (ω + δ) / β open windows


def test_saved_state_of_other_aggregates_is_refused():
    names, aggs = build_aggregates({"n": "count"})
    state = OpenWindows(WindowSpec(10, 5), aggs, names, keys=["cell"])
    other_names, other = build_aggregates({"m": "max:x"})
    with np.testing.assert_raises(StateFormatError):
        OpenWindows(WindowSpec(10, 5), other, other_names, keys=["cell"]).load_bytes(state.to_bytes())
