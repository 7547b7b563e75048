"""The Spark job against the Spark SQL a user would write instead: explode each call into its windows, group by.

Generated CDRs (7 days, 200 cells) in Parquet; ω/β = 15m/5m, 15m/1m and 1h/1m; count + sum:bytes +
max:duration, and count + sum:bytes; δ longer than the longest call. In one Spark session, the job
(``spark_jobs.run.compute``, plan chosen by ``--plan auto``) and the SQL run interleaved (job, SQL, job,
SQL, ...), each writing Parquet; the results must be identical. Prints medians, spreads and ratios.

    python bench/bench_spark_job.py                          # 3,000,000 rows, 3 rounds
    python bench/bench_spark_job.py --rows 200000 --repeat 1 --sink noop
    python bench/bench_spark_job.py --processes             # whole processes: spanning run vs a PySpark script
    python bench/bench_spark_job.py --timeline 900/60        # where one process's time goes, both commands

With ``--processes`` each pair starts ``spanning run`` and ``bench/sql_explode_job.py`` as separate
processes (JVM start included, as a user times them), interleaved, on the same Parquet file, for
integer-keyed CDRs (``spark_jobs.peers.integer_cdr_file``: 1% sessions of 0.5-4 h, calls of about a minute)
and the generator's text-keyed ones (``--data``); the first pair's windows are compared row for row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from spark_jobs.peers import AGG_SETS, SHAPES, cdr_file, integer_cdr_file, spark_vs_sql

HERE = Path(__file__).resolve().parent


DATASETS = {"int": integer_cdr_file, "text": cdr_file}  # integer cell ids (the main job's shape), text cells


def _commands(path: Path, out: Path, range_: int, slide: int, aggs: list[str]) -> tuple[list[str], list[str]]:
    """``spanning run`` and the hand-written script over ``path``, each writing Parquet under ``out``."""
    run = [sys.executable, "-m", "spanning.cli", "run", str(path), "--range", str(range_), "--slide", str(slide),
           "--ttp", "7d", "--start", "start", "--end", "end", "--key", "cell",
           *[x for a in aggs for x in ("--agg", a)], "--output", str(out / "run"), "--overwrite"]  # fmt: skip
    sql = [sys.executable, str(HERE / "sql_explode_job.py"), str(path), str(out / "sql"), "--range", str(range_),
           "--slide", str(slide), *(["--max"] if "max:duration" in aggs else [])]  # fmt: skip
    return run, sql


def _timed_command(command: list[str], env: dict) -> None:
    """Run ``command`` as a shell's ``time`` sees it: until its own process exits. Its output goes to files, not
    pipes: a pipe would also wait for the JVM that PySpark started, which exits on its own once its Python
    driver is gone (after the command's results are complete), for both commands alike."""
    with tempfile.TemporaryFile() as err:
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=err, check=False)
        if done.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n"
                             f"{err.read().decode(errors='replace')[-3000:]}")  # fmt: skip


def _same_windows(out: Path, aggs: list[str]) -> int:
    """The windows of ``spanning run`` and of the script, compared row for row; their number."""
    columns = ["cell", "window_start", *[a.replace(":", "_") for a in aggs]]
    frames = []
    for name in ("run/windows", "sql"):  # the script writes Spark's default INT96 times, read without a zone
        frame = pd.read_parquet(out / name, columns=columns)
        frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True).astype("datetime64[us, UTC]")
        frames.append(frame.sort_values(columns[:2]).reset_index(drop=True))
    try:
        pd.testing.assert_frame_equal(*frames, check_dtype=False)
    except AssertionError as err:
        raise SystemExit(f"spanning run and the SQL script gave different windows in {out}: {err}") from None
    return len(frames[0])


