"""The plans of the Spark job (explode, vector) against the oracle and the Python plan.

Random small streams: short and long calls, point events, ω mod β = 0 and ≠ 0, small and large TTP,
several keys with a null key, null values, every series start. Each key's rows arrive in end order
(the batch job's arrival order); windows, late rows and windows_missed must equal the oracle's.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanning.app.jobspec import EVENTS_COLUMN, EventFields, InputFiles, RunConfig, WindowQuery, output_name
from tests.budget import examples
from tests.oracle import oracle

RANGE_AGGS = ["count", "count:v", "sum:v", "mean:v"]
ALL_AGGS = [*RANGE_AGGS, "min:v", "max:v", "sum:f", "max:f"]


@st.composite
def streams(draw):
    n = draw(st.integers(1, 14))
    rows = []
    for i in range(n):
        start = draw(st.integers(-30, 120))
        length = draw(st.one_of(st.integers(0, 12), st.integers(0, 150)))  # short calls, long sessions, points
        rows.append({
            "id": i,
            "cell": draw(st.sampled_from(["a", "b", None])),
            "start": start,
            "end": start + length,
            "v": draw(st.one_of(st.none(), st.one_of(st.integers(-(2**40), 2**40), st.integers(-(2**59), 2**59)))),
            "f": draw(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False))),
        })  # fmt: skip
    window = draw(st.sampled_from([(10, 5), (15, 5), (7, 3), (10, 4), (1, 1)]))
    ttp = draw(st.sampled_from([0, 3, 20, 1000]))
    series = draw(st.sampled_from(["earliest", "first", -7]))
    return pd.DataFrame(rows), window, ttp, series


def _oracle(frame: pd.DataFrame, window, ttp, series, aggs) -> tuple[dict, dict]:
    """Windows with events per (key, window_start), and windows_missed per id, from the oracle."""
    names = {output_name(a): a for a in aggs}
    windows, late = {}, {}
    for key, rows in frame.groupby("cell", dropna=False, sort=False):
        key = None if isinstance(key, float) and math.isnan(key) else key
        rows = rows.assign(u=rows["end"].where(rows["end"] > rows["start"], rows["start"] + 1))
        rows = rows.sort_values(["u", "id"], kind="stable")  # arrival: by the event's u (a point ends at l + 1)
        stream = [(key, int(r.start), int(r.end), {"v": _py(r.v), "f": _py(r.f)}) for r in rows.itertuples()]
        start = {"earliest": int(rows["start"].min()), "first": None}.get(series, series)
        got, missed = oracle(stream, window[0], window[1], ttp, 0, {**names, "__n": "count"}, series_start=start)
        for s, _, values in got.get(key, []):
            if values["__n"]:
                windows[(key, s)] = {n: values[n] for n in names}
        ids = rows["id"].tolist()
        late.update({ids[seq]: m for seq, m in missed.items() if m})
    return windows, late


def _py(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _plan_output(spark, tmp_path, frame, window, ttp, series, aggs, plan, ids=True) -> tuple[dict, dict]:
    from spark_jobs.batch.plans import jvm_window_job, key_ids
    from spark_jobs.batch.windowed import LATE_SEQ, MISSED, window_job
    from spark_jobs.reading.prepare import events, load

    path = tmp_path / "calls.parquet"
    if not path.exists():
        frame.astype({"v": "Int64", "f": "Float64"}).to_parquet(path, index=False)
    query = WindowQuery(window[0], window[1], ttp, aggregates=aggs, series_start=series)
    cfg = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=["cell"]), query, engine="spark")
    prepared = load(spark, cfg)
    if len(frame) % 2:  # half the streams without the footers' bounds: integer sums carried as two parts
        prepared.value_bounds = {}
    begin = query.series_start  # checked: "earliest", "first" or an int
    if plan == "python":
        out = window_job(events(prepared, begin), prepared, cfg, series_start=begin != "first")
    elif plan == "parquet":  # vector's tasks reading row groups of 3 rows: partials of one key merged across tasks
        return _read_side_output(spark, tmp_path, frame, cfg, begin)
    else:  # as the job hands them over: from the earliest start, no per-key series column
        rows = events(prepared, "first" if begin == "earliest" else begin)
        out = jvm_window_job(rows, prepared, cfg, plan, str(begin), key_ids(rows, ["cell"]) if ids else None)
    result = out.toPandas()
    seq_to_id = dict(prepared.rows.select("_seq", "id").toPandas().itertuples(index=False))
    names = [output_name(a) for a in aggs]
    windows = {
        (_py(r["cell"]), int(r["window_start"])): {n: _py(r[n]) for n in names}
        for _, r in result[result[LATE_SEQ].isna() & (result[EVENTS_COLUMN] > 0)].iterrows()
    }
    late = {seq_to_id[int(r[LATE_SEQ])]: int(r[MISSED]) for _, r in result[result[LATE_SEQ].notna()].iterrows()}
    return windows, late


def _read_side_output(spark, tmp_path, frame, cfg, begin) -> tuple[dict, dict]:
    """``parquet_window_job``'s windows and counts, and the job's late rows (its own pass over the input)."""
    from pyspark.sql import Observation

    from spark_jobs.batch.plans import late_rows, parquet_window_job, read_plan
    from spark_jobs.reading.prepare import load

    path = tmp_path / "groups.parquet"
    # a text key even when every drawn key is null (else Parquet's null type: not a plain column to read)
    frame.astype({"v": "Int64", "f": "Float64", "cell": "string"}).to_parquet(path, index=False, row_group_size=3)
    cfg = RunConfig(InputFiles([str(path)]), cfg.events, cfg.query, engine="spark")
    prepared = load(spark, cfg)
    plan = read_plan(prepared, cfg)
    if begin == "first":  # each key's first event in end order: not for tasks that see part of a key
        assert plan is None
        return _plan_output(spark, tmp_path, frame, (cfg.query.range, cfg.query.slide), cfg.query.ttp, begin,
                            list(cfg.query.aggregates), "vector")  # fmt: skip
    counts = Observation("counts")
    result = parquet_window_job(spark, prepared, cfg, plan, counts).toPandas()
    names = [output_name(a) for a in cfg.query.aggregates]
    windows = {
        (_py(r["cell"]), int(r["window_start"])): {n: _py(r[n]) for n in names}
        for _, r in result[result[EVENTS_COLUMN] > 0].iterrows()
    }
    late_events = late_rows(prepared, cfg, str(begin)).toPandas()
    late = {int(r["id"]): int(r["windows_missed"]) for _, r in late_events.iterrows()}
    assert counts.get == {"read": len(frame), "rejected": 0, "late": len(late)}
    return windows, late


def _same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for where, values in want.items():
        for name, b in values.items():
            a = got[where][name]
            if isinstance(b, float) or isinstance(a, float):
                assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6), (
                    where, name, a, b)  # fmt: skip
            else:
                assert a == b, (where, name, a, b)


@pytest.mark.parametrize(
    ("plan", "aggs", "ids"),
    [
        ("explode", ALL_AGGS, True),
        ("explode", ALL_AGGS, False),
        ("vector", ALL_AGGS, False),
        ("vector", [*ALL_AGGS, "occupancy", "erlang"], True),  # hashed ids; the time inside windows
        ("parquet", [*ALL_AGGS, "occupancy", "erlang"], False),  # vector's tasks read the row groups themselves
    ],
)
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=streams())
def test_jvm_plans_equal_the_oracle(spark, tmp_path_factory, plan, aggs, ids, case):
    frame, window, ttp, series = case
    want_windows, want_late = _oracle(frame, window, ttp, series, aggs)
    got_windows, got_late = _plan_output(spark, tmp_path_factory.mktemp("plan"), frame, window, ttp, series, aggs,
                                         plan, ids)  # fmt: skip
    _same(got_windows, want_windows)
    assert got_late == want_late


def test_plans_agree_with_the_python_plan_on_a_worked_example(spark, tmp_path):
    """A hand-checked stream: calls across windows, a late session, a null value, two keys."""
    frame = pd.DataFrame({
        "id": [0, 1, 2, 3, 4],
        "cell": ["a", "a", "b", "a", "b"],
        "start": [0, 3, 4, 1, 12],
        "end": [8, 9, 4, 30, 14],
        "v": [10, None, 7, 5, 1],
        "f": [0.5, 1.5, None, 2.0, 4.0],
    })  # fmt: skip
    # ω=10, β=5, δ=0, series from the earliest start (0): key a's series begins with [-5,5). Calls 0 and 1
    # arrive at 8 and 9, when [-5,5) is already released: they count in [0,10) and [5,15) and miss one window.
    # Call 3 [1,30) arrives at 30: it counts in [20,30) and [25,35) and misses the five from [-5,5) to [15,25).
    expected_a = {0: 2, 5: 2, 20: 1, 25: 1}
    results = {}
    plans = ("python", "explode", "vector", "parquet")
    for plan in plans:
        results[plan] = _plan_output(spark, tmp_path, frame, (10, 5), 0, "earliest", RANGE_AGGS, plan)
        windows, late = results[plan]
        assert {s: v["count"] for (k, s), v in windows.items() if k == "a"} == expected_a
        assert windows[("a", 0)]["sum_v"] == 10 and windows[("a", 0)]["count_v"] == 1  # the null is not counted
        assert late == {0: 1, 1: 1, 3: 5}
    assert all(results[plan] == results["python"] for plan in plans)


@pytest.mark.parametrize(
    ("length", "aggs", "keys", "plan"),
    [
        (600, ["count", "sum:v", "max:f"], ["cell"], "vector"),  # 61 windows per event
        (600, ["count", "sum:v"], [], "vector"),  # no key: partials made where the rows are, merged
        (600, ["count", "max:v"], [], "vector"),
        (600, ["count", "count_distinct:v"], [], "python"),
        (3, ["count", "max:v"], ["cell"], "explode"),  # 1.3 windows per event
        (600, ["count", "stddev:v"], ["cell"], "python"),
        (3, ["count", "count_distinct:v", "percentile:f:0.5"], ["cell"], "python"),  # sets and value lists
        (600, ["count", "approx_count_distinct:v", "approx_percentile:f:0.95"], ["cell"], "python"),  # sketches
        (3, ["count", "hll_sketch:v"], [], "python"),
    ],
)
def test_auto_plan_follows_the_windows_per_event(spark, tmp_path, length, aggs, keys, plan):
    """And ``python_plan_certain``, which tells before Spark starts (to warm the workers), says the same."""
    from spark_jobs.batch.plans import choose_plan, python_plan_certain
    from spark_jobs.reading.prepare import END, START, events, load

    path = tmp_path / "calls.parquet"
    starts = list(range(0, 4000, 7))
    pd.DataFrame({"cell": [f"c{i % 3}" for i in range(len(starts))], "start": starts,
                  "end": [s + length for s in starts], "v": range(len(starts)),
                  "f": [0.5] * len(starts)}).to_parquet(path, index=False)  # fmt: skip
    cfg = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=keys), WindowQuery(10, 10, 0, aggs))
    prepared = load(spark, cfg)
    choice = choose_plan(cfg, prepared, events(prepared, "first").select(START, END))
    assert choice.plan == plan, choice
    assert python_plan_certain(cfg) == (plan == "python")


@pytest.mark.parametrize("unit", ["s", "ms"])
def test_windows_per_event_from_parquet_rows_read_on_the_driver_equals_spark_s_sample(spark, tmp_path, unit):
    """The planner's sample read on the driver (pyarrow, no Spark job) gives the windows per event that Spark's
    sample of the prepared events gives: timestamps of any unit floored to chronons, integer times, a duration
    column, nulls and reversed calls skipped; anything else (CSV, expressions) falls back to Spark's sample."""
    from spanning.app.files import input_files
    from spark_jobs.batch.plans import windows_per_event
    from spark_jobs.reading.prepare import END, START, events, load, parquet_times_sample

    starts = pd.Series(range(-4000, 50_000, 97), dtype="int64") * 1_000 + 333  # ms, some before 1970
    lengths = (starts % 7_919_000).abs()
    frame = pd.DataFrame({
        "cell": [f"c{i % 5}" for i in range(len(starts))],
        "start_ts": pd.to_datetime(starts, unit="ms").astype("datetime64[us]"),
        "end_ts": pd.to_datetime(starts + lengths, unit="ms").astype("datetime64[us]"),
        "start_n": (starts // (1 if unit == "ms" else 1000)).astype("Int64"),
        "length_n": (lengths // (1 if unit == "ms" else 1000)).astype("Int64"),
    })  # fmt: skip
    frame.loc[3, "end_ts"] = None  # rejected by the job: not in its sample
    frame.loc[6, ["start_ts", "end_ts"]] = frame.loc[6, ["end_ts", "start_ts"]].to_numpy()  # end before start
    frame.loc[7, "start_n"] = None
    path = tmp_path / "calls.parquet"
    frame.to_parquet(path, index=False)
    scale = 1000 if unit == "ms" else 1
    query = WindowQuery(900 * scale, 60 * scale, 0, ["count"])
    for fields in (EventFields("start_ts", "end_ts", keys=["cell"], time_unit=unit),
                   EventFields("start_n", None, duration="length_n", keys=["cell"], time_unit=unit)):  # fmt: skip
        cfg = RunConfig(InputFiles([str(path)]), fields, query)
        local = parquet_times_sample(input_files([str(path)]), fields, 10_000)
        spark_sample = events(load(spark, cfg), "first").select(START, END).limit(10_000)
        assert local is not None and len(local[0]) == spark_sample.count() < len(frame)  # the same rows skipped
        assert windows_per_event(cfg, local) == pytest.approx(windows_per_event(cfg, spark_sample), rel=1e-12)
    csv = tmp_path / "calls.csv"
    frame.to_csv(csv, index=False)
    expression = EventFields("start_ts + INTERVAL 1 SECOND", "end_ts", keys=["cell"])
    assert parquet_times_sample(input_files([str(csv)]), fields, 10_000) is None
    assert parquet_times_sample(input_files([str(path)]), expression, 10_000) is None


def _calls_as_parquet_and_csv(folder, seed: int, first: int) -> tuple[pd.DataFrame, object, object]:
    """3,000 calls from ``first`` (epoch seconds) in 7 cells, one rejected (it ends before it starts), written as
    Parquet and as CSV in ``folder``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 3_000
    starts = rng.integers(first, first + 20_000, n)
    frame = pd.DataFrame({"cell": rng.integers(0, 7, n), "start": starts, "end": starts + rng.integers(0, 900, n),
                          "bytes": rng.integers(0, 9, n), "name": "x"})  # fmt: skip
    frame.loc[5, "end"] = frame.loc[5, "start"] - 1  # rejected by the job: not in the sample
    path, csv = folder / "calls.parquet", folder / "calls.csv"
    frame.to_parquet(path, index=False)
    frame.to_csv(csv, index=False)
    return frame, path, csv


def _merge_config(folder, source, plan="auto", keys=("cell",), aggregates=("count", "sum:bytes"), end="end"):
    return RunConfig.from_parameters(dict(inputs=[str(source)], output=str(folder / "out"), range=900, slide=60,
                                          ttp=600, start="start", end=end, keys=list(keys), plan=plan,
                                          aggregates=list(aggregates)))  # fmt: skip


def test_the_jvm_s_quick_compiler_only_where_vector_s_tasks_read_the_rows_into_few_partials(tmp_path, monkeypatch):
    """``jvm_merge_is_small`` (decided before Spark starts): Parquet that vector's tasks read
    (``vector_reads_parquet``, which also starts their workers' warm-up early), whose partials per
    (key, window) ``partials_per_event`` estimates as each key's span of windows, checked against the windows
    enumerated one by one; CSV, an explicit other plan, an expression or a text value column never."""
    from spanning.app.files import input_files
    from spark_jobs.batch import plans
    from spark_jobs.reading.prepare import parquet_times_sample

    frame, path, csv = _calls_as_parquet_and_csv(tmp_path, 5, 0)
    inputs = input_files([str(path)])

    def cfg(plan="auto", keys=("cell",), aggregates=("count", "sum:bytes"), source=path):
        return _merge_config(tmp_path, source, plan, keys, aggregates)

    sample = parquet_times_sample(inputs, cfg().events, 10_000, with_keys=True)
    spans = {}
    for key, start, end in frame.drop(index=5)[["cell", "start", "end"]].itertuples(index=False):
        windows = [k for k in range(-20, 400) if k * 60 < max(end, start + 1) and start < k * 60 + 900]
        low, high = spans.get(key, (windows[0], windows[-1]))
        spans[key] = (min(low, windows[0]), max(high, windows[-1]))
    expected = sum(high - low + 1 for low, high in spans.values()) / (len(frame) - 1)
    assert plans.partials_per_event(cfg(), sample) == pytest.approx(expected, rel=1e-12)
    one_series = max(h for _, h in spans.values()) - min(low for low, _ in spans.values()) + 1  # no key
    unkeyed = parquet_times_sample(inputs, cfg(keys=()).events, 10_000, with_keys=True)
    assert plans.partials_per_event(cfg(keys=()), unkeyed) == pytest.approx(one_series / (len(frame) - 1), rel=1e-12)

    assert not plans.jvm_merge_is_small(cfg(), inputs)  # a small file: auto does not read it in the tasks
    monkeypatch.setattr(plans, "READ_SIDE_FROM", 0)
    assert plans.jvm_merge_is_small(cfg(), inputs) and plans.jvm_merge_is_small(cfg("vector"), inputs)
    monkeypatch.setattr(plans, "QUICK_COMPILER_PARTIALS", expected * len(frame) * 0.9)  # more partials than that
    assert not plans.jvm_merge_is_small(cfg(), inputs)
    assert plans.vector_reads_parquet(cfg(), inputs)  # read by the tasks all the same: their workers warmed early
    monkeypatch.setattr(plans, "QUICK_COMPILER_PARTIALS", expected * len(frame) * 1.1)
    assert plans.jvm_merge_is_small(cfg(), inputs)
    assert not plans.jvm_merge_is_small(cfg("explode"), inputs)
    assert not plans.jvm_merge_is_small(cfg(source=csv), input_files([str(csv)]))
    assert not plans.jvm_merge_is_small(cfg(keys=("cell % 2",)), inputs)
    assert not plans.jvm_merge_is_small(cfg(aggregates=("count", "count_distinct:name")), inputs)
    for other in (cfg("explode"), cfg(keys=("cell % 2",)), cfg(aggregates=("count", "count_distinct:name"))):
        assert not plans.vector_reads_parquet(other, inputs)
    assert not plans.vector_reads_parquet(cfg(source=csv), input_files([str(csv)]))


def test_the_jvm_s_quick_compiler_where_the_tasks_read_csv_ranges_into_few_partials(tmp_path, monkeypatch):
    """``csv_merge_is_small`` (decided before Spark starts): CSV files that vector's tasks read in byte ranges on a
    local master, whose partials the first records estimate (``partials_per_event``, the Parquet estimate's over
    the same rows) times the rows the files hold (the first records' bytes a row: here the whole file); another
    master, spark-submit's, a plan, key or aggregate the tasks do not read, or times in two forms never."""
    from spanning.app.files import input_files
    from spark_jobs.batch import csv_read, plans
    from spark_jobs.reading.prepare import parquet_times_sample

    frame, path, csv = _calls_as_parquet_and_csv(tmp_path, 7, 1_700_000_000)
    n = len(frame)
    inputs = input_files([str(csv)])

    def cfg(plan="auto", keys=("cell",), aggregates=("count", "sum:bytes"), source=csv, end="end"):
        return _merge_config(tmp_path, source, plan, keys, aggregates, end)

    same_rows = parquet_times_sample(input_files([str(path)]), cfg().events, 10_000, with_keys=True)
    partials = plans.partials_per_event(cfg(), same_rows) * (n - 1)  # the file's every usable row
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert not csv_read.csv_merge_is_small(cfg(), inputs, None)  # a small file: auto does not read it in the tasks
    monkeypatch.setattr(csv_read, "READ_SIDE_FROM", 0)
    monkeypatch.setattr(csv_read, "QUICK_COMPILER_PARTIALS", partials * 1.01)
    for master in (None, "local[2]", "local", "local-cluster[2,1,1024]"):
        assert csv_read.csv_merge_is_small(cfg(), inputs, master), master
    assert csv_read.csv_merge_is_small(cfg("vector"), inputs, None)
    monkeypatch.setattr(csv_read, "QUICK_COMPILER_PARTIALS", partials * 0.99)  # more partials than that
    assert not csv_read.csv_merge_is_small(cfg(), inputs, None)
    monkeypatch.setattr(csv_read, "QUICK_COMPILER_PARTIALS", partials * 1.01)
    assert not csv_read.csv_merge_is_small(cfg(), inputs, "yarn")  # no side folder there: Spark reads the files
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # under spark-submit: its master is not known before Spark
    assert not csv_read.csv_merge_is_small(cfg(), inputs, None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    assert not csv_read.csv_merge_is_small(cfg("explode"), inputs, None)
    assert not csv_read.csv_merge_is_small(cfg(keys=("cell % 2",)), inputs, None)
    assert not csv_read.csv_merge_is_small(cfg(aggregates=("count", "count_distinct:name")), inputs, None)
    assert not csv_read.csv_merge_is_small(cfg(source=path), input_files([str(path)]), None)  # Parquet: plans'
    frame["stamp"] = "2024-03-04 05:06:07"  # start in seconds, end as date-times: the job reports the mistake
    frame.to_csv(csv, index=False)
    assert not csv_read.csv_merge_is_small(cfg(end="stamp"), input_files([str(csv)]), None)


def test_distinct_keys_read_on_the_driver_are_spark_s_and_the_plans_give_the_same_windows(spark, tmp_path):
    """``parquet_key_values`` (pyarrow, no Spark job) gives the keys Spark's distinct gives, nulls included,
    for text and integer keys over several files; the key ids built from them give the windows of ids built
    by Spark, and so do dense ids (the fallback when two keys share a hash), all equal to the python plan's;
    expressions, CSV and other key types fall back to Spark (None)."""
    from spanning.app.files import input_files
    from spanning.app.jobspec import SparkOptions
    from spark_jobs.batch.compute import compute
    from spark_jobs.batch.plans import MAX_KEY_IDS
    from spark_jobs.reading.prepare import events, load, parquet_key_values

    frame = pd.DataFrame({
        "cell": pd.array(["b", None, "a", "b", "c", "a"], dtype="string"),
        "site": pd.array([2, 1, None, 2, 1, 1], dtype="Int32"),
        "ratio": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
        "start": [0, 100, 200, 300, 400, 500],
        "end": [700, 300, 900, 400, 2000, 650],
        "bytes": pd.array([1, 2, None, 4, 5, 6], dtype="Int64"),
    })  # fmt: skip
    folder = tmp_path / "in"
    folder.mkdir()
    frame.iloc[:3].to_parquet(folder / "a.parquet", index=False)
    frame.iloc[3:].to_parquet(folder / "b.parquet", index=False)
    query = WindowQuery(600, 200, 0, ["count", "sum:bytes", "max:bytes"])
    for keys in (["cell"], ["cell", "site"], ["site"]):
        cfg = RunConfig(InputFiles([str(folder)]), EventFields("start", "end", keys=keys), query)
        prepared = load(spark, cfg)
        known = parquet_key_values(prepared, keys, MAX_KEY_IDS)
        distinct = events(prepared, "first").select(*keys).distinct().collect()
        assert known is not None and sorted(map(tuple, distinct), key=repr) == sorted(known, key=repr)
        assert parquet_key_values(prepared, keys, 1) is not None and len(parquet_key_values(prepared, keys, 1)) == 2
        windows = {}
        for plan in ("vector", "explode", "python"):  # python: no key ids, the reference
            ids = plan != "python" and keys != ["site"]  # the python plan and one integer key use no key ids
            for source in ("driver", "spark", "collision") if ids else ("driver",):
                run = RunConfig(cfg.inputs, cfg.events, query, spark=SparkOptions(plan=plan))
                with pytest.MonkeyPatch.context() as patch:
                    if source == "spark":  # the Spark job finds the keys itself
                        patch.setattr("spark_jobs.batch.compute.parquet_key_values", lambda *a: None)
                    if source == "collision":  # as if two keys had one hash: dense ids by a join
                        patch.setattr("spark_jobs.batch.plans.spark_xxhash64", lambda *a: 0)
                    windows[plan, source] = sorted(map(tuple, compute(spark, run).windows.collect()), key=repr)
        assert len({tuple(w) for w in windows.values()}) == 1 and windows["vector", "driver"], keys
    renamed = RunConfig(InputFiles([str(folder)]), EventFields("start", "end", keys=["upper(cell) AS c"]), query)
    assert parquet_key_values(load(spark, renamed), ["upper(cell) AS c"], MAX_KEY_IDS) is None
    floats = RunConfig(InputFiles([str(folder)]), EventFields("start", "end", keys=["ratio"]), query)
    assert parquet_key_values(load(spark, floats), ["ratio"], MAX_KEY_IDS) is None
    csv = tmp_path / "calls.csv"
    frame.to_csv(csv, index=False)
    text = RunConfig(InputFiles([str(csv)]), EventFields("start", "end", keys=["cell"]), query)
    assert parquet_key_values(load(spark, text), ["cell"], MAX_KEY_IDS) is None
    assert input_files([str(folder)]).format == "parquet"


def test_integer_sums_bounded_by_the_parquet_footers_are_plain_sums_and_stay_exact(spark, tmp_path):
    """A column whose footer statistics bound every sum to 64 bits is summed as one long (and counted as
    events when it has no nulls); beyond the bound, the sum is carried in two parts and still stops with
    SumOverflowError when a window's sum leaves 64 bits. Every plan gives the python plan's windows."""
    from spanning.aggregates import SumOverflowError
    from spanning.app.jobspec import SparkOptions
    from spark_jobs.batch.compute import compute
    from spark_jobs.batch.plans import _partials
    from spark_jobs.reading.prepare import load

    half = 2**62 // 3  # 2 · 3 rows · half < 2^63 <= 2 · 3 rows · (half + 2^61)
    cases = {
        "bounded, no nulls": ([half, -half, half], {"_n", "_s__v_0"}),
        "bounded, nulls": ([half, None, -half], {"_n", "_n__v_0", "_s__v_0"}),
        "unbounded, no nulls": ([half + 2**61, 5, -(half + 2**61)], {"_n", "_h__v_0", "_l__v_0"}),
        "unbounded, nulls": ([half + 2**61, None, -(half + 2**61)], {"_n", "_n__v_0", "_h__v_0", "_l__v_0"}),
    }
    for name, (values, columns) in cases.items():
        path = tmp_path / f"{name}.parquet"
        pd.DataFrame({"cell": ["a", "a", "b"], "start": [0, 100, 200], "end": [500, 700, 900],
                      "v": pd.array(values, dtype="Int64")}).to_parquet(path, index=False)  # fmt: skip
        query = WindowQuery(600, 200, 0, ["count", "sum:v", "mean:v"])
        cfg = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=["cell"]), query)
        prepared = load(spark, cfg)
        assert {c.name for c in _partials(prepared.aggregates(query), prepared)[1]} == columns, name
        windows = {}
        for plan in ("explode", "vector", "python"):
            run = RunConfig(cfg.inputs, cfg.events, query, spark=SparkOptions(plan=plan))
            windows[plan] = sorted(map(tuple, compute(spark, run).windows.collect()), key=repr)
        assert len({tuple(w) for w in windows.values()}) == 1 and windows["python"], name
    path = tmp_path / "overflow.parquet"
    pd.DataFrame({"cell": ["a", "a"], "start": [0, 100], "end": [500, 700],
                  "v": pd.array([2**62 + 1, 2**62], dtype="Int64")}).to_parquet(path, index=False)  # fmt: skip
    for plan in ("explode", "vector"):
        run = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=["cell"]),
                        WindowQuery(600, 200, 0, ["sum:v"]), spark=SparkOptions(plan=plan))  # fmt: skip
        with pytest.raises(Exception, match="exceeds the 64-bit range") as err:
            compute(spark, run).windows.collect()
        assert "'v'" in str(err.value) and str(SumOverflowError("v")).split(":")[0] in str(err.value)



def test_the_python_plan_s_workers_are_warmed_as_the_session_starts_with_what_its_tasks_import(tmp_path, monkeypatch):
    """A query that only the Python plan runs (sketches, sets) starts its workers' warm-up as soon as the session
    is up (``compute.warm_vector_workers``), with the modules of ``python_plan_modules``; a query whose plan depends
    on the input starts none there. Those modules are all that the Python plan's tasks import: in a fresh
    interpreter that imported them, the tasks' own function (``SortedStreamAggregator`` over a sorted chunk,
    as ``spark_jobs.batch.windowed``'s ``process`` builds it) imports nothing more of the engine, pandas, pyarrow,
    numba or DataSketches."""
    import subprocess
    import sys

    from spanning.app.files import input_files
    from spark_jobs.batch import compute

    path = tmp_path / "calls.parquet"
    pd.DataFrame({"cell": [1, 2], "start": [0, 5], "end": [50, 70], "v": [3, 4], "f": [0.5, 2.0]}).to_parquet(path)

    def cfg(aggregates, plan="auto"):
        return RunConfig.from_parameters(dict(inputs=[str(path)], output=str(tmp_path / "out"), range=900, slide=60,
                                              ttp=600, start="start", end="end", keys=["cell"], plan=plan,
                                              aggregates=aggregates))  # fmt: skip

    warmed = []
    monkeypatch.setattr(compute, "warm_python_workers", lambda spark, modules: warmed.append(modules))
    monkeypatch.setattr(compute, "ship_engine", lambda spark: None)
    monkeypatch.setattr(compute.session_kind, "master", lambda spark: "local[2]")
    monkeypatch.setattr(compute.session_kind, "is_connect", lambda spark: False)
    inputs = input_files([str(path)])
    sketches = ["count", "approx_count_distinct:v", "approx_percentile:f:0.95"]
    assert compute.warm_vector_workers(None, cfg(sketches), inputs)
    assert compute.warm_vector_workers(None, cfg(["count", "sum:v"], plan="python"), inputs)
    assert not compute.warm_vector_workers(None, cfg(["count", "sum:v"]), inputs)  # a small file: explode, no Python
    assert warmed == [compute.python_plan_modules(cfg(sketches)), compute.PYTHON_MODULES]
    assert "datasketches" in warmed[0]
    # local CSV files whose byte ranges vector's tasks read (csv_reads_itself): warmed with the CSV range modules too
    csv_path = tmp_path / "calls.csv"
    pd.read_parquet(path).to_csv(csv_path, index=False)
    csv_cfg = cfg(["count", "sum:v"], plan="vector")
    csv_cfg.inputs.paths = [str(csv_path)]
    csv_inputs = input_files([str(csv_path)])
    assert compute.warm_vector_workers(None, csv_cfg, csv_inputs)
    assert warmed[-1] == compute.VECTOR_MODULES + compute.CSV_MODULES
    # the same choice before the session exists (what spanning run's worker daemon imports: session.get_session)
    assert compute.planned_worker_modules(csv_cfg, csv_inputs, "local[*]") == warmed[-1]
    assert compute.planned_worker_modules(cfg(sketches), inputs, "local[*]") == warmed[0]
    assert compute.planned_worker_modules(cfg(["count", "sum:v"]), inputs, "local[*]") == ()
    assert compute.planned_worker_modules(csv_cfg, csv_inputs, "yarn") == ()  # executors elsewhere: the JVM reads
    # what the worker daemon imports before it forks: vector's modules only, not the Python plan's
    assert compute.daemon_modules(csv_cfg, csv_inputs, "local[*]") == warmed[-1]
    assert compute.daemon_modules(cfg(sketches), inputs, "local[*]") == ()
    monkeypatch.setattr(compute.session_kind, "is_connect", lambda spark: True)  # Connect: the JVM reads the CSV
    assert not compute.warm_vector_workers(None, csv_cfg, csv_inputs)

    code = f"""
import importlib, sys
modules = {list(warmed[0])!r}
for name in modules:
    getattr(importlib.import_module(name), "warm_up", lambda: None)()
import numpy as np, pandas as pd
before = set(sys.modules)
from spanning.engines.engine import build_aggregates
from spanning.engines.params import ChunkColumns
from spanning.engines.streams import SortedStreamAggregator
from spanning.kernels.windows import WindowSpec
names, aggs = build_aggregates({{"n": "count", "d": "approx_count_distinct:v", "p": "approx_percentile:f:0.95"}})
rng = np.random.default_rng(3)
start = np.sort(rng.integers(0, 5_000, 3_000))
chunk = pd.DataFrame({{"cell": np.repeat([1, 2], 1_500), "start": start, "end": start + rng.integers(1, 900, 3_000),
                      "seq": np.arange(3_000), "v": rng.integers(0, 2_000, 3_000), "f": rng.random(3_000)}})
chunk = chunk.sort_values(["cell", "end", "seq"], kind="stable").reset_index(drop=True)
stream = SortedStreamAggregator(WindowSpec(900, 60), aggs, names, ["cell"], columns=ChunkColumns())
windows = [stream.feed(chunk)[0], stream.finish()[0]]
assert sum(len(w) for w in windows) > 0
heavy = ("spanning", "spark_jobs", "pandas", "pyarrow", "numba", "datasketches", "_datasketches")
print(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in heavy))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout
