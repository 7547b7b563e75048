"""``--output`` and ``--overwrite`` never lose a user's data (docs/SEMANTICS.md §12, "Outputs and user data").

Written as a user meets the problem: real files, a current folder, the ``spanning`` command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spanning.app.local_run
from spanning.app.outputs import MARKER
from spanning.cli import main

CALLS = "cell,t0,t1,bytes\na,0,300,10\na,100,100,20\nb,50,700,30\na,400,450,\n"
WINDOW = ["--range", "10m", "--slide", "5m", "--ttp", "1h", "--start", "t0", "--end", "t1", "--key", "cell"]
LOCAL = [*WINDOW, "--engine", "local"]


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``root``, by relative path."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def leftovers(root: Path) -> list[str]:
    """Temporary or set-aside folders of a run, anywhere under ``root``."""
    return [str(p) for p in root.rglob(".*") if ".spanning-" in p.name]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A user's folder: data/ holds the input, an unrelated file and a nested folder; photos/ is unrelated."""
    data = tmp_path / "data"
    (data / "nested").mkdir(parents=True)
    (data / "calls.csv").write_text(CALLS)
    (data / "notes.txt").write_text("my notes\n")
    (data / "nested" / "keep.bin").write_bytes(bytes(range(256)))
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8\xff" + b"meow" * 100)
    monkeypatch.chdir(data)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, list[str], str]:
    """Exit code, stderr lines and stdout of ``spanning run ARGS``."""
    code = main(["run", *args])
    out = capsys.readouterr()
    return code, out.err.strip().splitlines(), out.out


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (".", "is the current folder"),
        ("..", "contains the current folder"),
        ("../data", "is the current folder"),
        ("../photos", "is not a spanning output folder"),
        ("nested", "is not a spanning output folder"),
        ("notes.txt", "is a file, not a folder"),
    ],
)
@pytest.mark.parametrize("overwrite", [["--overwrite"], []])
def test_canary_survives_a_dangerous_output(home, capsys, output, message, overwrite):
    before = snapshot(home)
    code, err, _ = run(capsys, "calls.csv", *LOCAL, "--output", output, *overwrite)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("spanning: error:") and message in err[0], err
    assert snapshot(home) == before  # every file still there, with the same bytes; nothing added


def test_canary_survives_the_input_folder_as_output_from_elsewhere(home, capsys, monkeypatch):
    (home / "work").mkdir()
    (home / "archive" / "2024").mkdir(parents=True)
    (home / "archive" / "2024" / "calls.csv").write_text(CALLS)
    monkeypatch.chdir(home / "work")
    before = snapshot(home)
    for inputs, output in (
        (["../data/calls.csv"], "../data"),
        ([str(home / "data" / "*.csv")], str(home / "data")),
        (["../archive/2024/calls.csv"], "../archive"),  # a parent of the input's folder
        (["../archive/2024"], "../archive/2024"),  # the input folder itself
    ):
        code, err, _ = run(capsys, *inputs, *LOCAL, "--output", output, "--overwrite")
        assert code == 2 and len(err) == 1 and "holds the input" in err[0], err
        assert snapshot(home) == before


def test_an_output_inside_an_input_folder_is_refused(home, capsys, monkeypatch):
    monkeypatch.chdir(home)
    inputs = home / "inputs"
    inputs.mkdir()
    (inputs / "calls.csv").write_text(CALLS)
    for given, output in (("inputs", "inputs/out"), ("inputs/*", "inputs/out")):
        code, err, _ = run(capsys, given, *LOCAL, "--output", output)
        assert code == 2 and len(err) == 1 and "the next run would read it as input" in err[0], err
        assert not (inputs / "out").exists()
    assert run(capsys, "inputs/*.csv", *LOCAL, "--output", "inputs/out")[0] == 0  # the glob cannot match it


def test_failed_runs_keep_the_previous_output(home, capsys):
    assert run(capsys, "calls.csv", *LOCAL, "--output", "../out")[0] == 0
    before = snapshot(home)
    code, err, _ = run(capsys, "calls.csv", *LOCAL, "--output", "../out", "--overwrite", "--start", "t_zero")
    assert code == 2 and len(err) == 1 and "t_zero" in err[0], err
    code, err, _ = run(capsys, "missing.csv", *LOCAL, "--output", "../out", "--overwrite")
    assert code == 2 and len(err) == 1 and "missing.csv" in err[0], err
    assert snapshot(home) == before and not leftovers(home)


@pytest.mark.parametrize(("failure", "code"), [(RuntimeError("disk on fire"), 1), (KeyboardInterrupt(), 130)])
@pytest.mark.parametrize("when", ["before the summary", "after the summary"])
def test_a_run_failing_midway_keeps_the_previous_output(home, capsys, monkeypatch, failure, code, when):
    assert run(capsys, "calls.csv", *LOCAL, "--output", "../out")[0] == 0
    before = snapshot(home)
    real_finish = spanning.app.local_run.finish_output
    seen = []

    def failing_finish(cfg, output, **counts):
        assert (output / "windows").is_dir() and output.resolve() != (home / "out")  # written, elsewhere
        seen.append(output)
        if when == "after the summary":
            real_finish(cfg, output, **counts)
        raise failure

    monkeypatch.setattr(spanning.app.local_run, "finish_output", failing_finish)
    got, err, out = run(capsys, "calls.csv", *LOCAL, "--slide", "10m", "--output", "../out", "--overwrite")
    assert got == code and seen and out == ""
    assert snapshot(home) == before and not leftovers(home)
    assert "spanning-tmp" not in " ".join(err)


