"""The calls of ``spanning.spark.aggregate`` that ``tests/test_spark_connect.py`` makes on both kinds of session.

``run_scenarios(spark, folder)`` makes every call on the session it is given (a classic one in the test's process,
or a Spark Connect one in a process of its own: ``python -c "...; main()" OUT.pickle FOLDER``, see ``main``) and
gives, for each, what the call's frames hold as pandas frames, so that the two kinds can be held to each other and
to the oracle. After every action it reads the session's settings back: a changed one is recorded in ``changed``.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from tests.test_readme import ROOT
from tests.test_spark_api import (
    AGGS,
    CELLS,
    RANGE,
    SLIDE,
    TTP,
    USER_SETTINGS,
    calls,
    seconds_of,
    stream_halves,
    text_frame,
    typed,
)

#: the user's settings the calls must leave as found: test_spark_api's (zone, ANSI on, shuffle partitions) and
#: Arrow settings of this test's own
SETTINGS = {**USER_SETTINGS, "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "3000"}  # fmt: skip
#: a parameter's value that stands for the session the calls are made on (``spark=``)
SESSION = "<the session>"
#: calls on the typed frame (``typed(spark, calls(), kind)``): name -> (time kind, the call's parameters)
PARAMETERS: dict[str, tuple[str, dict]] = {
    "strings": ("timestamp", {"range": "15m", "slide": "5m", "ttp": "30m", "aggregates": AGGS, "key": "cell"}),
    "list_aggregates": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "key": "cell",
                                     "aggregates": ["count", "sum:bytes", "erlang", "peak_concurrent"]}),
    "duration_and_key_expression": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": AGGS,
                                                 "duration": "length", "key": "upper(cell)"}),
    "composite_key_offset_first_emit": ("epoch_double", {"range": RANGE, "slide": SLIDE, "ttp": TTP,
                                                         "aggregates": AGGS, "key": ["cell", "band"], "offset": 60,
                                                         "series_start": "first", "empty_windows": "emit"}),
    "text_in_a_zone": ("text", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": AGGS, "key": "cell",
                                "timezone": "Europe/Paris"}),
    "ntz_milliseconds": ("timestamp_ntz", {"range": RANGE * 1000, "slide": SLIDE * 1000, "ttp": "30m",
                                           "aggregates": AGGS, "key": "cell", "time_unit": "ms"}),
    "python_plan_ml_slicing": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": AGGS,
                                            "key": "cell", "plan": "python", "technique": "se-ml-slicing",
                                            "height": 2}),
    "vector_plan": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": AGGS, "key": "cell",
                                 "plan": "vector"}),
    "explode_plan_fixed_start": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": AGGS,
                                              "key": "cell", "plan": "explode", "series_start": 0}),
    "session_given": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": AGGS, "key": "cell",
                                   "spark": SESSION, "height": "auto", "technique": "se-ml-slicing"}),
    "point_events": ("chronons", {"range": RANGE, "slide": SLIDE, "ttp": TTP, "aggregates": ["count", "max:bytes"],
                                  "key": "cell", "point_events": True}),
    "two_specs": ("chronons", {"windows": ["15m/5m", (3600, "10m")], "ttp": TTP, "aggregates": AGGS, "key": "cell"}),
    "first_spec": ("chronons", {"windows": ["15m/5m"], "ttp": TTP, "aggregates": AGGS, "key": "cell"}),
    "second_spec": ("chronons", {"windows": [(3600, "10m")], "ttp": TTP, "aggregates": AGGS, "key": "cell"}),
}
#: the calls that fail, and the start of their one line: the same on both kinds
MISTAKES: dict[str, dict] = {
    "misspelt_column": {"range": RANGE, "slide": SLIDE, "start": "strat"},
    "bad_window": {"windows": ["15m"]},
    "bad_aggregate": {"range": RANGE, "slide": SLIDE, "aggregates": ["nosuch:bytes"]},
    "end_and_duration": {"range": RANGE, "slide": SLIDE, "end": "end", "duration": "length"},
}


class Recorder:
    """What the calls gave, and any setting found changed after an action."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.changed: list[tuple[str, str, str | None]] = []
        self.results: dict[str, Any] = {}

    def check(self, after: str) -> None:
        for name, value in SETTINGS.items():
            now = self.spark.conf.get(name)
            if now != value:
                self.changed.append((after, name, now))

    def act(self, after: str, action: Callable[[], Any]) -> Any:
        out = action()
        self.check(after)
        return out


