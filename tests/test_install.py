"""The install users do: ``pip install spanning[spark]`` (not editable) gives a ``spanning`` command that works.

Every subcommand but ``bench`` needs only the base dependencies (numpy, pandas, pyarrow, sortedcontainers);
the optional extras are imported only by the subcommand that needs them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spanning.app.bench.names import BENCH_MODULES, PRESET_NAMES

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("pyspark", "py4j", *BENCH_MODULES, "hypothesis", "pytest")  # not base dependencies
CALLS = (
    "cell,start,end,bytes\n"
    + "".join(f"{'ab'[i % 2]},{60 * i},{60 * i + 30 * (i % 5)},{100 + i}\n" for i in range(18))
    + "a,not a time,100,1\nb,500,400,2\n"
)  # 20 rows: 18 calls, 2 rejected
RUN = ["--range", "15m", "--slide", "5m", "--ttp", "1h", "--start", "start", "--end", "end", "--key", "cell",
       "--agg", "count", "--agg", "sum:bytes", "--engine", "local"]  # fmt: skip


def test_bench_preset_names_are_the_presets():
    for module in BENCH_MODULES:
        pytest.importorskip(module)
    from spanning.app.bench.presets import PRESETS

    assert tuple(PRESETS) == PRESET_NAMES


BLOCKED_RUNNER = """
import contextlib, io, json, sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed: importing it raises ModuleNotFoundError
from spanning.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append([code, out.getvalue(), err.getvalue()])
loaded = sorted(n for n in {blocked!r} if sys.modules.get(n) is not None)
print(json.dumps({{"results": results, "loaded": loaded}}))
"""


def test_every_subcommand_but_bench_needs_only_the_base_dependencies(tmp_path):
    calls = tmp_path / "calls.csv"
    calls.write_text(CALLS)
    commands = [
        (["--help"], 0, ""),
        (["run", "--help"], 0, ""),
        (["bench", "--help"], 0, ""),
        (["generate-cdr", "cdr.csv", "--rows", "500"], 0, ""),
        (["run", "calls.csv", *RUN, "--output", "out"], 0, ""),
        (["tune-height", "--range", "10000", "--slide", "200", "--mu", "50", "--events", "2000"], 0, ""),
        (["tune-height", "calls.csv", "--range", "15m", "--slide", "5m", "--start", "start", "--end", "end"], 0, ""),
        (["run", "calls.csv", *RUN[:-2], "--output", "spark-out"], 2, "the Spark engine needs pyspark"),
        (["stream", ".", *RUN[:-2], "--output", "stream-out", "--checkpoint", "chk"], 2,
         "the Spark engine needs pyspark"),  # fmt: skip
        (
            [
                "tune-height",
                "calls.csv",
                "--range",
                "15m",
                "--slide",
                "5m",
                "--start",
                "start",
                "--end",
                "end",
                "--engine",
                "spark",
            ],
            2,
            "the Spark engine needs pyspark",
        ),  # fmt: skip
        (["bench", "--quick"], 2, "spanning bench needs the bench extra: pip install 'spanning[bench]'"),
        (["busy-hour", "calls.csv", "--start", "start", "--end", "end", "--key", "cell", "--output", "busy"], 0, ""),
    ]
    script = BLOCKED_RUNNER.format(blocked=EXTRAS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, json.dumps([argv for argv, _, _ in commands])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    for (argv, want_code, message), (code, out, err) in zip(commands, report["results"], strict=True):
        assert code == want_code, (argv, out, err)
        if want_code == 0:
            assert err == "", (argv, err)
        else:
            assert len(err.strip().splitlines()) == 1 and err.startswith("spanning: error:") and message in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["rows_read"] == 20 == summary["accepted"] + summary["rejected"] and summary["rejected"] == 2
    assert not (tmp_path / "spark-out").exists() and not (tmp_path / "stream-out").exists()
    busy = report["results"][-1][1]  # no matplotlib: the tables, and a word on the plot
    assert "no busy_hour.png: drawing it needs matplotlib" in busy
    assert (tmp_path / "busy" / "busy_hours.parquet").exists()


def _installed(tmp_path: Path, extra: str, env: dict) -> Path:
    """The checkout (a copy of it) installed with ``extra`` into a clean venv under ``tmp_path`` by a plain ``pip
    install``, as a user installs it: the venv's Python."""
    src = _copy_of_the_checkout(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # --no-compile: pip byte-compiles none of the 3,485 modules it unpacks (pyspark, pandas, numpy...), 20 s against
    # 45 s here; the commands run after write the bytecode of the modules they import, once
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile", f"{src}[{extra}]"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    return python


def _copy_of_the_checkout(target: Path) -> Path:
    """What ``pip install .`` builds from, copied so that building writes no build/ into the checkout."""
    skip = shutil.ignore_patterns(".*", "__pycache__", "*.egg-info", "build", "dist", "output", "bench-results")
    shutil.copytree(ROOT, target, ignore=skip)
    return target


def test_pip_install_with_the_spark_extra_gives_a_working_command(tmp_path):
    """A clean venv, ``pip install <checkout>[spark]`` (not editable), the command run from elsewhere.

    About 20 s on two cores with a warm pip cache (the pyspark wheel, built once, is reused from it;
    pip uses this machine's own pip configuration and indexes, nothing added here).
    """
    began = time.perf_counter()
    # a user's environment: no checkout on the path, and Python writes the bytecode of what it imports
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                                                            "PYSPARK_DRIVER_PYTHON", "PYTHONHOME",
                                                            "PYTHONDONTWRITEBYTECODE")}  # fmt: skip
    python = _installed(tmp_path, "spark", env)
    spanning = python.parent / "spanning"
    installed = time.perf_counter() - began

    elsewhere = tmp_path / "elsewhere"  # not the checkout: only the installed package can be imported
    elsewhere.mkdir()
    (elsewhere / "calls.csv").write_text(CALLS)

    def command(*argv: str | Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=300)  # fmt: skip

    where = command(python, "-c", "import spanning, spark_jobs.sessions.errors, pyspark; print(spanning.__file__)")
    assert where.returncode == 0, where.stderr
    imported = Path(where.stdout.strip())
    assert imported.is_relative_to(python.parent.parent) and not imported.is_relative_to(ROOT)
    for argv in (["--help"], ["run", "--help"]):
        done = command(spanning, *argv)
        assert done.returncode == 0 and "usage: spanning" in done.stdout and done.stderr == "", done.stderr
    done = command(spanning, "run", "calls.csv", *RUN, "--output", "out")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    out = elsewhere / "out"
    assert f"results: {out.resolve()}/windows" in done.stdout
    assert (out / "windows").is_dir() and (out / "_SPANNING_OUTPUT").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_read"] == 20 == summary["accepted"] + summary["rejected"] and summary["rejected"] == 2
    arriving = elsewhere / "arriving"  # spanning stream, from the plain install too
    arriving.mkdir()
    (arriving / "calls.csv").write_text(CALLS)
    done = command(spanning, "stream", arriving, *RUN[:-2], "--output", "stream", "--checkpoint", "chk",
                   "--master", "local[2]", "--drain")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Using incubator modules" not in done.stderr  # the JVM's start-up warning, left out (issue 25)
    streamed = json.loads((elsewhere / "stream" / "summary.json").read_text())
    assert streamed["rows_read"] == 20 and streamed["rejected"] == 2 and streamed["windows_written"] > 0
    counts = {"rows_read", "accepted", "rejected", "late", "windows_written", "output"}
    assert streamed["accepted"] == 18 and counts <= set(summary) & set(streamed)  # run's and stream's: one vocabulary
    bench = command(spanning, "bench", "--quick")
    assert bench.returncode == 2 and bench.stderr.startswith("spanning: error: spanning bench needs the bench extra")
    print(f"install {installed:.1f} s, all {time.perf_counter() - began:.1f} s")


