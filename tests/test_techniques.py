"""Every technique == oracle for every built-in aggregate (same generators as the core tests), and §5.4 memory."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import spanning
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import ALL_AGGREGATES, assert_same_windows, frame_windows, streams, to_frame, window_specs
from tests.test_properties import run_engines

TECHNIQUES = sorted(spanning.TECHNIQUES)


def test_all_techniques_are_registered():
    assert set(TECHNIQUES) == {"se-slicing", "se-ml-slicing", "tuple-buckets", "aggregate-buckets", "sweeping"}


@pytest.mark.parametrize("technique", TECHNIQUES)
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams())
def test_technique_equals_oracle(technique, spec, events):
    assert_technique_equals_oracle(technique, spec, events, ALL_AGGREGATES, height=3)


def assert_technique_equals_oracle(technique, spec, events, aggregates, height):
    """One Engine per key of ``technique`` (``height`` for se-ml-slicing) gives the oracle's windows and late rows."""
    expected, expected_late = oracle(events, *spec, aggregates)
    got, late = run_engines(events, spec, aggregates, technique=technique,
                            height=height if technique == "se-ml-slicing" else 1)  # fmt: skip
    assert_same_windows(got, expected)
    assert late == expected_late


@pytest.mark.parametrize("technique", ["tuple-buckets", "aggregate-buckets", "sweeping"])
@settings(max_examples=examples(25), deadline=None)
@given(spec=window_specs(), events=streams())
def test_aggregate_takes_every_technique(technique, spec, events):
    expected, _ = oracle(events, *spec, ALL_AGGREGATES)
    out = spanning.aggregate(to_frame(events), *spec, aggregates=ALL_AGGREGATES, key="key", technique=technique)
    assert_same_windows(frame_windows(out, ALL_AGGREGATES), expected)


def test_sweeping_refuses_user_aggregates():
    concat = spanning.UserAggregate("c", identity="", lift=lambda row: "x", combine=lambda a, b: a + b)
    with pytest.raises(ValueError, match="sweeping supports the built-in aggregates only"):
        spanning.Engine(spanning.WindowSpec(10, 5), {"c": concat}, technique="sweeping")


def steady_state(technique: str, per_chronon: int) -> int:
    """Largest state a technique holds over a long stream of 16-chronon events (ω = 300, β = 60, δ = 100)."""
    eng = spanning.Engine(spanning.WindowSpec(300, 60, ttp=100), {"n": "count", "s": "sum:x", "m": "max:x"},
                          technique=technique)  # fmt: skip
    largest = 0
    for t in range(20, 6000):
        for j in range(per_chronon):
            eng.insert(t - 16 + j, t, {"x": j})
        if t % 97 == 0:
            largest = max(largest, eng.technique.state_size)
    return largest


def test_memory_follows_section_5_4():
    """Tuple buckets and sweeping grow with the events in the windows; se-slicing and aggregate buckets
    stay bounded by the number of slices or windows (Suzanne et al., §5.4)."""
    sizes = {t: (steady_state(t, 1), steady_state(t, 4)) for t in ("tuple-buckets", "sweeping", "se-slicing",
                                                                     "aggregate-buckets")}  # fmt: skip
    for technique in ("tuple-buckets", "sweeping"):
        sparse, dense = sizes[technique]
        assert dense >= 3.5 * sparse, (technique, sizes)
    for technique in ("se-slicing", "aggregate-buckets"):
        sparse, dense = sizes[technique]
        assert dense == sparse, (technique, sizes)
    slices = (300 + 100) // 60 + 2  # open windows' slices: (ω + δ) / β, plus the one in progress
    assert sizes["se-slicing"][0] <= slices * 5  # (φ, ϕ) for count and sum, one max
    assert sizes["aggregate-buckets"][0] <= (slices + 1) * 3