def outputs(recorder: Recorder, name: str, result) -> dict:
    """The frames of ``result`` as pandas (windows' bounds as epoch seconds), each taken by an action of its own."""
    began = time.perf_counter()
    windows = recorder.act(f"{name}: windows", lambda: seconds_of(result.windows))
    counted = result._observed()  # the windows' pass brought back its counts: .late, .rejected need no pass if none
    late = recorder.act(f"{name}: late", lambda: result.late.toPandas())
    rejected = recorder.act(f"{name}: rejected", lambda: result.rejected.toPandas())
    counts = recorder.act(f"{name}: counts", lambda: result.counts)
    return {"windows": windows, "late": late, "rejected": rejected, "counts": counts, "plans": result.plans,
            "counted": counted, "seconds": time.perf_counter() - began}


def run_scenarios(spark, folder: Path) -> dict:
    """Every call, on ``spark`` (whose settings ``SETTINGS`` are set here and given back at the end), with its input
    files written into ``folder``."""
    import spanning.spark
    from spanning.app.jobspec import UsageError

    before = {name: spark.conf.get(name) for name in SETTINGS}
    for name, value in SETTINGS.items():
        spark.conf.set(name, value)
    recorder = Recorder(spark)
    try:
        frame = calls()
        source = folder / "calls.csv"
        text_frame(frame).to_csv(source, index=False)
        cells = spark.createDataFrame(pd.DataFrame({"cell": CELLS, "region": ["north", "north", "south", "east"]}))
        spark.read.option("header", True).csv(str(source)).createOrReplaceTempView("cdr")
        inputs = {"table": spark.table("cdr"),
                  "join": spark.table("cdr").join(cells, "cell").where("region <> 'east'").drop("region")}  # fmt: skip
        for name, df in inputs.items():
            result = spanning.spark.aggregate(df, range=RANGE, slide=SLIDE, ttp="30m", aggregates=AGGS,
                                              start="start", end="end", key="cell")  # fmt: skip
            recorder.check(f"{name}: the call")
            recorder.results[name] = outputs(recorder, name, result)

        parquet = folder / "calls.parquet"  # typed times: the vector plan's tasks can read the row groups
        usable = frame.dropna(subset=["start"])
        usable = usable[usable["end"] >= usable["start"]]
        stamps = {c: pd.to_datetime(usable[c], unit="s", utc=True).astype("datetime64[us, UTC]")
                  for c in ("start", "end")}  # fmt: skip
        usable.assign(**stamps, bytes=usable["bytes"].astype("Int64")).to_parquet(parquet, index=False,
                                                                                  row_group_size=60)  # fmt: skip
        plain = spark.read.parquet(str(parquet))
        for name, df in {"parquet_plain": plain, "parquet_filtered": plain.where("cell IS NOT NULL")}.items():
            result = spanning.spark.aggregate(df, range=RANGE, slide=SLIDE, ttp=TTP, aggregates=AGGS, key="cell",
                                              plan="vector")  # fmt: skip
            recorder.results[name] = outputs(recorder, name, result)

        frames: dict[str, Any] = {}
        for name, (kind, parameters) in PARAMETERS.items():
            if kind not in frames:
                df = typed(spark, frame.assign(band=[None if i % 9 == 0 else f"b{i % 2}" for i in frame.index]), kind)
                frames[kind] = df.withColumn("length", df["end"] - df["start"]) if kind == "chronons" else df
            given = {name: spark if value == SESSION else value for name, value in parameters.items()}
            result = spanning.spark.aggregate(frames[kind], **given)
            recorder.results[name] = outputs(recorder, name, result)

        mistakes = {}
        for name, parameters in MISTAKES.items():
            try:
                spanning.spark.aggregate(frames["chronons"], **parameters)
                mistakes[name] = None
            except UsageError as err:
                mistakes[name] = str(err)
            recorder.check(f"{name}: the call")
        stream = spark.readStream.format("rate").load().selectExpr("value AS start", "value + 5 AS end")
        try:
            mistakes["stream"] = type(spanning.spark.aggregate(stream, range=RANGE, slide=SLIDE)).__name__
        except UsageError as err:
            mistakes["stream"] = str(err)
        recorder.results["mistakes"] = mistakes
        recorder.results.update(stream_scenarios(recorder, frame, folder))

        usable_after = {  # the session still runs the user's queries, with the user's settings
            "sum": spark.range(10).selectExpr("sum(id)").first()[0],
            "hour": spark.sql("SELECT hour(TIMESTAMP '2024-06-03 12:00:00Z')").first()[0],
        }
        try:
            spark.sql("SELECT CAST('x' AS INT)").collect()
            usable_after["ansi"] = "no error"
        except Exception as err:  # noqa: BLE001 - ANSI on: the cast fails
            usable_after["ansi"] = "CAST_INVALID_INPUT" if "CAST_INVALID_INPUT" in str(err) else str(err)[:200]
        recorder.results["usable_after"] = usable_after
        recorder.results["views"] = [table.name for table in spark.catalog.listTables()
                                     if table.name.startswith("spanning_job_")]  # fmt: skip
        recorder.results["changed"] = recorder.changed
    finally:
        for name, value in before.items():
            spark.conf.set(name, value)
    return recorder.results


