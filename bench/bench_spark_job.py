"""The Spark job against the Spark SQL a user would write instead: explode each call into its windows, group by.

    python bench/bench_spark_job.py --processes --rows 30000000 --keys hot,none,uniform --floor   # issue 30's table
    python bench/bench_spark_job.py --processes --archive on     # the driver's class archive on both sides
    python bench/bench_spark_job.py --timeline 900/60 --keys hot # where one process's time goes, both commands
    python bench/bench_spark_job.py --processes --rows 30000000 --csv-files 1 --shapes 900/60 --floor  # one CSV file
    python bench/bench_spark_job.py --processes --rows 30000000 --copies 10 --no-script --floor --shapes 900/60
    python bench/bench_spark_job.py                              # one Spark session, job and SQL interleaved

With ``--processes`` (how a user times it) each round starts ``spanning run``, the hand-written script
(``bench/sql_explode_job.py``) and, with ``--floor``, the floor (the same read, times included, grouped by cell
only, no windows) as separate processes, interleaved with the order turning each round, on the same Parquet file;
each stops Spark before it exits and runs with spanning run's settings (ANSI off, two shuffle partitions per
core), all with the class archive off (``--archive off``, the default) or all with it.
Data: integer-keyed CDRs (``--data int``,
``spark_jobs.peers.integer_cdr_file``: 1% sessions of 0.5-4 h, calls of about a minute, in end order, 1M-row
groups) whose cells are ``--keys``: ``hot`` (60 hours, 200 cells, one with 38% of the calls), ``none`` (the same
file, no key: the network's total), ``uniform`` (60 hours, 10,000 even cells) or ``zipf`` (7 days, 200 Zipf
cells); or the generator's text-keyed CDRs (``--data text``). The first round's windows are compared row for
row; ratio = script s / spanning run s, the median over the pairs. ω/β: 15m/5m, 15m/1m and 1h/1m (``--shapes``),
count + sum:bytes + max:duration, δ longer than any call.

Without ``--processes``: one Spark session, the job (``spark_jobs.batch.compute.compute``) and the SQL interleaved.
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

from spark_jobs.peers import AGG_SETS, cdr_file, integer_cdr_csv, integer_cdr_file, spark_vs_sql

HERE = Path(__file__).resolve().parent


KEY_SHAPES = ("zipf", "hot", "none", "uniform")  # the cells of the integer CDRs (--keys); none: a query without --key


def copies_of(path: Path, copies: int) -> Path:
    """A folder holding ``path`` ``copies`` times (hard links, no bytes copied): 300M rows from the 30M-row file.
    Hard links are plain files to every reader; symbolic ones were suspected of slowing Spark's floor (208 s over
    ten of them), but ten hard links gave 188 s on the same loaded machine, so that is not shown."""
    folder = path.with_name(f"{path.stem}-x{copies}-hard")
    folder.mkdir(exist_ok=True)
    for i in range(copies):
        link = folder / f"part-{i:03d}{path.suffix}"
        if not link.exists():
            os.link(path, link)
    return folder


def _same_as_one_copy(out: Path, run: list[str], env: dict, copies: int, keyed: bool = True) -> None:
    """The windows of ``copies`` copies of a file against those of the file once: every count and sum ``copies``
    times, every maximum the same (an event's windows and lateness depend on its own times only)."""
    folder = Path(run[run.index("run") + 1])
    one = [*run[: run.index("run") + 1], str(next(folder.iterdir())), *run[run.index("run") + 2:]]
    one = [*one[: one.index("--output")], "--output", str(out / "one"), "--overwrite"]
    timed_command(one, env)
    by = [*(["cell"] if keyed else []), "window_start"]
    many, single = (pd.read_parquet(out / side / "windows").sort_values(by).reset_index(drop=True)
                    for side in ("run", "one"))  # fmt: skip
    expected = single.assign(count=single["count"] * copies, sum_bytes=single["sum_bytes"] * copies)
    try:
        pd.testing.assert_frame_equal(many[expected.columns], expected, check_dtype=False)
    except AssertionError as err:
        raise SystemExit(f"{copies} copies gave other windows than one copy times {copies} in {out}: {err}") from None
    summaries = [json.loads((out / side / "summary.json").read_text()) for side in ("run", "one")]
    if summaries[0]["late"] != copies * summaries[1]["late"]:
        raise SystemExit(f"{copies} copies: {summaries[0]['late']} late rows, one copy {summaries[1]['late']}")


def dataset(data: str, rows: int, keys: str, csv_files: int = 0) -> Path:
    """The Parquet file of ``data`` ("int": integer cells shaped by ``keys``; "text": the generator's text cells).
    "zipf" is 7 days of 200 Zipf cells; "hot", "none" and "uniform" are 60 hours of one hot cell among 200 (the
    same file, "none" queried without a key) or of 10,000 even cells (``spark_jobs.peers.integer_cdr_frame``)."""
    if data == "text":
        return cdr_file(rows)
    if csv_files:
        return integer_cdr_csv(rows, "uniform" if keys == "uniform" else "hot", 60, csv_files)
    if keys == "zipf":
        return integer_cdr_file(rows)
    return integer_cdr_file(rows, "uniform" if keys == "uniform" else "hot", hours=60)


def _commands(path: Path, out: Path, range_: int, slide: int, aggs: list[str], keyed: bool = True,
              plan: str = "auto", ttp: str = "7d") -> dict:  # fmt: skip
    """``spanning run``, the hand-written script and the floor over ``path``, each writing Parquet under ``out``."""
    csv = path.suffix == ".csv" or path.is_dir()
    run = [sys.executable, "-m", "spanning.cli", "run", str(path), "--range", str(range_), "--slide", str(slide),
           "--ttp", ttp, "--start", "start", "--end", "end", *(["--key", "cell"] if keyed else []),
           *[x for a in aggs for x in ("--agg", a)], "--output", str(out / "run"), "--overwrite",
           "--plan", plan]  # fmt: skip
    script = [sys.executable, str(HERE / "sql_explode_job.py"), str(path), str(out / "sql"), "--range", str(range_),
              "--slide", str(slide), *(["--max"] if "max:duration" in aggs else []),
              *([] if keyed else ["--no-key"]), *(["--csv"] if csv else [])]  # fmt: skip
    floor = [*script[:3], str(out / "floor"), *script[4:], "--floor"]
    return {"run": run, "sql": script, "floor": floor}


def process_env(archive: bool, stream: bool = False) -> dict:
    """The environment of both sides' processes: the driver's class archive on for both (``archive``), or off,
    and the same driver heap for both (the one ``spanning`` gives itself, ``session.driver_memory``). With the
    archive, ``PYSPARK_SUBMIT_ARGS`` carries the driver's options, which ``spanning`` then leaves as given: for
    ``stream`` sides they also carry the collector that ``spanning stream`` takes (``session.compiler_options``)."""
    from spark_jobs.sessions.session import driver_memory

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    memory = driver_memory()
    if memory:
        env["SPARK_DRIVER_MEMORY"] = memory
    if archive:
        from spark_jobs.sessions.class_archive import driver_options
        from spark_jobs.sessions.session import check_java, submit_args

        options = driver_options(check_java())
        if not options:
            raise SystemExit("--archive on: no class archive"
                             " (python -m spark_jobs.sessions.build_class_archive builds it)")
        if stream:
            from spark_jobs.sessions.session import compiler_options, spark_defaults

            options += compiler_options(check_java(), False, True, env, spark_defaults())
        env["PYSPARK_SUBMIT_ARGS"] = submit_args(options)  # the script's JVM maps it as spanning run's does
    else:
        env["SPANNING_CLASS_ARCHIVE"] = "off"
    return env


def timed_command(command: list[str], env: dict) -> float:
    """Run ``command`` and return its seconds as a shell's ``time`` sees them: until its own process exits. Its
    output goes to files, not pipes: a pipe would also wait for the JVM that PySpark started, which exits on its
    own once its Python driver is gone (after the command's results are complete), for both commands alike."""
    with tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=err, check=False)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n"
                             f"{err.read().decode(errors='replace')[-3000:]}")  # fmt: skip
    return seconds


