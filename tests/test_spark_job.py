"""End-to-end tests of ``spanning run``: Spark job == aggregate() == oracle, rejections, errors.

Expected results are computed independently of the job: times parsed here with pandas, bad rows
dropped by the test's own rules, then ``spanning.aggregate`` on the rows in the job's arrival order
(by key, end, input order) and the brute-force oracle on a few keys.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import spanning
from spanning.app.cdr import CallMix, generate_cdr
from spanning.app.jobspec import RunConfig
from spanning.app.local_run import run_local
from spanning.cli import main
from tests.oracle import oracle

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_CDR = ROOT / "data" / "public_cdr_calls.csv"
AGGS = [
    "count",
    "sum:bytes",
    "max:duration",
    "mean:duration",
    "stddev:bytes",
    "argmax:duration:call_id",
    "mincount:duration",
]


def seconds(column: pd.Series) -> np.ndarray:
    return pd.to_datetime(column).to_numpy(dtype="datetime64[s]").astype(np.int64)


def read_output(path: Path) -> pd.DataFrame:
    frame = pd.read_parquet(path)
    for col in ("window_start", "window_end"):
        if col in frame and not pd.api.types.is_integer_dtype(frame[col]):
            frame[col] = seconds(frame[col])
    return frame


def assert_frames_match(got: pd.DataFrame, expected: pd.DataFrame, keys: list[str]) -> None:
    order = [*keys, "window_start"]
    got = got.sort_values(order).reset_index(drop=True)
    expected = expected.sort_values(order).reset_index(drop=True)
    assert len(got) == len(expected)
    for col in expected.columns:
        for i, (a, b) in enumerate(zip(got[col].tolist(), expected[col].tolist(), strict=True)):
            a = None if a is None or a is pd.NA or (isinstance(a, float) and math.isnan(a)) else a
            b = None if b is None or b is pd.NA or (isinstance(b, float) and math.isnan(b)) else b
            if isinstance(a, float) or isinstance(b, float):
                assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (
                    col,
                    i,
                    a,
                    b,
                )
            else:
                assert a == b, (col, i, a, b)


def sample_events(csv: Path) -> tuple[pd.DataFrame, set]:
    """The generated CDR file parsed by the test: usable events in the job's arrival order, and bad call ids."""
    raw = pd.read_csv(csv, keep_default_na=False, na_values=[""], dtype={"bytes": object})
    start = pd.to_datetime(raw["start"], errors="coerce", format="%Y-%m-%d %H:%M:%S")
    end = pd.to_datetime(raw["end"], errors="coerce", format="%Y-%m-%d %H:%M:%S")
    volume = pd.to_numeric(raw["bytes"], errors="coerce")
    bad = start.isna() | end.isna() | (end < start) | (raw["bytes"].notna() & volume.isna())
    good = raw[~bad].assign(
        start=seconds(start[~bad]), end=seconds(end[~bad]), bytes=volume[~bad].astype(float), row=np.flatnonzero(~bad)
    )
    good = good.sort_values(["cell", "end", "row"], kind="stable").reset_index(drop=True)
    return good, set(raw.loc[bad, "call_id"])


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cdr") / "cdr.csv"
    calls = generate_cdr(2500, seed=5, cells=12, subscribers=300, days=0.5, mix=CallMix(bad_share=0.03))
    calls.to_csv(path, index=False)
    return path


def config(inputs, output, **kw) -> RunConfig:
    """A job from flat parameters, as summary.json lists them."""
    defaults = dict(range=900, slide=300, ttp=1800, start="start", end="end", keys=["cell"], aggregates=AGGS)
    defaults.update(kw)
    return RunConfig.from_parameters(dict(inputs=[str(i) for i in inputs], output=str(output), master="local[2]",
                                          **defaults))  # fmt: skip


@pytest.fixture(scope="module")
def job(spark, sample, tmp_path_factory):
    from spark_jobs.command import run_spark

    output = tmp_path_factory.mktemp("job") / "out"
    summary = run_spark(config([sample], output))
    return summary, output


