"""The stream benchmark's data shapes and its floor (``bench/bench_stream.py``, ``bench/stream_floor_job.py``):
the figures they give are reported against issue 47's targets, so what they count is checked here."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_stream import make_files, report  # noqa: E402
from stream_floor_job import floor_query  # noqa: E402


@pytest.mark.parametrize("keys", ["cells", "hot"])
def test_the_stream_benchmark_files_land_in_end_order_with_the_cells_asked_for(tmp_path, keys):
    files = make_files(tmp_path / "in", 20_000, 5_000, 500, "parquet", keys=keys)
    assert files == 4
    parts = [pd.read_parquet(p) for p in sorted((tmp_path / "in").glob("cdr-*.parquet"))]
    assert [len(p) for p in parts] == [5_000] * 4
    ends = [pd.to_datetime(p["end"]) for p in parts]
    assert all(a.max() <= b.min() for a, b in zip(ends, ends[1:], strict=False))  # each file after the one before
    cells = pd.concat(parts)["cell"].value_counts(normalize=True)
    if keys == "hot":  # 200 cells, one with 38% of the calls
        assert len(cells) == 200 and cells.index[0] == "cell-0" and abs(cells.iloc[0] - 0.38) < 0.02
    else:
        assert len(cells) > 200 and cells.iloc[0] < 0.3  # 500 cells by 1/rank^1.1: the first about 19%


def test_the_stream_floor_reads_every_row_one_file_per_trigger(spark, tmp_path):
    make_files(tmp_path / "in", 3_000, 1_000, 50, "parquet", keys="hot")
    pd.read_parquet(tmp_path / "in" / "cdr-0001.parquet").assign(end="not a time").to_parquet(
        tmp_path / "in" / "cdr-0001.parquet", index=False)  # a file of rows the reader contract rejects
    floor = floor_query(spark, tmp_path / "in", tmp_path / "floor", keyed=False)  # --keys none's query
    assert floor["rows"] == 3_000 and floor["rejected"] == 1_000, floor
    assert floor["trigger_rows"] == [1_000] * 3 and len(floor["trigger_seconds"]) == 3, floor


def test_the_sustained_rate_counts_the_batches_after_the_second_over_the_time_between_their_records():
    """Batches overlap: the second batch is read while the first is reduced, so the span starts at its record."""
    batch = {"rows_read": 100, "rejected": 0, "late": 0, "compute_seconds": 0.1, "write_seconds": 0.1,
             "collect_seconds": 0.2, "buckets": {"0": {"state_bytes": 1, "held_windows": 1, "state_written": 1}}}
    done = [10.0, 10.5, 11.5, 12.5, 13.0]  # each batch's record; then the final flush, which reads no rows
    batches = [{**batch, "batch": b, "seconds": 0.4, "done_at": t} for b, t in enumerate(done)]
    batches.append({**batch, "batch": 5, "rows_read": 0, "seconds": 0.1, "done_at": 13.1})
    summary = {"rows_read": 500, "late": 0, "rows_dropped_by_spark": 0,
               "trigger_seconds": {str(b): 0.3 for b in range(5)},
               "batch_seconds": {"1": 0.6, "2": 0.7, "3": 0.8, "4": 0.9}}  # fmt: skip
    out = report({"wall": 5.0, "summary": summary, "batches": batches})
    assert out["sustained_events_per_second"] == round(300 / (13.0 - 10.5))  # batches 2-4 after batch 1's record
    assert out["batch_seconds_median"] == 0.75 and out["trigger_seconds_median"] == 0.3  # latency, not the trigger


def test_the_event_log_gives_the_driver_the_trigger_less_its_jobs_and_the_tasks_result_bytes(tmp_path):
    """``bench/stream_event_log.py`` on a made-up log: batch 1 of a query, two jobs (a map stage and a reduce stage)
    inside a 1.0 s trigger; the driver's share is what the jobs' span (0.7 s) leaves, the results and shuffle bytes
    are the tasks' sums, a job of no stream is left out, and the control files' rows are not the batch's."""
    import json

    from stream_event_log import batches, steady, summary

    props = {"streaming.sql.batchId": "1", "sql.streaming.queryId": "q"}
    task = lambda stage, result, run, shuffle=0: {  # noqa: E731
        "Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {
            "Result Size": result, "Executor Run Time": run, "Executor CPU Time": 0,
            "Shuffle Write Metrics": {"Shuffle Bytes Written": shuffle}}}  # fmt: skip
    sources = [{"description": "FileStreamSource[file:/in]", "numInputRows": 1000},
               {"description": "FileStreamSource[file:/chk/spanning/control]", "numInputRows": 4}]  # fmt: skip
    events = [
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 0, "Stage IDs": [0], "Properties": {}},
        task(0, 999_999, 5000), {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 10},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 1_100, "Stage IDs": [1],
         "Properties": props},
        task(1, 2_000, 300, shuffle=50_000), {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": 1_400},
        {"Event": "SparkListenerJobStart", "Job ID": 2, "Submission Time": 1_450, "Stage IDs": [2, 3],
         "Properties": props},
        task(3, 5_000, 200), task(3, 6_000, 250),
        {"Event": "SparkListenerJobEnd", "Job ID": 2, "Completion Time": 1_800},
        {"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent", "progress": {
            "id": "q", "batchId": 1, "sources": sources,
            "durationMs": {"triggerExecution": 1_000, "addBatch": 850, "queryPlanning": 50}}},
    ]  # fmt: skip
    log = tmp_path / "events_1_local-1"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    [batch] = batches(tmp_path)
    assert batch["rows"] == 1000 and batch["jobs_s"] == 0.7 and round(batch["driver_s"], 3) == 0.3
    assert batch["result_bytes"] == 13_000 and batch["shuffle_bytes"] == 50_000 and batch["tasks"] == 3
    assert batch["run_s"] == 0.75 and batch["reduce_run_s"] == 0.45
    assert round(batch["foreach_batch_driver_s"], 3) == 0.15 and batch["queryPlanning_s"] == 0.05
    assert steady([batch]) == [] and summary([batch]) == {"batches": 0}  # a query's first batch is its warm-up
