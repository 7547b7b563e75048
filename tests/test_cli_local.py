"""``spanning run --engine local`` (no JVM): input formats, --duration, --point-events, CSV output, errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import spanning
from spanning.app.cdr import generate_cdr
from spanning.app.jobspec import UsageError, parse_duration
from spanning.cli import main

CALLS = pd.DataFrame(
    {
        "cell": ["a", "a", "b", "a"],
        "t0": [0, 100, 50, 400],
        "t1": [300, 100, 700, 450],
        "bytes": [10, 20, 30, None],
    }
)
BASE = ["--range", "10m", "--slide", "5m", "--ttp", "1h", "--key", "cell", "--engine", "local"]


def expected(frame: pd.DataFrame, **kw) -> pd.DataFrame:
    out = spanning.aggregate(frame, 600, 300, 3600, start="t0", end="t1", key="cell", series_start="earliest", **kw)
    out.attrs.pop("late")
    return out[out["count"] > 0].reset_index(drop=True)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_input_formats_give_the_same_windows(tmp_path, fmt):
    path = tmp_path / f"calls.{fmt}"
    {"csv": CALLS.to_csv, "parquet": CALLS.to_parquet, "json": CALLS.to_json}[fmt](
        path, index=False, **({"orient": "records", "lines": True} if fmt == "json" else {})
    )
    out = tmp_path / "out"
    assert main(["run", str(path), *BASE, "--start", "t0", "--end", "t1", "--agg", "count", "--agg", "sum:bytes",
                 "--output", str(out)]) == 0  # fmt: skip
    got = pd.read_parquet(out / "windows")
    want = expected(
        CALLS.sort_values(["cell", "t1"], kind="stable"), aggregates={"count": "count", "sum_bytes": "sum:bytes"}
    )
    assert (
        got[["cell", "window_start", "count"]].values.tolist()
        == want[["cell", "window_start", "count"]].values.tolist()
    )
    assert got["sum_bytes"].fillna(-1).tolist() == want["sum_bytes"].fillna(-1).tolist()
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rows_read"], summary["rejected"]) == (4, 0)


def test_duration_point_events_and_csv_output(tmp_path):
    path = tmp_path / "calls.csv"
    CALLS.assign(length=CALLS["t1"] - CALLS["t0"]).to_csv(path, index=False)
    assert main(["run", str(path), *BASE, "--start", "t0", "--duration", "length", "--format", "csv",
                 "--output", str(tmp_path / "d")]) == 0  # fmt: skip
    by_duration = pd.read_csv(next((tmp_path / "d" / "windows").glob("*.csv")))
    want = expected(CALLS.sort_values(["cell", "t1"], kind="stable"), aggregates={"count": "count"})
    assert (
        by_duration[["cell", "window_start", "count"]].values.tolist()
        == want[["cell", "window_start", "count"]].values.tolist()
    )

    assert main(["run", str(path), *BASE, "--start", "t0", "--point-events", "--output", str(tmp_path / "p")]) == 0
    points = pd.read_parquet(tmp_path / "p" / "windows")
    as_points = CALLS.assign(t1=CALLS["t0"]).sort_values(["cell", "t0"], kind="stable")
    want = expected(as_points, aggregates={"count": "count"})
    assert (
        points[["cell", "window_start", "count"]].values.tolist()
        == want[["cell", "window_start", "count"]].values.tolist()
    )
    assert points["count"].sum() == 2 * 4  # each point lies in two 10-minute windows sliding by 5


def test_generated_cdr_with_timestamps(tmp_path):
    path = tmp_path / "cdr.csv"
    assert main(["generate-cdr", str(path), "--rows", "3000", "--bad-share", "0.02", "--seed", "4"]) == 0
    out = tmp_path / "out"
    assert main(["run", str(path), *BASE[:6], "--key", "cell", "--engine", "local", "--start", "start", "--end", "end",
                 "--agg", "count", "--agg", "max:duration", "--output", str(out)]) == 0  # fmt: skip
    windows = pd.read_parquet(out / "windows")
    assert pd.api.types.is_datetime64_any_dtype(windows["window_start"])  # timestamps in, timestamps out
    summary = json.loads((out / "summary.json").read_text())
    rejected = pd.read_parquet(out / "rejected")
    assert summary["rows_read"] == 3000 == summary["accepted"] + len(rejected)
    assert set(rejected["reason"]) <= {
        "start is null or not a time", "end is null or not a time", "end is before start",
        "non-numeric value in column duration",
    }  # fmt: skip
    assert len(rejected) > 0
    assert generate_cdr(10, seed=1).equals(generate_cdr(10, seed=1))  # the generator is deterministic


def test_durations_and_usage_errors(tmp_path, capsys):
    assert [parse_duration(d) for d in ("900", "90s", "15m", "2h", "1d")] == [900, 90, 900, 7200, 86400]
    assert parse_duration("1500ms", "ms") == 1500
    with pytest.raises(UsageError, match="not a whole number of s"):
        parse_duration("1500ms")
    path = tmp_path / "calls.csv"
    CALLS.to_csv(path, index=False)
    cases = [
        (["--start", "t0", "--output", str(tmp_path / "a")], "give exactly one of --end and --duration"),
        (["--start", "t0 + 1", "--end", "t1", "--output", str(tmp_path / "b")], "--engine local takes column names"),
        (
            ["--start", "t0", "--end", "t1", "--agg", "median:bytes", "--output", str(tmp_path / "c")],
            "unknown aggregate",
        ),
        (["--start", "t0", "--end", "t1", "--height", "0", "--output", str(tmp_path / "d")], "bad --height '0'"),
    ]
    for args, message in cases:
        assert main(["run", str(path), *BASE, *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_point_events_through_a_swag(tmp_path, capsys):
    path = tmp_path / "calls.csv"
    CALLS.to_csv(path, index=False)
    args = ["run", str(path), *BASE, "--start", "t0", "--point-events", "--agg", "count", "--agg", "max:bytes"]
    assert main([*args, "--output", str(tmp_path / "plain")]) == 0
    assert main([*args, "--swag", "daba-lite", "--output", str(tmp_path / "daba")]) == 0
    assert pd.read_parquet(tmp_path / "plain" / "windows").equals(pd.read_parquet(tmp_path / "daba" / "windows"))
    capsys.readouterr()
    assert main([*args[:-2], "--agg", "sum:bytes", "--swag", "soe", "--output", str(tmp_path / "soe")]) == 2
    assert "needs invertible aggregates" in capsys.readouterr().err
    assert (
        main(
            ["run", str(path), *BASE, "--start", "t0", "--end", "t1", "--swag", "daba", "--output", str(tmp_path / "x")]
        )
        == 2
    )
    assert "give --point-events too" in capsys.readouterr().err


def test_window_option_errors(tmp_path, capsys):
    path = tmp_path / "calls.csv"
    CALLS.to_csv(path, index=False)
    base = ["run", str(path), "--start", "t0", "--end", "t1", "--engine", "local"]
    assert main([*base, "--window", "10m/5m", "--range", "10m", "--output", str(tmp_path / "a")]) == 2
    assert "either --window" in capsys.readouterr().err
    assert main([*base, "--window", "10m", "--output", str(tmp_path / "b")]) == 2
    assert "write RANGE/SLIDE" in capsys.readouterr().err
    assert main([*base, "--output", str(tmp_path / "c")]) == 2
    assert "give --range and --slide" in capsys.readouterr().err
    assert main([*base, "--window", "10m/5m", "--window", "20m/10m", "--output", str(tmp_path / "d")]) == 0
    assert set(pd.read_parquet(tmp_path / "d" / "windows")["window"]) == {"600/300", "1200/600"}
    shared = [*base, "--window", "10m/5m", "--window", "20m/10m", "--technique", "se-ml-slicing", "--height", "2"]
    assert main([*shared, "--sharing", "weaveshare", "--output", str(tmp_path / "e")]) == 0
    assert pd.read_parquet(tmp_path / "e" / "windows").equals(pd.read_parquet(tmp_path / "d" / "windows"))


def test_the_command_exits_as_python_would_less_the_teardown(tmp_path):
    """``exit_now`` (the end of every ``spanning`` process): the exit code kept, threads that are not daemons
    joined, the exit handlers run and the standard streams flushed before the process ends; and
    ``python -m spanning.cli`` ends through it with the command's own code."""
    import os
    import subprocess
    import sys

    script = f"""
import atexit, pathlib, sys, threading, time
from spanning.cli import exit_now
folder = pathlib.Path({str(tmp_path)!r})
atexit.register(lambda: (folder / "handler").write_text("ran"))
def late():
    time.sleep(0.3)
    (folder / "thread").write_text("done")
threading.Thread(target=late).start()
sys.stdout.write("no newline, not flushed")
sys.stderr.write("to stderr")
exit_now(3)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the streams buffered, as usual
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 3
    assert ran.stdout == "no newline, not flushed" and ran.stderr == "to stderr"
    assert (tmp_path / "handler").read_text() == "ran" and (tmp_path / "thread").read_text() == "done"
    bad = subprocess.run([sys.executable, "-m", "spanning.cli", "run", str(tmp_path / "missing.csv"), *BASE],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("spanning: error:"), bad.stderr


def test_the_version_is_the_package_s(capsys):
    """``spanning --version`` names the version the package was built with (``spanning.__version__``, which the
    build reads too: pyproject.toml's version is dynamic)."""
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"spanning {spanning.__version__}" == f"spanning {version('spanning')}"