def _same_windows(out: Path, aggs: list[str], keyed: bool = True) -> int:
    """The windows of ``spanning run`` and of the script, compared row for row; their number."""
    columns = [*(["cell"] if keyed else []), "window_start", *[a.replace(":", "_") for a in aggs]]
    order = columns[: 1 + keyed]
    frames = []
    for name in ("run/windows", "sql"):  # the script writes Spark's default INT96 times, read without a zone
        frame = pd.read_parquet(out / name, columns=columns)
        unit = "s" if frame["window_start"].dtype.kind == "i" else None  # CSV input: epoch seconds, as read
        frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True, unit=unit).astype("datetime64[us, UTC]")
        frames.append(frame.sort_values(order).reset_index(drop=True))
    try:
        pd.testing.assert_frame_equal(*frames, check_dtype=False)
    except AssertionError as err:
        raise SystemExit(f"spanning run and the SQL script gave different windows in {out}: {err}") from None
    return len(frames[0])


def _same_as_explode_plan(out: Path, run: list[str], env: dict, aggs: list[str], keyed: bool = True) -> None:
    """``spanning run``'s windows and late rows against those of the same command with ``--plan explode`` (the JVM
    plan, where Spark reads the rows): with late events the explode script's windows are not the job's."""
    check = [*run[: run.index("--output")], "--output", str(out / "check"), "--overwrite", "--plan", "explode"]
    timed_command(check, env)
    columns = [*(["cell"] if keyed else []), "window_start", *[a.replace(":", "_") for a in aggs]]
    for part, order in (("windows", columns), ("late", None)):
        frames = [pd.read_parquet(out / side / part) for side in ("run", "check")]
        order = order or list(frames[0].columns)
        frames = [f[order].sort_values(order).reset_index(drop=True) for f in frames]
        try:
            pd.testing.assert_frame_equal(*frames, check_dtype=False)
        except AssertionError as err:
            raise SystemExit(f"spanning run and its --plan explode gave different {part} in {out}: {err}") from None


