"""What a whole ``spanning run`` does outside its windows pass, and that each shortcut keeps its guarantee.

- A local Parquet input's schema comes from its footers (no Spark job), and it is the schema Spark infers.
- One integer key is grouped by itself: no key ids, no join back, the same windows.
- An empty ``rejected/`` or ``late/`` is written on the driver, readable with the schema Spark would write.
- The windows written by the Python workers (``spark_jobs.batch.worker_parquet``) are the files Spark's writer writes.
- The engine zip is not shipped to Python workers that import the engine from this process's own files.
"""

from __future__ import annotations

import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spanning.app.files import input_files
from spanning.app.jobspec import EventFields, InputFiles, OutputOptions, RunConfig, SparkOptions, WindowQuery


def _plain_columns() -> pa.Table:
    return pa.table({
        "i8": pa.array([1, None], pa.int8()),
        "i16": pa.array([1, 2], pa.int16()),
        "i32": pa.array([None, 2], pa.int32()),
        "i64": pa.array([1, 2], pa.int64()),
        "f32": pa.array([0.5, None], pa.float32()),
        "f64": pa.array([0.5, 1.5], pa.float64()),
        "flag": pa.array([True, None]),
        "text": pa.array(["a", None]),
        "big_text": pa.array(["a", "b"], pa.large_string()),
        "day": pa.array([0, 19000], pa.date32()),
        "at_ms": pa.array([0, 1_000], pa.timestamp("ms", tz="UTC")),
        "at_us": pa.array([0, 1_000_000], pa.timestamp("us", tz="Europe/Paris")),
    })  # fmt: skip


def test_parquet_schema_from_the_footers_is_the_one_spark_infers(spark, tmp_path):
    from spark_jobs.reading.prepare import parquet_footer_schema, read_input

    table = _plain_columns()
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(table.slice(0, 1), folder / "a.parquet")
    pq.write_table(table.slice(1, 1), folder / "b.parquet")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    inputs = input_files([str(folder)], None, ",")
    footer = parquet_footer_schema(inputs)
    assert set(tracker.getJobIdsForGroup(None)) == before  # no Spark job: the footers read on the driver
    inferred = spark.read.parquet(str(folder)).schema
    assert set(tracker.getJobIdsForGroup(None)) > before  # as Spark's inference runs one (so one would be seen)
    assert footer is not None and footer == inferred
    read = read_input(spark, inputs)
    assert read.schema == inferred
    assert sorted(map(tuple, read.collect()), key=repr) == sorted(
        map(tuple, spark.read.parquet(str(folder)).collect()), key=repr
    )
    # what Spark reads otherwise, or cannot read as pyarrow maps it: Spark infers (None)
    for name, column in {
        "unsigned": pa.array([1], pa.uint32()),
        "wall_time": pa.array([0], pa.timestamp("us")),
        "decimal": pa.array([1], pa.decimal128(10, 2)),
        "nested": pa.array([[1]], pa.list_(pa.int64())),
    }.items():
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({name: column}), path)
        assert parquet_footer_schema(input_files([str(path)], None, ",")) is None, name
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(pa.table({"x": pa.array([1], pa.int64())}), other / "a.parquet")
    pq.write_table(pa.table({"x": pa.array([1], pa.int32())}), other / "b.parquet")
    assert parquet_footer_schema(input_files([str(other)], None, ",")) is None  # two schemas: Spark merges
    pq.write_table(pa.table({"x": [1], "X": [2]}), tmp_path / "cases.parquet")
    assert parquet_footer_schema(input_files([str(tmp_path / "cases.parquet")], None, ",")) is None


def _calls(key) -> pd.DataFrame:
    return pd.DataFrame({
        "cell": key,
        "start": [0, 100, 200, 300, 400, 500, 5000],
        "end": [700, 300, 900, 400, 2000, 650, 5100],
        "bytes": pd.array([1, 2, None, 4, 5, 6, 7], dtype="Int64"),
    })  # fmt: skip


