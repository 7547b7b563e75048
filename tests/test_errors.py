"""Bad input gets a clear exception naming the problem; nothing is dropped silently."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import spanning
from spanning import Engine, WindowSpec

CALLS = pd.DataFrame({"start": [0, 5, 9], "end": [4, 12, 9], "bytes": [1, 2, 3]})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"range": 0, "slide": 5}, "range must be > 0"),
        ({"range": 10, "slide": -1}, "slide must be > 0"),
        ({"range": 10, "slide": 5, "ttp": -3}, "ttp must be >= 0"),
        ({"range": 10.5, "slide": 5}, "window range must be an integer"),
        ({"range": "15m", "slide": 5}, "window range must be an integer"),
    ],
)
def test_window_spec_out_of_domain(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WindowSpec(**kwargs)
    with pytest.raises(ValueError, match=message):
        spanning.aggregate(CALLS, **kwargs)


def test_end_before_start():
    eng = Engine(WindowSpec(10, 5), {"n": "count"})
    with pytest.raises(ValueError, match="event end 3 is before its start 7"):
        eng.insert(7, 3)
    bad = pd.DataFrame({"start": [0, 7], "end": [4, 3]})
    out = spanning.aggregate(bad, 10, 5, aggregates={"n": "count"})  # the row set aside with its reason
    rejected = out.attrs["rejected"]
    assert rejected.index.tolist() == [1] and rejected["reason"].tolist() == ["end is before start"]
    assert out["n"].sum() == 2  # the event [0, 4) in windows [-5, 5) and [0, 10)


def test_non_integer_null_and_text_times_are_rejected_rows():
    eng = Engine(WindowSpec(10, 5), {"n": "count"})
    with pytest.raises(ValueError, match="event start must be an integer chronon"):
        eng.insert(1.5, 3)
    cases = [
        (pd.DataFrame({"start": [0.0, 2.5], "end": [4.0, 5.0]}), "time is not a whole number of chronons"),
        (pd.DataFrame({"start": [0.0, np.nan], "end": [4, 5]}), "start is null or not a time"),
        (pd.DataFrame({"start": ["0", "9"], "end": ["4", "x"]}), "end is null or not a time"),
    ]
    for frame, reason in cases:
        out = spanning.aggregate(frame, 10, 5, aggregates={"n": "count"})
        assert out.attrs["rejected"]["reason"].tolist() == [reason]
        assert out.attrs["rejected"].index.tolist() == [1]
        assert out["n"].sum() == 2  # the first row, [0, 4), in two windows
    with pytest.raises(ValueError, match="holds booleans"):
        spanning.aggregate(pd.DataFrame({"start": [True], "end": [False]}), 10, 5)


def test_unknown_aggregate_column_and_technique():
    with pytest.raises(ValueError, match="unknown aggregate 'median:bytes'"):
        spanning.aggregate(CALLS, 10, 5, aggregates={"m": "median:bytes"})
    with pytest.raises(ValueError, match="bad aggregate 'sum'"):
        Engine(WindowSpec(10, 5), {"s": "sum"})
    with pytest.raises(ValueError, match="unknown column 'volume'"):
        spanning.aggregate(CALLS, 10, 5, aggregates={"s": "sum:volume"})
    with pytest.raises(ValueError, match="unknown column 'cell'"):
        spanning.aggregate(CALLS, 10, 5, key="cell")
    with pytest.raises(ValueError, match="unknown technique 'fast'"):
        spanning.aggregate(CALLS, 10, 5, technique="fast")
    with pytest.raises(ValueError, match="row has no column 'bytes'"):
        Engine(WindowSpec(10, 5), {"s": "sum:bytes"}).insert(0, 3, {"volume": 1})


def test_non_numeric_values_in_aggregated_column_are_rejected_rows():
    frame = CALLS.assign(bytes=["1", "lots", None])  # text, as read_csv(dtype=str) gives: numbers parsed
    out = spanning.aggregate(frame, 10, 5, aggregates={"s": "sum:bytes", "n": "count"})
    rejected = out.attrs["rejected"]
    assert rejected.index.tolist() == [1] and rejected["reason"].tolist() == ["non-numeric value in column bytes"]
    assert out["s"].dtype == "Int64" and out["s"].max() == 1  # "1" is the integer 1; the null row adds nothing


def test_late_events_are_reported_not_dropped():
    # ω = 10, β = 5, δ = 0. The call [20, 30) arrives at 30 and first releases [15, 25) (25 + 0 < 30),
    # so with no TTP it misses that window; [1, 3) arrives after [-5, 5) and [0, 10) were released.
    frame = pd.DataFrame({"start": [0, 20, 1], "end": [5, 30, 3]})
    out = spanning.aggregate(frame, 10, 5, ttp=0)
    late = out.attrs["late"]
    assert late.index.tolist() == [1, 2] and late["windows_missed"].tolist() == [1, 2]
    assert out["window_start"].tolist() == [-5, 0, 5, 10, 15, 20, 25]
    assert out["count"].tolist() == [1, 1, 0, 0, 0, 1, 1]  # windows are final once released
    # δ = 10 covers the 10-chronon call, so [15, 25) counts it; [1, 3) is still too late (10 + 10 < 30)
    out = spanning.aggregate(frame, 10, 5, ttp=10)
    assert out.attrs["late"].index.tolist() == [2]
    assert out["count"].tolist() == [1, 1, 0, 0, 1, 1, 1]
    # δ = 25 covers the disorder too: nothing is late
    out = spanning.aggregate(frame, 10, 5, ttp=25)
    assert out.attrs["late"].empty
    assert out["count"].tolist() == [2, 2, 0, 0, 1, 1, 1]


# --- the command line: one ``spanning: error:`` line, exit 2 for user mistakes and 1 for bugs ---------------

PY4J_TEXT = """An error occurred while calling o87.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 4.0 failed 1 times, most \
recent failure: Lost task 1.0 in stage 4.0 (TID 9) (host executor driver): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main
    process()
  File "/tmp/spark-1/spanning.zip/spanning/aggregates.py", line 88, in add
    raise SumOverflowError(f"sum:{column} overflows int64")
