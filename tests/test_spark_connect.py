"""``spanning.spark.aggregate`` on a Spark Connect session, against its classic-session twin.

One process of its own starts a local Connect server (``SparkSession.builder.remote("local[2]")``: the server's
SparkContext lives in that process, so it cannot share this one with the suite's classic session) whose Python
workers run ``connect_server_python`` (numpy, pandas, pyarrow, numba and the Connect client's packages, which the
server's foreachBatch process imports; not the project, nor pyspark): the engine reaches them as an artifact of the
session, and a stream's foreachBatch process in its function (``spark_jobs.stream.remote``). It makes every call of
``tests/session_scenarios.py`` while this process makes the same calls on the suite's classic session, and each
kind is held to the oracle and ``spanning run`` (a table, a joined-and-filtered frame), to the read-side path (a
plain Parquet read), to batch calls (a stream in two available-now rounds; ``foreach_batch`` with two window specs)
and to the other kind (every parameter; two window specs in one call against two calls, batch and stream). The
session's settings (a zone, ANSI on, shuffle partitions, Arrow values of the test's own) are read back after every
action on both kinds.

The documented differences (README, "Use it from PySpark"): the result's frames are read from temporary views of
the session on Connect (``views``, named in ``test_every_parameter...``), and ``foreach_batch``'s function runs in
the server's Python there, so it must be picklable (the scenarios' is made by ``received_into``).
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spark_jobs.sessions.session import ENGINE_ZIP
from tests.conftest import KERNEL_CACHE
from tests.session_scenarios import PARAMETERS, STREAM_SPECS, run_scenarios
from tests.test_spark_api import calls, expected_windows, rows_by_id, run_command, text_frame
from tests.test_spark_job import assert_frames_match

ROOT = Path(__file__).resolve().parent.parent
#: what must not reach the Connect process: this process's session (a gateway), a remote of the user's, or a path
#: that would put the checkout on the server's workers' path
_NOT_INHERITED = ("PYTHONPATH", "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE",
                  "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")  # fmt: skip


class ConnectRun:
    """The Connect process, started at once; ``results()`` waits for it (the classic calls run meanwhile)."""

    def __init__(self, server_python: Path, folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(PYSPARK_PYTHON=str(server_python), SPANNING_KERNEL_CACHE=str(KERNEL_CACHE))
        code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.session_scenarios import main; main()"
        self.out = folder / "results.pickle"
        # in its own folder: a local master's workers start in the server's folder, which must not hold the project
        self.process = subprocess.Popen([sys.executable, "-c", code, str(self.out), str(folder)], cwd=folder,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        self._results: dict | None = None

    def results(self) -> dict:
        if self._results is None:
            _, err = self.process.communicate(timeout=600)
            assert self.process.returncode == 0, err[-4000:]
            self._results = pickle.loads(self.out.read_bytes())
            print("Connect seconds:", self._results["seconds"], "streams:", self._results["stream_seconds"],
                  file=sys.stderr)
        return self._results


@pytest.fixture(scope="module")
def connect(connect_server_python, tmp_path_factory, connect_port):
    with connect_port():  # the install test's Connect example waits for this server to end (tests/conftest.py)
        run = ConnectRun(connect_server_python, tmp_path_factory.mktemp("connect"))
        yield run
        if run.process.poll() is None:
            run.process.kill()
        run.process.communicate()


@pytest.fixture(scope="module")
def both(connect, spark, tmp_path_factory) -> dict[str, dict]:
    """Every call's results on each kind: the classic session's made here while the Connect process runs."""
    classic = run_scenarios(spark, tmp_path_factory.mktemp("classic"))
    return {"connect": connect.results(), "classic": classic}


def test_readmes_connect_example_runs_and_prints_the_counts_its_comment_gives(both):
    """README's Spark Connect example, run as written in the Connect process (tests/test_readme.py runs the
    classic one, whose comment gives the same counts)."""
    block = re.search(r"```python3\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S).group(1)
    said = re.search(r"print\(result\.counts\)\s*# (\{.*\})", block)
    assert said and ast.literal_eval(both["connect"]["readme"].strip()) == ast.literal_eval(said.group(1))


def canonical(frame: pd.DataFrame) -> list[list[str]]:
    """A frame's rows as text, in one order, its columns in their order."""
    return sorted(frame.astype(str).values.tolist())


