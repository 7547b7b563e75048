"""README's code, and the examples of docs/PYTHON.md and docs/PYSPARK.md, run as written, on the bundled sample, and
give what the command gives; the docs' links lead somewhere."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pandas as pd

from spanning.cli import main

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(page: str = "README.md", fence: str = "python") -> list[str]:
    return re.findall(rf"```{fence}\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


def run_blocks(blocks: list[str], namespace: dict) -> str:
    """README's code blocks run in the checkout (README's paths are relative to it), in one namespace; what they
    printed."""
    printed = io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(printed):
            for block in blocks:
                exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    finally:
        os.chdir(here)
    return printed.getvalue()


def test_readme_python_runs_on_the_sample_and_equals_the_command(tmp_path):
    blocks = python_blocks()
    assert blocks, "README has no Python block"
    namespace: dict = {}
    printed = run_blocks(blocks, namespace)
    windows, rejected, late = namespace["windows"], namespace["rejected"], namespace["late"]

    # the command over the same file, through its own reader (spanning.app.csv_records, the local engine)
    out = tmp_path / "out"
    args = ["run", str(ROOT / "data/sample_cdr.csv"), "--range", "15m", "--slide", "5m", "--ttp", "2h",
            "--start", "start", "--end", "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes",
            "--agg", "max:duration", "--engine", "local", "--output", str(out)]  # fmt: skip
    assert main(args) == 0
    command = pd.read_parquet(out / "windows")
    order = ["cell", "window_start"]
    mine = windows.sort_values(order).reset_index(drop=True)
    theirs = command.sort_values(order).reset_index(drop=True)
    assert list(mine.columns) == list(theirs.columns)
    assert mine["window_start"].tolist() == theirs["window_start"].tolist()
    for name in ("cell", "count", "sum_bytes", "max_duration"):
        assert mine[name].astype(object).tolist() == theirs[name].astype(object).tolist(), name
    assert len(rejected) == len(pd.read_parquet(out / "rejected"))
    assert sorted(rejected["reason"]) == sorted(pd.read_parquet(out / "rejected")["reason"])
    assert len(late) == len(pd.read_parquet(out / "late"))
    assert printed.split()[:3] == [str(len(windows)), str(len(rejected)), str(len(late))]
    said = re.search(r"print\(len\(windows\), len\(rejected\), len\(late\)\)\s*# (\d+) (\d+) (\d+)", blocks[0])
    assert said and list(said.groups()) == printed.split()[:3]  # README's comment says what it prints


def test_docs_python_examples_run_on_the_sample():
    """docs/PYTHON.md's block: one event at a time, point events through a SWAG, two specs in one pass."""
    namespace: dict = {}
    run_blocks(python_blocks("docs/PYTHON.md"), namespace)
    assert namespace["released"], "the Engine released the event's windows"
    assert len(namespace["sms"]) > 0
    assert set(namespace["both"]["window"]) == {"900/300", "3600/900"}


def test_every_relative_link_of_the_docs_leads_to_a_file():
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            path = target.split("#")[0]
            if path and "://" not in path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_every_run_option_is_in_the_command_reference_synopsis():
    from spanning.cli import build_parser

    parser = build_parser()
    run = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "run")[1]
    options = {s for action in run._actions for s in action.option_strings if s.startswith("--") and s != "--help"}
    reference = (ROOT / "docs/COMMAND.md").read_text()
    synopsis = re.search(r"```bash\nspanning run INPUT\.\.\.(.*?)\nspanning generate-cdr", reference, flags=re.S)
    assert synopsis, "docs/COMMAND.md's synopsis block starts with 'spanning run INPUT...'"
    missing = sorted(o for o in options if not re.search(re.escape(o) + r"(?![\w-])", synopsis.group(1)))
    assert not missing, f"options missing from docs/COMMAND.md's synopsis: {missing}"