def test_job_equals_aggregate_and_oracle(job, sample):
    summary, output = job
    events, bad_ids = sample_events(sample)
    names = {spec.replace(":", "_"): spec for spec in AGGS}
    expected = spanning.aggregate(
        events, 900, 300, 1800, aggregates=names, key="cell", series_start="earliest"
    )  # ttp 30 min < the longest data sessions: some events are late
    late_expected = expected.attrs.pop("late")
    expected = expected[expected["count"] > 0]
    windows = read_output(output / "windows")
    assert list(windows.columns) == ["cell", "window_start", "window_end", *names]
    assert_frames_match(windows, expected, ["cell"])

    late = pd.read_parquet(output / "late")
    assert len(late_expected) > 0
    assert sorted(zip(late["call_id"], late["windows_missed"], strict=True)) == sorted(
        zip(late_expected["call_id"], late_expected["windows_missed"], strict=True)
    )
    for cell in sorted(events["cell"].unique())[:3]:  # the brute-force oracle on a few keys
        rows = events[events["cell"] == cell]
        stream = [
            (cell, int(r.start), int(r.end), {"bytes": r.bytes, "duration": r.duration, "call_id": r.call_id})
            for r in rows.itertuples()
        ]
        specs = {name: spec for name, spec in names.items() if not spec.startswith("argmax")}
        want, _ = oracle(stream, 900, 300, 1800, 0, specs, series_start=int(rows["start"].min()))
        want_windows = [(s, e, v) for s, e, v in want[cell] if v["count"]]
        got = windows[windows["cell"] == cell].sort_values("window_start")
        assert got["window_start"].tolist() == [s for s, _, _ in want_windows]
        for name in specs:
            for a, (_, _, v) in zip(got[name].tolist(), want_windows, strict=True):
                b = v[name]
                assert (
                    (a is None or a is pd.NA or (isinstance(a, float) and math.isnan(a)))
                    if b is None
                    else (math.isclose(a, b, rel_tol=1e-9))
                ), (cell, name, a, b)

    rejected = pd.read_parquet(output / "rejected")
    assert set(rejected["call_id"]) == bad_ids
    assert summary["rows_read"] == 2500 == summary["accepted"] + summary["rejected"]
    assert summary["rejected"] == len(bad_ids) and summary["late"] == len(late_expected)
    on_disk = json.loads((output / "summary.json").read_text())
    assert on_disk["rows_read"] == 2500 and on_disk["windows_written"] == len(expected)


def test_local_engine_equals_spark_job(job, sample, tmp_path):
    _, output = job
    summary = run_local(config([sample], tmp_path / "local", engine="local"))
    local, spark_windows = read_output(tmp_path / "local" / "windows"), read_output(output / "windows")
    assert_frames_match(local, spark_windows, ["cell"])
    assert summary["rejected"] == len(pd.read_parquet(output / "rejected"))


def test_rejected_rows_have_reasons_and_counts_reconcile(spark, tmp_path):
    from spark_jobs.command import run_spark

    csv = tmp_path / "calls.csv"
    csv.write_text(
        "call_id,cell,start,end,bytes\n"
        "1,a,2024-01-01 00:00:00,2024-01-01 00:10:00,100\n"
        "2,a,,2024-01-01 00:10:00,100\n"
        "3,a,2024-01-01 00:00:00,garbage,100\n"
        "4,a,2024-01-01 00:10:00,2024-01-01 00:00:00,100\n"
        "5,a,2024-01-01 00:00:00,2024-01-01 00:05:00,lots\n"
        "6,b,2024-01-01 00:01:00,2024-01-01 00:02:00,\n"
    )
    summary = run_spark(config([csv], tmp_path / "out", aggregates=["count", "sum:bytes"]))
    rejected = pd.read_parquet(tmp_path / "out" / "rejected")
    assert dict(zip(rejected["call_id"], rejected["reason"], strict=True)) == {
        2: "start is null or not a time",
        3: "end is null or not a time",
        4: "end is before start",
        5: "non-numeric value in column bytes",
    }
    assert rejected.loc[rejected["call_id"] == 5, "bytes"].tolist() == ["lots"]  # the row as read
    assert (summary["rows_read"], summary["accepted"], summary["rejected"]) == (6, 2, 4)
    windows = read_output(tmp_path / "out" / "windows")
    # 15-minute windows every 5: the call [00:00, 00:10) overlaps those starting at -10, -5, 0 and 5 minutes,
    # the call [00:01, 00:02) those starting at -10, -5 and 0
    assert windows.groupby("cell")["count"].sum().to_dict() == {"a": 4, "b": 3}
    assert windows.loc[windows["cell"] == "b", "sum_bytes"].isna().all()  # a null value is not a rejection