@pytest.mark.parametrize("plan", ["explode", "vector"])
def test_one_integer_key_is_grouped_by_itself_with_the_windows_of_a_text_key(spark, tmp_path, plan):
    from spark_jobs.batch.compute import compute

    query = WindowQuery(600, 200, 0, ["count", "sum:bytes", "max:bytes"])
    got = {}
    for kind, key in (("int", pd.array([7, 3, None, 7, 3, 7, 3], dtype="Int32")),
                      ("text", ["7", "3", None, "7", "3", "7", "3"])):  # fmt: skip
        path = tmp_path / f"{kind}.parquet"
        _calls(key).to_parquet(path, index=False)
        cfg = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=["cell"]), query,
                        spark=SparkOptions(plan=plan))  # fmt: skip
        job = compute(spark, cfg)
        assert job.choices[0].key_ids == (kind == "text" and plan != "explode")  # explode: ids once sampled only
        rows = job.windows.collect()
        got[kind] = sorted(((None if r["cell"] is None else str(r["cell"]), *tuple(r)[1:]) for r in rows), key=repr)
    assert got["int"] == got["text"] and len(got["int"]) > 5


@pytest.mark.parametrize("plan", ["auto", "python"])
def test_empty_rejected_and_late_are_written_on_the_driver_as_spark_writes_them(spark, tmp_path, plan):
    """Counted while the windows are written (a JVM plan's pass; the Python plan's late rows above its cache),
    none is written on the driver with no Spark job; some are written by Spark, the count checked."""
    from spark_jobs.command import run_spark

    messy = _calls(["a"] * 7).assign(start=[0, 100, 200, 300, 400, 500, 50], end=[700, 300, 900, 400, 2000, 650, 10])
    for fmt in ("parquet", "csv"):
        schemas = {}
        for case, frame, ttp in (("clean", _calls(["a"] * 7), 10_000), ("messy", messy, 0)):
            path = tmp_path / f"{case}.parquet"
            frame.to_parquet(path, index=False)
            out = tmp_path / f"{case}-{fmt}"
            cfg = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=["cell"]),
                            WindowQuery(600, 200, ttp, ["count", "sum:bytes"]),
                            output=OutputOptions(str(out), fmt), spark=SparkOptions(plan=plan))  # fmt: skip
            summary = run_spark(cfg)
            assert [c["plan"] for c in summary["plans"]] == ["explode" if plan == "auto" else plan]
            if case == "clean":  # nothing to reject, nothing late: both written on the driver
                assert summary["rejected"] == summary["late"] == 0
                for name in ("rejected", "late"):
                    assert sorted(p.name for p in (out / name).iterdir()) == [f"part-00000.{fmt}"]
            else:  # an end before its start; calls that arrive after windows they overlap were released
                assert summary["rejected"] == 1 and summary["late"] > 0
            hadoop_files = [p.name for p in out.rglob("*") if p.name == "_SUCCESS" or p.name.endswith(".crc")]
            assert hadoop_files == [], hadoop_files  # Spark-written folders too: no commit marker, no checksums
            for name in ("rejected", "late"):
                reader = spark.read if fmt == "parquet" else spark.read.option("header", True).format("csv")
                read = reader.load(str(out / name), format=fmt)
                schemas[case, name] = read.schema
                assert read.count() == summary[name]
        assert schemas["clean", "rejected"] == schemas["messy", "rejected"]
        assert schemas["clean", "late"] == schemas["messy", "late"]


