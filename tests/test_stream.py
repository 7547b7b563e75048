"""``spanning stream`` on Structured Streaming: a drained stream equals ``spanning run`` and the oracle; late
rows are reported, never dropped; windows are released on the key's clock, by --idle-flush and at the end;
a crash (an exception, or a hard kill of the process group) and a restart give the same output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spanning.app.jobspec import UsageError
from spanning.app.stream_command import StreamOptions
from tests.oracle import oracle
from tests.streams import assert_same_windows, frame_windows

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample_cdr.csv"
QUERY = ["--range", "15m", "--slide", "5m", "--ttp", "10m", "--start", "start", "--end", "end", "--key", "cell",
         "--agg", "count", "--agg", "sum:bytes", "--agg", "max:duration"]  # fmt: skip
AGGS = {"count": "count", "sum_bytes": "sum:bytes", "max_duration": "max:duration"}
# one processor since 2026-11-26 (--processor is a no-op; jvm was removed): the tests keep the parameter so that a
# second processor, should one come, runs every test
PROCESSORS = ["python"]
# where a batch is reduced (--reduce-on): the tests that check the oracle, two rounds and a replay run both; a local
# master's default (auto) is the driver
REDUCERS = ["executors", "driver"]


def drop_files(folder: Path, frames: list[pd.DataFrame], first: int = 0) -> None:
    """One CSV file per frame, landing in name order (the file source takes them by modification time); the
    files of a later drop are numbered from ``first``, and land after the earlier ones."""
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time() - 1000
    for i, frame in enumerate(frames, start=first):
        temp = folder.parent / f".part-{i:03d}.csv"
        frame.to_csv(temp, index=False)
        target = folder / f"cdr-{i:03d}.csv"
        os.replace(temp, target)  # whole files only: written elsewhere, renamed in
        os.utime(target, (now + i, now + i))


def by_end(frame: pd.DataFrame, pieces: int) -> list[pd.DataFrame]:
    """The sample cut into ``pieces`` files by end time (unparseable ends last), so that files arrive in order."""
    ends = pd.to_datetime(frame["end"], errors="coerce")
    ordered = frame.assign(_e=ends).sort_values("_e", kind="stable", na_position="last").drop(columns="_e")
    return [ordered.iloc[rows] for rows in np.array_split(np.arange(len(ordered)), pieces)]


def seconds(column: pd.Series) -> pd.Series:
    """Timestamps as epoch seconds."""
    return (pd.to_datetime(column, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)


def stream_cli(*args: str) -> int:
    from spanning.cli import main

    return main(["stream", *args])


def read_folder(path: Path) -> pd.DataFrame:
    parts = sorted(path.glob("batch=*/*.parquet"))
    if not parts:
        return pd.DataFrame()
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def windows_of(output: Path) -> pd.DataFrame:
    frame = read_folder(output / "windows")
    if frame.empty:
        return frame
    return frame.sort_values(["cell", "window_start"]).reset_index(drop=True)


def late_of(output: Path) -> pd.DataFrame:
    frame = read_folder(output / "late")
    if frame.empty:
        return frame
    return frame.sort_values(["call_id"]).reset_index(drop=True)


def run_batch_job(inputs: Path, output: Path) -> None:
    from spanning.cli import main

    assert main(["run", str(inputs), *QUERY, "--series-start", "first", "--engine", "local",
                 "--output", str(output)]) == 0  # fmt: skip


def summary_of(output: Path) -> dict:
    import json

    return json.loads((output / "summary.json").read_text())


@pytest.fixture(scope="module", params=PROCESSORS)
def in_order(spark, tmp_path_factory, request):
    """The bundled sample as 6 files in end order, streamed one file per trigger, and the batch job on them."""
    base = tmp_path_factory.mktemp(f"stream-in-order-{request.param}")
    drop_files(base / "in", by_end(pd.read_csv(SAMPLE, dtype=str, keep_default_na=False), 6))
    assert stream_cli(str(base / "in"), "--output", str(base / "out"), "--checkpoint", str(base / "chk"), *QUERY,
                      "--max-files-per-trigger", "1", "--master", "local[2]", "--drain",
                      "--processor", request.param, "--reduce-on", "executors") == 0  # fmt: skip
    run_batch_job(base / "in", base / "batch")
    return base


def test_drained_stream_equals_the_batch_job(in_order):
    stream, batch = windows_of(in_order / "out"), pd.read_parquet(in_order / "batch" / "windows")
    batch = batch.sort_values(["cell", "window_start"]).reset_index(drop=True)
    assert len(stream) > 1000
    pd.testing.assert_frame_equal(stream[batch.columns.tolist()], batch, check_dtype=False)
    late, batch_late = late_of(in_order / "out"), pd.read_parquet(in_order / "batch" / "late")
    assert late["call_id"].tolist() == sorted(batch_late["call_id"].tolist())
    assert late["windows_missed"].tolist() == batch_late.sort_values("call_id")["windows_missed"].tolist()
    summary, batch_summary = summary_of(in_order / "out"), summary_of(in_order / "batch")
    assert summary["batches"] >= 7  # one per file, and the final flush
    for name in ("rows_read", "rejected", "late"):
        assert summary[name] == batch_summary[name], name
    rejected = read_folder(in_order / "out" / "rejected")
    assert len(rejected) == summary["rejected"] > 0 and rejected["reason"].notna().all()
    assert summary["rows_read"] == 20_000, "every row read is an event or a rejected row"
    assert summary["rows_dropped_by_spark"] == 0
    triggers = summary["trigger_seconds"]  # Spark's time of each batch: 6 files, one per batch, and the drain's
    assert sorted(map(int, triggers)) == list(range(7)) and all(t > 0 for t in triggers.values())

    # and the brute-force oracle, on the three busiest cells, over the rows the stream did not reject
    sample = pd.read_csv(SAMPLE, dtype=str, keep_default_na=False)
    usable = sample[~sample["call_id"].isin(rejected["call_id"].astype(str))]
    cells = usable["cell"].value_counts().index[:3].tolist()
    events = oracle_events([usable[usable["cell"].isin(cells)]])
    expected, expected_late = oracle(events, 900, 300, 600, 0, AGGS)
    got = stream[stream["cell"].isin(cells)]
    got = got.assign(window_start=seconds(got["window_start"]), window_end=seconds(got["window_end"]))
    assert_same_windows(frame_windows(got, AGGS, key="cell"), {k: [w for w in ws if w[2]["count"]]
                                                                for k, ws in expected.items()})  # fmt: skip
    late_cells = late[late["call_id"].astype(str).isin(usable.loc[usable["cell"].isin(cells), "call_id"])]
    assert dict(zip(late_cells["call_id"].astype(str), late_cells["windows_missed"], strict=True)) == {
        events[seq][3]["call_id"]: n for seq, n in expected_late.items()}


def _number(value: float) -> int | None:
    return None if pd.isna(value) else int(value)


def oracle_events(frames: list[pd.DataFrame]) -> list:
    """The arrival order of a stream of ``frames``: file after file, each file's calls in end order (per key)."""
    events = []
    for frame in frames:
        start = pd.to_datetime(frame["start"]).astype("int64") // 10**9
        end = pd.to_datetime(frame["end"]).astype("int64") // 10**9
        part = frame.assign(t_start=start.to_numpy(), t_end=end.to_numpy(),
                            v_bytes=pd.to_numeric(frame["bytes"], errors="coerce"),
                            v_duration=pd.to_numeric(frame["duration"], errors="coerce"))  # fmt: skip
        part = part.assign(arrives=np.where(part["t_end"] > part["t_start"], part["t_end"], part["t_start"] + 1))
        part = part.sort_values(["arrives"], kind="stable")
        events += [(r.cell, int(r.t_start), int(r.t_end), {"bytes": _number(r.v_bytes),
                                                            "duration": _number(r.v_duration), "call_id": r.call_id})
                   for r in part.itertuples()]  # fmt: skip
    return events


