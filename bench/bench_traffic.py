"""Erlangs per cell and window: whole ``spanning run`` processes against the PySpark script a user writes.

Data: the integer CDRs of ``bench/bench_spark_job.py`` (60 hours, calls of about a minute and 1% sessions of
0.5-4 h; ``--keys hot``: 200 cells, one holding 38% of the calls; ``none``: the same file with no key, one
series; ``uniform``: 10,000 even cells). Each side is a whole process that reads the Parquet file
and writes Parquet, timed as a shell's ``time`` sees it, interleaved (ours, script, script, ours, ...), the
class archive off on both sides and the same driver heap (``bench_spark_job.process_env``); δ is longer than
any call, so nothing is late:

* ours: ``spanning run --agg count --agg occupancy --agg erlang`` (auto picks the vector plan for them, whose
  tasks read the Parquet row groups themselves);
* the script: ``bench/sql_explode_job.py --traffic``, every call exploded into its windows, each pair clipped
  with ``least``/``greatest``, summed per cell and window.

The answers are checked row for row: the counts and occupancies equal, the Erlangs within 1e-12 relative.

    python bench/bench_traffic.py                                # 3,000,000 rows, 2 rounds, 15m/5m, 15m/1m, 1h/1m
    python bench/bench_traffic.py --rows 300000 --repeat 1 --shapes 900/60
    python bench/bench_traffic.py --rows 30000000 --keys none --shapes 900/60,3600/60
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from bench_spark_job import HERE, dataset, process_env, ratio_spread, spread, timed_command

AGGREGATES = ["count", "occupancy", "erlang"]


def _windows(folder: Path, keys: list[str]) -> pd.DataFrame:
    frame = pd.read_parquet(folder, columns=[*keys, "window_start", *AGGREGATES])
    frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True).astype("datetime64[us, UTC]")
    return frame.sort_values([*keys, "window_start"]).reset_index(drop=True)


def _check(out: Path, keys: list[str]) -> str:
    ours, theirs = _windows(out / "ours" / "windows", keys), _windows(out / "script", keys)
    exact = [*keys, "window_start", "count", "occupancy"]
    if len(ours) != len(theirs) or not ours[exact].equals(theirs[exact].astype(ours.dtypes[exact].to_dict())):
        raise SystemExit(f"spanning run and the script gave different windows in {out}")
    worst = float(np.max(np.abs(ours["erlang"] - theirs["erlang"]) / np.maximum(theirs["erlang"].abs(), 1e-300)))
    if worst > 1e-12:
        raise SystemExit(f"Erlangs differ by {worst:.2e} relative in {out}")
    return f"{len(ours):,} windows identical (Erlangs within {worst:.0e})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shapes", default="900/300,900/60,3600/60", help="ω/β pairs in seconds")
    parser.add_argument("--keys", default="hot", choices=["hot", "none", "uniform"])
    args = parser.parse_args()
    path = dataset("int", args.rows, args.keys)
    keyed = args.keys != "none"
    cells = {"hot": "200 cells (one with 38%)", "none": "no key (one series)", "uniform": "10,000 even cells"}
    env = process_env(False)
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-traffic-"))
    print(f"{args.rows:,} CDRs, {cells[args.keys]}, 60 hours; whole processes, {args.repeat} interleaved "
          f"rounds, class archive off on both sides; {os.cpu_count()} cores, Python {platform.python_version()}; "
          "ratio = script s / ours s")  # fmt: skip
    print("| ω/β | windows per call | ours s (min-max) | script s (min-max) | script / ours, rounds (min-max) "
          "| answers |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    times_of = pd.read_parquet(path, columns=["start", "end"])
    begin, end = ((pd.to_datetime(times_of[c], utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
                  for c in ("start", "end"))  # fmt: skip
    end = np.maximum(end.to_numpy(), begin.to_numpy() + 1)
    for shape in args.shapes.split(","):
        range_, slide = (int(x) for x in shape.split("/"))
        ours = [sys.executable, "-m", "spanning.cli", "run", str(path), "--range", str(range_), "--slide", str(slide),
                "--ttp", "7d", "--start", "start", "--end", "end", *(["--key", "cell"] if keyed else []),
                "--output", str(out / "ours"),
                "--overwrite", *[x for a in AGGREGATES for x in ("--agg", a)]]  # fmt: skip
        script = [sys.executable, str(HERE / "sql_explode_job.py"), str(path), str(out / "script"), "--range",
                  str(range_), "--slide", str(slide), "--traffic", *([] if keyed else ["--no-key"])]  # fmt: skip
        times: dict[str, list[float]] = {"ours": [], "script": []}
        answers = ""
        for round_ in range(args.repeat):
            for label in ("ours", "script") if round_ % 2 == 0 else ("script", "ours"):  # A, B, B, A, ...
                times[label].append(timed_command(ours if label == "ours" else script, env))
            if round_ == 0:
                answers = _check(out, ["cell"] if keyed else [])
        per_call = float(np.mean((end - 1) // slide - ((begin.to_numpy() - range_) // slide + 1) + 1))
        print(f"| {range_ // 60}m/{slide // 60}m | {per_call:.1f} | {spread(times['ours'])} | "
              f"{spread(times['script'])} | {ratio_spread(times['ours'], times['script'])} | {answers} |", flush=True)
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
