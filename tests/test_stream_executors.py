"""``spanning stream``'s stateful step in the executors' tasks (``spark_jobs.stream.tasks``): the driver receives a
stats row per key group, not the rows; a checkpoint goes on with another parallelism, and from one reduced on the
driver; the groups spread over the tasks as Spark's hash partitioning sends them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_stream import QUERY, SAMPLE, assert_equals_batch_job, by_end, drop_files, run_batch_job, stream_cli


def result_bytes(spark, after: int) -> dict[int, int]:
    """Spark's own count of the bytes that tasks sent the driver as results (``resultSize``), per stage with an id
    above ``after``, but for the Python workers' warm-up (``warm_python_workers``, in ``sessions/session.py``)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    gateway = spark.sparkContext._gateway
    none = gateway.jvm.java.util.ArrayList()
    stages = store.stageList(none, False, False, gateway.new_array(gateway.jvm.double, 0), none).iterator()
    sizes = {}
    while stages.hasNext():
        stage = stages.next()
        if stage.stageId() > after and "sessions/session.py" not in stage.name():
            sizes[stage.stageId()] = stage.resultSize()
    return sizes


def last_stage(spark) -> int:
    return max(result_bytes(spark, -1) or {-1: 0})


def calls_over(cells: int, n: int, seed: int, day: str) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = pd.Timestamp(day).value // 10**9 + rng.integers(0, 6 * 3600, n)
    duration = rng.integers(0, 600, n)
    as_text = lambda t: pd.to_datetime(t, unit="s").strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    return pd.DataFrame({"call_id": np.arange(n).astype(str), "cell": [f"cell-{i}" for i in rng.integers(0, cells, n)],
                         "start": as_text(start), "end": as_text(start + duration), "duration": duration.astype(str),
                         "bytes": rng.integers(0, 10**6, n).astype(str)})  # fmt: skip


@pytest.mark.parametrize("reduce_on", ["executors", "driver"])
def test_the_driver_receives_a_stats_row_per_key_group_not_the_rows(spark, tmp_path, reduce_on):
    """Batches of 20k and then 200k rows over the same 400 keys: on the executors, the bytes the tasks send the
    driver (Spark's task result sizes) stay within a few kB and do not grow with the rows; on the driver (the
    control, which takes the rows), they grow with them."""
    small, large = calls_over(400, 20_000, 1, "2024-03-04"), calls_over(400, 200_000, 2, "2024-03-05")
    folder = tmp_path / "in"
    received = []
    for n, calls in enumerate([small, large]):  # one batch a run, each measured alone; the second file lands later
        drop_files(folder, [calls], first=n)
        before = last_stage(spark)
        assert stream_cli(str(folder), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
                          *QUERY, "--max-files-per-trigger", "1", "--master", "local[2]", "--buckets", "8",
                          "--parallelism", "2", "--reduce-on", reduce_on, "--no-overlap") == 0  # fmt: skip
        received.append(sum(result_bytes(spark, before).values()))
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "chk" / "spanning" / "batches").glob("*"))]
    assert [r["rows_read"] for r in records] == [len(small), len(large)]
    assert min(received) > 0, "Spark's count of the tasks' results was read"
    if reduce_on == "driver":
        assert received[0] > 20_000 * 20 and received[1] > 8 * received[0], received  # the rows
    else:
        assert max(received) < 20_000, received  # 8 groups' and 2 tasks' stats rows, and each task's metrics
        assert received[1] < 1.5 * received[0] + 2_000, received  # ten times the rows: about the same bytes


def test_a_checkpoint_goes_on_with_another_parallelism_and_from_the_driver_s_reduction(spark, tmp_path):
    """The sample in 6 files, streamed in three runs on one checkpoint: the first reduced on the driver (as the
    build before 2026-11-29 reduced every batch, its job.json the same), the second by 1 task, the third by 3, with
    8 key groups: the windows and late rows are the batch job's."""
    files = by_end(pd.read_csv(SAMPLE, dtype=str, keep_default_na=False), 6)
    everything = tmp_path / "all"
    drop_files(everything, files)
    run_batch_job(everything, tmp_path / "batch")
    folder = tmp_path / "in"
    common = ["--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), *QUERY, "--master", "local[2]",
              "--max-files-per-trigger", "1", "--buckets", "8"]  # fmt: skip
    drop_files(folder, files[:2])
    assert stream_cli(str(folder), *common, "--reduce-on", "driver") == 0
    job = json.loads((tmp_path / "chk" / "spanning" / "job.json").read_text())
    assert job["operator"] == "foreachBatch" and job["buckets"] == 8
    drop_files(folder, files[2:4], first=2)
    assert stream_cli(str(folder), *common, "--reduce-on", "executors", "--parallelism", "1") == 0
    drop_files(folder, files[4:], first=4)
    assert stream_cli(str(folder), *common, "--reduce-on", "executors", "--parallelism", "3", "--drain") == 0
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "chk" / "spanning" / "batches").glob("*"))]
    assert [r.get("reduced_on") for r in records] == ["driver"] * 2 + ["executors"] * 5
    assert [r.get("tasks") for r in records[2:]] == [1, 1, 3, 3, 3]
    assert_equals_batch_job(tmp_path / "out", tmp_path / "batch")
    parts = sorted(p.name for p in (tmp_path / "out" / "windows" / "batch=5").iterdir())
    assert parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"], parts