def clean_calls(n: int, seed: int) -> pd.DataFrame:
    """Valid calls only (the oracle knows no rejection), over 4 cells and 6 hours."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-03-04").value // 10**9 + rng.integers(0, 6 * 3600, n)
    duration = np.where(rng.random(n) < 0.1, rng.integers(0, 7200, n), rng.integers(0, 600, n))
    as_text = lambda t: pd.to_datetime(t, unit="s").strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    return pd.DataFrame({"call_id": np.arange(n).astype(str), "cell": [f"cell-{i}" for i in rng.integers(0, 4, n)],
                         "start": as_text(start), "end": as_text(start + duration), "duration": duration.astype(str),
                         "bytes": rng.integers(0, 10**6, n).astype(str)})  # fmt: skip


def test_integer_keys_past_2_53_beside_null_keys_stay_exact_in_every_engine(spark, tmp_path):
    """Keys 2**62 + 1 and 2**62 + 3 beside null keys, in a Parquet int64 column: pandas' ``to_pandas`` makes such
    a column float64, which would make the two keys one. ``spanning run`` with each engine and the stream (one
    bucket: the driver reduces every key in one frame) each give the oracle's windows, their keys exact."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from spanning.cli import main

    rng = np.random.default_rng(11)
    n = 90
    start = 1_709_510_400 + rng.integers(0, 6 * 3600, n)
    end = start + rng.integers(0, 900, n)
    keys = [2**62 + 1, 2**62 + 3, None] * (n // 3)
    moved = rng.integers(0, 10**6, n)
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"cell": pa.array(keys, pa.int64()), "start": start, "end": end, "bytes": moved}),
                   tmp_path / "in" / "calls.parquet")  # fmt: skip
    query = ["--range", "15m", "--slide", "5m", "--ttp", "1d", "--start", "start", "--end", "end", "--key", "cell",
             "--agg", "count", "--agg", "sum:bytes"]  # fmt: skip
    events = [(k, int(s), int(e), {"bytes": int(b)}) for k, s, e, b in zip(keys, start, end, moved, strict=True)]
    events.sort(key=lambda event: max(event[2], event[1] + 1))  # arrival order: each key's series starts there
    every, _ = oracle(events, 900, 300, 86_400, 0, {"count": "count", "sum_bytes": "sum:bytes"})
    expected = {key: [w for w in rows if w[2]["count"]] for key, rows in every.items()}  # empty windows: skipped

    def windows(folder: Path) -> dict:
        got: dict = {}
        for row in ds.dataset(folder, partitioning="hive").to_table().to_pylist():  # no pandas: keys as written
            got.setdefault(row["cell"], []).append(
                (row["window_start"], row["window_end"], {"count": row["count"], "sum_bytes": row["sum_bytes"]}))
        return {key: sorted(rows, key=lambda r: r[0]) for key, rows in got.items()}

    for engine in ("local", "spark"):
        assert main(["run", str(tmp_path / "in"), *query, "--engine", engine, "--output", str(tmp_path / engine)]) == 0
        assert windows(tmp_path / engine / "windows") == expected, engine
    assert stream_cli(str(tmp_path / "in"), *query, "--output", str(tmp_path / "stream"), "--checkpoint",
                      str(tmp_path / "chk"), "--buckets", "1", "--master", "local[2]", "--drain") == 0  # fmt: skip
    assert windows(tmp_path / "stream" / "windows") == expected
    assert set(expected) == {2**62 + 1, 2**62 + 3, None}


@pytest.mark.parametrize("processor", PROCESSORS)
@pytest.mark.parametrize("reduce_on", REDUCERS)
def test_out_of_order_files_give_late_rows_as_the_oracle_says(spark, tmp_path, processor, reduce_on):
    calls = clean_calls(600, seed=7)
    ends = pd.to_datetime(calls["end"])
    frames = [calls[(ends >= lo) & (ends < hi)] for lo, hi in
              zip(pd.date_range("2024-03-04", periods=7, freq="2h")[:-1],
                  pd.date_range("2024-03-04", periods=7, freq="2h")[1:], strict=True)]  # fmt: skip
    frames = [frames[i] for i in (0, 2, 1, 4, 3, 5)]  # later files hold older calls
    drop_files(tmp_path / "in", frames)
    assert stream_cli(str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      *QUERY, "--max-files-per-trigger", "1", "--master", "local[2]", "--drain",
                      "--processor", processor, "--reduce-on", reduce_on) == 0  # fmt: skip
    events = oracle_events(frames)
    expected, expected_late = oracle(events, 900, 300, 600, 0, {"count": "count", "sum_bytes": "sum:bytes",
                                                                 "max_duration": "max:duration"})  # fmt: skip
    got = windows_of(tmp_path / "out")
    got = got.assign(window_start=seconds(got["window_start"]), window_end=seconds(got["window_end"]))
    expected = {k: [w for w in ws if w[2]["count"]] for k, ws in expected.items()}  # the job skips empty windows
    assert_same_windows(frame_windows(got, AGGS, key="cell"), expected)
    late = late_of(tmp_path / "out")
    assert len(late) > 0, "older calls arriving later must be late"
    missed = {events[seq][3]["call_id"]: n for seq, n in expected_late.items()}
    assert dict(zip(late["call_id"].astype(str), late["windows_missed"], strict=True)) == missed
    summary = summary_of(tmp_path / "out")
    assert summary["rows_dropped_by_spark"] == 0 and summary["late"] == len(missed)
    assert summary["rows_read"] == len(calls) and summary["rejected"] == 0