def test_the_connect_session_runs_on_workers_without_the_project_and_both_leave_the_settings_as_found(
        both, connect_server_python):  # fmt: skip
    results = both["connect"]
    assert results["kind"].startswith("pyspark.sql.connect"), results["kind"]
    python, engine = results["workers"]
    assert Path(python) == connect_server_python  # the server's workers ran the Python without the project
    assert f"/{ENGINE_ZIP}/" in engine, engine  # importing the engine from the session's artifact
    for kind, results in both.items():
        assert results["changed"] == [], (kind, results["changed"][:5])  # after every call and every action
        assert results["usable_after"] == {"sum": 45, "hour": 8, "ansi": "CAST_INVALID_INPUT"}, kind


def test_a_table_and_a_joined_filtered_frame_give_the_oracles_windows_and_the_commands_late_and_rejected_rows(
        both, tmp_path):  # fmt: skip
    frame = calls()
    kept = frame[frame["cell"] != "d"]  # the join's filter drops the east's cell
    sources = {}
    for name, rows in {"table": frame, "join": kept}.items():
        sources[name] = tmp_path / f"{name}.csv"
        text_frame(frame)[frame.index.isin(rows.index)].to_csv(sources[name], index=False)
    commands = {name: run_command(tmp_path, source, name) for name, source in sources.items()}
    for kind, results in both.items():
        for name, rows in {"table": frame, "join": kept}.items():
            got = results[name]
            assert list(got["windows"].columns) == ["cell", "window_start", "window_end", "n", "bytes", "longest"]
            usable = rows.drop(index=[5, 7], errors="ignore")  # the text frame's bad bytes and bad start
            assert_frames_match(got["windows"], expected_windows(usable, ["cell"]), ["cell"])
            their_late = pd.read_parquet(commands[name] / "late")
            their_rejected = pd.read_parquet(commands[name] / "rejected")
            unusable = len({3, 5, 7, 11} & set(rows.index))
            late, rejected = got["late"], got["rejected"]
            assert len(late) > 0 and len(rejected) == unusable > 0, (kind, name)
            assert rows_by_id(late, "windows_missed") == rows_by_id(their_late, "windows_missed"), (kind, name)
            assert rows_by_id(rejected, "reason") == rows_by_id(their_rejected, "reason"), (kind, name)
            assert sorted(rejected.columns) == sorted(their_rejected.columns), (kind, name)
            assert got["counts"] == {"read": len(rows), "accepted": len(rows) - unusable, "rejected": unusable,
                                     "late": len(late)}, (kind, name)  # fmt: skip
            # counted by the windows' pass (its Observation came back), as on classic: no pass of their own
            counted = got["counted"] or {}
            assert counted.get("read") == len(rows) and counted.get("rejected") == unusable, (kind, name, counted)
    for name in ("table", "join"):
        assert both["connect"][name]["plans"] == both["classic"][name]["plans"], name


def test_a_plain_parquet_read_takes_the_read_side_path_on_both_kinds(both):
    frame = calls().dropna(subset=["start"])
    frame = frame[frame["end"] >= frame["start"]]
    for kind, results in both.items():
        assert results["parquet_plain"]["plans"][0]["reads_input"], kind  # found in the plan: the tasks read the files
        assert not results["parquet_filtered"]["plans"][0]["reads_input"], kind
        for name in ("parquet_plain", "parquet_filtered"):
            assert_frames_match(results[name]["windows"], expected_windows(frame, ["cell"]), ["cell"])
            assert results[name]["counts"]["read"] == len(frame), (kind, name)
            assert (results[name]["counted"] or {}).get("read") == len(frame), (kind, name)  # by the windows' pass