def processes(rows: int, repeat: int, archive_control: bool, datasets: list[str], agg_sets: dict) -> None:
    """Whole processes, interleaved: ``spanning run`` against the standalone SQL script (and, with
    ``archive_control``, the script again with the driver's class archive that ``spanning run`` maps)."""
    from spark_jobs.class_archive import driver_options
    from spark_jobs.session import check_java, submit_args

    out = Path(tempfile.mkdtemp(prefix="spanning-bench-proc-"))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    archive = driver_options(check_java())
    if archive_control and not archive:
        raise SystemExit("no class archive to give the SQL script: python -m spark_jobs.class_archive builds it")
    with_archive = {**env, "PYSPARK_SUBMIT_ARGS": submit_args(archive)}
    print(f"{rows:,} CDRs (Parquet), whole processes, {repeat} interleaved pairs, {os.cpu_count()} cores, "
          f"class archive {'mapped' if archive else 'absent'}; ratio = SQL script s / spanning run s")  # fmt: skip
    control = " SQL + archive s (min-max) | SQL + archive/run |" if archive_control else ""
    print("| data | ω/β | aggregates | plan (windows/event) | spanning run s (min-max) | SQL script s (min-max) "
          f"| SQL/run, median of pairs (min-max) |{control}")  # fmt: skip
    print("|---|---|---|---|---|---|---|" + ("---|---|" if archive_control else ""))
    for data in datasets:
        path = DATASETS[data](rows)
        for range_, slide in SHAPES:
            for name, aggs in agg_sets.items():
                run, sql = _commands(path, out, range_, slide, aggs)
                commands = [("run", run, env), ("sql", sql, env), *([("sql+", sql, with_archive)] * archive_control)]
                times = {label: [] for label, _, _ in commands}
                for round_ in range(repeat):
                    for label, command, command_env in commands:
                        began = time.perf_counter()
                        _timed_command(command, command_env)
                        times[label].append(time.perf_counter() - began)
                    if round_ == 0:
                        _same_windows(out, aggs)
                plan = json.loads((out / "run" / "summary.json").read_text())["plans"][0]
                a = sorted(times["run"])
                cells = [data, f"{range_ // 60}m/{slide // 60}m", name,
                         f"{plan['plan']} ({plan['windows_per_event'] or 0:.1f})",
                         f"{statistics.median(a):.1f} ({a[0]:.1f}-{a[-1]:.1f})"]  # fmt: skip
                for label in [label for label in times if label != "run"]:
                    b = sorted(times[label])
                    pairs = sorted(y / x for x, y in zip(times["run"], times[label], strict=True))
                    cells += [f"{statistics.median(b):.1f} ({b[0]:.1f}-{b[-1]:.1f})",
                              f"**{statistics.median(pairs):.2f}×** ({pairs[0]:.2f}-{pairs[-1]:.2f})"]  # fmt: skip
                print("| " + " | ".join(cells) + " |", flush=True)
    shutil.rmtree(out, ignore_errors=True)


def timeline(rows: int, data: str, range_: int, slide: int) -> None:
    """Where each second of one whole process goes, for ``spanning run`` and for the SQL script: the process's
    start and exit, and from Spark's event log the application's start, each job and stage, and each SQL
    execution (seconds from the process's start)."""
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-timeline-"))
    conf, events = out / "conf", out / "events"
    conf.mkdir()
    events.mkdir()
    (conf / "spark-defaults.conf").write_text(f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
                                              "spark.eventLog.compress false\nspark.eventLog.rolling.enabled false\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_CONF_DIR": str(conf)}  # fmt: skip
    run, sql = _commands(DATASETS[data](rows), out, range_, slide, ["count", "sum:bytes", "max:duration"])
    for label, command in (("spanning run", run), ("SQL script", sql)):
        before = set(events.iterdir())
        began = time.time()
        _timed_command(command, env)
        ended = time.time() - began
        (log,) = _new_event_log(events, before)
        print(f"\n{label} ({data} keys, {range_ // 60}m/{slide // 60}m, {rows:,} rows): {ended:.2f} s in all")
        print("| from s | to s | s | what |\n|---|---|---|---|")
        for at, until, what in _event_spans(log, began):
            print(f"| {at:.2f} | {until:.2f} | {until - at:.2f} | {what} |")
        print(f"| {ended:.2f} | | | process exits |")
    shutil.rmtree(out, ignore_errors=True)


def _new_event_log(events: Path, before: set[Path]) -> list[Path]:
    """The event log a process added to ``events``: a JVM that outlives its Python process may still be
    renaming it from ``*.inprogress`` (given a few seconds)."""
    for _ in range(50):
        added = set(events.iterdir()) - before
        if len(added) == 1 and not next(iter(added)).name.endswith(".inprogress"):
            return list(added)
        time.sleep(0.1)
    return [max(events.iterdir(), key=lambda p: p.stat().st_mtime)]