def test_a_second_job_in_the_session_reads_a_rewritten_file_again(spark, tmp_path):
    """The job caches the parsed rows of a text input for its passes and drops them after its writes: Spark's
    cache matches a later query by its plan, so a second job over the same path (rewritten) would see the old
    rows (found when the suite's temp folders were reused under pytest-xdist)."""
    from spark_jobs.command import run_spark

    cached_before = set(spark.sparkContext._jsc.getPersistentRDDs().keys())  # what earlier tests left
    csv = tmp_path / "calls.csv"
    header = "call_id,cell,start,end,bytes\n"
    csv.write_text(header + "1,a,2024-01-01 00:00:00,2024-01-01 00:10:00,100\n")
    run_spark(config([csv], tmp_path / "first", aggregates=["count", "sum:bytes"]))
    csv.write_text(header + "1,b,2024-01-01 00:00:00,2024-01-01 00:10:00,7\n2,b,2024-01-01 00:01:00,"
                            "2024-01-01 00:02:00,8\n")  # fmt: skip
    summary = run_spark(config([csv], tmp_path / "second", aggregates=["count", "sum:bytes"]))
    assert summary["rows_read"] == 2
    windows = read_output(tmp_path / "second" / "windows")
    assert set(windows["cell"]) == {"b"} and windows["sum_bytes"].max() == 15
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) <= cached_before, "nothing of the jobs stays"


def test_public_cdr_file(spark, tmp_path):
    """The messy public layout: split date/time columns, d/M/yyyy, calls across midnight."""
    from spark_jobs.command import run_spark

    start = "to_timestamp(concat(startDate, ' ', startTime), 'd/M/yyyy H:mm:ss')"
    end = "to_timestamp(concat(endDate, ' ', endTime), 'd/M/yyyy H:mm:ss')"
    aggs = ["count", "sum:Cost", "max:Cost"]
    summary = run_spark(
        config([PUBLIC_CDR], tmp_path / "out", range=3600, slide=900, ttp=7200, start=start, end=end,
               keys=["phoneNumber"], aggregates=aggs)
    )  # fmt: skip
    raw = pd.read_csv(PUBLIC_CDR, skipinitialspace=True)
    raw.columns = [c.strip() for c in raw.columns]
    events = raw.assign(
        start=seconds(pd.to_datetime(raw["startDate"] + " " + raw["startTime"], format="%d/%m/%Y %H:%M:%S")),
        end=seconds(pd.to_datetime(raw["endDate"] + " " + raw["endTime"], format="%d/%m/%Y %H:%M:%S")),
        row=np.arange(len(raw)),
    ).sort_values(["phoneNumber", "end", "row"], kind="stable")
    names = {a.replace(":", "_"): a for a in aggs}
    expected = spanning.aggregate(
        events.reset_index(drop=True), 3600, 900, 7200, aggregates=names, key="phoneNumber", series_start="earliest"
    )
    expected.attrs.pop("late")
    expected = expected[expected["count"] > 0]
    windows = read_output(tmp_path / "out" / "windows")
    assert_frames_match(windows, expected, ["phoneNumber"])
    assert summary["rows_read"] == len(raw) == 42238 and summary["rejected"] == 0
    for caller in sorted(events["phoneNumber"].unique())[:2]:
        rows = events[events["phoneNumber"] == caller]
        stream = [(caller, int(r.start), int(r.end), {"Cost": int(r.Cost)}) for r in rows.itertuples()]
        want, _ = oracle(stream, 3600, 900, 7200, 0, names, series_start=int(rows["start"].min()))
        got = windows[windows["phoneNumber"] == caller].sort_values("window_start")
        assert [(s, v["count"], v["sum_Cost"]) for s, _, v in want[caller] if v["count"]] == list(
            zip(got["window_start"], got["count"], got["sum_Cost"], strict=True)
        )


def run_cli(*args: str) -> int:
    return main(list(args))