def test_pip_install_with_the_connect_extra_runs_the_readmes_connect_example(tmp_path, connect_port):
    """A clean venv, ``pip install <checkout>[connect]`` (not editable), then README's Spark Connect example run as
    written from elsewhere, on a local Connect server whose workers run the venv's Python (the server's
    ``PYSPARK_PYTHON``, as README says); it prints the counts its comment gives."""
    import ast
    import re

    began = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_DRIVER_PYTHON",
                                                            "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "SPARK_REMOTE",
                                                            "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS",
                                                            "PYSPARK_PYTHON")}  # fmt: skip
    python = _installed(tmp_path, "connect", env)
    env["PYSPARK_PYTHON"] = str(python)
    installed = time.perf_counter() - began
    elsewhere = tmp_path / "elsewhere"  # README's path is relative to a folder that holds data/sample_cdr.csv
    (elsewhere / "data").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "sample_cdr.csv", elsewhere / "data")
    block = re.findall(r"```python3\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(block) == 1, "README's one python3 block: the Connect example"
    with connect_port():  # its server on Connect's port: never beside the Connect module's (tests/conftest.py)
        done = subprocess.run([str(python), "-c", block[0]], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = re.search(r"print\(result\.counts\)\s*# (\{.*\})", block[0])
    assert said and ast.literal_eval(done.stdout.strip().splitlines()[-1]) == ast.literal_eval(said.group(1))
    print(f"install {installed:.1f} s, all {time.perf_counter() - began:.1f} s")