def spread(times: list[float]) -> str:
    t = sorted(times)
    return f"{statistics.median(t):.1f} ({t[0]:.1f}-{t[-1]:.1f})"


def ratio_spread(ours: list[float], theirs: list[float]) -> str:
    """The peer's seconds over ours, round by round: the median in bold, then (min-max)."""
    pairs = sorted(t / o for o, t in zip(ours, theirs, strict=True))
    return f"**{statistics.median(pairs):.2f}×** ({pairs[0]:.2f}-{pairs[-1]:.2f})"


def processes(rows: int, repeat: int, archive: bool, datasets: list[str], keys: list[str], shapes: list,
              agg_sets: dict, floor: bool, plan: str = "auto", csv_files: int = 0, ttp: str = "7d",
              copies: int = 1, script: bool = True) -> None:  # fmt: skip
    """Whole processes, interleaved, the order turning each round (run, script, floor; script, floor, run; ...):
    ``spanning run`` against the standalone SQL script, each with the driver's class archive (``archive``) or both
    without it; the first round's windows compared."""
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-proc-"))
    env = process_env(archive)
    form = "Parquet" if not csv_files else f"CSV, {csv_files} file{'s' if csv_files > 1 else ''}"
    print(f"{rows:,} CDRs ({form}), TTP {ttp}, whole processes, {repeat} interleaved pairs, {os.cpu_count()} cores, "
          f"class archive {'on' if archive else 'off'} on both sides; ratio = script s / spanning run s")  # fmt: skip
    print("| data | keys | ω/β | aggregates | plan (windows/event) | spanning run s (min-max) | script s (min-max) "
          "| script/run, median of pairs (min-max) |" + (" floor s (min-max) | run/floor |" if floor else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if floor else ""))
    for data in datasets:
        for shape in keys if data == "int" else ["zipf"]:
            path = dataset(data, rows, shape, csv_files)
            path = copies_of(path, copies) if copies > 1 else path
            for range_, slide in shapes:
                for name, aggs in agg_sets.items():
                    commands = _commands(path, out, range_, slide, aggs, keyed=shape != "none", plan=plan, ttp=ttp)
                    labels = ["run", *(["sql"] if script else []), *(["floor"] if floor else [])]
                    times = {label: [] for label in labels}
                    for round_ in range(repeat):  # the order turns each round: run, sql, floor; sql, floor, run...
                        for label in labels[round_ % len(labels):] + labels[: round_ % len(labels)]:
                            times[label].append(timed_command(commands[label], env))
                        if round_ == 0 and copies > 1:  # many copies of one file: the file's windows, times N
                            _same_as_one_copy(out, commands["run"], env, copies, keyed=shape != "none")
                        elif round_ == 0 and ttp == "7d" and script:  # none late: the explode's windows are ours
                            _same_windows(out, aggs, keyed=shape != "none")
                        elif round_ == 0 and ttp != "7d":  # some late: the general way's (--plan explode) are ours
                            _same_as_explode_plan(out, commands["run"], env, aggs, keyed=shape != "none")
                    chosen = json.loads((out / "run" / "summary.json").read_text())["plans"][0]
                    cells = [data, shape if data == "int" else "text", f"{range_ // 60}m/{slide // 60}m", name,
                             f"{chosen['plan']} ({chosen['windows_per_event'] or 0:.1f})", spread(times["run"]),
                             *((spread(times["sql"]), ratio_spread(times["run"], times["sql"])) if script
                               else ("-", "-"))]  # fmt: skip
                    if floor:
                        cells += [spread(times["floor"]),
                                  f"{statistics.median(times['run']) / statistics.median(times['floor']):.2f}×"]
                    print("| " + " | ".join(cells) + " |", flush=True)
    shutil.rmtree(out, ignore_errors=True)


