"""SE-ML-Slicing: the §4.3.1 example, Table 4's operation counts, and se-ml-slicing(d) == se-slicing == oracle."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
from spanning import WindowSpec, count
from spanning.techniques.se_ml_slicing import SEMLSlicing
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import ALL_AGGREGATES, assert_same_windows, streams, window_specs
from tests.test_properties import run_engines

# §4.3.1: 5-minute slices from 50 to 80, height 3; per level (top to bottom in the paper) (φ, ϕ) per slice
LEVEL3 = [(4, 3), (5, 6), (5, 7), (4, 3), (4, 7), (5, 6)]
LEVEL2 = [(5, 2), (7, 4), (4, 5), (3, 4), (5, 4), (4, 3)]
LEVEL1 = [(5, 6), (3, 5), (6, 9), (5, 7), (5, 4), (5, 5)]


def test_paper_example_count_91():
    spec = WindowSpec(range=15, slide=5, ttp=100)
    tech = SEMLSlicing(spec, [count()], height=3)
    for k in range(10, 16):  # windows starting at 50 .. 75 add slices [50, 55) .. [75, 80)
        tech.add_window(*spec.window(k))
    for i in range(6):
        for level, values in enumerate((LEVEL1, LEVEL2, LEVEL3)):
            tech._ended[i][level][0], tech._ongoing[i][level][0] = values[i]
    tech.insert(61, 79, [1])  # the 18-minute call ending at 79
    assert (tech._ended[5][2][0], tech._ongoing[5][2][0]) == (6, 6)  # level 3 of [75, 80): φ 5 -> 6
    assert (tech._ended[2][0][0], tech._ongoing[2][0][0]) == (6, 10)  # level 1 of [60, 65): ϕ 9 -> 10
    assert tech.updates == 2
    assert tech.query(50, 65) == [91]  # φ = 55, ϕ = 36
    assert tech.reads == 3 * 3 + 3 * 2 // 2  # d·n_ω + d(d-1)/2


@given(
    height=st.integers(1, 8),
    slices=st.integers(1, 40),
    offset_in_slice=st.integers(0, 9),
    length_in_slice=st.integers(1, 10),
)
def test_insert_touches_ceil_k_over_d_levels(height, slices, offset_in_slice, length_in_slice):
    """An event spanning k raw slices touches ⌈k/d⌉ slice levels (Table 4)."""
    spec = WindowSpec(range=500, slide=10, ttp=0)
    tech = SEMLSlicing(spec, [count()], height=height)
    for k in range(-60, 10):
        tech.add_window(*spec.window(k))
    start = -slices * 10 + offset_in_slice
    end = start + (slices - 1) * 10 + length_in_slice - offset_in_slice if slices > 1 else start + 1
    spanned = tech.slicer.slice_of(end - 1) - tech.slicer.slice_of(start) + 1
    tech.insert(start, end, [1])
    assert tech.updates == math.ceil(spanned / height)


@given(height=st.integers(1, 8), per_window=st.integers(1, 12))
def test_release_reads_d_n_omega_plus_d_d_minus_1_over_2(height, per_window):
    spec = WindowSpec(range=10 * per_window, slide=10, ttp=0)
    tech = SEMLSlicing(spec, [count()], height=height)
    for k in range(0, per_window + height + 2):
        tech.add_window(*spec.window(k))
    tech.query(*spec.window(0))
    assert tech.reads == height * per_window + height * (height - 1) // 2


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(), height=st.integers(1, 8))
def test_se_ml_slicing_equals_se_slicing_and_oracle(spec, events, height):
    expected, expected_late = oracle(events, *spec, ALL_AGGREGATES)
    got, late = run_engines(events, spec, ALL_AGGREGATES, technique="se-ml-slicing", height=height)
    assert_same_windows(got, expected)
    assert late == expected_late
    flat, _ = run_engines(events, spec, ALL_AGGREGATES, technique="se-slicing")
    assert_same_windows(got, flat)


def test_height_one_is_se_slicing_on_a_long_stream():
    spec = WindowSpec(range=50, slide=20, ttp=30)  # ω mod β = 10: two slices per step
    rows = [(i, i + (i * 7919) % 90, {"x": i % 13}) for i in range(0, 3000, 3)]
    aggs = {"n": "count", "s": "sum:x", "m": "max:x", "sd": "stddev:x"}
    outputs = []
    for technique, height in (("se-slicing", 1), ("se-ml-slicing", 1), ("se-ml-slicing", 5)):
        eng = spanning.Engine(spec, aggs, technique=technique, height=height)
        out = []
        for start, end, row in sorted(rows, key=lambda r: r[1]):
            out += eng.insert(start, end, row)
        outputs.append(out + eng.flush())
    assert outputs[0] == outputs[1]
    assert [(w.start, w.values["n"], w.values["s"], w.values["m"]) for w in outputs[0]] == [
        (w.start, w.values["n"], w.values["s"], w.values["m"]) for w in outputs[2]
    ]


def test_height_auto_everywhere():
    from spanning.planning.height import synthetic_events

    starts, ends = synthetic_events(3000, mu=900, sigma=10)
    frame = __import__("pandas").DataFrame({"start": starts, "end": ends, "x": (ends % 7).astype(int)})
    spec = WindowSpec(range=2000, slide=100, ttp=1000)
    aggs = {"n": "count", "s": "sum:x", "m": "max:x"}
    flat = spanning.aggregate(frame, 2000, 100, 1000, aggregates=aggs)
    auto = spanning.aggregate(frame, 2000, 100, 1000, aggregates=aggs, technique="se-ml-slicing", height="auto")
    assert flat[["window_start", "n", "s", "m"]].equals(auto[["window_start", "n", "s", "m"]])
    eng = spanning.Engine(spec, aggs, technique="se-ml-slicing", height="auto", sample_events=(starts, ends))
    assert eng.height > 1  # events span ~10 slices: more than one level pays
    assert spanning.Engine(spec, aggs, height="auto").height == 1  # se-slicing has one level
    try:
        spanning.Engine(spec, aggs, technique="se-ml-slicing", height="auto")
    except ValueError as err:
        assert "sample_events" in str(err)
    else:
        raise AssertionError("height='auto' without events to measure must fail")


def test_tune_height_command(capsys):
    from spanning.cli import main

    assert main(["tune-height", "--range", "10000", "--slide", "200", "--mu", "5000", "--events", "20000",
                 "--max-height", "12"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    recommended = int(out.split("recommended height: ")[1].split()[0])
    assert 5 <= recommended <= 10 and out.count("\n") >= 13  # §6.2 finds d = 7 best at μ = 5000, ω = 50β
    assert main(["tune-height", "--range", "15m", "--slide", "5m", "data/sample_cdr.csv", "--start", "start",
                 "--end", "end", "--max-height", "4", "--measure", "--sample", "2000"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "measured events/s" in out
    rows = {int(line.split()[0]): (float(line.split()[3].replace(",", "")), "<- recommended" in line)
            for line in out.splitlines() if line.strip() and line.split()[0].isdigit()}  # fmt: skip
    said = int(out.split("recommended height: ")[1].split()[0])
    assert [d for d, (_, marked) in rows.items() if marked] == [said]  # the table marks what the line says
    fastest = max(rows, key=lambda d: rows[d][0])
    if "(measured fastest" in out:  # it recommends what it measured, and says why the model differs
        assert said == fastest and "why they differ:" in out
    else:  # the model's pick, measured within the margin of the fastest
        assert rows[said][0] * 1.10 >= rows[fastest][0]
    assert main(["tune-height", "--range", "15m", "--slide", "5m"]) == 2
    assert "give INPUT files" in capsys.readouterr().err


def test_height_model_counts_windows_per_key():
    """Each key is its own stream: many keys release many more windows per event, so the best height drops."""
    import numpy as np

    from spanning.planning.height import recommend_height, synthetic_events, windows_per_event

    starts, ends = synthetic_events(20_000, mu=900, sigma=10)
    spec = WindowSpec(range=2000, slide=100)
    keys = np.arange(len(starts)) % 50  # round-robin over 50 keys: each key spans the whole time
    assert windows_per_event(spec, starts, ends, keys) > 40 * windows_per_event(spec, starts, ends)
    assert recommend_height(spec, starts, ends, groups=keys) < recommend_height(spec, starts, ends)
