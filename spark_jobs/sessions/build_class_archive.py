"""``python -m spark_jobs.sessions.build_class_archive``: build (or remove) the Spark driver's class archive.

The archive itself, where it lives and the JVM options that map it are ``class_archive``'s; this command runs the
small jobs of each plan in a child process whose JVM writes the archive as it exits (``class_archive.build``
starts that child with ``--write``), and the session (``session.get_session``) is started here, above both.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from spark_jobs.sessions.class_archive import (
    BUILD_TIMEOUT_S,
    NONE,
    QUIET_CDS,
    archive_folder,
    archive_path,
    build,
    driver_options,
)
from spark_jobs.sessions.session import check_java, get_session, quiet_log_option, submit_args


def _warm_up_jobs(folder: Path, progress: Callable[[str], None]) -> None:
    """Small jobs that load the classes of every plan, CSV and Parquet in and out, rejected and late rows."""
    import contextlib
    import io

    from spanning.app.cdr import CallMix, generate_cdr
    from spanning.cli import main

    cdrs = folder / "cdr.csv"
    generate_cdr(3000, seed=1, cells=20, days=0.5, mix=CallMix(bad_share=0.02)).to_csv(cdrs, index=False)
    query = ["--start", "start", "--end", "end", "--key", "cell", "--ttp", "10m", "--overwrite"]
    most = ["--agg", "count", "--agg", "sum:bytes", "--agg", "max:duration"]
    runs = [
        [str(cdrs), "--range", "15m", "--slide", "5m", "--plan", "explode", *most],
        [str(cdrs), "--range", "15m", "--slide", "1m", "--plan", "vector", *most],
        [str(cdrs), "--range", "1h", "--slide", "1m", "--plan", "vector", "--agg", "count", "--agg", "mean:bytes"],
        [str(cdrs), "--range", "15m", "--slide", "5m", "--plan", "python", "--format", "csv", *most],
    ]
    parquet = folder / "out0" / "windows"  # a Parquet input: the windows as events of their own
    again = ["--start", "window_start", "--end", "window_end", "--key", "cell", "--agg", "sum:count"]
    runs = [[*run, *query, "--output", str(folder / f"out{i}")] for i, run in enumerate(runs)]
    runs.append([str(parquet), *again, "--range", "1h", "--slide", "15m", "--output", str(folder / "again")])
    for i, run in enumerate(runs):
        with contextlib.redirect_stdout(io.StringIO()):  # the jobs' summaries: progress says enough
            code = main(["run", *run])
        if code != 0:
            raise RuntimeError(f"warm-up job {i + 1} failed")
        progress(f"warm-up job {i + 1}/{len(runs)} done")


def _write(target: Path) -> int:
    """In a child process: start Spark writing its classes to ``target`` at exit, run the jobs, wait for the exit."""
    writing = [quiet_log_option(), f"-XX:ArchiveClassesAtExit={target}", QUIET_CDS]
    os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args(writing)
    began = time.perf_counter()

    def progress(message: str) -> None:
        print(f"  {message} ({time.perf_counter() - began:.0f} s)", flush=True)

    spark = get_session("local[2]")
    progress("Spark started")
    from pyspark import SparkContext

    done = False
    gateway = SparkContext._gateway
    try:
        with tempfile.TemporaryDirectory(prefix="spanning-warm-up-") as folder:
            _warm_up_jobs(Path(folder), progress)
        done = True
        progress("writing the archive as the JVM exits")
    finally:
        spark.stop()
        jvm = getattr(gateway, "proc", None)
        gateway.shutdown()
        if jvm is not None:  # the JVM exits when its stdin closes, and writes the archive as it exits
            jvm.stdin.close()
            done = done and jvm.wait(timeout=BUILD_TIMEOUT_S) == 0
    return 0 if done and jvm is not None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.sessions.build_class_archive",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="build it again, even if it exists")
    parser.add_argument("--remove", action="store_true", help="remove the archive of this Java and Spark")
    parser.add_argument("--quiet", action="store_true", help="no output from the jobs, one line at the end")
    parser.add_argument("--write", metavar="FILE", help=argparse.SUPPRESS)  # the child process of a build
    args = parser.parse_args(argv)
    if args.write:
        return _write(Path(args.write))
    try:
        java_version = check_java()
    except Exception as err:  # UsageError: no Java, or one that does not run
        print(f"spanning: error: {err}", file=sys.stderr)
        return 2
    if args.remove:
        path = archive_path(java_version)
        if path is not None:
            path.unlink(missing_ok=True)
            Path(f"{path}.json").unlink(missing_ok=True)
        print(f"removed {path}" if path else NONE)
        return 0
    existed = driver_options(java_version) != []
    if (not existed or args.rebuild) and archive_path(java_version) is not None:
        print(f"building the Spark class archive (once, about a minute): about 185 MiB in {archive_folder()}, which"
              " starts every Spark job seconds sooner. SPANNING_CLASS_ARCHIVE=off skips it;"
              " python -m spark_jobs.sessions.build_class_archive --remove removes it", flush=True)  # fmt: skip
    try:
        path = build(java_version, rebuild=args.rebuild, quiet=args.quiet)
    except (OSError, RuntimeError, subprocess.SubprocessError) as err:
        print(f"spanning: error: cannot build the Spark class archive: {err}", file=sys.stderr)
        return 1
    if path is None:
        print(NONE)
    else:
        state = "in place" if existed and not args.rebuild else "built"
        print(f"Spark class archive {state}: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