def timeline(rows: int, data: str, keys: str, range_: int, slide: int, csv_files: int = 0) -> None:
    """Where each second of one whole process goes, for ``spanning run``, the SQL script and the floor: the process's
    start and exit, and from Spark's event log the application's start, each job and stage, and each SQL
    execution (seconds from the process's start)."""
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-timeline-"))
    conf, events = out / "conf", out / "events"
    conf.mkdir()
    events.mkdir()
    (conf / "spark-defaults.conf").write_text(f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
                                              "spark.eventLog.compress false\nspark.eventLog.rolling.enabled false\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_CONF_DIR": str(conf), "SPANNING_CLASS_ARCHIVE": "off"}  # fmt: skip
    commands = _commands(dataset(data, rows, keys, csv_files), out, range_, slide,
                         ["count", "sum:bytes", "max:duration"], keyed=keys != "none")
    for label, command in (("spanning run", commands["run"]), ("SQL script", commands["sql"]),
                           ("floor", commands["floor"])):
        before = set(events.iterdir())
        began = time.time()
        timed_command(command, env)
        ended = time.time() - began
        (log,) = _new_event_log(events, before)
        form = f", {csv_files} CSV file{'s' if csv_files > 1 else ''}" if csv_files else ", Parquet"
        print(f"\n{label} ({data} data, {keys} keys, {range_ // 60}m/{slide // 60}m, {rows:,} rows{form}): "
              f"{ended:.2f} s")
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
    parser.add_argument("--archive", choices=["on", "off"], default="off",
                        help="--processes: the driver's class archive on both sides, or off on both (default)")
    parser.add_argument("--data", choices=["int", "text", "both"], default="int",
                        help="--processes, --timeline: integer-keyed CDRs, the generator's text-keyed ones, or both")
    parser.add_argument("--keys", default="hot", help="--processes, --timeline: the integer CDRs' cells, a comma "
                        f"list of {', '.join(KEY_SHAPES)} (default hot)")  # fmt: skip
    parser.add_argument("--shapes", default="900/300,900/60,3600/60", help="ω/β pairs in seconds (--processes)")
    parser.add_argument("--plan", default="auto", help="--processes: spanning run's --plan (default auto)")
    parser.add_argument("--csv-files", type=int, default=0, metavar="N",
                        help="--processes, --timeline: the integer CDRs as N CSV files (epoch seconds), read by"
                             " every side")
    parser.add_argument("--ttp", default="7d", help="--processes: spanning run's --ttp (default 7d: none late)")
    parser.add_argument("--copies", type=int, default=1, metavar="N",
                        help="--processes: the data file N times in one folder (300M rows from 30M); the windows are"
                        " checked against one copy's, times N")  # fmt: skip
    parser.add_argument("--no-script", action="store_true", help="--processes: time the run and the floor only")
    parser.add_argument("--floor", action="store_true", help="--processes: also time the floor (read, group by cell)")
    parser.add_argument("--both-agg-sets", action="store_true",
                        help="--processes: count + sum too, not only count + sum + max")  # fmt: skip
    parser.add_argument("--timeline", metavar="RANGE/SLIDE", help="one process each, where its time goes (e.g. 900/60)")
    args = parser.parse_args()
    datasets = ["int", "text"] if args.data == "both" else [args.data]
    keys = args.keys.split(",")
    if set(keys) - set(KEY_SHAPES):
        parser.error(f"--keys takes {', '.join(KEY_SHAPES)}")
    if args.timeline:
        range_, slide = (int(x) for x in args.timeline.split("/"))
        for data in datasets:
            timeline(args.rows, data, keys[0], range_, slide, args.csv_files)
        return
    if args.processes:
        agg_sets = AGG_SETS if args.both_agg_sets else {"count+sum+max": AGG_SETS["count+sum+max"]}
        shapes = [tuple(int(x) for x in pair.split("/")) for pair in args.shapes.split(",")]
        processes(args.rows, args.repeat, args.archive == "on", datasets, keys, shapes, agg_sets, args.floor,
                  args.plan, args.csv_files, args.ttp, args.copies, not args.no_script)
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