def test_user_mistakes_give_one_line_errors(spark, sample, tmp_path, capsys, monkeypatch):
    COLUMNS = "call_id, caller, cell, type, start, end, duration, bytes"  # noqa: N806 (the sample's header)
    base = ["--range", "15m", "--slide", "5m", "--start", "start", "--end", "end", "--master", "local[2]"]
    cases = [
        ([str(tmp_path / "missing.csv"), *base, "--output", str(tmp_path / "o1")], "input not found"),
        ([str(sample), *base, "--key", "antenna", "--output", str(tmp_path / "o2")],
         f"unknown column 'antenna' in --key: the columns are {COLUMNS}"),  # from the header, before Spark
        ([str(sample), *base, "--key", "upper(antenna)", "--output", str(tmp_path / "o2e")],
         f"unknown column 'antenna' in --key 'upper(antenna)': the columns are {COLUMNS}"),  # Spark's, translated
        ([str(sample), *base, "--agg", "sum:volume", "--output", str(tmp_path / "o3")],
         f"unknown column 'volume' in --agg: the columns are {COLUMNS}"),
        ([str(sample), *base[:2], "--slide", "5x", *base[4:], "--output", str(tmp_path / "o4")], "bad duration '5x'"),
    ]
    for argv, message in cases:
        assert run_cli("run", *argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("spanning: error:") and message in err[0], err
        assert not Path(argv[argv.index("--output") + 1]).exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    assert run_cli("run", str(sample), *base, "--output", str(existing)) == 2
    assert "exists: give --overwrite" in capsys.readouterr().err
    assert run_cli("run", str(sample), *base, "--key", "antenna", "--output", str(tmp_path / "o5"), "--verbose") == 2
    assert "Traceback" in capsys.readouterr().err  # the trace only under --verbose
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert run_cli("run", str(sample), *base, "--output", str(tmp_path / "o6")) == 2
    assert "Java was not found" in capsys.readouterr().err


def test_se_ml_slicing_job_with_auto_height_equals_se_slicing(job, sample, tmp_path):
    from spark_jobs.command import run_spark

    _, output = job
    summary = run_spark(config([sample], tmp_path / "ml", technique="se-ml-slicing", height="auto"))
    assert summary["parameters"]["height"] >= 1
    assert_frames_match(read_output(tmp_path / "ml" / "windows"), read_output(output / "windows"), ["cell"])
    late = pd.read_parquet(tmp_path / "ml" / "late")
    assert sorted(late["call_id"]) == sorted(pd.read_parquet(output / "late")["call_id"])


def test_point_events_through_a_swag_on_spark(spark, sample, tmp_path):
    from spark_jobs.command import run_spark

    kwargs = dict(end=None, point_events=True, aggregates=["count", "max:duration"], swag="daba-lite")
    run_spark(config([sample], tmp_path / "spark", **kwargs))
    run_local(config([sample], tmp_path / "local", engine="local", **kwargs))
    assert_frames_match(
        read_output(tmp_path / "spark" / "windows"), read_output(tmp_path / "local" / "windows"), ["cell"]
    )


def test_several_windows_in_one_run(spark, sample, tmp_path):
    from spark_jobs.command import run_spark

    kwargs = dict(windows=[(900, 300), (3600, 900)], aggregates=["count", "sum:bytes"])
    run_spark(config([sample], tmp_path / "spark", **kwargs))
    run_local(config([sample], tmp_path / "local", engine="local", **kwargs))
    spark_windows, local_windows = (
        read_output(tmp_path / "spark" / "windows"),
        read_output(tmp_path / "local" / "windows"),
    )
    assert set(spark_windows["window"]) == {"900/300", "3600/900"}
    assert_frames_match(spark_windows, local_windows, ["cell", "window"])
    late = [pd.read_parquet(tmp_path / d / "late") for d in ("spark", "local")]
    assert sorted(zip(late[0]["call_id"], late[0]["window"], strict=True)) == sorted(
        zip(late[1]["call_id"], late[1]["window"], strict=True)
    )


@pytest.mark.parametrize("times", ["timestamps", "integers"])
def test_vector_reading_parquet_itself_gives_the_jvm_plans_outputs(spark, tmp_path, times):
    """Bad rows (null start, null end, end before start, an infinite value), NaN and null values, a null key,
    late events, several row groups of one key: ``--plan vector``, whose tasks read the row groups themselves,
    writes the same windows, rejected and late rows and counts as ``--plan explode``, which reads through Spark."""
    from spark_jobs.command import run_spark

    rng = np.random.default_rng(7)
    n = 400
    starts = np.sort(rng.integers(0, 20_000, n))
    ends = starts + rng.integers(0, 2_000, n)
    ends[::37] = starts[::37] - 5  # end before start
    frame = pd.DataFrame({
        "cell": pd.array(rng.choice([10, 11, 12], n), dtype="Int64") if times == "integers"
        else rng.choice(["a", "b", "c"], n).astype(object),
        "start": pd.array(starts, dtype="Int64"), "end": pd.array(ends, dtype="Int64"),
        "bytes": pd.array(rng.integers(0, 10**6, n), dtype="Int64"), "duration": rng.random(n) * 100,
    })  # fmt: skip
    frame.loc[5, "start"] = pd.NA
    frame.loc[9, "end"] = pd.NA
    frame.loc[13, "duration"] = np.inf
    frame.loc[17, "duration"] = np.nan
    frame.loc[21, "bytes"] = pd.NA
    frame.loc[25, "cell"] = None
    frame = frame.iloc[rng.permutation(n)]  # out of end order: late events
    if times == "timestamps":
        for c in ("start", "end"):
            frame[c] = pd.to_datetime(frame[c].astype("float64"), unit="s", utc=True).astype("datetime64[us, UTC]")
    path = tmp_path / "calls.parquet"
    frame.to_parquet(path, index=False, row_group_size=64)
    series = {} if times == "timestamps" else {"series_start": 3_000}
    outputs = {}
    for plan in ("vector", "explode"):
        cfg = config([path], tmp_path / plan, range=900, slide=60, ttp=300, plan=plan,
                     aggregates=["count", "sum:bytes", "max:duration", "mean:duration"], **series)  # fmt: skip
        summary = run_spark(cfg)
        written = {name: pd.read_parquet(tmp_path / plan / name) for name in ("windows", "rejected", "late")}
        outputs[plan] = summary, written
    (vector, read), (explode, through_spark) = outputs["vector"], outputs["explode"]
    assert vector["plans"][0]["reads_input"] and not explode["plans"][0]["reads_input"]
    assert vector["rejected"] == len(range(0, n, 37)) + 3  # reversed; null start, null end, infinite duration
    for count in ("rows_read", "accepted", "rejected", "late", "windows_written"):
        assert vector[count] == explode[count], count
    assert vector["late"] > 0
    for name, key in (("windows", ["cell", "window_start"]), ("rejected", ["start", "end", "bytes"]),
                      ("late", ["start", "end", "bytes"])):  # fmt: skip
        a, b = (frame_.sort_values(key, na_position="first").reset_index(drop=True)
                for frame_ in (read[name], through_spark[name]))  # fmt: skip
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_vector_reads_parquet_itself_only_where_its_columns_are_plain(spark, tmp_path):
    """Expressions, a duration, a series from each key's first event, CSV input and decimal values go through
    Spark's reader (``read_plan`` is None); plain columns of local Parquet are read by the tasks."""
    from decimal import Decimal

    from spark_jobs.batch.plans import read_plan
    from spark_jobs.reading.prepare import load

    frame = pd.DataFrame({"cell": ["a", "b"], "start": [0, 10], "end": [5, 30], "bytes": [1, 2],
                          "price": [Decimal("1.5")] * 2})  # fmt: skip
    frame.to_parquet(tmp_path / "calls.parquet", index=False)
    frame.to_csv(tmp_path / "calls.csv", index=False)
    parquet, csv = tmp_path / "calls.parquet", tmp_path / "calls.csv"

    def plan_of(inputs, **kw):
        cfg = config([inputs], tmp_path / "out", **{"aggregates": ["count", "sum:bytes"], **kw})
        return read_plan(load(spark, cfg), cfg)

    assert plan_of(parquet) is not None
    assert plan_of(parquet).keys == ["cell"] and plan_of(parquet, keys=[]).keys == []
    assert plan_of(csv) is None
    assert plan_of(parquet, start="start + 1") is None
    assert plan_of(parquet, keys=["upper(cell)"]) is None
    assert plan_of(parquet, end=None, duration="end") is None
    assert plan_of(parquet, series_start="first") is None
    assert plan_of(parquet, aggregates=["sum:price"]) is None