@pytest.mark.parametrize("times", ["seconds", "instants", "all rejected", "csv ranges"])
def test_windows_written_by_the_python_workers_are_what_spark_writes(spark, tmp_path, monkeypatch, times):
    import spark_jobs.batch.outputs as outputs
    from spark_jobs.command import run_spark

    calls = _calls(["a", "b", None, "a", "b", "a", "b"])
    if times == "instants":  # window_start and window_end are timestamps: microseconds adjusted to UTC
        for column in ("start", "end"):
            calls[column] = pd.to_datetime(calls[column], unit="s", utc=True)
    elif times == "all rejected":  # no window at all: one part with the schema alone
        calls["end"] = calls["start"] - 1
    path = tmp_path / "calls.parquet"
    calls.to_parquet(path, index=False, coerce_timestamps="us")
    if times == "csv ranges":  # CSV whose byte ranges the tasks read (csv_read.csv_merge_is_small): few partials
        path = tmp_path / "calls.csv"
        calls.to_csv(path, index=False)
    by_workers = []
    in_workers = outputs.write_in_workers
    monkeypatch.setattr(outputs, "write_in_workers", lambda *a: by_workers.append(in_workers(*a)))
    got = {}
    for writer in ("workers", "spark"):
        if writer == "spark":
            monkeypatch.setattr(outputs, "writes_in_workers", lambda *a: False)
        out = tmp_path / writer
        fields = EventFields("start", "end", keys=["cell"], timezone="Europe/Paris")  # the session's zone
        cfg = RunConfig(InputFiles([str(path)]), fields,
                        WindowQuery(600, 200, 0, ["count", "sum:bytes", "mean:bytes", "max:bytes"]),
                        output=OutputOptions(str(out)), spark=SparkOptions(plan="vector"))  # fmt: skip
        summary = run_spark(cfg)
        folder = out / "windows"
        names = sorted(p.name for p in folder.iterdir())
        assert names and all(n.startswith("part-") and n.endswith(".snappy.parquet") for n in names), names
        read = spark.read.parquet(str(folder))
        table = pq.read_table(folder)
        rows = sorted(map(tuple, read.collect()), key=repr)
        assert len(rows) == summary["windows_written"] == table.num_rows
        got[writer] = (read.schema, table.schema.remove_metadata(), rows, table.sort_by("window_start").to_pylist())
    assert by_workers == [len(got["spark"][2])]  # the first run's windows went through the workers, only those
    assert got["workers"][:2] == got["spark"][:2]  # the same schema, read by Spark and by pyarrow
    assert got["workers"][2] == got["spark"][2] and (times == "all rejected") == (got["spark"][2] == [])
    assert sorted(got["workers"][3], key=repr) == sorted(got["spark"][3], key=repr)


def test_only_plans_whose_tasks_run_python_write_local_parquet_in_the_workers(spark):
    from spark_jobs.batch.worker_parquet import writes_in_workers

    frame = spark.createDataFrame(pd.DataFrame({"cell": ["a"], "n": [1], "mean": [0.5]}))
    assert writes_in_workers(frame, "parquet", ["vector"], True)
    assert writes_in_workers(frame, "parquet", ["python"], True)
    assert not writes_in_workers(frame, "parquet", ["vector"], False)  # many windows: Spark's writer is faster
    assert not writes_in_workers(frame, "csv", ["vector"], True)  # Spark's CSV writer: its quoting and time format
    assert not writes_in_workers(frame, "parquet", ["explode"], True)  # no Python worker started: Spark's writer
    decimal = frame.selectExpr("cell", "cast(n as decimal(10, 2)) as n")  # pyarrow writes decimals otherwise
    assert not writes_in_workers(decimal, "parquet", ["vector"], True)
    nested = frame.selectExpr("cell", "array(n) as n")
    assert not writes_in_workers(nested, "parquet", ["vector"], True)
    spark.conf.set("spark.sql.parquet.compression.codec", "lz4")  # a codec pyarrow names otherwise: Spark's
    try:
        assert not writes_in_workers(frame, "parquet", ["vector"], True)
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")


def test_the_engine_is_shipped_only_to_workers_that_cannot_import_it_themselves(monkeypatch, tmp_path):
    from spark_jobs.sessions import session

    assert session.workers_import_the_engine("local[2]", sys.executable)
    assert session.workers_import_the_engine("local", sys.executable)
    assert not session.workers_import_the_engine("local-cluster[2,1,1024]", sys.executable)  # other processes
    assert not session.workers_import_the_engine("spark://host:7077", sys.executable)
    assert not session.workers_import_the_engine("local[2]", str(tmp_path / "python"))  # another interpreter
    monkeypatch.setattr(session, "ENGINE_PACKAGES", (*session.ENGINE_PACKAGES, "added_at_run_time"))
    package = tmp_path / "added_at_run_time"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))  # a path this process added: a worker would not have it
    assert not session.workers_import_the_engine("local[2]", sys.executable)


