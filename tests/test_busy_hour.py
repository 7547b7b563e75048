"""``spanning busy-hour``: the busiest hour per key and day, and the time-consistent busy hour, worked by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from spanning.cli import main

CALLS = pd.DataFrame([
    ("a", "2024-03-04 10:00:00", "2024-03-04 10:40:00"),
    ("a", "2024-03-04 10:20:00", "2024-03-04 11:00:00"),
    ("a", "2024-03-05 18:00:00", "2024-03-05 19:00:00"),
    ("b", "2024-03-04 10:00:00", "2024-03-04 10:10:00"),
    ("b", "not a time", "2024-03-04 10:10:00"),
], columns=["cell", "start", "end"])  # fmt: skip


def _busy_hour(tmp_path, *extra):
    CALLS.to_csv(tmp_path / "calls.csv", index=False)
    argv = ["busy-hour", str(tmp_path / "calls.csv"), "--start", "start", "--end", "end", "--key", "cell",
            "--output", str(tmp_path / "out"), *extra]  # fmt: skip
    return main(argv)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_the_busy_hours_of_a_hand_worked_file(tmp_path, capsys, fmt):
    assert _busy_hour(tmp_path, "--format", fmt) == 0
    out = tmp_path / "out"
    assert "read 5 rows: 4 accepted, 1 rejected; 3 busy hours of 2 keys" in capsys.readouterr().out
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    daily = read(out / f"busy_hours.{fmt}")
    starts = pd.to_datetime(daily["busy_hour_start"], utc=True).dt.strftime("%m-%d %H:%M").tolist()
    # a: [10:00, 11:00) holds both calls whole, 80 minutes: 4/3 Erlang, 2 at once (its neighbours hold 65)
    # a, day 2: the hour of its one call; b: its 10-minute call lies whole in [09:15, 10:15) .. [10:00, 11:00):
    # equal, the earliest wins
    assert list(zip(daily["cell"], starts, strict=True)) == [("a", "03-04 10:00"), ("a", "03-05 18:00"),
                                                             ("b", "03-04 09:15")]  # fmt: skip
    assert [round(e, 12) for e in daily["erlang"]] == [round(80 / 60, 12), 1.0, round(10 / 60, 12)]
    assert daily["peak_concurrent"].tolist() == [2, 1, 1]
    # the day's traffic over 24 hours: each call's minutes once
    for got, minutes in zip(daily["day_mean_erlang"], [80, 60, 10], strict=True):
        assert math.isclose(got, minutes / 1440, rel_tol=1e-12)
    consistent = read(out / f"consistent_busy_hour.{fmt}")
    # a, at 10:00: 4/3 on day 1 and 0 on day 2, mean 2/3; at 18:00: 0 and 1, mean 1/2
    assert consistent["cell"].tolist() == ["a", "b"] and consistent["clock_time"].tolist() == ["10:00", "09:15"]
    assert math.isclose(consistent["mean_erlang"].iloc[0], 2 / 3) and consistent["days"].iloc[0] == 2
    assert (out / "busy_hour.png").stat().st_size > 0
    assert len(pd.read_parquet(out / "rejected")) == 1


def test_days_and_clock_times_are_the_timezone_s(tmp_path):
    assert _busy_hour(tmp_path, "--timezone", "Asia/Kolkata") == 0  # text times read in +05:30 too
    daily = pd.read_parquet(tmp_path / "out" / "busy_hours.parquet")
    local = pd.to_datetime(daily["busy_hour_start"]).dt.tz_convert("Asia/Kolkata").dt.strftime("%H:%M")
    assert local.tolist() == ["10:00", "18:00", "09:15"]  # the same hours, as the zone reads them
    consistent = pd.read_parquet(tmp_path / "out" / "consistent_busy_hour.parquet")
    assert consistent["clock_time"].tolist() == ["10:00", "09:15"]


def test_a_step_longer_than_the_hour_is_refused(tmp_path, capsys):
    assert _busy_hour(tmp_path, "--step", "2h") == 2
    assert "--step (2h) is longer than --hour (60m)" in capsys.readouterr().err


def test_it_runs_on_the_bundled_sample(tmp_path, capsys):
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "data" / "sample_cdr.csv"
    argv = ["busy-hour", str(sample), "--start", "start", "--end", "end", "--key", "cell", "--output",
            str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    daily = pd.read_parquet(tmp_path / "out" / "busy_hours.parquet")
    windows = pd.read_parquet(tmp_path / "out" / "windows")
    assert daily["cell"].nunique() == windows["cell"].nunique() > 10
    best = windows.groupby("cell")["erlang"].max()  # every key's best day holds its best window of all
    assert (daily.groupby("cell")["erlang"].max() == best[daily.groupby("cell")["erlang"].max().index]).all()
    assert (daily["peak_concurrent"] >= 1).all() and (daily["erlang"] >= daily["day_mean_erlang"]).all()
