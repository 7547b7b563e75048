"""The Spark job on a cluster whose executors have only numpy, pandas, pyarrow and numba installed.

``local-cluster[2,1,1024]`` starts two executor JVMs whose Python workers run ``bare_python`` (see conftest):
a venv without the project and without sortedcontainers, as on a cluster where only the driver has the project.
Everything else the workers import must reach them from the driver (``spark_jobs.sessions.session.ship_engine``).
One driver process runs every job of the test (a cluster start is the slow part), through ``spanning.cli.main``
as ``python -m spanning.cli`` does. Its stream is the recovery test of the executors' path as well: one of its tasks
is held in a batch after writing its files (``PausedOnce``) and that task's executor JVM is killed, and a second
stream's driver (a process of its own, on its own cluster) is killed the same way and restarted in the first.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from spanning.app.cdr import CallMix, generate_cdr
from spanning.cli import main
from spark_jobs.sessions.class_archive import driver_options
from spark_jobs.sessions.session import ENGINE_PACKAGES, ENGINE_ZIP, check_java, driver_memory, engine_zip
from spark_jobs.stream.tasks import GroupTask
from tests.conftest import KERNEL_CACHE
from tests.test_spark_job import AGGS, assert_frames_match, read_output

MASTER = "local-cluster[2,1,1024]"
BROKEN = "driver_only"  # a module that only the driver can import


def per_event_windows() -> dict[str, list]:
    """The per-event engine's windows on a few events (run by the cluster's probe task too: the runner holds this
    function's source)."""
    import spanning

    windows = {}
    for technique, height in (("se-ml-slicing", 2), ("sweeping", 1)):
        engine = spanning.Engine(spanning.WindowSpec(10, 5, 20), {"n": "count", "s": "sum:v"}, technique=technique,
                                 height=height)  # fmt: skip
        events = ((0, 7, 1), (3, 12, 2), (9, 30, 4), (14, 15, 8))
        released = [w for s, e, v in events for w in engine.insert(s, e, {"v": v})] + engine.flush()
        windows[technique] = [[w.start, w.values["n"], w.values["s"]] for w in released]
    return windows