def test_overwrite_replaces_a_folder_written_by_spanning(home, capsys):
    assert run(capsys, "calls.csv", *LOCAL, "--output", "../out")[0] == 0
    out = home / "out"
    marker = json.loads((out / MARKER).read_text())
    assert marker["tool"] == "spanning" and set(marker["entries"]) >= {"windows", "rejected", "late", "summary.json"}

    code, err, _ = run(capsys, "calls.csv", *LOCAL, "--output", "../out")
    assert code == 2 and len(err) == 1 and "exists: give --overwrite" in err[0], err

    code, err, printed = run(capsys, "calls.csv", *LOCAL, "--slide", "10m", "--output", "../out", "--overwrite")
    assert code == 0 and err == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["slide"] == 600  # the new run's
    assert summary["output"] == str(out.resolve()) and f"{out.resolve()}/windows" in printed
    assert summary["rows_read"] == summary["accepted"] + summary["rejected"] == 4
    assert "spanning-tmp" not in printed and not leftovers(home)
    assert (out / MARKER).is_file() and sorted(p.name for p in (home / "data").iterdir()) == [
        "calls.csv", "nested", "notes.txt",
    ]  # fmt: skip


def test_a_marked_folder_holding_the_users_files_is_kept(home, capsys):
    assert run(capsys, "calls.csv", *LOCAL, "--output", "../out")[0] == 0
    (home / "out" / "my-analysis.ipynb").write_text("{}")
    before = snapshot(home)
    code, err, _ = run(capsys, "calls.csv", *LOCAL, "--output", "../out", "--overwrite")
    assert code == 2 and len(err) == 1 and "my-analysis.ipynb" in err[0] and "refusing" in err[0], err
    assert snapshot(home) == before


def test_an_empty_folder_and_new_parents_may_be_used(home, capsys):
    (home / "empty").mkdir()
    code, err, _ = run(capsys, "calls.csv", *LOCAL, "--output", "../empty")
    assert code == 2 and "exists: give --overwrite" in err[0], err  # an existing folder needs --overwrite
    assert run(capsys, "calls.csv", *LOCAL, "--output", "../empty", "--overwrite")[0] == 0
    assert (home / "empty" / "summary.json").is_file() and (home / "empty" / MARKER).is_file()
    assert run(capsys, "calls.csv", *LOCAL, "--output", "../new/deeper/out")[0] == 0
    assert (home / "new" / "deeper" / "out" / "windows").is_dir()
    # a failed run removes the parent folders it created for its output
    assert run(capsys, "calls.csv", *LOCAL, "--start", "nope", "--output", "../other/deeper/out")[0] == 2
    assert not (home / "other").exists()


@pytest.mark.parametrize("output", ["hdfs:///out/cells", "s3a://bucket/out", "file:///tmp/out"])
def test_uri_outputs_are_refused_for_now(home, capsys, output):
    before = snapshot(home)
    code, err, _ = run(capsys, "calls.csv", *LOCAL, "--output", output)
    assert code == 2 and len(err) == 1 and "only local or mounted paths are supported" in err[0], err
    assert snapshot(home) == before


def test_a_failed_spark_run_keeps_the_previous_output(spark, home, capsys, monkeypatch):
    """The Spark engine writes through the same temporary folder: a failure midway changes nothing."""
    import spark_jobs.batch.outputs

    assert run(capsys, "calls.csv", *LOCAL, "--output", "../out")[0] == 0
    before = snapshot(home)
    written = []

    def failing_write(frame, path, fmt, *_):  # Spark writes a part into the run's folder, then the disk fails
        spark.range(3).write.mode("overwrite").parquet(path)
        written.append(Path(path))
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(spark_jobs.batch.outputs, "write", failing_write)
    spark_args = [*WINDOW, "--engine", "spark", "--master", "local[2]", "--output", "../out", "--overwrite"]
    calls = str(home / "data" / "calls.csv")  # the tests' JVM resolves relative paths from where it started
    code, err, out = run(capsys, calls, *spark_args)
    assert written, (code, err)
    assert not written[0].exists() and written[0].parent.name.startswith(".out.spanning-tmp-")
    assert code == 2 and len(err) == 1 and out == "", err
    assert err[0] == f"spanning: error: No space left on device: {home / 'out' / 'windows'}"  # not the temporary
    assert snapshot(home) == before and not leftovers(home)

    # a user mistake found by Spark (an unknown column) with --overwrite: same
    code, err, _ = run(capsys, calls, *spark_args, "--agg", "sum:volume")
    assert code == 2 and len(err) == 1 and "unknown column 'volume'" in err[0], err
    assert snapshot(home) == before and not leftovers(home)