def test_negative_durations_and_gapped_windows_get_plain_messages(capsys, tmp_path):
    base = ["run", str(ROOT / "data/sample_cdr.csv"), "--start", "start", "--end", "end", "--engine", "local"]
    assert main([*base, "--range", "15m", "--slide", "-5m"]) == 2
    assert "duration '-5m' is negative" in capsys.readouterr().err
    assert main([*base, "--range", "5m", "--slide", "15m", "--output", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert "the slide (900 s) is longer than the range (300 s): the windows leave gaps of 600 s" in captured.err
    assert "late: with --ttp 0" in captured.out  # the late events get their reason


def test_gitignore_covers_what_the_commands_write():
    import subprocess

    written = ["spanning-output/windows/part-0.parquet", "bench-results/summary.md", "data/cdr.csv",
               "output/main-job/summary.json", "out/stream/windows/batch=0/x.parquet"]  # fmt: skip
    result = subprocess.run(["git", "check-ignore", *written], cwd=ROOT, capture_output=True, text=True)
    assert sorted(result.stdout.split()) == sorted(written)


def test_readme_pyspark_runs_on_the_session_and_counts_as_the_command(spark, tmp_path):
    """README's and docs/PYSPARK.md's PySpark blocks (```py: the ``pyspark`` shell's ``spark`` in scope) run as
    written; the batch call counts what ``spanning run`` counts over the same file, and prints what README's comment
    says."""
    import ast

    blocks = python_blocks("README.md", "py") + python_blocks("docs/PYSPARK.md", "py")
    assert len(blocks) == 2, "the PySpark blocks: README's batch call and docs/PYSPARK.md's stream"
    namespace: dict = {"spark": spark}
    printed = run_blocks(blocks, namespace)
    counts = namespace["result"].counts
    said = re.search(r"print\(result\.counts\)\s*# (\{.*\})", blocks[0])
    assert said and ast.literal_eval(said.group(1)) == counts  # README's comment says what it prints
    out = tmp_path / "out"
    args = ["run", str(ROOT / "data/sample_cdr.csv"), "--range", "15m", "--slide", "5m", "--ttp", "2h",
            "--start", "start", "--end", "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes",
            "--agg", "max:duration", "--engine", "local", "--output", str(out)]  # fmt: skip
    assert main(args) == 0
    summary = __import__("json").loads((out / "summary.json").read_text())
    assert counts == {"read": summary["rows_read"], "accepted": summary["accepted"], "rejected": summary["rejected"],
                      "late": summary["late"]}  # fmt: skip
    lines = printed.splitlines()
    batches = [line for line in lines if re.fullmatch(r"\d+ \d+ \d+ \d+", line)]
    assert batches and sum(int(line.split()[1]) for line in batches) > 1000, lines[-5:]  # the drained stream's windows


def test_every_benchmark_command_of_the_docs_exists_and_takes_its_flags():
    """Each ``bench/...py`` command that docs/BENCHMARKS.md names is a script of the checkout whose ``--help`` lists
    every flag the command gives (a renamed or dropped flag fails here, not in the next reader's hands)."""
    import shlex
    import subprocess
    import sys

    text = (ROOT / "docs/BENCHMARKS.md").read_text()
    commands = [shlex.split(" ".join(span.split()))
                for span in re.findall(r"`((?:python )?bench/[a-z_]+\.py[^`]*)`", text, flags=re.S)]  # fmt: skip
    assert len(commands) >= 8, commands
    helps: dict[str, str] = {}
    for command in commands:
        script = command[1] if command[0] == "python" else command[0]
        assert (ROOT / script).is_file(), script
        flags = [word.split("=")[0] for word in command if word.startswith("--")]
        if not flags:
            continue
        if script not in helps:
            done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True,
                                  timeout=120)  # fmt: skip
            assert done.returncode == 0, (script, done.stderr[-2000:])
            helps[script] = done.stdout
        missing = [flag for flag in flags if not re.search(re.escape(flag) + r"(?![\w-])", helps[script])]
        assert not missing, (script, missing)


def test_readme_commands_run_as_written(tmp_path, capsys):
    """README's command examples (its bash blocks after the two setup commands) run as written, through the
    command's own entry point, their outputs sent to a temporary folder; ``--engine local`` where README leaves
    the engine to Spark's default, so that the test starts no JVM of its own (the main job's own run is
    ``scripts/main_job.sh``, tested in tests/test_first_hour.py)."""
    import shlex

    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert "scripts/main_job.sh" in blocks[0] and "scripts/test.sh" in blocks[0]
    commands = [shlex.split(line.split("#")[0]) for line in re.sub(r"\\\n\s*", "", "".join(blocks[1:])).splitlines()
                if line.strip()]  # fmt: skip
    assert commands and all(command[0] == "spanning" for command in commands), commands
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        for i, command in enumerate(commands):
            args = command[1:]
            if "--output" in args:
                args[args.index("--output") + 1] = str(tmp_path / f"out{i}")
                if "--engine" not in args:
                    args += ["--engine", "local"]
            assert main(args) == 0, command
    finally:
        os.chdir(here)
    assert "spanning " in capsys.readouterr().out