class PausedOnce(GroupTask):
    """The stream's task that holds, in one batch of one output, the first of its tasks to have written its part
    files and its key groups' next state files, before it hands its stats back, until its process is killed (at most
    ``HOLD`` seconds): a kill then hits a batch in flight, where a task has done all but report. ``PAUSES``: output
    folder -> (batch id, a folder for ``paused.json``, which names the held task's Python worker, stage, partition and
    task attempt). Its source runs in this test's driver processes (``__main__``), so cloudpickle ships the class by
    value to the bare executors, and the project's code stays as it is."""

    PAUSES: ClassVar[dict[str, tuple[int, str]]] = {}  # set once, before the stream starts
    HOLD = 120.0

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import json
        import os
        import time

        from pyspark import TaskContext

        pause = self.PAUSES.get(self.output)
        for stats in super().__call__(batches):
            if pause is not None and self.batch_id == pause[0]:
                try:  # the first task of the batch to get here, once: the others (and its retry) go on
                    os.close(os.open(os.path.join(pause[1], "claimed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    pause = None
            if pause is not None and self.batch_id == pause[0]:
                context = TaskContext.get()
                held = {"pid": os.getpid(), "stage": context.stageId(), "partition": context.partitionId(),
                        "attempt": context.attemptNumber(), "task": context.taskAttemptId()}  # fmt: skip
                temp = os.path.join(pause[1], ".paused.json")
                with open(temp, "w") as file:
                    json.dump(held, file)
                os.replace(temp, os.path.join(pause[1], "paused.json"))
                parent, until = os.getppid(), time.monotonic() + self.HOLD
                while os.getppid() == parent and time.monotonic() < until:  # its daemon ends with the executor
                    time.sleep(0.02)
            yield stats


def ancestry(pid: int) -> list[tuple[int, list[bytes]]]:
    """A process and its ancestors up to init, each as (pid, its command line's arguments)."""
    chain = []
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            chain.append((pid, cmdline.read().split(b"\0")))
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    return chain


# the checkout this test is in, first on the driver's path alone (sys.path, not PYTHONPATH, which local-cluster hands
# the executors): the shared environment's editable install may point at another checkout
CHECKOUT = f"import sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
# a driver whose stream's tasks are held by PausedOnce (argv: the stream's, PausedOnce.PAUSES)
PAUSING = CHECKOUT + """from collections.abc import Iterator
from typing import Any, ClassVar

from spark_jobs.stream.tasks import GroupTask
""" + inspect.getsource(PausedOnce) + """
import json

import spark_jobs.stream.writer

PausedOnce.PAUSES = {output: tuple(pause) for output, pause in json.loads(sys.argv[-1]).items()}  # the last argument
spark_jobs.stream.writer.GroupTask = PausedOnce
"""
KILLED_DRIVER = PAUSING + """
from spanning.cli import main

sys.exit(main(json.loads(sys.argv[1])))
"""
RUNNER = PAUSING + inspect.getsource(per_event_windows) + inspect.getsource(
    ancestry) + """
import contextlib, importlib, io, json, os, signal, sys, threading, time

from spanning.cli import main


def run(argv):
    err, began = io.StringIO(), time.perf_counter()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    return [code, err.getvalue(), round(time.perf_counter() - began, 1)]


report = {}
finished = threading.Event()


EXECUTOR = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"  # an executor JVM's main class


def kill_the_paused_executor(folder):  # the executor JVM of the task that PausedOnce holds, killed while it holds it
    paused = os.path.join(folder, "paused.json")
    while not os.path.exists(paused):
        if finished.is_set():
            return
        time.sleep(0.02)
    try:
        with open(paused) as file:
            held = json.load(file)
        chain = ancestry(held["pid"])
        jvms = [(pid, args) for pid, args in chain if EXECUTOR in args]  # (this script's own text names it too)
        assert len(jvms) == 1 and os.getpid() in [pid for pid, _ in chain], [(pid, args[:4]) for pid, args in chain]
        pid, args = jvms[0]
        args = [a.decode() for a in args]
        os.kill(pid, signal.SIGKILL)
        report["executor_kill"] = {**held, "jvm": pid, "executor_id": args[args.index("--executor-id") + 1],
                                   "app_id": args[args.index("--app-id") + 1]}
    except Exception as error:  # told in the report: the test fails on it
        report["executor_kill"] = {"error": repr(error)}


for output, (_, folder) in PausedOnce.PAUSES.items():
    threading.Thread(target=kill_the_paused_executor, args=(folder,), daemon=True).start()
report["runs"] = [run(argv) for argv in json.loads(sys.argv[1])]
finished.set()
probes = json.loads(sys.argv[3])


def where(_):  # on an executor: its Python, its JVM's -XX options, where the engine and sortedcontainers come from,
    # and the per-event engine's windows (SE-ML-Slicing; Plane Sweeping's sorted lists come from sortedcontainers)
    import importlib.util, os, sys
    pid, jvm = os.getpid(), None
    while jvm is None and pid > 1:  # up from this worker to the executor's JVM
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            args = cmdline.read().split(b"\\0")
        if any(b"CoarseGrainedExecutorBackend" in a for a in args):
            jvm = [a.decode() for a in args if a.startswith(b"-XX:")]
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    origins = [getattr(importlib.util.find_spec(n), "origin", None) for n in probes]
    return [sys.executable, jvm, per_event_windows(), *origins]


from pyspark.sql import SparkSession

spark = SparkSession.getActiveSession()
api = json.loads(sys.argv[6])  # spanning.spark.aggregate on the same session: a plain Parquet read and a filtered one
import spanning.spark

query = {"range": "15m", "slide": "5m", "ttp": "30m", "key": "cell", "aggregates": api["aggregates"]}
plain = spark.read.parquet(api["parquet"])
report["api"] = []
# vector both times: the tasks read the Parquet row groups themselves (plain), or take the frame's rows through
# mapInArrow (filtered); the command's python plan runs above
for name, frame in (("plain", plain), ("frame", plain.where("true"))):
    result = spanning.spark.aggregate(frame, plan="vector", **query)
    for part in ("windows", "late", "rejected"):
        getattr(result, part).write.parquet(api["out"] + "/" + name + "/" + part)
    report["api"].append([result.plans[0], result.counts])
report["executor"] = spark.sparkContext.parallelize([0], 1).map(where).collect()[0]
runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # the driver's JVM, as launched
report["driver_jvm"] = list(runtime.getInputArguments())

# A worker failure: the job's function refers to a module only the driver has (in a folder on the driver's
# path alone), so unpickling it on an executor raises ModuleNotFoundError, as 'buckets' did before it was shipped.
sys.path.insert(0, sys.argv[4])
module = importlib.import_module(sys.argv[5])
import spark_jobs.batch.windowed

spark_jobs.batch.windowed.user_errors = module.user_errors
report["broken"] = run(json.loads(sys.argv[2]))
spark.stop()  # the event log written whole and closed before this process ends (the test reads it then)
print(json.dumps(report))
"""


def test_engine_zip_holds_every_package_the_executors_import_built_once():
    first = engine_zip()
    assert engine_zip() == first
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
    assert {name.split("/")[0] for name in names} == set(ENGINE_PACKAGES)
    assert {"spanning/techniques/registry.py", "buckets/ring.py", "sweeping/plane_sweeping.py",
            "spark_jobs/batch/windowed.py", "sortedcontainers/sortedlist.py"} <= set(names)  # fmt: skip
    assert not [n for n in names if "__pycache__" in n or "/tests/" in n or not n.endswith(".py")]
    try:  # every top-level package of the installed project (pyproject's packages.find) is shipped
        top_level = metadata.distribution("spanning").read_text("top_level.txt")
    except metadata.PackageNotFoundError:
        top_level = None
    if top_level:
        assert set(top_level.split()) <= set(ENGINE_PACKAGES)


def assert_written_by_workers(folder: Path) -> None:
    """The folder's parts are pyarrow's, as the Python workers name them (``spark_jobs.batch.worker_parquet``)."""
    parts = [p.name for p in folder.iterdir()]
    assert parts and all(re.fullmatch(r"part-\d{5}-[0-9a-f]{32}\.snappy\.parquet", p) for p in parts), parts


def side_rows(output: Path, part: str) -> list[tuple[str, str]]:
    """An output's late or rejected rows as (call_id, windows missed or reason), sorted: a stream's batches together."""
    folder = output / part
    batches = sorted(folder.glob("batch=*"))
    frame = pd.concat([pd.read_parquet(b) for b in batches]) if batches else pd.read_parquet(folder)
    column = "windows_missed" if part == "late" else "reason"
    return sorted(zip(frame["call_id"].astype(str), frame[column].astype(str), strict=True))


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cdr") / "cdr.csv"
    calls = generate_cdr(2500, seed=5, cells=12, subscribers=300, days=0.5, mix=CallMix(bad_share=0.03))
    calls.to_csv(path, index=False)
    return path


def test_cluster_without_the_project_on_its_executors(bare_python, sample, tmp_path):
    """Same windows, late and rejected events as the local engine: the command's python plan, its stream (through
    the loss of an executor JVM mid-batch, and through a driver's kill -9 mid-batch and a restart), and
    ``spanning.spark.aggregate``'s vector plan over the Parquet row groups and over a frame's rows; the per-event
    engine (SE-ML-Slicing, Plane Sweeping) gives the driver's windows inside an executor's task; and a worker's
    exception is told in one line (its type and message), as in local mode."""
    windows = [str(sample), "--range", "15m", "--slide", "5m", "--ttp", "30m", "--start", "start", "--end", "end",
               "--key", "cell"]  # fmt: skip
    query = [*windows, *(arg for spec in AGGS for arg in ("--agg", spec))]
    on_cluster = ["--master", MASTER, "--partitions", "4", "--plan", "python"]  # mapInPandas: Python on executors
    traffic = ["--agg", "erlang", "--agg", "peak_concurrent", "--agg", "prorated_sum:bytes"]  # the batch path's
    # the command's per-event engine (--technique se-ml-slicing) is not run here as a job of its own (12 s of the
    # test): the probe task below runs that engine on the executor and is compared with the driver's
    runs = {"cluster": [*query, *traffic, *on_cluster]}
    argvs = [["run", *argv, "--output", str(tmp_path / name)] for name, argv in runs.items()]
    arriving = tmp_path / "arriving"  # spanning stream: the same calls as two files, parsed on the executors
    arriving.mkdir()
    calls = pd.read_csv(sample, dtype=str, keep_default_na=False)  # "n/a" stays text, as the job reads it
    calls = calls.assign(_e=pd.to_datetime(calls["end"], errors="coerce")).sort_values("_e", na_position="last")
    for i, half in enumerate((calls.iloc[: len(calls) // 2], calls.iloc[len(calls) // 2 :])):
        half.drop(columns="_e").to_csv(arriving / f"part-{i}.csv", index=False)
        os.utime(arriving / f"part-{i}.csv", (1e9 + i, 1e9 + i))
    def stream(name: str) -> list[str]:  # its output folder is tmp_path / name, its checkpoint tmp_path / name-chk
        return ["stream", str(arriving), *query[1:], "--master", MASTER, "--partitions", "4",
                "--max-files-per-trigger", "1", "--output", str(tmp_path / name), "--checkpoint",
                str(tmp_path / f"{name}-chk"), "--drain"]  # fmt: skip

    argvs.append(stream("stream"))  # batch 1 held in a task after its writes, and that task's executor killed
    # PausedOnce.PAUSES of each stream: batch 1 of its output held, its marker in a folder of its own
    pauses = {name: {str(tmp_path / name): (1, str(tmp_path / f"{name}-pause"))} for name in ("stream", "restarted")}
    for name in pauses:
        os.mkdir(tmp_path / f"{name}-pause")
    parquet = tmp_path / "calls.parquet"  # typed columns: vector's tasks read the row groups on the executors
    parsed = {c: pd.to_datetime(calls[c], errors="coerce", utc=True).astype("datetime64[us, UTC]")
              for c in ("start", "end")}  # fmt: skip
    calls.drop(columns="_e").assign(**parsed, bytes=pd.to_numeric(calls["bytes"], errors="coerce").astype("Int64"),
                                    duration=pd.to_numeric(calls["duration"], errors="coerce")).to_parquet(
        parquet, index=False, row_group_size=len(calls) // 5)  # fmt: skip
    typed = [str(parquet), *windows[1:], *(arg for spec in AGGS[:4] for arg in ("--agg", spec))]
    # the command's vector plan: its tasks read the row groups, and its few windows are written by the bare workers
    argvs.append(["run", *typed, "--master", MASTER, "--plan", "vector", "--output", str(tmp_path / "vector")])
    # the messy CSV file itself: vector's tasks read its byte ranges, and the bare workers write its few windows
    ranges = [*windows, *(arg for spec in AGGS[:4] for arg in ("--agg", spec))]
    argvs.append(["run", *ranges, "--master", MASTER, "--plan", "vector", "--output", str(tmp_path / "csv-vector")])
    broken = ["run", *windows, "--agg", "count", *on_cluster, "--output", str(tmp_path / "broken")]
    # no PYTHONPATH: local-cluster hands the driver's to the executors' Python, which must not find the checkout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_GATEWAY_PORT")}
    env.update(PYSPARK_PYTHON=str(bare_python), PYSPARK_DRIVER_PYTHON=sys.executable)  # executors: the bare venv
    env["SPANNING_KERNEL_CACHE"] = str(KERNEL_CACHE)  # the kernel copy compiled by scripts/setup.sh, if it ran

    # kill -9 of a driver whose stream's batch 1 is in flight (a task held after its writes), on a cluster of its own
    # (local-cluster's master and workers live in the driver's JVM); the restart runs in the runner's below
    began = time.perf_counter()
    killed = [sys.executable, "-c", KILLED_DRIVER, json.dumps(stream("restarted")), json.dumps(pauses["restarted"])]
    with (tmp_path / "restarted.err").open("w") as err:  # the child's copy stays open
        driver = subprocess.Popen(killed, cwd=tmp_path, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                  stderr=err)  # fmt: skip
    held = tmp_path / "restarted-pause" / "paused.json"
    deadline = time.monotonic() + 300
    while not held.exists():
        assert driver.poll() is None and time.monotonic() < deadline, (
            "the stream ended before it could be killed", (tmp_path / "restarted.err").read_text()[-3000:])
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver, its JVM (the cluster's master and workers) and executors
    driver.wait(timeout=60)
    print("the killed driver's seconds:", round(time.perf_counter() - began, 1))
    query_log = tmp_path / "restarted-chk" / "query"
    assert (query_log / "offsets" / "1").exists() and not (query_log / "commits" / "1").exists(), "batch 1 in flight"
    assert list((tmp_path / "restarted").glob("*/_tmp-batch=1/part-*.parquet")), "its held task had written its part"
    records = tmp_path / "restarted-chk" / "spanning" / "batches"
    assert (query_log / "commits" / "0").exists() and not (records / "00000001.json").exists(), "batch 0 done, not 1"
    argvs.append(stream("restarted"))  # the restart, in the runner's driver (a new application, as after a crash)
    events = tmp_path / "events"  # Spark's event log of the runner's application: the killed executor's task
    events.mkdir()
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("\n".join([  # one plain file (Spark 4 rolls and compresses by default)
        "spark.eventLog.enabled true", f"spark.eventLog.dir {events.as_uri()}", "spark.eventLog.compress false",
        "spark.eventLog.rolling.enabled false"]))  # fmt: skip
    env["SPARK_CONF_DIR"] = str(conf)
    probes = ["spanning", "sortedcontainers"]
    driver_only = tmp_path / "driver-only"
    driver_only.mkdir()
    (driver_only / f"{BROKEN}.py").write_text("def user_errors(error, columns):\n    return error\n")
    api = {"parquet": str(parquet), "aggregates": AGGS[:4], "out": str(tmp_path / "api")}
    args = [sys.executable, "-c", RUNNER, json.dumps(argvs), json.dumps(broken), json.dumps(probes), str(driver_only),
            BROKEN, json.dumps(api), json.dumps(pauses["stream"])]  # fmt: skip
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print("seconds per run:", [run[2] for run in [*report["runs"], report["broken"]]])
    for (code, err, _), name in zip(report["runs"], [*runs, "stream", "vector", "csv-vector", "restarted"],
                                    strict=True):  # fmt: skip
        assert code == 0 and err == "", (name, err)

    jvm_options = report["driver_jvm"]  # a small local input: the quick compiler, and the class archive if built
    assert "-XX:TieredStopAtLevel=1" in jvm_options, jvm_options
    archive = driver_options(check_java())
    assert [o for o in jvm_options if o.startswith("-XX:SharedArchiveFile=")] == archive[:1], jvm_options
    assert f"-Xmx{driver_memory()}" in jvm_options, jvm_options  # not Spark's 1 GiB (session.driver_memory)

    python, executor_jvm, per_event, *origins = report["executor"]
    assert "-XX:TieredStopAtLevel=1" in executor_jvm, executor_jvm  # local-cluster's executors: the same choice
    assert Path(python) == bare_python  # the workers ran the bare Python, importing the shipped engine
    assert all(origin and f"/{ENGINE_ZIP}/" in origin for origin in origins), origins
    on_driver = per_event_windows()
    assert per_event == on_driver and on_driver["se-ml-slicing"] == on_driver["sweeping"] != [], per_event

    assert main(["run", *query, *traffic, "--engine", "local", "--output", str(tmp_path / "local")]) == 0
    local = tmp_path / "local"
    for name in runs:
        output = tmp_path / name
        summary = json.loads((output / "summary.json").read_text())
        assert summary["spark_master"] == MASTER
        assert summary["plans"][0]["plan"] == "python", summary["plans"]
        got = read_output(output / "windows")
        assert_frames_match(got, read_output(local / "windows")[list(got.columns)], ["cell"])
        for part in ("late", "rejected"):
            assert side_rows(output, part) == side_rows(local, part), (name, part)

    assert main(["run", *ranges, "--engine", "local", "--output", str(tmp_path / "csv-local")]) == 0
    csv_vector = tmp_path / "csv-vector"
    assert json.loads((csv_vector / "summary.json").read_text())["plans"][0]["reads_input"]
    assert_written_by_workers(csv_vector / "windows")
    got = read_output(csv_vector / "windows")
    assert_frames_match(got, read_output(tmp_path / "csv-local" / "windows")[list(got.columns)], ["cell"])
    for part in ("late", "rejected"):
        assert side_rows(csv_vector, part) == side_rows(tmp_path / "csv-local", part), part

    assert main(["run", *typed, "--engine", "local", "--output", str(tmp_path / "parquet-local")]) == 0
    summary = json.loads((tmp_path / "parquet-local" / "summary.json").read_text())
    (plain_plan, plain_counts), (frame_plan, frame_counts) = report["api"]  # the call, on the bare executors
    assert plain_plan["plan"] == "vector" and plain_plan["reads_input"], plain_plan
    assert frame_plan["plan"] == "vector" and not frame_plan["reads_input"], frame_plan
    assert summary["rejected"] > 0 and plain_counts == {k: summary[k] for k in ("rejected", "late")} | {
        "read": summary["rows_read"], "accepted": summary["accepted"]}  # fmt: skip
    assert frame_counts == plain_counts  # the filter keeps every row
    vector = tmp_path / "vector"
    assert json.loads((vector / "summary.json").read_text())["plans"][0]["reads_input"]
    assert_written_by_workers(vector / "windows")
    for name in ("plain", "frame", "vector"):
        folder = vector if name == "vector" else tmp_path / "api" / name
        got = read_output(folder / "windows")
        assert_frames_match(got, read_output(tmp_path / "parquet-local" / "windows")[list(got.columns)], ["cell"])
        for part in ("late", "rejected"):
            assert side_rows(folder, part) == side_rows(tmp_path / "parquet-local", part), (name, part)

    first = ["run", str(arriving), *query[1:], "--engine", "local", "--series-start", "first", "--output",
             str(tmp_path / "first")]  # fmt: skip
    assert main(first) == 0  # a drained stream equals the batch job whose series start at the first arrival
    # both streams: one whose executor was killed in batch 1 and whose task Spark ran again, and one whose driver was
    # killed in batch 1 and that was restarted
    for name in ("stream", "restarted"):
        streamed = pd.concat([read_output(p) for p in sorted((tmp_path / name / "windows").glob("batch=*"))])
        assert_frames_match(streamed, read_output(tmp_path / "first" / "windows"), ["cell"])
        for part in ("late", "rejected"):  # the stream's, written by the bare executors' batches
            column = "windows_missed" if part == "late" else "reason"
            assert side_rows(tmp_path / name, part) == side_rows(tmp_path / "first", part) != [], (
                f"{name}: the stream's {part}/ on the cluster: not spanning run's rows by (call_id, {column})")
        assert json.loads((tmp_path / name / "summary.json").read_text())["rows_read"] == len(calls), name
        assert not list((tmp_path / name).glob("*/_tmp-batch=*")), name
        batches = tmp_path / f"{name}-chk" / "spanning" / "batches"
        records = [json.loads(p.read_text()) for p in sorted(batches.glob("*.json"))]
        assert [r["batch"] for r in records] == [0, 1, 2], (name, "two files, then the drain")
        assert {r["reduced_on"] for r in records} == {"executors"}, "the bare executors' tasks reduced every batch"
        state_files = list((tmp_path / f"{name}-chk" / "spanning" / "buckets").rglob("snapshot-*"))
        assert state_files, "the tasks kept their key groups' state in the checkpoint"

    # the executor's kill hit batch 1's task while it was held, after its writes: Spark saw that very task lost with
    # its executor, and ran its partition again, which succeeded
    kill = report["executor_kill"]
    print("the executor's kill:", kill)
    assert "error" not in kill and kill["attempt"] == 0, kill
    log = [json.loads(line) for line in next(events.glob(f"{kill['app_id']}*")).read_text().splitlines()]
    ends = [e for e in log if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] == kill["stage"]]
    lost = [e for e in ends if e["Task Info"]["Task ID"] == kill["task"]]
    assert [e["Task End Reason"]["Reason"] for e in lost] == ["ExecutorLostFailure"], lost
    assert lost[0]["Task End Reason"]["Executor ID"] == kill["executor_id"], lost
    removed = [e for e in log if e["Event"] == "SparkListenerExecutorRemoved"]
    assert [e["Executor ID"] for e in removed] == [kill["executor_id"]], removed  # the kill, and no other loss
    again = [e for e in ends[ends.index(lost[0]) + 1 :] if e["Task Info"]["Partition ID"] == kill["partition"]]
    assert again and again[-1]["Task End Reason"]["Reason"] == "Success", again

    code, err, _ = report["broken"]
    assert code != 0, "the job no longer refers to spark_jobs.batch.windowed.user_errors: inject the failure elsewhere"
    assert err.splitlines()[0] == f"spanning: error: ModuleNotFoundError: No module named '{BROKEN}'", err
    assert "Traceback" not in err and "PythonException" not in err
    assert not (tmp_path / "broken").exists()