def _event_spans(log: Path, began: float) -> list[tuple[float, float, str]]:
    """(from, to, what) of the application, its jobs, stages and SQL executions in a Spark event log."""
    spans, opened = [], {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"].rsplit(".", 1)[-1]
        if kind == "SparkListenerApplicationStart":
            at = event["Timestamp"] / 1000 - began
            spans.append((at, at, "Spark application started (JVM up, SparkContext made)"))
        elif kind == "SparkListenerJobStart":
            opened["job", event["Job ID"]] = event["Submission Time"] / 1000 - began
        elif kind == "SparkListenerJobEnd":
            at = opened.pop(("job", event["Job ID"]))
            spans.append((at, event["Completion Time"] / 1000 - began, f"  job {event['Job ID']}"))
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            spans.append((info["Submission Time"] / 1000 - began, info["Completion Time"] / 1000 - began,
                          f"    stage {info['Stage ID']}: {info['Number of Tasks']} tasks"))  # fmt: skip
        elif kind == "SparkListenerSQLExecutionStart":
            opened["sql", event["executionId"]] = (event["time"] / 1000 - began, event["description"].split(" at ")[0])
        elif kind == "SparkListenerSQLExecutionEnd" and ("sql", event["executionId"]) in opened:
            at, what = opened.pop(("sql", event["executionId"]))
            spans.append((at, event["time"] / 1000 - began, f"query: {what}"))
        elif kind == "SparkListenerApplicationEnd":
            at = event["Timestamp"] / 1000 - began
            spans.append((at, at, "Spark application ended"))
    return sorted(spans, key=lambda span: (span[0], -span[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--sink", default="parquet", choices=["parquet", "noop"])
    parser.add_argument("--processes", action="store_true", help="time whole processes instead of one session")
    parser.add_argument("--archive-control", action="store_true",
                        help="--processes: also time the SQL script with spanning's class archive mapped")  # fmt: skip
    parser.add_argument("--data", choices=[*DATASETS, "both"], default="both",
                        help="--processes, --timeline: integer-keyed CDRs, the generator's text-keyed ones, or both")
    parser.add_argument("--both-agg-sets", action="store_true",
                        help="--processes: count + sum too, not only count + sum + max")  # fmt: skip
    parser.add_argument("--timeline", metavar="RANGE/SLIDE", help="one process each, where its time goes (e.g. 900/60)")
    args = parser.parse_args()
    datasets = list(DATASETS) if args.data == "both" else [args.data]
    if args.timeline:
        range_, slide = (int(x) for x in args.timeline.split("/"))
        for data in datasets:
            timeline(args.rows, data, range_, slide)
        return
    if args.processes:
        agg_sets = AGG_SETS if args.both_agg_sets else {"count+sum+max": AGG_SETS["count+sum+max"]}
        processes(args.rows, args.repeat, args.archive_control, datasets, agg_sets)
        return
    records, agreement = spark_vs_sql(args.rows, args.repeat, lambda m: None, args.master, sink=args.sink)
    print(f"{args.rows:,} CDRs, {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"sink {args.sink}, {args.repeat} interleaved rounds")  # fmt: skip
    failed = [case for case, ok in agreement.items() if not ok]
    if failed:
        raise SystemExit(f"results differ: {failed}")
    print("| ω/β | aggregates | plan | job s (min-max) | SQL s (min-max) | SQL/job median | per-round ratios |")
    print("|---|---|---|---|---|---|---|")
    for job in (r for r in records if r["technique"].startswith("Spark job")):
        sql = next(r for r in records if r["technique"].startswith("Spark SQL") and r["range"] == job["range"]
                   and r["slide"] == job["slide"] and r["aggregates"] == job["aggregates"])  # fmt: skip
        ratios = ", ".join(f"{x:.2f}" for x in job["ratios"])
        print(f"| {job['range'] // 60}m/{job['slide'] // 60}m | {job['aggregates']} | {job['plan']} | "
              f"{job['seconds_median']:.2f} ({job['seconds_min']:.2f}-{job['seconds_max']:.2f}) | "
              f"{sql['seconds_median']:.2f} ({sql['seconds_min']:.2f}-{sql['seconds_max']:.2f}) | "
              f"**{sql['seconds_median'] / job['seconds_median']:.2f}×** | {ratios} |")  # fmt: skip


if __name__ == "__main__":
    main()