def test_key_groups_spread_over_the_tasks_as_spark_s_hash_partitioning_sends_them(spark):
    """``task_of_group`` relies on Spark's hash of an int (``spark_hash_int``) and on ``repartition(n, column)``
    placing a row by it: group g goes to task g mod n, for any n."""
    from pyspark.sql import functions as F

    from spark_jobs.stream.tasks import spark_hash_int, task_of_group

    values = [0, 1, 2, 7, -5, 123_456, 2**31 - 1, -(2**31)]
    frame = spark.createDataFrame([(v,) for v in values], "v int")
    assert [r[0] for r in frame.select(F.hash("v")).collect()] == [spark_hash_int(v) for v in values]
    groups = spark.range(0, 40).select(F.col("id").cast("int").alias("g"))
    for tasks in (1, 2, 3, 8):
        placed = groups.repartition(tasks, task_of_group(F.col("g"), tasks)).select("g", F.spark_partition_id())
        assert sorted(map(tuple, placed.collect())) == [(g, g % tasks) for g in range(40)], tasks


def test_a_task_s_held_states_are_its_query_s_own():
    """A worker holds the states of the last two queries it ran tasks for, each apart: a third lets the oldest go."""
    from spark_jobs.stream import tasks

    tasks._HELD.clear()
    tasks.held_for("a")[0] = (1, "state of a")
    tasks.held_for("b")[0] = (1, "state of b")
    assert tasks.held_for("a") == {0: (1, "state of a")}
    tasks.held_for("c")
    assert set(tasks._HELD) == {"a", "c"} and tasks.held_for("b") == {}


def test_a_task_run_again_elsewhere_with_its_rows_in_another_order_writes_the_same_bytes(spark, tmp_path):
    """What Spark's retry of a task (a lost executor, or a batch run again) amounts to: the same rows, perhaps in
    another order from the shuffle, and the same versions, in a worker that holds no state. The task writes the same
    part files and state files, byte for byte, and returns the same versions."""
    import pyarrow as pa

    from spanning.app.jobspec import RunConfig
    from spanning.app.stream_command import StreamOptions
    from spark_jobs.stream.outputs import OutputShape
    from spark_jobs.stream.query import streaming_rows
    from spark_jobs.stream.tasks import GroupTask
    from tests.test_stream import clean_calls

    files = by_end(clean_calls(400, seed=13), 2)
    for frame in files:  # rejected rows, written in the order the task takes them
        frame.loc[frame.index[::25], "end"] = "not a time"
    drop_files(tmp_path / "in", files)
    cfg = RunConfig.from_parameters({"inputs": [str(tmp_path / "in")], "start": "start", "end": "end", "range": 900,
                                     "slide": 300, "ttp": 600, "keys": ["cell"], "aggregates": ["count", "sum:bytes"],
                                     "series_start": "first", "master": "local[2]"})  # fmt: skip
    job = streaming_rows(spark, cfg, StreamOptions(str(tmp_path / "chk"), max_files_per_trigger=1, buckets=3))
    batches: list = []
    query = (job.rows.writeStream.foreachBatch(lambda batch, _: batches.append(batch.toArrow()))
             .option("checkpointLocation", str(tmp_path / "rows")).trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    first, second = batches
    shape = OutputShape.of(job, "UTC")

    def run(rows, versions: dict, token: str, output: Path) -> tuple[list, dict]:
        task = GroupTask(job.reducer, shape, str(output), 1, versions, token)
        stats = pa.Table.from_batches(list(task(iter(rows.to_batches(max_chunksize=97))))).to_pylist()
        files = {p.relative_to(output): p.read_bytes() for p in output.rglob("*.parquet")}
        return stats, files

    stats, _ = run(first, {}, "a", tmp_path / "out-0")  # batch 0: each group's first version
    versions = {s["group"]: (s["version"], s["snapshot"], s["delta_bytes"], s["snapshot_bytes"])
                for s in stats if s["group"] >= 0}  # fmt: skip
    store = Path(job.reducer.store)
    once, written = run(second, versions, "a", tmp_path / "out-1")  # held states of batch 0: the worker's own
    state = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    shuffled = second.take(np.random.default_rng(1).permutation(second.num_rows))
    again, rewritten = run(shuffled, versions, "b", tmp_path / "out-2")  # another worker: the files of batch 0
    def groups(stats: list) -> list:  # each group's version and stats, but whether its state was held
        return [{k: v for k, v in s.items() if k != "cached"} for s in stats if s["group"] >= 0]

    assert groups(again) == groups(once) and len(groups(once)) == 3
    assert {s["cached"] for s in once if s["group"] >= 0} == {True} and {s["cached"] for s in again
                                                                          if s["group"] >= 0} == {False}
    assert rewritten == written and {p.parts[0] for p in written} == {"windows", "late", "rejected"}
    assert {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()} == state
