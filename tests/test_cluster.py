"""The Spark job on a cluster whose executors have only numpy, pandas, pyarrow and numba installed.

``local-cluster[2,1,1024]`` starts two executor JVMs whose Python workers run ``bare_python`` (see conftest):
a venv without the project and without sortedcontainers, as on a cluster where only the driver has the project.
Everything else the workers import must reach them from the driver (``spark_jobs.sessions.session.ship_engine``).
One driver process runs every job of the test (a cluster start is the slow part), through ``spanning.cli.main``
as ``python -m spanning.cli`` does.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest

from spanning.app.cdr import CallMix, generate_cdr
from spanning.cli import main
from spark_jobs.sessions.class_archive import driver_options
from spark_jobs.sessions.session import ENGINE_PACKAGES, ENGINE_ZIP, check_java, driver_memory, engine_zip
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


# the checkout this test is in, first on the driver's path alone (sys.path, not PYTHONPATH, which local-cluster hands
# the executors): the shared environment's editable install may point at another checkout
RUNNER = f"import sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n" + inspect.getsource(
    per_event_windows) + """
import contextlib, importlib, io, json, sys, time

from spanning.cli import main


def run(argv):
    err, began = io.StringIO(), time.perf_counter()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    return [code, err.getvalue(), round(time.perf_counter() - began, 1)]


report = {"runs": [run(argv) for argv in json.loads(sys.argv[1])]}
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
    """Same windows, late and rejected events as the local engine: the command's python plan, its stream, and
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
    stream = ["stream", str(arriving), *query[1:], "--master", MASTER, "--partitions", "4", "--max-files-per-trigger",
              "1", "--output", str(tmp_path / "stream"), "--checkpoint", str(tmp_path / "chk"), "--drain"]
    argvs.append(stream)
    parquet = tmp_path / "calls.parquet"  # typed columns: vector's tasks read the row groups on the executors
    parsed = {c: pd.to_datetime(calls[c], errors="coerce", utc=True).astype("datetime64[us, UTC]")
              for c in ("start", "end")}  # fmt: skip
    calls.drop(columns="_e").assign(**parsed, bytes=pd.to_numeric(calls["bytes"], errors="coerce").astype("Int64"),
                                    duration=pd.to_numeric(calls["duration"], errors="coerce")).to_parquet(
        parquet, index=False, row_group_size=len(calls) // 5)  # fmt: skip
    typed = [str(parquet), *windows[1:], *(arg for spec in AGGS[:4] for arg in ("--agg", spec))]
    # the command's vector plan: its tasks read the row groups, and its few windows are written by the bare workers
    argvs.append(["run", *typed, "--master", MASTER, "--plan", "vector", "--output", str(tmp_path / "vector")])
    broken = ["run", *windows, "--agg", "count", *on_cluster, "--output", str(tmp_path / "broken")]
    # no PYTHONPATH: local-cluster hands the driver's to the executors' Python, which must not find the checkout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_GATEWAY_PORT")}
    env.update(PYSPARK_PYTHON=str(bare_python), PYSPARK_DRIVER_PYTHON=sys.executable)  # executors: the bare venv
    env["SPANNING_KERNEL_CACHE"] = str(KERNEL_CACHE)  # the kernel copy compiled by scripts/setup.sh, if it ran
    probes = ["spanning", "sortedcontainers"]
    driver_only = tmp_path / "driver-only"
    driver_only.mkdir()
    (driver_only / f"{BROKEN}.py").write_text("def user_errors(error, columns):\n    return error\n")
    api = {"parquet": str(parquet), "aggregates": AGGS[:4], "out": str(tmp_path / "api")}
    args = [sys.executable, "-c", RUNNER, json.dumps(argvs), json.dumps(broken), json.dumps(probes), str(driver_only),
            BROKEN, json.dumps(api)]  # fmt: skip
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print("seconds per run:", [run[2] for run in [*report["runs"], report["broken"]]])
    for (code, err, _), name in zip(report["runs"], [*runs, "stream", "vector"], strict=True):
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
    parts = [p.name for p in (vector / "windows").iterdir()]  # pyarrow's parts (spark_jobs.batch.worker_parquet)
    assert parts and all(re.fullmatch(r"part-\d{5}-[0-9a-f]{32}\.snappy\.parquet", p) for p in parts), parts
    for name in ("plain", "frame", "vector"):
        folder = vector if name == "vector" else tmp_path / "api" / name
        got = read_output(folder / "windows")
        assert_frames_match(got, read_output(tmp_path / "parquet-local" / "windows")[list(got.columns)], ["cell"])
        for part in ("late", "rejected"):
            assert side_rows(folder, part) == side_rows(tmp_path / "parquet-local", part), (name, part)

    first = ["run", str(arriving), *query[1:], "--engine", "local", "--series-start", "first", "--output",
             str(tmp_path / "first")]  # fmt: skip
    assert main(first) == 0  # a drained stream equals the batch job whose series start at the first arrival
    streamed = pd.concat([read_output(p) for p in sorted((tmp_path / "stream" / "windows").glob("batch=*"))])
    assert_frames_match(streamed, read_output(tmp_path / "first" / "windows"), ["cell"])
    for part in ("late", "rejected"):  # the stream's, written by the bare executors' batches
        column = "windows_missed" if part == "late" else "reason"
        assert side_rows(tmp_path / "stream", part) == side_rows(tmp_path / "first", part) != [], (
            f"the stream's {part}/ on the cluster: not spanning run's rows by (call_id, {column})")
    assert json.loads((tmp_path / "stream" / "summary.json").read_text())["rows_read"] == len(calls)
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "chk" / "spanning" / "batches").glob("*.json"))]
    assert {r["reduced_on"] for r in records} == {"executors"}, "the bare executors' tasks reduced every batch"
    state_files = list((tmp_path / "chk" / "spanning" / "buckets").rglob("snapshot-*"))
    assert state_files, "the tasks kept their key groups' state in the checkpoint"

    code, err, _ = report["broken"]
    assert code != 0, "the job no longer refers to spark_jobs.batch.windowed.user_errors: inject the failure elsewhere"
    assert err.splitlines()[0] == f"spanning: error: ModuleNotFoundError: No module named '{BROKEN}'", err
    assert "Traceback" not in err and "PythonException" not in err
    assert not (tmp_path / "broken").exists()
