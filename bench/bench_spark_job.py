"""The Spark job against the Spark SQL a user would write instead: explode each call into its windows, group by.

Generated CDRs (7 days, 200 cells) in Parquet; ω/β = 15m/5m, 15m/1m and 1h/1m; count + sum:bytes +
max:duration, and count + sum:bytes; δ longer than the longest call. In one Spark session, the job
(``spark_jobs.run.compute``, plan chosen by ``--plan auto``) and the SQL run interleaved (job, SQL, job,
SQL, ...), each writing Parquet; the results must be identical. Prints medians, spreads and ratios.

    python bench/bench_spark_job.py                          # 3,000,000 rows, 3 rounds
    python bench/bench_spark_job.py --rows 200000 --repeat 1 --sink noop
    python bench/bench_spark_job.py --processes             # whole processes: spanning run vs a PySpark script

With ``--processes`` each round starts ``spanning run`` and ``bench/sql_explode_job.py`` as separate
processes (JVM start included, as a user times them), interleaved, on the same Parquet file.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spark_jobs.peers import AGG_SETS, SHAPES, cdr_file, spark_vs_sql

HERE = Path(__file__).resolve().parent


def processes(rows: int, repeat: int, archive_control: bool) -> None:
    """Whole processes, interleaved: ``spanning run`` against the standalone SQL script (and, with
    ``archive_control``, the script again with the driver's class archive that ``spanning run`` maps)."""
    from spark_jobs.class_archive import driver_options
    from spark_jobs.session import check_java, submit_args

    path = cdr_file(rows)
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-proc-"))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    archive = driver_options(check_java())
    if archive_control and not archive:
        raise SystemExit("no class archive to give the SQL script: python -m spark_jobs.class_archive builds it")
    with_archive = {**env, "PYSPARK_SUBMIT_ARGS": submit_args(archive)}
    print(f"{rows:,} CDRs (Parquet), whole processes, {repeat} interleaved rounds, {os.cpu_count()} cores, "
          f"class archive {'mapped' if archive else 'absent'}")  # fmt: skip
    control = " SQL + archive s (min-max) | SQL + archive/run |" if archive_control else ""
    print(f"| ω/β | aggregates | spanning run s (min-max) | SQL script s (min-max) | SQL/run median |{control}")
    print("|---|---|---|---|---|" + ("---|---|" if archive_control else ""))
    for range_, slide in SHAPES:
        for name, aggs in AGG_SETS.items():
            run = [sys.executable, "-m", "spanning.cli", "run", str(path), "--range", str(range_), "--slide",
                   str(slide), "--ttp", "2d", "--start", "start", "--end", "end", "--key", "cell",
                   *[x for a in aggs for x in ("--agg", a)], "--output", str(out / "run"), "--overwrite"]
            sql = [sys.executable, str(HERE / "sql_explode_job.py"), str(path), str(out / "sql"), "--range",
                   str(range_), "--slide", str(slide), *(["--max"] if "max:duration" in aggs else [])]
            commands = [("run", run, env), ("sql", sql, env), *([("sql+", sql, with_archive)] * archive_control)]
            times = {label: [] for label, _, _ in commands}
            for _ in range(repeat):
                for label, command, command_env in commands:
                    began = time.perf_counter()
                    subprocess.run(command, env=command_env, check=True, capture_output=True)
                    times[label].append(time.perf_counter() - began)
            a = sorted(times["run"])
            cells = [f"{range_ // 60}m/{slide // 60}m", name, f"{statistics.median(a):.1f} ({a[0]:.1f}-{a[-1]:.1f})"]
            for label in [label for label in times if label != "run"]:
                b = sorted(times[label])
                cells += [f"{statistics.median(b):.1f} ({b[0]:.1f}-{b[-1]:.1f})",
                          f"**{statistics.median(b) / statistics.median(a):.2f}×**"]  # fmt: skip
            print("| " + " | ".join(cells) + " |")
    shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--sink", default="parquet", choices=["parquet", "noop"])
    parser.add_argument("--processes", action="store_true", help="time whole processes instead of one session")
    parser.add_argument("--archive-control", action="store_true",
                        help="--processes: also time the SQL script with spanning's class archive mapped")  # fmt: skip
    args = parser.parse_args()
    if args.processes:
        processes(args.rows, args.repeat, args.archive_control)
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
