"""occupancy, erlang, prorated_sum and peak_concurrent: the time events spend inside each window, against a
chronon-by-chronon oracle (tests/oracle.py)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning
from spanning.kernels.ranges import window_occupancy
from tests.budget import examples
from tests.oracle import oracle
from tests.streams import assert_same_windows, frame_windows, streams, to_frame, window_specs
from tests.test_chunks import run_chunked, sorted_by_key_and_end

TRAFFIC = {"n": "count", "busy": "occupancy", "erl": "erlang", "sum_x": "sum:x", "share_x": "prorated_sum:x",
           "share_y": "prorated_sum:y", "peak": "peak_concurrent"}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams())
def test_aggregate_equals_the_chronon_by_chronon_oracle(spec, events):
    """Short, long and point events, ω mod β = 0 and ≠ 0, small and large TTP, out of order, several keys."""
    expected, expected_late = oracle(events, *spec, TRAFFIC)
    out = spanning.aggregate(to_frame(events), *spec, aggregates=TRAFFIC, key="key")
    assert out["busy"].dtype == np.int64 and out["erl"].notna().all()
    assert_same_windows(frame_windows(out, TRAFFIC), expected)
    late = out.attrs["late"]
    assert dict(zip(late.index.tolist(), late["windows_missed"].tolist(), strict=True)) == expected_late


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(max_events=50), cuts=st.lists(st.integers(0, 60), max_size=8))
def test_chunks_that_carry_open_windows_give_the_oracle(spec, events, cuts):
    """What a Spark task and a stream's micro-batches run: open windows carried from chunk to chunk."""
    events = sorted_by_key_and_end(events)
    windows, _ = run_chunked(to_frame(events), spec, TRAFFIC, cuts)
    expected, _ = oracle(events, *spec, TRAFFIC)
    assert_same_windows(frame_windows(windows, TRAFFIC), expected)


def _one_key(calls, **query):
    """(n, occupancy, erlang) of the windows that hold an event, by (start, end)."""
    traffic = {"n": "count", "busy": "occupancy", "erl": "erlang"}
    out = spanning.aggregate(pd.DataFrame(calls, columns=["start", "end"]), aggregates=traffic, **query)
    return {(int(r.window_start), int(r.window_end)): (int(r.n), int(r.busy), float(r.erl))
            for r in out.itertuples() if r.n}  # fmt: skip


def test_worked_examples_of_semantics():
    """docs/SEMANTICS.md, "Traffic": windows of 15 minutes every 5 (900 s, 300 s)."""
    # a call 00:12-00:17 (720-1020 s) crosses windows: [0, 900) holds 180 s of it, [300, 1200) and [600, 1500)
    # all 300 s, [900, 1800) 120 s
    got = _one_key([(720, 1020)], range=900, slide=300, ttp=900, series_start=0)
    assert got == {(0, 900): (1, 180, 0.2), (300, 1200): (1, 300, 1 / 3), (600, 1500): (1, 300, 1 / 3),
                   (900, 1800): (1, 120, 120 / 900)}  # fmt: skip
    # a session longer than ω fills every window inside it: 900 s, one Erlang
    got = _one_key([(0, 3600)], range=900, slide=300, ttp=3600, series_start=0)
    assert [got[w] for w in [(0, 900), (1200, 2100), (2700, 3600)]] == [(1, 900, 1.0)] * 3
    assert got[(3300, 4200)] == (1, 300, 300 / 900)
    # a point event is one chronon wherever it lies
    got = _one_key([(400, 400)], range=900, slide=300, ttp=0, series_start=0)
    assert got == {(-300, 600): (1, 1, 1 / 900), (0, 900): (1, 1, 1 / 900), (300, 1200): (1, 1, 1 / 900)}
    # late calls: with no TTP, a call arrives when it ends, so the 1000-s call closed [0, 900) and the windows
    # before it by its own arrival; [600, 800), arriving after it, misses [0, 900) too. Neither adds to them.
    got = _one_key([(0, 1000), (600, 800)], range=900, slide=300, ttp=0, series_start=0)
    assert got == {(300, 1200): (2, 700 + 200, 1.0), (600, 1500): (2, 400 + 200, 600 / 900),
                   (900, 1800): (1, 100, 100 / 900)}  # fmt: skip