@pytest.mark.parametrize("processor", PROCESSORS)
def test_a_batch_of_several_files_read_by_several_tasks_gives_the_oracle(spark, tmp_path, processor):
    """Two files a trigger, each its own task (a key's calls, and its first call in end order, in either one):
    the rows the tasks read reach the reducer as one batch, taken in end order per key, and give the oracle's
    windows and late rows."""
    calls = clean_calls(600, seed=5)
    ends = pd.to_datetime(calls["end"])
    edges = pd.date_range("2024-03-04", periods=7, freq="2h")
    frames = [calls[(ends >= lo) & (ends < hi)] for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    frames = [frames[i] for i in (1, 0, 2, 4, 5, 3)]  # batches of two files, the later one first in each
    drop_files(tmp_path / "in", frames)
    before = spark.conf.get("spark.sql.files.openCostInBytes")
    spark.conf.set("spark.sql.files.openCostInBytes", "1")  # small files are not packed into one task
    try:
        assert stream_cli(str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint",
                          str(tmp_path / "chk"), *QUERY, "--max-files-per-trigger", "2", "--master", "local[2]",
                          "--drain", "--processor", processor, "--reduce-on", "executors") == 0  # fmt: skip
    finally:
        spark.conf.set("spark.sql.files.openCostInBytes", before)
    events = oracle_events([pd.concat(frames[i:i + 2]) for i in range(0, 6, 2)])  # a batch's calls in end order
    expected, expected_late = oracle(events, 900, 300, 600, 0, AGGS)
    expected = {k: [w for w in ws if w[2]["count"]] for k, ws in expected.items()}
    got = windows_of(tmp_path / "out")
    got = got.assign(window_start=seconds(got["window_start"]), window_end=seconds(got["window_end"]))
    assert_same_windows(frame_windows(got, AGGS, key="cell"), expected)
    missed = {events[seq][3]["call_id"]: n for seq, n in expected_late.items()}
    late = late_of(tmp_path / "out")
    assert len(missed) > 0 and dict(zip(late["call_id"].astype(str), late["windows_missed"], strict=True)) == missed
    assert summary_of(tmp_path / "out")["batches"] == 4  # three of two files, and the drain


@pytest.mark.parametrize("processor", PROCESSORS)
@pytest.mark.parametrize("reduce_on", REDUCERS)
def test_two_available_now_rounds_on_one_checkpoint_equal_one_run_and_the_oracle(spark, tmp_path, capsys, processor,
                                                                                  reduce_on):
    """A periodic run (cron) over files that keep arriving: the first round keeps its open windows in the
    checkpoint, so calls of the second round still count in them; the second round drains. Both rounds together
    give the oracle's windows and late rows over all files (one uninterrupted drained run: in_order's tests)."""
    calls = clean_calls(600, seed=11)
    ends = pd.to_datetime(calls["end"])
    edges = pd.date_range("2024-03-04", periods=7, freq="2h")
    frames = [calls[(ends >= lo) & (ends < hi)] for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    frames = [frames[i] for i in (0, 2, 1, 4, 3, 5)]  # some calls late, as files come out of order
    common = [*QUERY, "--max-files-per-trigger", "1", "--master", "local[2]", "--processor", processor,
              "--reduce-on", reduce_on]  # fmt: skip
    drop_files(tmp_path / "in", frames[:3])
    rounds = ["--output", str(tmp_path / "rounds"), "--checkpoint", str(tmp_path / "chk")]
    assert stream_cli(str(tmp_path / "in"), *rounds, *common) == 0  # round 1: no --drain
    assert "series start: first" in capsys.readouterr().out
    first = summary_of(tmp_path / "rounds")
    assert first["held_windows"] > 0, "round 1 keeps the windows its keys' clocks have not passed"
    assert first["windows_written"] > 0 and first["accepted"] == first["rows_read"] == sum(map(len, frames[:3]))
    drop_files(tmp_path / "in", frames[3:], first=3)  # the next files land after round 1
    assert stream_cli(str(tmp_path / "in"), *rounds, *common, "--drain") == 0  # round 2: the input is complete

    events = oracle_events(frames)
    expected, expected_late = oracle(events, 900, 300, 600, 0, AGGS)
    expected = {k: [w for w in ws if w[2]["count"]] for k, ws in expected.items()}
    missed = {events[seq][3]["call_id"]: n for seq, n in expected_late.items()}
    got = windows_of(tmp_path / "rounds")
    got = got.assign(window_start=seconds(got["window_start"]), window_end=seconds(got["window_end"]))
    assert_same_windows(frame_windows(got, AGGS, key="cell"), expected)
    late = late_of(tmp_path / "rounds")
    assert dict(zip(late["call_id"].astype(str), late["windows_missed"], strict=True)) == missed
    summary = summary_of(tmp_path / "rounds")
    assert summary["rows_read"] == summary["accepted"] == len(calls) and summary["held_windows"] == 0
    assert len(missed) > 0 and summary["late"] == len(missed)


@pytest.mark.parametrize("reduce_on", REDUCERS)
def test_two_window_specs_in_one_stream_give_each_specs_oracle_tagged_with_its_window(spark, tmp_path, reduce_on):
    """``spanning stream --window 15m/5m --window 1h/5m``, one query over files out of order: each spec's windows
    and late rows are the oracle's for that spec, tagged in a ``window`` column as ``spanning run`` tags them."""
    calls = clean_calls(400, seed=13)
    ends = pd.to_datetime(calls["end"])
    edges = pd.date_range("2024-03-04", periods=5, freq="3h")
    frames = [calls[(ends >= lo) & (ends < hi)] for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    frames = [frames[i] for i in (0, 2, 1, 3)]  # some calls late
    drop_files(tmp_path / "in", frames)
    query = ["--window", "15m/5m", "--window", "1h/5m", "--ttp", "10m", "--start", "start", "--end", "end", "--key",
             "cell", "--agg", "count", "--agg", "sum:bytes", "--agg", "max:duration"]  # fmt: skip
    assert stream_cli(str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      "--max-files-per-trigger", "1", "--master", "local[2]", "--drain", *query,
                      "--reduce-on", reduce_on) == 0  # fmt: skip
    events = oracle_events(frames)
    got, late = windows_of(tmp_path / "out"), late_of(tmp_path / "out")
    assert sorted(got["window"].unique()) == ["3600/300", "900/300"]  # range/slide in chronons, as run tags them
    for label, (range_, slide) in {"900/300": (900, 300), "3600/300": (3600, 300)}.items():
        expected, expected_late = oracle(events, range_, slide, 600, 0, AGGS)
        expected = {k: [w for w in ws if w[2]["count"]] for k, ws in expected.items()}
        mine = got[got["window"] == label]
        mine = mine.assign(window_start=seconds(mine["window_start"]), window_end=seconds(mine["window_end"]))
        assert_same_windows(frame_windows(mine, AGGS, key="cell"), expected)
        missed = {events[seq][3]["call_id"]: n for seq, n in expected_late.items()}
        mine_late = late[late["window"] == label]
        assert dict(zip(mine_late["call_id"].astype(str), mine_late["windows_missed"], strict=True)) == missed
        assert len(missed) > 0
    summary = summary_of(tmp_path / "out")
    assert summary["rows_read"] == summary["accepted"] == len(calls)


def test_a_batch_writes_the_open_windows_of_the_keys_it_changed_not_its_bucket(spark, tmp_path):
    """State that follows the batch: with all 200 keys in one bucket, a batch of one key's calls writes that key's
    open windows (the bucket store's delta), where a whole bucket's state would be 200 keys' worth."""
    calls = clean_calls(1200, seed=3)
    calls["cell"] = [f"cell-{i % 200}" for i in range(len(calls))]
    ends = pd.to_datetime(calls["end"])
    one_key = calls[(ends >= "2024-03-04 04:00") & (calls["cell"] == "cell-7")]
    drop_files(tmp_path / "in", [calls[ends < "2024-03-04 04:00"], one_key])
    assert stream_cli(str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      *QUERY, "--max-files-per-trigger", "1", "--master", "local[2]", "--buckets", "1") == 0
    first, second = (json.loads(p.read_text()) for p in sorted((tmp_path / "chk" / "spanning" / "batches").glob("*")))
    assert first["rows_read"] > 500 and second["rows_read"] == len(one_key) > 0
    assert first["state_written"] == first["buckets"]["0"]["state_bytes"] > 0, "the first batch: a snapshot"
    held = first["buckets"]["0"]["state_bytes"]
    assert 0 < second["state_written"] * 30 < held, f"one key's windows: {second['state_written']} of {held} bytes"
    files = sorted(p.name for p in (tmp_path / "chk" / "spanning" / "buckets" / "0").iterdir())
    assert files == ["delta-2", "snapshot-1"]


def test_a_checkpoint_keeps_its_bucket_count_when_buckets_is_not_given(in_order, tmp_path):
    """``--buckets`` defaults to the checkpoint's count (for a new one, 2 reduced on the driver and 32 key groups on
    the executors): a stream made when the default was 16, or with ``--buckets 16``, goes on without the option; a
    count given that differs is refused."""
    from spanning.app.stream_command import (
        DEFAULT_BUCKETS,
        DEFAULT_KEY_GROUPS,
        JOB_FILE,
        StreamOptions,
        recorded_buckets,
    )

    new = StreamOptions(str(tmp_path / "new"))  # auto: the driver's count on a local master, the executors' else
    assert (new.buckets, new.resolved("local[2]").buckets, new.resolved("local[2]").reduce_on) == (2, 2, "driver")
    assert new.resolved("local-cluster[2,1,1024]").reduce_on == "executors"
    assert new.resolved("spark://host:7077").buckets == DEFAULT_KEY_GROUPS == recorded_buckets(in_order / "chk")
    assert StreamOptions(str(tmp_path / "new"), reduce_on="executors").buckets == DEFAULT_KEY_GROUPS
    assert StreamOptions(str(tmp_path / "new"), buckets=4).resolved("yarn").buckets == 4
    assert StreamOptions(str(in_order / "chk")).resolved("local[2]").buckets == DEFAULT_KEY_GROUPS  # recorded
    assert DEFAULT_BUCKETS == 2
    folder = tmp_path / "in"
    drop_files(folder, by_end(pd.read_csv(SAMPLE, dtype=str, keep_default_na=False), 2))
    first = next(iter(sorted(folder.iterdir())))
    (tmp_path / "later").mkdir()
    later = first.rename(tmp_path / "later" / first.name)  # the first file in end order arrives after a restart
    common = ["--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), *QUERY, "--master", "local[2]"]
    assert stream_cli(str(folder), *common, "--buckets", "16") == 0
    assert json.loads((tmp_path / "chk" / "spanning" / JOB_FILE).read_text())["buckets"] == 16
    later.rename(folder / later.name)
    assert StreamOptions(str(tmp_path / "chk")).buckets == 16
    assert stream_cli(str(folder), *common) == 0  # the restart takes the checkpoint's 16
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["rows_read"] == len(pd.read_csv(SAMPLE)) and summary["batches"] == 2
    assert stream_cli(str(folder), *common, "--buckets", "4") == 2  # another count: refused


def test_a_checkpoint_of_the_removed_jvm_processor_is_refused_and_processor_jvm_says_so(in_order, tmp_path, capsys):
    import shutil

    old = tmp_path / "chk"
    shutil.copytree(in_order / "chk", old)
    record = json.loads((old / "spanning" / "job.json").read_text())
    (old / "spanning" / "job.json").write_text(json.dumps({**record, "processor": "jvm"}))
    code = stream_cli(str(in_order / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(old), *QUERY,
                      "--master", "local[2]")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "made by --processor jvm" in err and "new --checkpoint" in err and "Traceback" not in err
    code = stream_cli(str(in_order / "in"), "--output", str(tmp_path / "out2"), "--checkpoint", str(tmp_path / "c2"),
                      *QUERY, "--master", "local[2]", "--processor", "jvm")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--processor jvm was removed" in err and "Traceback" not in err
    assert not (tmp_path / "c2").exists() or not list((tmp_path / "c2").rglob("job.json"))
    # a checkpoint made before 2026-11-26 (no "operator": transformWithStateInPandas' state) is refused too
    (old / "spanning" / "job.json").write_text(json.dumps({k: v for k, v in record.items() if k != "operator"}))
    code = stream_cli(str(in_order / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(old), *QUERY,
                      "--master", "local[2]")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "transformWithStateInPandas" in err and "new --checkpoint" in err and "Traceback" not in err
    # checkpoints of the builds that kept each bucket's state (whole until 2026-11-27, then its files' version) in
    # Spark's applyInPandasWithState, until 2026-11-28: refused too
    for made in ({**record, "operator": "applyInPandasWithState"},
                 {**{k: v for k, v in record.items() if k != "state"}, "operator": "applyInPandasWithState"}):
        (old / "spanning" / "job.json").write_text(json.dumps(made))
        code = stream_cli(str(in_order / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(old), *QUERY,
                          "--master", "local[2]")  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and "applyInPandasWithState" in err and "until 2026-11-28" in err, err
        assert "new --checkpoint" in err and "Traceback" not in err
    # an operator this build does not know (a later build's): refused, named, with no date made up
    (old / "spanning" / "job.json").write_text(json.dumps({**record, "operator": "laterOperator"}))
    code = stream_cli(str(in_order / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(old), *QUERY,
                      "--master", "local[2]")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "'laterOperator'" in err and "does not know" in err and "None" not in err, err


def test_restart_with_other_windows_is_refused(in_order, capsys):
    """A restart for other windows is refused, naming the change and the version of spanning that made the
    checkpoint (``job.json`` records it; a checkpoint made before 0.2.0 has none)."""
    import spanning

    job = in_order / "chk" / "spanning" / "job.json"
    record = json.loads(job.read_text())
    assert record["spanning_version"] == spanning.__version__
    code = stream_cli(str(in_order / "in"), "--output", str(in_order / "out"), "--checkpoint", str(in_order / "chk"),
                      *[a if a != "5m" else "1m" for a in QUERY], "--master", "local[2]")  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert f"was made by spanning {spanning.__version__} for another query" in err and "slide 300 -> 60" in err
    assert "Traceback" not in err
    try:  # a checkpoint of 0.1.0, which did not record its version
        job.write_text(json.dumps({k: v for k, v in record.items() if k != "spanning_version"}))
        code = stream_cli(str(in_order / "in"), "--output", str(in_order / "out"), "--checkpoint",
                          str(in_order / "chk"), *[a if a != "5m" else "1m" for a in QUERY], "--master", "local[2]")
        assert code == 2 and "was made by spanning 0.1.0 or earlier for another query" in capsys.readouterr().err
    finally:
        job.write_text(json.dumps(record))


def test_missing_checkpoint_is_a_usage_error(tmp_path, capsys):
    assert stream_cli(str(tmp_path), "--output", str(tmp_path / "out"), *QUERY) == 2
    err = capsys.readouterr().err
    assert "--checkpoint" in err and "required" in err


def test_stream_options_are_checked():
    with pytest.raises(UsageError, match="--trigger"):
        StreamOptions("chk", trigger="soon")
    assert StreamOptions("chk", trigger="30s").spark_trigger == {"processingTime": "30 seconds"}
    assert StreamOptions("chk").spark_trigger == {"availableNow": True}


def test_an_available_now_run_over_small_local_files_keeps_the_jvm_to_its_quick_compiler(tmp_path, monkeypatch):
    """As ``spanning run`` does below ``QUICK_JIT_INPUT``; a stream that runs on, larger files, remote files or
    no files yet take both compilers."""
    import dataclasses

    from spanning.app.files import input_files
    from spark_jobs import command
    from spark_jobs.reading import prepare

    drop_files(tmp_path / "in", [clean_calls(50, seed=1)])
    there = input_files([str(tmp_path / "in")], "csv", ",")
    size = sum(p.stat().st_size for p in (tmp_path / "in").iterdir())
    assert command.quick_compiler(StreamOptions("chk"), there)
    assert not command.quick_compiler(StreamOptions("chk", trigger="10s"), there)
    assert not command.quick_compiler(StreamOptions("chk"), None)
    remote = dataclasses.replace(there, files=["s3a://bucket/calls.csv"])
    assert not command.quick_compiler(StreamOptions("chk"), remote)
    monkeypatch.setattr(prepare, "QUICK_JIT_INPUT", size)
    assert not command.quick_compiler(StreamOptions("chk"), there)
    monkeypatch.setattr(prepare, "QUICK_JIT_INPUT", size + 1)
    assert command.quick_compiler(StreamOptions("chk"), there)


@pytest.fixture(scope="module")
def four_files(tmp_path_factory):
    """The first 8,000 rows of the sample (in end order) as 4 files, and the batch job's output on them."""
    base = tmp_path_factory.mktemp("stream-four")
    drop_files(base / "in", by_end(pd.read_csv(SAMPLE, dtype=str, keep_default_na=False), 10)[:4])
    run_batch_job(base / "in", base / "batch")
    return base


def assert_equals_batch_job(output: Path, batch: Path) -> None:
    got = windows_of(output)
    expected = pd.read_parquet(batch / "windows").sort_values(["cell", "window_start"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[expected.columns.tolist()], expected, check_dtype=False)
    late = late_of(output)
    expected_late = pd.read_parquet(batch / "late").sort_values("call_id").reset_index(drop=True)
    columns = ["call_id", "windows_missed"]
    assert late[columns].values.tolist() == expected_late[columns].values.tolist()
    assert summary_of(output)["rows_read"] == summary_of(batch)["rows_read"]


def test_without_max_files_a_batch_takes_files_up_to_its_byte_bound(spark, four_files, tmp_path, monkeypatch):
    """The driver holds a batch's rows: without --max-files-per-trigger a batch takes files up to BATCH_BYTES (at
    least one), so a first start on a full folder goes through it in several batches, with the batch job's result."""
    from spark_jobs.stream import query

    files = sorted((four_files / "in").glob("*.csv"))
    monkeypatch.setattr(query, "BATCH_BYTES", files[0].stat().st_size + 1)  # one file a batch, not two
    assert stream_cli(str(four_files / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      *QUERY, "--master", "local[2]", "--drain") == 0  # fmt: skip
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "chk" / "spanning" / "batches").glob("*"))]
    assert [r["rows_read"] > 0 for r in records] == [True] * len(files) + [False], "a batch per file, then the drain"
    assert_equals_batch_job(tmp_path / "out", four_files / "batch")


@pytest.mark.parametrize("processor", PROCESSORS)
@pytest.mark.parametrize(("reduce_on", "overlap"), [("executors", False), ("driver", True), ("driver", False)])
def test_a_failing_batch_then_a_restart_gives_the_uninterrupted_output(spark, four_files, tmp_path, monkeypatch,
                                                                        processor, reduce_on, overlap):
    """A batch whose reduction fails once, after some key groups wrote their next state files: in an executor's task
    (the failure is the task's, the action's, so Spark commits nothing), or on the driver, where with batches that
    overlap Spark had committed the batch and its rows wait in the checkpoint."""
    from spark_jobs.stream import buckets

    flag = tmp_path / "fail-once"
    flag.touch()
    third = pd.read_csv(sorted((four_files / "in").glob("*.csv"))[2], dtype=str, keep_default_na=False)
    middle = int(pd.to_datetime(third["end"], errors="coerce").min().value // 10**9)  # a bucket of the third file
    monkeypatch.setattr(buckets, "FAIL_ONCE", (str(flag), middle))
    args = [str(four_files / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), *QUERY,
            "--max-files-per-trigger", "1", "--master", "local[2]", "--drain", "--processor", processor,
            "--reduce-on", reduce_on, *([] if overlap else ["--no-overlap"])]  # fmt: skip
    assert stream_cli(*args) == 1, "the injected failure stops the stream"
    assert not flag.exists()
    kinds = tmp_path / "chk" / "spanning" / "column-kinds.json"
    assert "raw:bytes" in kinds.read_text(), "the column kinds are kept: a restart does not count them again"
    assert 1 <= summary_of(tmp_path / "out")["batches"] <= 3
    # batches overlap: the failure came from the batch in flight, which Spark had committed, and its rows wait in
    # the checkpoint (a restart that lost them would miss its windows); without, the failing batch is not committed
    kept = sorted(int(p.stem) for p in (tmp_path / "chk" / "spanning" / "pending").glob("*.arrow"))
    if overlap:
        assert kept and (tmp_path / "chk" / "query" / "commits" / str(kept[0])).exists(), kept
    else:
        assert kept == []
    assert stream_cli(*args) == 0, "the restart goes on from the checkpoint"
    assert not list((tmp_path / "chk" / "spanning" / "pending").glob("*")), "kept rows go once they are written"
    assert_equals_batch_job(tmp_path / "out", four_files / "batch")


# These two start `spanning stream` as a process of its own, among the suite's slowest tests, so each runs once, on a
# local master's default path (the driver): the executors' path is killed -9, driver and executor, on local-cluster
# (tests/test_cluster.py). What they add over the
# in-process tests is the command's stop and the output's orphan folders. A batch run again from the state versions
# of its first run is checked in process, on both paths, by
# test_a_batch_run_again_after_a_lost_commit_writes_the_same_bytes (the stream) and by tests/test_bucket_store.py.
@pytest.mark.parametrize("processor", ["python"])
def test_a_killed_process_group_then_a_restart_gives_the_uninterrupted_output(four_files, tmp_path, processor):
    args = [sys.executable, "-m", "spanning.cli", "stream", str(four_files / "in"), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "chk"), *QUERY, "--max-files-per-trigger", "1", "--master", "local[2]",
            "--drain", "--processor", processor, "--reduce-on", "auto"]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    child = subprocess.Popen(args, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 300
    while not (tmp_path / "out" / "summary.json").exists():  # the first batch is recorded (windows, then summary.json,
        # which waiting for windows/batch=0 alone could kill before): kill the second
        assert child.poll() is None and time.time() < deadline, "the stream ended before it could be killed"
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)  # the driver, its JVM and the Python workers: no clean-up
    child.wait(timeout=60)
    assert summary_of(tmp_path / "out")["batches"] < 5
    again = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not list((tmp_path / "out").glob("*/_tmp-batch=*")), "orphan folders of the killed batch are removed"
    assert_equals_batch_job(tmp_path / "out", four_files / "batch")


@pytest.mark.parametrize("processor", PROCESSORS)
@pytest.mark.parametrize("reduce_on", REDUCERS)
def test_idle_flush_releases_a_quiet_key_and_an_available_now_run_keeps_windows_open(spark, tmp_path, processor,
                                                                                     reduce_on):
    def calls(rows):
        return pd.DataFrame(rows, columns=["call_id", "cell", "start", "end", "duration", "bytes"]).astype(str)

    first = calls([(1, "busy", "2024-03-04 00:00:00", "2024-03-04 00:02:00", 120, 10),
                   (2, "quiet", "2024-03-04 00:01:00", "2024-03-04 00:03:00", 120, 20)])  # fmt: skip
    later = calls([(3, "busy", "2024-03-04 03:00:00", "2024-03-04 03:01:00", 60, 30)])
    drop_files(tmp_path / "in", [first, later])
    args = [str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), *QUERY,
            "--max-files-per-trigger", "1", "--master", "local[2]", "--idle-flush", "1h", "--processor", processor,
            "--reduce-on", reduce_on]
    assert stream_cli(*args) == 0
    after_first = windows_of(tmp_path / "out")
    assert "quiet" not in set(after_first["cell"]), "nothing passes the quiet key's clock, and no --drain"
    assert set(after_first["cell"]) == {"busy"}, "the busy key's clock released its early windows"
    assert stream_cli(*args) == 0  # no new file: the control files of the watermark (03:01) reach every bucket
    windows = windows_of(tmp_path / "out")
    quiet = windows[windows["cell"] == "quiet"]
    assert seconds(quiet["window_start"]).tolist() == [1709509800, 1709510100, 1709510400]  # 23:50, 23:55, 00:00
    busy_last = seconds(windows.loc[windows["cell"] == "busy", "window_start"]).max()
    assert busy_last < 1709521200, "the busy key's windows near 03:00 stay open: the watermark passed them by < 1h"


@pytest.mark.parametrize("processor", ["python"])  # a process of its own: see the kill -9 test
def test_processing_time_trigger_flushes_idle_keys_live_and_stops_cleanly_on_ctrl_c(tmp_path, processor):
    def calls(rows):
        return pd.DataFrame(rows, columns=["call_id", "cell", "start", "end", "duration", "bytes"]).astype(str)

    drop_files(tmp_path / "in", [calls([(1, "busy", "2024-03-04 00:00:00", "2024-03-04 00:02:00", 120, 10),
                                        (2, "quiet", "2024-03-04 00:01:00", "2024-03-04 00:03:00", 120, 20)])])
    args = [sys.executable, "-m", "spanning.cli", "stream", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "chk"), *QUERY, "--master", "local[2]", "--trigger", "1s",
            "--idle-flush", "1h", "--processor", processor]  # fmt: skip
    child = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        deadline = time.time() + 240

        def wait_for(condition, what):
            while not condition():
                assert child.poll() is None and time.time() < deadline, f"no {what}"
                time.sleep(0.2)

        wait_for(lambda: (tmp_path / "out" / "summary.json").exists(), "first batch")
        later = calls([(3, "busy", "2024-03-04 03:00:00", "2024-03-04 03:01:00", 60, 30)])
        drop_files(tmp_path / "more", [later])
        os.replace(tmp_path / "more" / "cdr-000.csv", tmp_path / "in" / "cdr-001.csv")  # lands while it runs
        wait_for(lambda: "quiet" in set(windows_of(tmp_path / "out").get("cell", [])), "idle flush of the quiet key")
        time.sleep(3)  # a few idle triggers: no control file without a new watermark, so no batch
        batches = summary_of(tmp_path / "out")["batches"]
        time.sleep(3)
        assert summary_of(tmp_path / "out")["batches"] == batches, "an unchanged watermark triggers nothing"
    finally:
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=60)
    assert child.returncode == 0, out
    assert "stopped; restart with the same --checkpoint" in out
    assert summary_of(tmp_path / "out")["stopped"] is True


def test_python_api_builds_the_streaming_frame_for_a_pipeline_of_ones_own(spark, tmp_path):
    """The stream's rows and reducer in a pipeline of one's own (``foreachBatch`` calling the reducer): the windows
    it releases, then those its buckets still hold, are the oracle's, and its late rows the oracle's."""
    from spanning.app.jobspec import RunConfig, key_column
    from spark_jobs.stream.query import streaming_rows

    calls = clean_calls(200, seed=3)
    drop_files(tmp_path / "in", [calls.iloc[:100], calls.iloc[100:]])
    cfg = RunConfig.from_parameters({"inputs": [str(tmp_path / "in")], "start": "start", "end": "end", "range": 900,
                                     "slide": 300, "ttp": 600, "keys": ["cell"], "aggregates": ["count"],
                                     "series_start": "first", "master": "local[2]"})  # fmt: skip
    job = streaming_rows(spark, cfg, StreamOptions(str(tmp_path / "chk"), max_files_per_trigger=1, buckets=4,
                                                   processor="python"))  # fmt: skip
    assert job.rows.isStreaming
    from spark_jobs.stream.bucket_store import Version

    seen: list = []
    versions: dict = {}  # each bucket's state files after the last batch (BatchWriter keeps them in its records)

    def each_batch(batch, _):
        reduced = job.reducer(batch.toArrow(), versions)
        versions.update({b: Version(*stats["version"]) for b, stats in reduced.buckets.items()})
        seen.append(reduced)

    query = (job.rows.writeStream.foreachBatch(each_batch)
             .option("checkpointLocation", str(tmp_path / "chk" / "query")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert len(seen) == 2 and sum(s["accepted"] for r in seen for s in r.buckets.values()) == 200
    assert all(r.rejected.num_rows == 0 for r in seen)  # clean calls
    windows = pd.concat([r.windows.to_pandas() for r in seen], ignore_index=True)
    assert len(windows) and (windows[job.aggregates["__events"]] > 0).all()
    assert (windows[job.aggregates["count"]] == windows[job.aggregates["__events"]]).all()
    assert sorted(versions) == sorted({b for r in seen for b in r.buckets})
    assert all(v.version for v in versions.values())
    # the windows released, then those the buckets' states still hold (the end of the stream): the oracle's
    held = [state.flush() for _, state in job.reducer.held.values()]
    every = pd.concat([windows, *held], ignore_index=True)
    every = every[every[job.aggregates["__events"]] > 0].rename(columns={key_column(0): "cell",
                                                                        job.aggregates["count"]: "count"})
    every = every.sort_values(["cell", "window_start"], kind="stable")
    events = oracle_events([calls.iloc[:100], calls.iloc[100:]])  # a batch's calls in end order
    expected, expected_late = oracle(events, 900, 300, 600, 0, {"count": "count"})
    expected = {k: [w for w in ws if w[2]["count"]] for k, ws in expected.items()}
    assert_same_windows(frame_windows(every, {"count": "count"}, key="cell"), expected)
    late = pd.concat([r.late.to_pandas() for r in seen], ignore_index=True)
    missed = {events[seq][3]["call_id"]: n for seq, n in expected_late.items()}
    assert len(missed) > 0  # some calls are late
    assert dict(zip(late[job.reducer.originals["call_id"]].astype(str), late["windows_missed"], strict=True)) == missed


def test_two_copies_of_a_checkpoint_reduced_side_by_side_each_go_on_from_their_own_state(spark, tmp_path):
    """A checkpoint copied, and each copy reduced by a query of its own in one process, at the same state versions
    with other calls: each gives what a reducer that ran its calls alone gives, to its last window. On the driver
    (each query's ``BucketReducer``) and in the executors' tasks (``GroupTask``, each given the reducer pickled as
    Spark ships it and its query's ``BatchWriter`` token: one worker holds both queries' states). Until 2026-11-28
    the process kept the states by an id in the checkpoint, which a copy shares, and the second took the first's."""
    import pickle
    import shutil
    import uuid

    import pyarrow as pa

    from spanning.app.jobspec import RunConfig, key_column
    from spark_jobs.stream.bucket_store import Version
    from spark_jobs.stream.buckets import BucketReducer
    from spark_jobs.stream.outputs import OutputShape
    from spark_jobs.stream.query import StreamQuery, streaming_rows
    from spark_jobs.stream.tasks import GroupTask
    from spark_jobs.stream.writer import BatchWriter

    calls = clean_calls(400, seed=11)
    files = by_end(calls, 4)
    drop_files(tmp_path / "in", files)
    cfg = RunConfig.from_parameters({"inputs": [str(tmp_path / "in")], "start": "start", "end": "end", "range": 900,
                                     "slide": 300, "ttp": 600, "keys": ["cell"], "aggregates": ["count", "sum:bytes"],
                                     "series_start": "first", "master": "local[2]"})  # fmt: skip

    def job(name: str) -> StreamQuery:
        return streaming_rows(spark, cfg, StreamOptions(str(tmp_path / name), max_files_per_trigger=1, buckets=2,
                                                        processor="python"))  # fmt: skip

    def shipped(reducer: BucketReducer, checkpoint: str) -> BucketReducer:
        """``reducer`` as Spark ships it to a task (pickled, holding no state), its state files under
        ``checkpoint``: a reducer of the same query over another checkpoint, made without a second streaming frame."""
        copy = pickle.loads(pickle.dumps(reducer))
        copy.store = (tmp_path / checkpoint / "spanning" / "buckets").resolve()
        return copy

    first = job("a")
    jobs = {"a": first}  # the real queries, each over its copy of the checkpoint
    batches: list = []  # the rows of each file, as the stream's batches hand them to the reducer
    query = (first.rows.writeStream.foreachBatch(lambda batch, _: batches.append(batch.toArrow()))
             .option("checkpointLocation", str(tmp_path / "rows")).trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    assert len(batches) == 4
    shape = OutputShape.of(first, "UTC")
    sequences = {"a": [batches[0], batches[1], batches[3]], "b": [batches[0], batches[2], batches[3]]}

    def on_driver(reducer: BucketReducer, steps: range, sequence: list, versions: dict, released: list,
                  cached: list) -> dict:  # fmt: skip
        for step in steps:
            reduced = reducer(sequence[step], versions)
            versions.update({b: Version(*stats["version"]) for b, stats in reduced.buckets.items()})
            released.append(reduced.windows.to_pandas())
            cached.append({stats["cached"] for stats in reduced.buckets.values()})
        return reducer.held

    def on_executors(reducer: BucketReducer, steps: range, sequence: list, versions: dict, output: Path, cached: list,
                     token: str) -> dict:  # fmt: skip
        """As ``BatchWriter._on_executors`` hands each batch to a task: its parts under ``output``; the states that
        this worker holds for ``token`` after the last."""
        held: dict = {}
        for step in steps:
            task = GroupTask(pickle.loads(pickle.dumps(reducer)), shape, str(output), step,
                             {b: tuple(v) for b, v in versions.items()}, token)  # fmt: skip
            stats = pa.Table.from_batches(list(task(iter(sequence[step].to_batches())))).to_pylist()
            groups = [s for s in stats if s["group"] >= 0]
            versions.update({s["group"]: Version(*(s[k] for k in Version._fields)) for s in groups})
            cached.append({s["cached"] for s in groups})
            held = task.reducer.held
        return held

    def every_window(held: dict, released: list, output: Path | None = None) -> list:
        """The windows released (on the executors: the parts written), then those the held states flush."""
        if output is not None:
            released = [pd.read_parquet(p) for p in sorted(output.glob("windows/_tmp-batch=*/*.parquet"))]
            released = [frame.rename(columns={"cell": key_column(0), **first.aggregates}).assign(
                window_start=seconds(frame["window_start"]), window_end=seconds(frame["window_end"]))
                for frame in released]  # fmt: skip
        flushed = [state.flush() for _, state in held.values()]
        frame = pd.concat([*released, *flushed], ignore_index=True)
        columns = [key_column(0), "window_start", "window_end",
                   *[first.aggregates[n] for n in ("count", "sum_bytes")]]  # fmt: skip
        return sorted(map(tuple, frame[columns].astype(str).values.tolist()))

    def writer_token(query: StreamQuery) -> str:
        """The token that a query's ``BatchWriter`` gives its tasks (made with a sink: it runs no Spark action)."""
        return BatchWriter(query, None, sink=lambda *_: None).token

    def copies(where: str) -> None:
        checkpoint = {"a": "a", "b": "b"} if where == "driver" else {"a": "executors-a", "b": "executors-b"}
        reducers = {"a": first.reducer if where == "driver" else shipped(first.reducer, checkpoint["a"])}
        versions: dict = {"a": {}, "b": {}}
        released: dict = {"a": [], "b": []}
        cached: dict = {"a": [], "b": []}
        held: dict = {}
        tokens = {"a": writer_token(first)} if where == "executors" else {}

        def reduce(name: str, steps: range) -> None:
            if where == "driver":
                held[name] = on_driver(reducers[name], steps, sequences[name], versions[name], released[name],
                                       cached[name])  # fmt: skip
            else:
                held[name] = on_executors(reducers[name], steps, sequences[name], versions[name],
                                          tmp_path / checkpoint[name] / "out", cached[name], tokens[name])

        reduce("a", range(1))  # the first file, then the copy, its outputs with it
        for folder in ("spanning", *(["out"] if where == "executors" else [])):
            shutil.copytree(tmp_path / checkpoint["a"] / folder, tmp_path / checkpoint["b"] / folder,
                            dirs_exist_ok=True)  # fmt: skip
        versions["b"], released["b"] = dict(versions["a"]), list(released["a"])
        if where == "driver":
            jobs["b"] = job("b")
            reducers["b"] = jobs["b"].reducer
        else:
            tokens["b"] = writer_token(jobs["b"])
            reducers["b"] = shipped(first.reducer, checkpoint["b"])
        for step in (1, 2):  # the same versions, other calls, one copy after the other
            for name in ("a", "b"):
                reduce(name, range(step, step + 1))
            assert {b: v.version for b, v in versions["a"].items()} == {b: v.version for b, v in versions["b"].items()}
        for name in ("a", "b"):  # each against a reducer that ran its calls alone, on a checkpoint of its own
            alone = shipped(first.reducer, f"{where}-alone-{name}")
            if where == "driver":
                alone_released: list = []
                expected = every_window(on_driver(alone, range(3), sequences[name], {}, alone_released, []),
                                        alone_released)  # fmt: skip
                got = every_window(held[name], released[name])
            else:
                output = tmp_path / f"{where}-alone-{name}" / "out"
                expected = every_window(on_executors(alone, range(3), sequences[name], {}, output, [],
                                                     uuid.uuid4().hex), [], output)  # fmt: skip
                got = every_window(held[name], [], tmp_path / checkpoint[name] / "out")
            assert got == expected, f"{where}: copy {name} took a state that was not its own"
        # and each went on from a state held in memory where it had one (a after each batch, b after its first), so
        # that a state held for the other copy at the same version was there to be taken
        assert cached["a"][1:] == [{True}, {True}] and cached["b"] == [{False}, {True}], (where, cached)

    copies("driver")
    copies("executors")


@pytest.mark.parametrize("reduce_on", ["driver", "executors"])
def test_the_stream_s_files_are_on_disk_before_a_record_names_them(spark, tmp_path, monkeypatch, reduce_on):
    """Every file the stream keeps under its checkpoint (state files, batch records, kinds) and every output it writes
    is flushed to disk (``fsync``) under its temporary name, and every folder holding them after its rename: a power
    loss cannot leave a committed batch's record naming an empty or missing file. (Spark's own files under
    ``CHECKPOINT/query`` are Spark's.) Only this process's flushes are seen: on the executors, the state files and
    output parts that the tasks write (with the same ``bucket_store.write_whole``) are left out, and what the driver
    flushes (the batch folders it renames, the records) is checked."""
    flushed: set = set()
    flush = os.fsync

    def recorded(descriptor: int) -> None:
        status = os.fstat(descriptor)
        flushed.add((status.st_dev, status.st_ino))
        flush(descriptor)

    monkeypatch.setattr(os, "fsync", recorded)
    drop_files(tmp_path / "in", by_end(clean_calls(300, seed=8), 3))
    assert stream_cli(str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      *QUERY, "--max-files-per-trigger", "1", "--master", "local[2]", "--drain",
                      "--reduce-on", reduce_on) == 0  # fmt: skip
    kept = [p for p in (tmp_path / "chk" / "spanning").rglob("*") if p.is_file()]
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and p.name != "_SPANNING_OUTPUT"]  # not the
    # output folder's mark, made once when the stream starts (spanning.app.outputs): no record names it
    assert any("buckets" in str(p) for p in kept) and any(p.suffix == ".parquet" for p in written)
    paths = [*kept, *written, *{p.parent for p in [*kept, *written]}]
    if reduce_on == "executors":  # written in the tasks' Python workers, out of this process's sight
        paths = [p for p in paths if "buckets" not in p.parts and p.suffix != ".parquet"]
        assert any(p.name.startswith("batch=") for p in paths), "the driver's renamed batch folders are checked"
    unflushed = [p for p in paths if (p.stat().st_dev, p.stat().st_ino) not in flushed]
    assert unflushed == [], unflushed


@pytest.mark.parametrize("reduce_on", REDUCERS)
def test_a_batch_run_again_after_a_lost_commit_writes_the_same_bytes(spark, tmp_path, reduce_on):
    """Exactly once: a batch that Spark runs again (its commit lost in a crash) reads the state version its first
    run read and writes byte-identical windows and late rows; a killed write's folders are removed."""
    calls = clean_calls(600, seed=5)
    ends = pd.to_datetime(calls["end"])
    edges = pd.date_range("2024-03-04", periods=5, freq="90min")
    frames = [calls[(ends >= lo) & (ends < hi)] for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    frames = [frames[0], frames[2], pd.concat([frames[1], frames[3]])]  # the last batch: late calls, and later ones
    drop_files(tmp_path / "in", frames)
    args = [str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), *QUERY,
            "--max-files-per-trigger", "1", "--master", "local[2]", "--reduce-on", reduce_on]  # fmt: skip
    assert stream_cli(*args) == 0
    written = {p.relative_to(tmp_path): p.read_bytes()
               for p in (tmp_path / "out").glob("*/batch=2/*.parquet")}  # fmt: skip
    assert any("late" in str(p) for p in written) and any("windows" in str(p) for p in written)
    commits = tmp_path / "chk" / "query" / "commits"
    for name in ("2", ".2.crc"):  # as if the process died before Spark's commit
        (commits / name).unlink(missing_ok=True)
    for path in written:  # and before its files: the run again must write them anew
        (tmp_path / path).unlink()
    orphan = tmp_path / "out" / "windows" / "_tmp-batch=7"  # as kill -9 mid-write leaves one
    orphan.mkdir()
    (orphan / "part-0.parquet").write_bytes(b"half written")
    assert stream_cli(*args) == 0
    assert {p: (tmp_path / p).read_bytes() for p in written} == written
    assert not orphan.exists(), "a killed write's folder is removed on restart"
    assert (commits / "2").exists(), "Spark ran batch 2 again and committed it"
    assert summary_of(tmp_path / "out")["rows_read"] == sum(map(len, frames))


@pytest.mark.parametrize("processor", PROCESSORS)
def test_distinct_counts_and_quantiles_stream_as_the_batch_job_gives_them(spark, tmp_path, processor):
    """count_distinct, percentile and the sketches through the stream's state (sets, value lists and
    sketch bytes kept between batches): a drained stream == spanning run on the same files."""
    from spanning.cli import main

    drop_files(tmp_path / "in", by_end(pd.read_csv(SAMPLE, dtype=str, keep_default_na=False).iloc[:6000], 4))
    query = ["--range", "15m", "--slide", "5m", "--ttp", "10m", "--start", "start", "--end", "end", "--key", "cell",
             "--agg", "count", "--agg", "count_distinct:caller", "--agg", "percentile:duration:0.95",
             "--agg", "approx_count_distinct:caller", "--agg", "approx_percentile:duration:0.5"]  # fmt: skip
    assert stream_cli(str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      *query, "--max-files-per-trigger", "1", "--master", "local[2]", "--drain",
                      "--processor", processor) == 0  # fmt: skip
    assert main(["run", str(tmp_path / "in"), *query, "--series-start", "first", "--engine", "local",
                 "--output", str(tmp_path / "batch")]) == 0  # fmt: skip
    streamed = windows_of(tmp_path / "out")
    batch = pd.read_parquet(tmp_path / "batch" / "windows").sort_values(["cell", "window_start"])
    assert len(streamed) > 100 and (streamed["count_distinct_caller"] < streamed["count"]).any()
    pd.testing.assert_frame_equal(streamed[batch.columns.tolist()], batch.reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize("processor", PROCESSORS)
def test_malformed_csv_records_are_rejected_as_the_batch_job_rejects_them(spark, tmp_path, processor):
    # too many fields, too few, a quote never closed (the rest of its file one record): rejected rows naming
    # the line, the rows around them kept, the counts and windows of `spanning run` on the same files
    header = "call_id,cell,start,end,bytes,duration\n"
    files = [
        header + "1,a,2024-01-01 00:00:00,2024-01-01 00:05:00,10,300\n",
        header + "2,a,2024-01-01 00:06:00,2024-01-01 00:07:00,20,60,extra\n"  # line 2: 7 fields
                 "3,a,2024-01-01 00:08:00\n"  # line 3: 3 fields
                 "4,b,2024-01-01 00:08:00,2024-01-01 00:09:00,5,60\n"
                 '5,b,"2024-01-01 00:09:00,2024-01-01 00:10:00,7,60\n'  # line 5: to the end of the file
                 "6,b,2024-01-01 00:09:30,2024-01-01 00:10:00,8,30\n",
        header + "7,b,2024-01-01 00:20:00,2024-01-01 00:21:00,9,60\n",
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    now = time.time() - 1000
    for i, text in enumerate(files):
        (folder / f"cdr-{i}.csv").write_text(text)
        os.utime(folder / f"cdr-{i}.csv", (now + i, now + i))
    assert stream_cli(str(folder), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                      *QUERY, "--max-files-per-trigger", "1", "--master", "local[2]", "--drain",
                      "--processor", processor) == 0  # fmt: skip
    run_batch_job(folder, tmp_path / "batch")
    streamed, batch = summary_of(tmp_path / "out"), summary_of(tmp_path / "batch")
    assert (streamed["rows_read"], streamed["rejected"]) == (batch["rows_read"], batch["rejected"]) == (6, 3)
    reasons = sorted(read_folder(tmp_path / "out" / "rejected")["reason"])
    assert reasons == sorted(pd.read_parquet(tmp_path / "batch" / "rejected")["reason"]) == [
        "line 2 has 7 fields, the header 6", "line 3 has 3 fields, the header 6",
        "line 5 opens a quote that is never closed: 2 lines to the end of the file read as one record"]
    got = windows_of(tmp_path / "out")
    expected = pd.read_parquet(tmp_path / "batch" / "windows").sort_values(["cell", "window_start"])
    assert list(got.columns) == list(expected.columns) and len(got) == 9
    assert got.astype(object).values.tolist() == expected.reset_index(drop=True).astype(object).values.tolist()


def test_the_column_kinds_of_local_parquet_files_are_counted_on_the_driver_as_spark_counts_them(spark, tmp_path,
                                                                                                   monkeypatch):
    """The stream's start counts the kinds of its text columns over the files there with pyarrow, file by file, not
    a Spark job, and a new stream counts them ahead, while its JVM starts: the counts must be Spark's, value for
    value (date-times, epoch numbers, decimals, garbage, nulls, plain integers past 64 bits), either way, and a file
    that changed after it was counted ahead is counted again."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from spanning.app.files import input_files
    from spanning.app.jobspec import EventFields, InputFiles, OutputOptions, RunConfig, SparkOptions, WindowQuery
    from spark_jobs.reading.prepare import KindCounts, _text_stats
    from spark_jobs.stream import query

    values = ["2024-03-04 00:00:00", "1709510400", "12.5", "abc", None, "99999999999999999999", "-3",
              "9223372036854775807", "9223372036854775808", "2024-03-04T00:00:01", "", " 7", "1e3", "0012"]  # fmt: skip
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"t": values[i::2], "n": list(range(len(values[i::2])))}), folder / f"p{i}.parquet")
    cfg = RunConfig(inputs=InputFiles([str(folder)]), events=EventFields("t", "t"),
                    query=WindowQuery(900, 300, 600, ["count"]), output=OutputOptions(str(tmp_path / "out")),
                    spark=SparkOptions("local[2]", None))  # fmt: skip
    counted = query.local_parquet_stats(cfg, "parquet")
    asked = []

    def column_stats(name, plain_only):
        asked.append(name)
        return counted(name, plain_only)

    frame = spark.read.parquet(str(folder))
    read_files: list = []  # the files the counts read, once the files are counted ahead
    for ahead in (False, True):
        if ahead:  # the files counted ahead: the counts are taken from there, no file read again
            query.count_kinds_ahead(cfg, input_files(cfg.inputs.paths, "parquet", ",", warn=False))
            made = {key: future for key, future in query._COUNTED_AHEAD.items() if key[0].startswith(str(folder))}
            assert {key[-1] for key in made} == {"t"}  # text only
            for future in made.values():
                future.result(timeout=60)
            monkeypatch.setattr(query, "_parquet_counts",
                                lambda path, *rest, reading=query._parquet_counts: read_files.append(path)
                                or reading(path, *rest))  # fmt: skip
        for full in (None, set()):  # every count, and the plain ones only
            on_driver = KindCounts(lambda: frame, None, column_stats)("", {"x": F.col("t")}, full, {"x": "t"})
            assert on_driver == _text_stats(frame, {"x": F.col("t")}, full)
    assert asked == ["t", "t"] * 2  # counted on the driver every time
    assert read_files == [], "the counts made ahead are taken, not made again"
    assert on_driver["x"].present == len(values) - 1
    pq.write_table(pa.table({"t": ["2024-03-04 00:00:02"] * 3, "n": [1, 2, 3]}), folder / "p0.parquet")  # changed
    assert counted("t", False).present == 3 + len(values[1::2])  # not the counts made ahead of the old file
    assert [Path(path).name for path in read_files] == ["p0.parquet"]  # the changed file alone is read again
    assert counted("missing", False) is None  # a column not in the files (a partition column): Spark counts it
    assert query.local_parquet_stats(cfg, "csv") is None


def test_the_column_kinds_of_small_local_csv_files_are_counted_on_the_driver_as_spark_counts_them(spark, tmp_path,
                                                                                                  monkeypatch):
    """``spanning run`` and the stream's start over local CSV files under ``DRIVER_COUNTS_BELOW`` bytes count the
    kinds of the text columns by the tasks' own reader on the driver: the counts must be Spark's over the rows
    ``read_input`` gives (quoted fields, empty fields, malformed records, garbage, plain integers past 64 bits);
    larger or remote files are left to Spark."""
    from pyspark.sql import functions as F

    from spanning.app.files import input_files
    from spark_jobs.reading import prepare
    from spark_jobs.reading.prepare import KindCounts, _text_stats, local_csv_stats, quoted, read_input

    values = ["2024-03-04 00:00:00", "1709510400", "12.5", "abc", "", '"2024-03-04 00:00:01"', "99999999999999999999",
              "-3", "9223372036854775808", '"1,5"', " 7", "1e3", "0012", "2024-03-04T00:00:02"]  # fmt: skip
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        lines = [f"{v},{n}" for n, v in enumerate(values[i::2])] + (["5,6,7", "8"] if i else [])  # two malformed
        (folder / f"p{i}.csv").write_text("t,n\n" + "\n".join(lines) + "\n")
    inputs = input_files([str(folder)], None, ",", warn=False)
    frame = read_input(spark, inputs)
    columns = {name: quoted(name) for name in ("t", "n")}
    asked = []
    counted = local_csv_stats(inputs)

    def column_stats(name, plain_only):
        asked.append(name)
        return counted(name, plain_only)

    for full in (None, {"t"}, set()):  # every count, the roles' (as prepare asks), and the plain ones only
        on_driver = KindCounts(lambda: frame, None, column_stats)("raw:", columns, full, {"t": "t", "n": "n"})
        assert on_driver == _text_stats(frame, columns, full), full
    assert asked == ["t", "n"] * 3  # counted on the driver every time
    assert on_driver["t"].present == len(values) - 1 + 2 and on_driver["n"].present == len(values) + 1
    assert counted("_malformed", False) is None and counted("missing", False) is None
    monkeypatch.setattr(prepare, "DRIVER_COUNTS_BELOW", sum(p.stat().st_size for p in folder.iterdir()))
    assert local_csv_stats(inputs) is None  # not under the bound: Spark counts
    parquet = tmp_path / "p.parquet"
    frame.select(F.col("t")).toPandas().to_parquet(parquet)
    assert local_csv_stats(input_files([str(parquet)], None, ",", warn=False)) is None


def test_the_summary_keeps_the_trigger_times_of_the_last_batches_only():
    from types import SimpleNamespace

    from spark_jobs.stream.writer import TRIGGERS_KEPT, BatchWriter

    writer = SimpleNamespace(trigger_seconds={str(b): b / 10 for b in range(TRIGGERS_KEPT + 50)},
                             trigger_started={str(b): 1e9 + b for b in range(TRIGGERS_KEPT + 50)})  # fmt: skip
    kept = BatchWriter.recent_triggers(writer)
    assert sorted(map(int, kept)) == list(range(50, TRIGGERS_KEPT + 50))  # by batch number, not as text
    assert writer.trigger_seconds == kept and kept["50"] == 5.0
    assert sorted(writer.trigger_started, key=int) == sorted(kept, key=int), "their start times go with them"


def test_a_failed_batch_in_flight_is_raised_once_and_quietly_while_another_error_goes_on():
    """``BatchWriter.finish``: the batch in flight's failure is raised (the stream's error), once; ``quietly`` waits
    for it without raising; ``failure`` tells ``_wait`` of it as soon as it is done; a batch that ends well is no
    failure."""
    from concurrent.futures import ThreadPoolExecutor

    from spark_jobs.stream.writer import BatchWriter

    def fail():
        raise RuntimeError("batch 7 failed")

    writer = BatchWriter.__new__(BatchWriter)  # the overlap's state alone: no Spark
    with ThreadPoolExecutor(1) as pool:
        writer._in_flight = pool.submit(fail)
        writer._in_flight.exception()  # done
        assert isinstance(writer.failure(), RuntimeError)
        with pytest.raises(RuntimeError, match="batch 7 failed"):
            writer.finish()
        writer.finish()  # raised once: nothing in flight now
        assert writer.failure() is None
        writer._in_flight = pool.submit(fail)
        writer.finish(quietly=True)
        assert writer._in_flight is None
        writer._in_flight = pool.submit(lambda: None)
        writer.finish()
        assert writer.failure() is None and writer._in_flight is None