def test_local_workers_import_pyspark_from_its_installed_package_not_its_zip(spark):
    import pyspark

    def where(batches):
        import pyspark

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"file": pyspark.__file__}])

    files = {r.file for r in spark.range(0, 4, 1, 2).mapInArrow(where, "file string").collect()}
    assert files == {pyspark.__file__}  # the driver's own, compiled; not .../python/lib/pyspark.zip/...


def test_the_worker_daemon_leaves_off_only_zips_that_the_installed_pyspark_holds_unzipped(tmp_path):
    from spark_jobs.sessions.worker_daemon import installed_pyspark_first

    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "py4j-0.10.9.9.dist-info").mkdir()
    zips = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    assert installed_pyspark_first([*zips, "/work", str(site)]) == ["/work", str(site)]
    assert installed_pyspark_first([*zips, "/work"]) == [*zips, "/work"]  # the package is not on the path
    other = str(lib / "py4j-0.10.9.8-src.zip")  # another py4j than the installed one: kept
    assert installed_pyspark_first([zips[0], other, str(site)]) == [other, str(site)]
    spark_home = tmp_path / "spark" / "python" / "lib" / "pyspark.zip"  # a Spark distribution's zip: kept
    assert installed_pyspark_first([str(spark_home), str(site)]) == [str(spark_home), str(site)]