def test_worked_examples_of_prorated_sums_and_peaks():
    """docs/SEMANTICS.md, "Traffic", the same windows (900 s every 300 s, the series from 0)."""
    frame = pd.DataFrame({"start": [0, 400], "end": [3600, 400], "bytes": [3600, 140]})  # a session, an SMS
    out = spanning.aggregate(frame, 900, 300, ttp=3600, series_start=0, aggregates={"b": "prorated_sum:bytes"})
    got = {int(r.window_start): float(r.b) for r in out.itertuples()}
    assert got[0] == 900 + 140 and got[900] == 900 and got[3300] == 300  # the SMS counts in full where it lies
    assert got[-300] == 600 + 140 and got[600] == 900  # [-300, 600) holds 600 s of the session
    calls = pd.DataFrame({"start": [0, 300, 600], "end": [600, 900, 1000]})  # the first ends as the third begins
    out = spanning.aggregate(calls, 900, 300, ttp=900, series_start=0, aggregates={"peak": "peak_concurrent"})
    got = {int(r.window_start): int(r.peak) for r in out.itertuples()}
    assert got == {-600: 1, -300: 2, 0: 2, 300: 2, 600: 2, 900: 1}


def test_the_kernel_is_exact_where_its_partial_sums_wrap():
    """Times near 2^62 chronons: the window bounds stay in int64, and the occupancies are exact."""
    big = 2**62
    starts, ends = np.array([big + 3, big + 14]), np.array([big + 12, big + 15])
    got = window_occupancy(starts, ends, np.array([0, 2]), np.array([3, 3]), np.array([big - 5, big + 5]), 5, 10, 4)
    assert got.tolist() == [2, 7, 8, 3]


def test_per_event_paths_refuse_with_the_reason():
    calls = pd.DataFrame({"start": [0], "end": [10]})
    with pytest.raises(ValueError, match="erlang needs each window's bounds"):
        spanning.aggregate(calls, 10, 5, aggregates={"e": "erlang"}, technique="se-ml-slicing", height=2)
    with pytest.raises(ValueError, match="per-event Engine cannot compute occupancy"):
        spanning.Engine(spanning.WindowSpec(10, 5), {"o": "occupancy"})
    with pytest.raises(ValueError, match="write it as 'occupancy'"):
        spanning.aggregate(calls, 10, 5, aggregates={"o": "occupancy:x"})


