"""What a new user meets first: column mistakes named before Spark starts, and a quiet terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spanning.app.files import check_plain_columns, input_files
from spanning.app.jobspec import EventFields, InputFiles, RunConfig, UsageError, WindowQuery
from spanning.cli import main
from spark_jobs.sessions.session import INCUBATOR_WARNING, QUICK_COMPILER_ONLY, forward_jvm_stderr
from tests.test_install import BLOCKED_RUNNER

ROOT = Path(__file__).resolve().parents[1]
WINDOW = ["--range", "15m", "--slide", "5m", "--ttp", "1h", "--output", "out"]
CALLS = pd.DataFrame({"cell": ["a", "b"], "start": [0, 60], "end": [30, 200], "bytes": [5, 7]})


@pytest.fixture
def inputs(tmp_path):
    CALLS.to_csv(tmp_path / "calls.csv", index=False)
    CALLS.to_parquet(tmp_path / "calls.parquet", index=False)
    return tmp_path


MISTAKES = [
    ("calls.csv", ["--start", "start", "--end", "end", "--key", "antenna"], "unknown column 'antenna' in --key"),
    ("calls.parquet", ["--start", "begin", "--end", "end"], "unknown column 'begin' in --start"),
    ("calls.parquet", ["--start", "start", "--duration", "`length`"], "unknown column 'length' in --duration"),
    ("calls.csv", ["--start", "start", "--end", "end", "--agg", "sum:volume"], "unknown column 'volume' in --agg"),
]
WITHOUT_MISTAKE = ["calls.csv", "--start", "start", "--end", "end", "--key", "cell"]


@pytest.fixture(scope="module")
def without_java(tmp_path_factory) -> dict[tuple[str, ...], tuple[int, str]]:
    """``spanning run`` with each column mistake, and without one, where no Java can be found: one process
    (``python -m spanning.cli`` but for its start, paid once), each run's exit code and stderr by its arguments.
    Nothing else reaches the process's stderr, and no run writes its output folder."""
    folder = tmp_path_factory.mktemp("no-java")
    CALLS.to_csv(folder / "calls.csv", index=False)
    CALLS.to_parquet(folder / "calls.parquet", index=False)
    argvs = [[name, *options] for name, options, _ in MISTAKES] + [WITHOUT_MISTAKE]
    env = {**os.environ, "JAVA_HOME": str(folder / "no-java"), "PYTHONPATH": str(ROOT)}
    runs = json.dumps([["run", *argv, *WINDOW] for argv in argvs])
    runner = BLOCKED_RUNNER.format(blocked=())  # main over each argv in one process, nothing blocked
    done = subprocess.run([sys.executable, "-c", runner, runs], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert not (folder / "out").exists()
    results = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    return {tuple(argv): (code, err) for argv, (code, _, err) in zip(argvs, results, strict=True)}


@pytest.mark.parametrize(("name", "options", "message"), MISTAKES)
def test_a_plain_column_mistake_is_named_before_spark_starts(without_java, name, options, message):
    """From the header or the Parquet footer, with no JVM: a Java that cannot be found fails the run with
    another error (``test_the_same_run_without_the_mistake_stops_at_java``), had the check waited for Spark."""
    code, err = without_java[name, *options]
    assert code == 2, err
    assert err == f"spanning: error: {message}: the columns are cell, start, end, bytes\n"


def test_the_same_run_without_the_mistake_stops_at_java(without_java):
    """What makes the test above able to fail: without the column mistake, the run gets as far as Spark."""
    code, err = without_java[tuple(WITHOUT_MISTAKE)]
    assert code == 2 and err.startswith("spanning: error: Java was not found"), err


@pytest.mark.parametrize("key", ["cell", "CELL", "`cell`", "`Cell`", "cell % 2", "current_date", "concat(cell, 'x')"])
def test_plain_names_are_checked_as_spark_resolves_them(inputs, key):
    """Any case (Spark resolves names regardless of it), quoted names, bare SQL functions and expressions pass
    the check: Spark resolves them (an unknown column inside an expression is reported by Spark's side)."""
    for name in ("calls.csv", "calls.parquet"):
        files = input_files([str(inputs / name)])
        check_plain_columns(_config(files, key), files)


@pytest.mark.parametrize("key", ["antenna", "`antenna`", "cel"])
def test_a_missing_plain_name_fails_the_check(inputs, key):
    for name in ("calls.csv", "calls.parquet"):
        files = input_files([str(inputs / name)])
        with pytest.raises(UsageError, match=r"^unknown column '(antenna|cel)' in --key: the columns are cell, "):
            check_plain_columns(_config(files, key), files)


def _config(files, key: str) -> RunConfig:
    return RunConfig(InputFiles(files.files), EventFields("start", "end", keys=[key]),
                     WindowQuery(900, 300, 3600, ["count", "sum:bytes"]))  # fmt: skip


def test_the_local_engine_names_column_mistakes_in_the_same_form(inputs, capsys):
    argv = ["run", str(inputs / "calls.csv"), "--start", "start", "--end", "end", "--engine", "local",
            "--range", "15m", "--slide", "5m", "--ttp", "1h", "--output", str(inputs / "o")]  # fmt: skip
    assert main([*argv, "--key", "CELL"]) == 2  # Spark would take it, the local engine does not
    err = capsys.readouterr().err
    assert err.startswith("spanning: error: unknown column 'CELL' in --key: the columns are cell, start, end, bytes;")
    assert "--engine spark also takes Spark SQL expressions" in err


def test_the_jvm_noise_is_left_out_of_stderr_and_nothing_else():
    read_end, write_end = os.pipe()
    out_read, out_write = os.pipe()
    lines = [INCUBATOR_WARNING + b" jdk.incubator.vector\n", b"\n", b"Error: Could not create the Java VM\n", b"\n",
             b"\n", b"Traceback (most recent call last):\n", b"last"]  # fmt: skip
    with os.fdopen(write_end, "wb") as jvm:
        jvm.write(b"".join(lines))
    forward_jvm_stderr(read_end, out_write)
    os.close(out_write)
    with os.fdopen(out_read, "rb") as forwarded:  # a blank line is dropped only right after a dropped line
        assert forwarded.read() == b"Error: Could not create the Java VM\n\n\nTraceback (most recent call last):\nlast"


def test_spark_submit_runs_the_job_as_the_readme_says(inputs):
    """``spark-submit spark_jobs/submit.py run ...`` (docs/COMMAND.md, "On a cluster"): spark-submit starts the JVM
    and the master, the job runs unchanged and writes the same folders, with no Hadoop marker files."""
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}  # fmt: skip
    # the JVMs spark-submit starts keep to their quick compiler, as `spanning run` starts its own for a small input
    # (spark_jobs.sessions.session.QUICK_COMPILER_ONLY): alone 24.1-24.3 s against 29.6-32.0 s. The command line is
    # docs/COMMAND.md's.
    env["JAVA_TOOL_OPTIONS"] = f"{env.get('JAVA_TOOL_OPTIONS', '')} {QUICK_COMPILER_ONLY}".strip()
    done = subprocess.run([str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                           str(ROOT / "spark_jobs" / "submit.py"), "run", "calls.csv", "--start", "start", "--end",
                           "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes", *WINDOW],
                          cwd=inputs, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"results: {inputs / 'out'}/windows" in done.stdout and "Traceback" not in done.stderr
    local = ["run", str(inputs / "calls.csv"), "--start", "start", "--end", "end", "--key", "cell", "--agg", "count",
             "--agg", "sum:bytes", *WINDOW[:-1], str(inputs / "local"), "--engine", "local"]  # fmt: skip
    assert main(local) == 0
    windows, expected = (pd.read_parquet(inputs / name / "windows").sort_values(["cell", "window_start"])
                         .reset_index(drop=True) for name in ("out", "local"))  # fmt: skip
    # each call overlaps [-600, 300), [-300, 600) and [0, 900): 3 windows per cell, counting it alone
    assert windows[["cell", "window_start", "count"]].values.tolist() == [
        [c, s, 1] for c in "ab" for s in (-600, -300, 0)]  # fmt: skip
    pd.testing.assert_frame_equal(windows, expected, check_dtype=False)
    assert not [p for p in (inputs / "out").rglob("*") if p.name == "_SUCCESS" or p.name.endswith(".crc")]