def test_the_worker_daemon_imports_the_jobs_modules_once_and_serves_both_rdd_and_sql_tasks():
    """A session started with ``worker_modules`` (``spanning run``) has its worker daemon import them
    (``worker_daemon.preload``): a SQL task's worker finds them imported. The daemon that ``start_worker_daemon``
    starts with an RDD task, before the SparkSession, is the one that forks the SQL tasks' workers: Spark keeps one
    daemon per environment, and the context's environment holds what SQL tasks add to theirs. A fresh process:
    ``get_session`` reuses an active session."""
    import json
    import subprocess

    code = """if True:
        import json, os, sys
        import pyarrow as pa
        from spark_jobs.sessions.session import get_session

        spark = get_session("local[1]", worker_modules=("colorsys",))

        def sql_task(batches):
            for _ in batches:
                pass
            yield pa.RecordBatch.from_pylist([{"preloaded": "colorsys" in sys.modules, "daemon": os.getppid()}])

        def rdd_task(items):
            yield os.getppid()

        row = spark.range(0, 1, 1, 1).mapInArrow(sql_task, "preloaded boolean, daemon long").collect()[0]
        rdd_daemon = spark.sparkContext.parallelize([0], 1).mapPartitions(rdd_task).collect()[0]
        print(json.dumps({"preloaded": row.preloaded, "one_daemon": row.daemon == rdd_daemon}))
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"preloaded": True, "one_daemon": True}


def test_a_worker_importing_one_kernel_does_not_import_pandas_and_the_public_names_still_resolve():
    import subprocess

    code = ("import sys, spanning.engines.window_ranges; assert 'pandas' not in sys.modules, 'pandas'; "
            "import spanning; missing = [n for n in spanning.__all__ if getattr(spanning, n, None) is None]; "
            "assert not missing, missing; from spanning import Engine, WindowSpec, count; print('ok')")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_python_workers_are_warmed_in_the_background_and_a_failing_warm_up_is_silent(spark):
    """Each warm-up is a Spark job of one task per core whose tasks import the modules in the Python workers:
    one that imports completes every task; one whose import fails, fails its tasks, and nothing is raised."""
    from spark_jobs.sessions.session import warm_python_workers

    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    warmed = warm_python_workers(spark, ("numpy", "colorsys"))
    warmed.join(timeout=120)
    failing = warm_python_workers(spark, ("no_such_module_for_spanning",))  # the query would report it, not this
    failing.join(timeout=120)
    assert not warmed.is_alive() and not failing.is_alive()
    jobs = sorted(set(tracker.getJobIdsForGroup(None)) - before)
    assert len(jobs) == 2, jobs
    cores = spark.sparkContext.defaultParallelism
    for job, succeeds in zip(jobs, (True, False), strict=True):
        info = tracker.getJobInfo(job)
        stages = [tracker.getStageInfo(stage) for stage in info.stageIds]
        assert info.status == ("SUCCEEDED" if succeeds else "FAILED"), info
        if succeeds:
            assert sum(stage.numCompletedTasks for stage in stages) == cores
        else:
            assert sum(stage.numFailedTasks for stage in stages) >= 1


def test_the_driver_heap_is_a_quarter_of_memory_unless_the_user_gives_one(tmp_path, monkeypatch):
    """local[*] runs its executors in the driver's JVM: Spark's 1 GiB default ran out at 60 windows per event
    (spanning stream, 100k calls a trigger). A heap the user gives, either way, is left to Spark."""
    from spark_jobs.sessions.session import driver_memory, submit_args

    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    heap = driver_memory()
    assert heap is not None and 1024 <= int(heap.removesuffix("m")) <= 8192
    assert submit_args(["-Dx=1"], heap).startswith(f"--driver-memory {heap} --driver-java-options")
    (tmp_path / "spark-defaults.conf").write_text("# spark.driver.memory 5g\nspark.master local[2]\n")
    assert driver_memory() == heap  # commented out: not given
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.memory 3g\n")
    assert driver_memory() is None
    (tmp_path / "spark-defaults.conf").unlink()
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "2g")
    assert driver_memory() is None


def test_local_files_skip_hadoops_checksum_layer_unless_spark_defaults_say_otherwise(spark, tmp_path, monkeypatch):
    """spanning's session reads and writes local files through Hadoop's raw local file system (no ``.crc`` file
    beside each file: a stream's trigger lists and writes several), and on a local master takes task results of up
    to 128 MiB in their status messages; a key that spark-defaults.conf sets is left to it."""
    from spark_jobs.sessions.session import LOCAL_DIRECT_RESULTS, RAW_LOCAL_FILES, is_local, unless_spark_defaults

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    assert {key: hadoop.get(key.removeprefix("spark.hadoop.")) for key in RAW_LOCAL_FILES} == RAW_LOCAL_FILES
    spark.range(3).write.parquet(str(tmp_path / "written"))
    assert not list((tmp_path / "written").rglob("*.crc")), "the checksum layer wrote its files"
    conf = spark.sparkContext.getConf()
    assert {key: conf.get(key) for key in LOCAL_DIRECT_RESULTS} == LOCAL_DIRECT_RESULTS  # the tests' local[2]
    assert [is_local(m) for m in ("local", "local[2]", "local[*]", "local-cluster[2,1,1024]", "yarn", None)] == \
        [True, True, True, False, False, False]
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert unless_spark_defaults(RAW_LOCAL_FILES) == RAW_LOCAL_FILES
    (tmp_path / "spark-defaults.conf").write_text("spark.hadoop.fs.file.impl org.apache.hadoop.fs.LocalFileSystem\n"
                                                  "spark.task.maxDirectResultSize=4m\n")  # fmt: skip
    left = "spark.hadoop.fs.AbstractFileSystem.file.impl"
    assert unless_spark_defaults(RAW_LOCAL_FILES) == {left: RAW_LOCAL_FILES[left]}
    assert unless_spark_defaults(LOCAL_DIRECT_RESULTS) == {}


def test_the_exit_stops_spark_without_waiting_for_the_accumulator_server():
    """``stop_at_exit`` (the exit hook of a JVM that spanning started): the context stops, and the accumulator
    server is told to stop and detached first, so that ``SparkContext.stop`` does not wait a poll for it; a
    context without such a server (another PySpark) gets a plain stop."""
    from spark_jobs.sessions.session import stop_at_exit

    class Server:
        server_shutdown = False

    class Context:
        def __init__(self, server):
            self._accumulatorServer = server

    class Session:
        def __init__(self, server):
            self.sparkContext, self.seen_at_stop = Context(server), []

        def stop(self):
            self.seen_at_stop.append(self.sparkContext._accumulatorServer)

    server = Server()
    session = Session(server)
    stop_at_exit(session)
    assert session.seen_at_stop == [None] and server.server_shutdown
    other = Session(object())  # not a server this hook knows: left for stop
    stop_at_exit(other)
    assert len(other.seen_at_stop) == 1 and other.seen_at_stop[0] is not None