spanning.aggregates.SumOverflowError: sum:bytes overflows int64 in window [0, 900)
of key 'a'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read(PythonArrowOutput.scala:118)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
"""

CHAINED = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "worker.py", line 3, in f
    int("x")
ValueError: invalid literal for int() with base 10: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "worker.py", line 5, in f
    raise Oops()
tests.test_errors.test_x.<locals>.Oops
"""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (PY4J_TEXT, "SumOverflowError: sum:bytes overflows int64 in window [0, 900)"),
        (CHAINED, "Oops"),
        ("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
         '  File "x.py", line 1, in f\n    1 / 0\n    ~~^~~\nZeroDivisionError: division by zero\n',
         "ZeroDivisionError: division by zero"),
    ],
)  # fmt: skip
def test_worker_error_is_the_last_exception_of_the_worker_traceback(text, line):
    from spark_jobs.sessions.errors import worker_error

    found = worker_error(text)
    assert found is not None and found.line == line
    assert worker_error("Job aborted: executor lost") is None
    assert worker_error(RuntimeError("no traceback here")) is None


class PythonException(Exception):
    """Stands for pyspark's class of the same name: the CLI reads its text, not its type."""


def test_cli_exit_codes_and_one_line(tmp_path, capsys, monkeypatch):
    import spanning.aggregates
    import spanning.app.local_run
    from spanning.app.jobspec import UsageError
    from spanning.cli import main

    overflow = getattr(spanning.aggregates, "SumOverflowError", None)
    worker = PY4J_TEXT.split(": Traceback", 1)[1]
    failures = [
        (UsageError("--range must be positive"), 2, "spanning: error: --range must be positive"),
        (PythonException("An exception was thrown from the Python worker:\nTraceback" + worker), 2,
         "spanning: error: SumOverflowError: sum:bytes overflows int64 in window [0, 900)"),
        (PythonException(CHAINED.replace("tests.test_errors.test_x.<locals>.Oops", "spanning.jobspec.UsageError: "
                                         "bad thing")), 2, "spanning: error: UsageError: bad thing"),
        (PythonException(CHAINED), 1, "spanning: error: Oops"),
        (PermissionError(13, "Permission denied", "/data/calls.csv"), 2,
         "spanning: error: Permission denied: /data/calls.csv"),
        (KeyError("window_start"), 1, "spanning: error: KeyError: 'window_start'"),
    ]  # fmt: skip
    if isinstance(overflow, type):
        error = overflow("bytes")
        failures.append((error, 2, f"spanning: error: SumOverflowError: {str(error).splitlines()[0]}"))
    path = tmp_path / "calls.csv"
    CALLS.to_csv(path, index=False)
    argv = ["run", str(path), "--range", "10", "--slide", "5", "--start", "start", "--end", "end", "--engine", "local"]
    for failure, code, line in failures:

        def fail(cfg, verbose=False, failure=failure):
            raise failure

        monkeypatch.setattr(spanning.app.local_run, "run_local", fail)
        assert main([*argv, "--output", str(tmp_path / "out")]) == code
        err = capsys.readouterr().err.strip().splitlines()
        assert err[0].startswith(line), (err, line)
        assert len(err) == (1 if code == 2 else 2), err  # a bug adds: run again with --verbose
        assert main([*argv, "--output", str(tmp_path / "out"), "--verbose"]) == code
        assert "Traceback" in capsys.readouterr().err
    # a bad command line: one line too, not argparse's usage text
    assert main(["run", str(path), "--range", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("spanning: error: the following arguments are required: --start"), err


def test_warnings_reach_the_terminal_only_with_verbose(tmp_path, capsys, monkeypatch):
    import os
    import warnings

    import spanning.app.local_run
    from spanning.cli import main

    seen_env = []

    def noisy(cfg, verbose=False):
        seen_env.append(os.environ.get("PYTHONWARNINGS"))  # Spark's Python workers inherit it
        warnings.warn("a pandas-like deprecation", FutureWarning, stacklevel=1)
        np.log(np.array([-1.0]))  # RuntimeWarning: invalid value
        return {"rows_read": 0, "accepted": 0, "rejected": 0, "late": 0, "windows_written": 0, "wall_time_s": 0.0,
                "output": str(tmp_path / "out")}  # fmt: skip

    monkeypatch.setattr(spanning.app.local_run, "run_local", noisy)
    path = tmp_path / "calls.csv"
    CALLS.to_csv(path, index=False)
    argv = ["run", str(path), "--range", "10", "--slide", "5", "--start", "start", "--end", "end", "--engine", "local"]
    before = os.environ.get("PYTHONWARNINGS")
    for verbose, expect in (([], 0), (["--verbose"], 2)):
        with warnings.catch_warnings(record=True) as caught, np.errstate(invalid="warn"):
            warnings.simplefilter("always")
            assert main([*argv, "--output", str(tmp_path / "out"), *verbose]) == 0
        assert len(caught) == expect, [str(w.message) for w in caught]
    assert seen_env == ["ignore", before] and os.environ.get("PYTHONWARNINGS") == before
    assert capsys.readouterr().err == ""


def test_a_real_spark_worker_failure_is_one_line(spark):
    """A PythonException as PySpark raises it: the worker's own exception, exit 2 only for user mistakes."""
    import spanning.aggregates
    from spanning.app.jobspec import UsageError
    from spanning.cli import describe_failure

    user_error = getattr(spanning.aggregates, "SumOverflowError", UsageError)
    frame = spark.range(4, numPartitions=1)
    for raised, code in ((user_error("bytes"), 2), (ZeroDivisionError("by zero"), 1)):

        def fail(batches, raised=raised):
            for batch in batches:
                raise raised
                yield batch

        with pytest.raises(Exception) as caught:
            frame.mapInPandas(fail, frame.schema).collect()
        assert type(caught.value).__name__ in ("PythonException", "Py4JJavaError")
        line, got = describe_failure(caught.value)
        assert (line, got) == (f"{type(raised).__name__}: {str(raised).splitlines()[0]}", code)