def test_the_command_refuses_them_with_a_per_event_technique(tmp_path, capsys):
    from spanning.cli import main

    calls = tmp_path / "calls.csv"
    calls.write_text("start,end\n0,10\n")
    argv = ["run", str(calls), "--range", "10", "--slide", "5", "--start", "start", "--end", "end", "--agg", "erlang",
            "--engine", "local", "--output", str(tmp_path / "out"), "--technique", "se-ml-slicing"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--technique se-ml-slicing cannot compute --agg erlang" in err and "Traceback" not in err


def test_both_engines_the_python_plan_and_the_stream_give_one_answer_on_a_messy_file(spark, tmp_path, capsys):
    """Generated CDRs with 3% bad rows: the local engine and Spark (its Python plan, chosen for them) give the
    same windows, rejected and late rows; a JVM plan says why not; a drained stream of the file in two
    parts gives what ``run --series-start first`` gives."""
    from spanning.app.cdr import CallMix, generate_cdr
    from spanning.cli import main

    calls = generate_cdr(1500, seed=3, cells=6, subscribers=200, days=0.25, mix=CallMix(bad_share=0.03))
    path = tmp_path / "calls.csv"
    calls.to_csv(path, index=False)
    query = ["--range", "15m", "--slide", "5m", "--ttp", "20m", "--start", "start", "--end", "end", "--key", "cell",
             "--agg", "count", "--agg", "occupancy", "--agg", "erlang", "--agg", "prorated_sum:bytes",
             "--agg", "peak_concurrent", "--master", "local[2]"]  # fmt: skip
    outputs = {}
    for engine in ("local", "spark"):
        assert main(["run", str(path), *query, "--engine", engine, "--output", str(tmp_path / engine)]) == 0, engine
        outputs[engine] = {part: pd.read_parquet(tmp_path / engine / part) for part in ("windows", "rejected", "late")}
    order = ["cell", "window_start"]
    local, on_spark = (outputs[e]["windows"].sort_values(order).reset_index(drop=True) for e in ("local", "spark"))
    pd.testing.assert_frame_equal(local, on_spark[local.columns], check_exact=False, rtol=1e-12)  # float sums
    assert (local["occupancy"] > 0).all() and local["erlang"].max() > 1  # busy cells: several calls at once
    assert local["peak_concurrent"].max() > 1 and local["prorated_sum_bytes"].notna().any()
    for part in ("rejected", "late"):
        assert sorted(outputs["local"][part]["call_id"]) == sorted(outputs["spark"][part]["call_id"]), part
    assert len(outputs["local"]["rejected"]) > 0 and len(outputs["local"]["late"]) > 0
    summary = pd.read_json(tmp_path / "spark" / "summary.json", typ="series")
    assert summary["plans"][0]["plan"] == "python"  # prorated_sum and peak_concurrent: the batch path in Python

    assert main(["run", str(path), *query, "--plan", "vector", "--output", str(tmp_path / "vector")]) == 2
    assert "--plan vector cannot run this query: prorated_sum:bytes" in capsys.readouterr().err
    erlangs = [*query[: query.index("--agg")], "--agg", "count", "--agg", "occupancy", "--agg", "erlang",
               "--master", "local[2]"]  # fmt: skip
    assert main(["run", str(path), *erlangs, "--output", str(tmp_path / "auto")]) == 0  # vector's kernel
    assert pd.read_json(tmp_path / "auto" / "summary.json", typ="series")["plans"][0]["plan"] == "vector"
    assert main(["run", str(path), *erlangs, "--engine", "local", "--output", str(tmp_path / "local-erlangs")]) == 0
    vector, expected = (pd.read_parquet(tmp_path / name / "windows").sort_values(order).reset_index(drop=True)
                        for name in ("auto", "local-erlangs"))  # fmt: skip
    pd.testing.assert_frame_equal(vector, expected[vector.columns], check_exact=False, rtol=1e-12)
    typed = tmp_path / "calls.parquet"  # timestamps in Parquet: vector's tasks could read the row groups themselves
    usable = calls.assign(**{c: pd.to_datetime(calls[c], errors="coerce", utc=True) for c in ("start", "end")})
    usable.dropna(subset=["start", "end"])[["call_id", "cell", "start", "end"]].to_parquet(typed, index=False,
                                                                            coerce_timestamps="us")
    for engine in ("spark", "local"):
        assert main(["run", str(typed), *erlangs, "--engine", engine, "--output", str(tmp_path / f"pq-{engine}")]) == 0
    got, expected = (pd.read_parquet(tmp_path / f"pq-{e}" / "windows").sort_values(order).reset_index(drop=True)
                     for e in ("spark", "local"))  # fmt: skip
    pd.testing.assert_frame_equal(got, expected[got.columns], check_exact=False, rtol=1e-12)
    assert main(["run", str(path), *erlangs, "--plan", "explode", "--output", str(tmp_path / "explode")]) == 2
    assert "--plan explode cannot compute occupancy" in capsys.readouterr().err

    busy = ["busy-hour", str(path), "--start", "start", "--end", "end", "--key", "cell", "--master", "local[2]"]
    for engine in ("local", "spark"):  # the busy hour, on both engines
        assert main([*busy, "--engine", engine, "--output", str(tmp_path / f"busy-{engine}")]) == 0, engine
    local_busy, spark_busy = (pd.read_parquet(tmp_path / f"busy-{e}" / "busy_hours.parquet")
                              for e in ("local", "spark"))  # fmt: skip
    pd.testing.assert_frame_equal(local_busy, spark_busy, check_exact=False, rtol=1e-12)

    arriving = tmp_path / "arriving"
    arriving.mkdir()
    ends = pd.to_datetime(calls["end"], errors="coerce")
    ordered = calls.assign(_e=ends).sort_values("_e", na_position="last").drop(columns="_e")
    for i, part in enumerate((ordered.iloc[:750], ordered.iloc[750:])):
        part.to_csv(arriving / f"part-{i}.csv", index=False)
        os.utime(arriving / f"part-{i}.csv", (1e9 + i, 1e9 + i))
    assert main(["stream", str(arriving), *query, "--max-files-per-trigger", "1", "--drain", "--output",
                 str(tmp_path / "stream"), "--checkpoint", str(tmp_path / "chk")]) == 0  # fmt: skip
    assert main(["run", str(arriving), *query, "--engine", "local", "--series-start", "first", "--output",
                 str(tmp_path / "first")]) == 0  # fmt: skip
    streamed = pd.read_parquet(tmp_path / "stream" / "windows").sort_values(order).reset_index(drop=True)
    expected = pd.read_parquet(tmp_path / "first" / "windows").sort_values(order).reset_index(drop=True)
    pd.testing.assert_frame_equal(streamed[expected.columns], expected, check_dtype=False)


def test_occupancy_is_in_seconds_with_millisecond_chronons():
    """``time_unit="ms"``: occupancy in float seconds (the chronons / 1000), erlang unit-free as with seconds."""
    calls = pd.DataFrame({"start": [3_000, 14_000, 2_500], "end": [12_000, 15_000, 2_501]})  # 9 s, 1 s, 1 ms
    out = spanning.aggregate(calls, range=10_000, slide=5_000, ttp=10_000, time_unit="ms",
                             aggregates={"busy": "occupancy", "erl": "erlang"})  # fmt: skip
    assert out["busy"].dtype == np.float64
    assert out["busy"].tolist() == [2.001, 7.001, 8.0, 3.0]
    assert np.allclose(out["erl"], [0.2001, 0.7001, 0.8, 0.3], rtol=1e-12)


def test_both_engines_and_the_stream_report_occupancy_in_seconds_with_millisecond_chronons(spark, tmp_path):
    from spanning.cli import main

    folder = tmp_path / "calls"
    folder.mkdir()
    (folder / "calls.csv").write_text("cell,start,end\na,3000,12000\na,14000,15000\nb,2500,2501\n")
    query = ["--range", "10000ms", "--slide", "5000ms", "--ttp", "10000ms", "--time-unit", "ms", "--key", "cell",
             "--start", "start", "--end", "end", "--agg", "occupancy", "--agg", "erlang", "--master", "local[2]"]
    runs = {"local": ["run", "--engine", "local"], "vector": ["run", "--plan", "vector"],  # Spark's plans share
            "stream": ["stream", "--drain", "--checkpoint", str(tmp_path / "chk")]}  # the output's conversion
    outputs = {}
    for name, (command, *extra) in runs.items():
        assert main([command, str(folder), *query, *extra, "--output", str(tmp_path / name)]) == 0, name
        windows = pd.read_parquet(tmp_path / name / "windows").sort_values(["cell", "window_start"])
        outputs[name] = windows.reset_index(drop=True)
    local = outputs["local"]
    assert local["occupancy"].tolist() == [2.0, 7.0, 8.0, 3.0, 0.001, 0.001]
    for name in ("vector", "stream"):
        pd.testing.assert_frame_equal(local, outputs[name][local.columns], check_exact=False, rtol=1e-12, obj=name)