def test_every_parameter_gives_the_same_frames_on_both_kinds_and_mistakes_the_same_line(both):
    connect, classic = both["connect"], both["classic"]
    for name in PARAMETERS:
        for part in ("windows", "late", "rejected"):
            assert list(connect[name][part].columns) == list(classic[name][part].columns), (name, part)
            assert canonical(connect[name][part]) == canonical(classic[name][part]), (name, part)
        assert len(connect[name]["windows"]) > 0, name
        assert connect[name]["counts"] == classic[name]["counts"], name
        assert connect[name]["plans"] == classic[name]["plans"], name
    mistakes = dict(connect["mistakes"])
    assert mistakes.pop("stream") == classic["mistakes"].pop("stream") == "StreamResult"  # a stream is taken on both
    assert mistakes == classic["mistakes"] and all(mistakes.values()), mistakes
    # the documented difference: a Connect job's prepared rows are read from a temporary view of the session, one a
    # call (the stream scenarios' batch calls among them)
    calls_made = 2 + 2 + len(PARAMETERS) + len(STREAM_SPECS)  # the table and the join, the two Parquet reads, the
    # parameters, the batch calls the streams are held to
    assert len(connect["views"]) == calls_made and classic["views"] == [], connect["views"][:4]


def test_two_window_specs_in_one_call_equal_two_calls_on_both_kinds(both):
    for kind, results in both.items():
        together = results["two_specs"]
        for label, alone in (("900/300", results["first_spec"]), ("3600/600", results["second_spec"])):
            for part in ("windows", "late"):
                mine = together[part][together[part]["window"] == label]
                assert len(mine) > 0 or part == "late", (kind, label, part)
                assert canonical(mine) == canonical(alone[part]), (kind, label, part)


def late_rows(frame: pd.DataFrame) -> list[tuple]:
    """Late rows by call, window spec (where tagged) and windows missed: their times are read back in two ways
    (Parquet's UTC instants, ``toPandas``'s wall-clock times)."""
    tag = frame["window"] if "window" in frame else [None] * len(frame)
    return sorted(zip(frame["call_id"], tag, frame["windows_missed"], strict=True))


def rejected_rows(frame: pd.DataFrame) -> list[tuple]:
    return sorted(zip(frame["call_id"], frame["reason"], strict=True))


def untagged(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="window")


def test_a_stream_in_two_available_now_rounds_equals_one_batch_call_on_both_kinds(both):
    """``write_stream`` in two available-now rounds (a file added between them, the second round drained) writes
    the windows, late and rejected rows of one batch call over both files; the same on both kinds (on Connect each
    batch is reduced and written in the server's foreachBatch Python, from the checkpoint's state)."""
    for kind, results in both.items():
        got, batch = results["stream_rounds"], results["stream_batch_0"]
        assert got["failures"] == [] and got["released_in_round_0"], (kind, got["failures"])
        assert len(got["windows"]) > 50 and len(got["late"]) > 0 and len(got["rejected"]) == 1, kind
        assert canonical(got["windows"]) == canonical(untagged(batch["windows"])), kind
        assert late_rows(got["late"]) == late_rows(untagged(batch["late"])), kind
        assert rejected_rows(got["rejected"]) == rejected_rows(batch["rejected"]), kind
    connect, classic = both["connect"]["stream_rounds"], both["classic"]["stream_rounds"]
    for part in ("windows", "late", "rejected"):
        assert list(connect[part].columns) == list(classic[part].columns), part
        assert canonical(connect[part]) == canonical(classic[part]), part