#: the stream scenarios' query: one spec (``windows=`` adds a second), series from each key's first event
STREAM_QUERY = {"ttp": "30m", "aggregates": AGGS, "key": "cell"}
STREAM_SPECS = ["15m/5m", (3600, "10m")]


def received_into(folder: str) -> Callable:
    """A ``foreach_batch`` function that writes the three frames it is given as Parquet files into ``folder``.
    Made in this function, it refers to no module of the tests: cloudpickle takes it by value to a Connect server's
    Python, which has neither the tests nor the project."""

    def sink(windows, late, rejected, batch_id):
        import os

        import pyarrow.parquet as pq

        for name, rows in (("windows", windows), ("late", late), ("rejected", rejected)):
            os.makedirs(os.path.join(folder, name), exist_ok=True)
            pq.write_table(rows.toArrow(), os.path.join(folder, name, f"batch={batch_id}.parquet"))

    return sink


def written(folder: Path) -> dict[str, pd.DataFrame]:
    """A stream's three outputs under ``folder`` (``kind/batch=N`` folders or files) as pandas, the windows' bounds
    as epoch seconds."""
    from tests.test_spark_job import read_output

    return {kind: pd.concat([read_output(path) for path in sorted((folder / kind).glob("batch=*"))] or [pd.DataFrame()],
                            ignore_index=True)
            for kind in ("windows", "late", "rejected")}  # fmt: skip


