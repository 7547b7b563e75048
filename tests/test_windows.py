"""Window and Pairs-slice arithmetic against direct enumeration, and the interval predicates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spanning import PairsSlicer, WindowSpec
from spanning.kernels.intervals import ends_in, goes_beyond, overlaps
from tests.streams import window_specs


@given(spec=window_specs(), t=st.integers(-200, 200))
def test_window_arithmetic_matches_enumeration(spec, t):
    ws = WindowSpec(*spec)
    ks = range(-500, 500)
    assert ws.first_window_ending_after(t) == min(k for k in ks if ws.window(k)[1] > t)
    assert ws.last_window_starting_before(t) == max(k for k in ks if ws.window(k)[0] < t)
    assert ws.first_window_open_at(t) == min(k for k in ks if ws.window(k)[1] + ws.ttp >= t)


@given(spec=window_specs())
def test_pairs_slices_partition_time_and_tile_windows(spec):
    ws = WindowSpec(*spec)
    slicer = PairsSlicer(ws)
    eps = ws.range % ws.slide
    bounds = [slicer.bounds(i) for i in range(-20, 20)]
    for (a, b), (c, _) in zip(bounds, bounds[1:], strict=False):
        assert a < b == c  # P1 and P2: slices do not overlap and meet
    sizes = {b - a for a, b in bounds}
    assert sizes == ({eps, ws.slide - eps} if eps else {ws.slide})  # ε and β - ε (§5.2.1)
    for i in range(-20, 20):
        assert slicer.slice_of(slicer.bounds(i)[0]) == i == slicer.slice_of(slicer.bounds(i)[1] - 1)
    for k in range(-5, 5):
        first, last = slicer.window_slices(k)
        assert (
            last - first + 1 == slicer.per_window == (2 * (ws.range // ws.slide) + 1 if eps else ws.range // ws.slide)
        )
        assert (slicer.bounds(first)[0], slicer.bounds(last)[1]) == ws.window(k)


def test_interval_predicates():
    call, slice_ = (16, 34), (30, 35)
    assert overlaps(call, slice_) and ends_in(call, slice_) and not goes_beyond(call, slice_)
    assert overlaps(call, (20, 25)) and goes_beyond(call, (20, 25)) and not ends_in(call, (20, 25))
    assert not overlaps(call, (34, 40)) and not overlaps(call, (10, 16))


@given(a=st.tuples(st.integers(0, 20), st.integers(1, 10)), b=st.tuples(st.integers(0, 20), st.integers(1, 10)))
def test_overlap_is_ends_in_or_goes_beyond(a, b):
    a, b = (a[0], a[0] + a[1]), (b[0], b[0] + b[1])
    assert overlaps(a, b) == (ends_in(a, b) or goes_beyond(a, b))
    assert not (ends_in(a, b) and goes_beyond(a, b))