def test_foreach_batch_with_two_window_specs_receives_the_rows_of_two_calls_on_both_kinds(both):
    """``foreach_batch`` over a stream with ``windows=`` (two specs, one query) receives each spec's windows and late
    rows tagged, equal to a batch call per spec, and its first spec's to the one-spec stream's; the same rows on both
    kinds (on Connect the function runs in the server's Python, given frames of the batch's session)."""
    for kind, results in both.items():
        got = results["stream_specs"]
        assert got["failures"] == [], (kind, got["failures"])
        assert list(got["windows"].columns[:4]) == ["cell", "window", "window_start", "window_end"], kind
        for i, label in enumerate(("900/300", "3600/600")):
            alone = results[f"stream_batch_{i}"]
            for part in ("windows", "late"):
                mine = got[part][got[part]["window"] == label]
                assert len(mine) > 0, (kind, label, part)
                if part == "windows":
                    assert canonical(mine) == canonical(alone[part]), (kind, label)
                else:
                    assert late_rows(mine) == late_rows(alone[part]), (kind, label)
        first = got["windows"][got["windows"]["window"] == "900/300"]
        assert canonical(untagged(first)) == canonical(results["stream_rounds"]["windows"]), kind  # two stream calls
        assert rejected_rows(got["rejected"]) == rejected_rows(results["stream_batch_0"]["rejected"]), kind
    connect, classic = both["connect"]["stream_specs"], both["classic"]["stream_specs"]
    for part in ("windows", "late", "rejected"):
        assert list(connect[part].columns) == list(classic[part].columns), part
        assert canonical(connect[part]) == canonical(classic[part]), part


def test_spanning_run_as_a_connect_client_writes_what_the_local_engine_writes(both, tmp_path):
    """``spanning run --remote sc://localhost:15002`` against the Connect process's server (a session of its own,
    whose settings do not reach the user's: the scenarios' checks ran before it), held to ``--engine local``."""
    got = both["connect"]["remote_command"]
    assert got["code"] == 0, got
    source = tmp_path / "calls.csv"
    text_frame(calls()).to_csv(source, index=False)
    theirs = run_command(tmp_path, source, "local")
    windows = pd.read_parquet(theirs / "windows")
    assert canonical(got["windows"]) == canonical(windows[got["windows"].columns])
    for part, column in (("late", "windows_missed"), ("rejected", "reason")):
        assert rows_by_id(got[part], column) == rows_by_id(pd.read_parquet(theirs / part), column), part
    summary = json.loads(got["summary"])
    assert summary["parameters"]["remote"] == "sc://localhost:15002" and summary["spark_master"] == "local[2]"


def test_spark_remote_is_the_commands_server_unless_the_engine_is_local(monkeypatch):
    from spanning.app.jobspec import UsageError
    from spanning.app.run_command import config_from_args
    from spanning.cli import build_parser

    def config(*extra: str):
        return config_from_args(build_parser().parse_args(["run", "calls.csv", "--range", "15m", "--slide", "5m",
                                                           "--start", "s", "--end", "e", *extra]))  # fmt: skip

    monkeypatch.setenv("SPARK_REMOTE", "sc://spark.example:15002")
    assert config().spark.remote == "sc://spark.example:15002"  # as PySpark's own tools take it
    assert config("--remote", "sc://other:15002").spark.remote == "sc://other:15002"  # the option first
    assert config("--engine", "local").spark.remote is None
    with pytest.raises(UsageError, match="give --master or a Spark Connect server"):
        config("--master", "local[2]")
    monkeypatch.delenv("SPARK_REMOTE")
    assert config().spark.remote is None
    with pytest.raises(UsageError, match="leave out --engine local"):
        config("--remote", "sc://h:15002", "--engine", "local")
    with pytest.raises(UsageError, match="bad Spark Connect URL"):
        config("--remote", "h:15002")


def test_spanning_run_remote_with_no_server_there_fails_in_one_line_within_seconds(tmp_path, capsys):
    import socket
    import time

    from spanning.cli import main

    with socket.socket() as free:  # a port of this machine that nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    before = dict(os.environ)
    began = time.perf_counter()
    code = main(["run", str(ROOT / "data" / "sample_cdr.csv"), "--range", "15m", "--slide", "5m", "--start", "start",
                 "--end", "end", "--output", str(tmp_path / "out"), "--remote", f"sc://127.0.0.1:{port}"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"spanning: error: no Spark Connect server answers at sc://127.0.0.1:{port}:"), err
    assert time.perf_counter() - began < 30  # PySpark's own retries wait 10 minutes
    # no variable of the process changed (PySpark's builder sets SPARK_CONNECT_MODE_ENABLED, which turned the suite's
    # later `spanning stream` children into Connect clients that failed)
    assert dict(os.environ) == before