def stream_scenarios(recorder: Recorder, frame: pd.DataFrame, folder: Path) -> dict:
    """The calls on a streaming DataFrame of Parquet files (typed times): ``write_stream`` in two available-now rounds
    (the second file added between them, the second round drained), ``foreach_batch`` over both files with two
    window specs (drained), and a batch call over both files per spec, which they are held to."""
    import spanning.spark

    spark = recorder.spark
    landing, everything, schema = stream_halves(spark, frame, folder)
    results = {}
    steps: dict[str, float] = {}  # seconds of each step
    began = time.perf_counter()

    stream = spanning.spark.aggregate(spark.readStream.schema(schema).parquet(str(landing)), range="15m",
                                      slide="5m", **STREAM_QUERY)  # fmt: skip
    out, checkpoint = folder / "stream_out", str(folder / "stream_chk")
    failures = []
    for i, drain in enumerate((False, True)):
        (landing / f"part-{i}.parquet").write_bytes((everything / f"part-{i}.parquet").read_bytes())
        query = recorder.act(f"write_stream round {i}", lambda drain=drain: stream.write_stream(
            str(out), checkpoint=checkpoint, trigger="available-now", drain=drain))
        query.awaitTermination()
        failures.append(query.exception())
        recorder.check(f"write_stream round {i}: done")
        steps[f"write_stream round {i}"] = round(time.perf_counter() - began - sum(steps.values()), 2)
    results["stream_rounds"] = {**written(out), "failures": [str(f) for f in failures if f is not None],
                                "released_in_round_0": len(list((out / "windows").glob("batch=0")))}  # fmt: skip

    received = folder / "received"
    specs = spanning.spark.aggregate(spark.readStream.schema(schema).parquet(str(everything)), windows=STREAM_SPECS,
                                     **STREAM_QUERY)  # fmt: skip
    query = recorder.act("foreach_batch", lambda: specs.foreach_batch(
        received_into(str(received)), checkpoint=str(folder / "specs_chk"), trigger="available-now", drain=True))
    query.awaitTermination()
    recorder.check("foreach_batch: done")
    results["stream_specs"] = {**written(received), "failures": [str(query.exception())] if query.exception() else []}
    steps["foreach_batch"] = round(time.perf_counter() - began - sum(steps.values()), 2)

    for i, spec in enumerate(STREAM_SPECS):  # a batch call per spec, each tagged with its spec (windows=[spec])
        batch = spanning.spark.aggregate(spark.read.parquet(str(everything)), windows=[spec], series_start="first",
                                         **STREAM_QUERY)  # fmt: skip
        results[f"stream_batch_{i}"] = outputs(recorder, f"stream_batch_{i}", batch)
    steps["batch"] = round(time.perf_counter() - began - sum(steps.values()), 2)
    results["stream_seconds"] = steps
    return results


def worker_facts(spark) -> list[str]:
    """What a worker's Python is, and where it imports the engine from (on the session's workers)."""
    from pyspark.sql import functions as F

    def where(batches):  # runs on a worker
        import sys

        import pyarrow as pa

        import spanning

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"fact": [sys.executable, spanning.__file__]})

    import spark_jobs.sessions.session as session

    session.ship_engine(spark)
    rows = spark.range(1, numPartitions=1).mapInArrow(where, "fact string").select(F.col("fact")).collect()
    return [row["fact"] for row in rows]


def readme_connect_example(folder: Path) -> str:
    """README's Spark Connect example (its ``python3`` block) run as written; what it printed. Its file path is
    relative to the checkout, and the server (a local one, in this process) resolves it in its own folder: there
    ``data`` is a link to the checkout's."""
    block = re.findall(r"```python3\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(block) == 1, "README's one python3 block: the Connect example"
    (folder / "data").symlink_to(ROOT / "data")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block[0], "README.md", "exec"), {})  # noqa: S102 - the README's own code
    return printed.getvalue()


def remote_command(folder: Path) -> dict:
    """``spanning run --remote sc://localhost:15002`` over the calls' CSV (``run_scenarios`` wrote it): the command
    as a client of this process's server, in a session of its own; its exit code, outputs and summary."""
    from spanning.cli import main as command
    from tests.test_spark_api import ZONE

    out = folder / "remote_run"
    code = command(["run", str(folder / "calls.csv"), "--range", str(RANGE), "--slide", str(SLIDE), "--ttp", str(TTP),
                    "--start", "start", "--end", "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes",
                    "--agg", "max:bytes", "--timezone", ZONE, "--output", str(out),
                    "--remote", "sc://localhost:15002"])  # fmt: skip
    if code != 0:
        return {"code": code}
    return {"code": code, **{part: pd.read_parquet(out / part) for part in ("windows", "late", "rejected")},
            "summary": (out / "summary.json").read_text()}


def main() -> None:
    """A Spark Connect session on a local server (``remote("local[2]")``), every call made on it, and the results
    pickled into ``sys.argv[1]``; the input files are written into ``sys.argv[2]``."""
    from pyspark.sql import SparkSession

    began = time.perf_counter()
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    started = time.perf_counter() - began
    results = run_scenarios(spark, Path(sys.argv[2]))
    results["kind"] = type(spark).__module__
    results["workers"] = worker_facts(spark)
    results["readme"] = readme_connect_example(Path(sys.argv[2]))
    results["remote_command"] = remote_command(Path(sys.argv[2]))
    results["seconds"] = {"server": started, "all": time.perf_counter() - began}
    Path(sys.argv[1]).write_bytes(pickle.dumps(results))
    spark.stop()
