"""``spanning.spark.aggregate`` on a Spark Connect session, against its classic-session twin.

One process of its own starts a local Connect server (``SparkSession.builder.remote("local[2]")``: the server's
SparkContext lives in that process, so it cannot share this one with the suite's classic session) whose Python
workers run ``bare_python`` (numpy, pandas, pyarrow, numba; not the project, nor pyspark): the engine reaches them
as an artifact of the session. It makes every call of ``tests/session_scenarios.py`` while this process makes the
same calls on the suite's classic session, and each kind is held to the oracle and ``spanning run`` (a table, a
joined-and-filtered frame), to the read-side path (a plain Parquet read), and to the other kind (every parameter;
two window specs in one call against two calls). The session's settings (a zone, ANSI on, shuffle partitions, Arrow
values of the test's own) are read back after every action on both kinds.

The documented differences (README, "Use it from PySpark"), both named in ``test_every_parameter...``: a
streaming DataFrame of a Connect session is refused in one line (the ``stream`` entry), and the result's frames
are read from temporary views of the session there (``views``).
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
from tests.session_scenarios import PARAMETERS, run_scenarios
from tests.test_spark_api import calls, expected_windows, rows_by_id, run_command, text_frame
from tests.test_spark_job import assert_frames_match

ROOT = Path(__file__).resolve().parent.parent
#: what must not reach the Connect process: this process's session (a gateway), a remote of the user's, or a path
#: that would put the checkout on the server's workers' path
_NOT_INHERITED = ("PYTHONPATH", "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE",
                  "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")  # fmt: skip


class ConnectRun:
    """The Connect process, started at once; ``results()`` waits for it (the classic calls run meanwhile)."""

    def __init__(self, bare_python: Path, folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(PYSPARK_PYTHON=str(bare_python), SPANNING_KERNEL_CACHE=str(KERNEL_CACHE))
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
            print("Connect seconds:", self._results["seconds"], file=sys.stderr)
        return self._results


@pytest.fixture(scope="module")
def connect(bare_python, tmp_path_factory):
    run = ConnectRun(bare_python, tmp_path_factory.mktemp("connect"))
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


def test_the_connect_session_runs_on_workers_without_the_project_and_both_leave_the_settings_as_found(both,
                                                                                                      bare_python):
    results = both["connect"]
    assert results["kind"].startswith("pyspark.sql.connect"), results["kind"]
    python, engine = results["workers"]
    assert Path(python) == bare_python  # the server's workers ran the bare Python
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
    # the documented difference: a stream of a Connect session is refused in one line (classic: a StreamResult)
    assert classic["mistakes"].pop("stream") == "StreamResult"
    assert mistakes.pop("stream").startswith("a streaming DataFrame of a Spark Connect session is not supported yet")
    assert mistakes == classic["mistakes"] and all(mistakes.values()), mistakes
    # the other: a Connect job's prepared rows are read from a temporary view of the session, one a call
    calls_made = 2 + 2 + len(PARAMETERS)  # the table and the join, the two Parquet reads, the parameters
    assert len(connect["views"]) == calls_made and classic["views"] == [], connect["views"][:4]


def test_two_window_specs_in_one_call_equal_two_calls_on_both_kinds(both):
    for kind, results in both.items():
        together = results["two_specs"]
        for label, alone in (("900/300", results["first_spec"]), ("3600/600", results["second_spec"])):
            for part in ("windows", "late"):
                mine = together[part][together[part]["window"] == label]
                assert len(mine) > 0 or part == "late", (kind, label, part)
                assert canonical(mine) == canonical(alone[part]), (kind, label, part)


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
