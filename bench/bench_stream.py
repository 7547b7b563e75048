"""Benchmark of ``spanning stream``: sustained events/s, per-batch latency and state size as the stream grows.

Generated CDRs (``spanning.app.cdr.generate_cdr``) are cut by end time into files of ``--rows-per-trigger``
rows, written as Parquet (or CSV) into a folder, and streamed one file per trigger (available-now) on
``local[2]``. Per batch it reports the rows, its whole trigger as Spark times it (``triggerExecution``, as the
peer's is timed; ``summary.json``'s ``trigger_seconds``), its latency (from its trigger's start to its record, its
outputs written: ``summary.json``'s ``batch_seconds``; batches overlap, so that runs into the next trigger), the
seconds of taking its rows to the driver (``collect``), of reducing them there (``compute``) and of the writes, and
the state the buckets hold (keys, open windows, bytes). Sustained events/s is the rows of the batches after the
second over the time from the second batch's record to the last one's (wall time: the floor's is by trigger, as
the floor's batches do not overlap); the latencies (median, p95) leave out the first batch (JVM and Python worker
warm-up); both leave out the final flush. ``--range``/``--slide`` set the in-process runs' shape
(default 15m/5m).

    python bench/bench_stream.py                       # 1M CDRs, 10k cells, 100k rows per trigger
    python bench/bench_stream.py --rows 200000 --rows-per-trigger 20000 --cells 2000

With ``--peer``, the same files also go through what a Spark user would write instead
(``bench/sql_stream_job.py``): each call exploded into the windows it overlaps, ``withWatermark`` and
``groupBy(cell, window)`` in append mode (its rows behind the watermark are dropped, not reported), timed the
same way.

With ``--processes``, both sides run as whole processes, as a user times them: ``spanning stream`` and the
script, each a fresh ``python`` over the same files and a fresh checkpoint, interleaved (A, B, B, A, ...),
for each ω/β of ``--shapes``; the ratio is the script's seconds over ours, per round:

    python bench/bench_stream.py --processes --rows 600000 --shapes 15m/5m,15m/1m,1h/1m --rounds 2 --floor

With ``--floor``, the floor of any stream over the same files runs too (``bench/stream_floor_job.py``: the
session and reader contract of ``spanning stream`` into a ``foreachBatch`` that only counts), in the benchmark's
own Spark session or, with ``--processes``, as a third whole process in the rotation; the table then gives ours
over the floor.
``--keys`` sets the cells: ``cells`` (``--cells`` of them by Zipf-like popularity, the default), ``hot`` (200 cells,
one with 38% of the calls, as the batch job's benchmark) or ``none`` (those CDRs and a query without a key).

``--master`` runs every side on another master than ``local[2]``, such as ``local-cluster[2,1,2048]`` (not with
``--floor``). ``--event-log DIR`` has every Spark application of the run write its event log into ``DIR`` (through a
``spark-defaults.conf`` of its own, which keeps the lines of the user's); the in-process runs then print, per query,
the driver's share of a batch and the executors' events per core-second (``bench/stream_event_log.py``):

    python bench/bench_stream.py --range 15m --slide 1m --reduce-on executors --buckets 32 --event-log /tmp/ev
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

from spanning.app.stream_command import DEFAULT_BUCKETS, DEFAULT_KEY_GROUPS  # noqa: E402 - the project's root is on the path above

QUERY = dict(range="15m", slide="5m", ttp="10m")
AGGREGATES = ["count", "sum:bytes", "max:duration"]  # those of the peer query (bench/sql_stream_job.py)


KEY_SHAPES = ("cells", "hot", "none")  # --keys: those of bench/bench_spark_job.py's table, on the stream's CDRs


def make_files(folder: Path, rows: int, per_file: int, cells: int, fmt: str, days: float = 1.0,
               keys: str = "cells") -> int:  # fmt: skip
    """Generated CDRs, cut by end time into files of ``per_file`` rows, landing in end order. ``keys``: "cells",
    ``cells`` cells by Zipf-like popularity (``generate_cdr``'s); "hot" and "none", 200 cells of which one holds
    38% of the calls and the others share the rest by 1/rank^1.1, as ``spark_jobs.peers.integer_cdr_frame``'s
    "hot" (with "none" the query has no key)."""
    from spanning.app.cdr import generate_cdr

    calls = generate_cdr(rows, seed=1, cells=cells, subscribers=max(50_000, cells * 5), days=days)
    if keys != "cells":
        weights = 1.0 / np.arange(1, 201) ** 1.1
        weights = np.concatenate([[0.38], 0.62 * weights[1:] / weights[1:].sum()])
        cell = np.random.default_rng(2).choice(200, size=rows, p=weights / weights.sum())
        calls["cell"] = np.char.add("cell-", cell.astype(str))
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


def _config(folder: Path, output: Path, aggregates: list[str], partitions: int | None = None, keyed: bool = True):
    """The benchmark's query over ``folder`` (``QUERY``, keyed by cell or not), as ``spanning stream`` takes it."""
    from stream_floor_job import stream_config

    from spanning.app.jobspec import parse_duration as d

    query = tuple(d(QUERY[name]) for name in ("range", "slide", "ttp"))
    return stream_config(folder, output, aggregates, query, keyed, partitions)


def run_ours(folder: Path, work: Path, buckets: int | None, partitions: int | None = None, keyed: bool = True,
             reduce_on: str | None = None) -> dict:  # fmt: skip
    from spanning.app.stream_command import StreamOptions
    from spark_jobs.command import run_stream

    cfg = _config(folder, work / "out", AGGREGATES, partitions, keyed)
    where = {} if reduce_on is None else {"reduce_on": reduce_on}  # a build before --reduce-on has no such option
    options = StreamOptions(str(work / "chk"), max_files_per_trigger=1, buckets=buckets, final_flush=True, **where)
    began = time.perf_counter()
    summary = run_stream(cfg, options, progress=lambda line: print("  " + line, flush=True))
    wall = time.perf_counter() - began
    records = [json.loads(p.read_text()) for p in sorted((work / "chk" / "spanning" / "batches").glob("*.json"))]
    return {"wall": wall, "summary": summary, "batches": records}


def run_floor(folder: Path, work: Path, keyed: bool = True) -> dict:
    """The floor of any stream over these files, in this Spark session (``bench/stream_floor_job.py``): read and
    validate each batch (spanning's reader contract) into a ``foreachBatch`` that only counts."""
    from pyspark.sql import SparkSession
    from stream_floor_job import floor_query

    floor = floor_query(SparkSession.getActiveSession(), folder, work, keyed)
    seconds = floor["trigger_seconds"][1:]  # after the warm-up batch, as ours are taken
    return {"floor_events_per_second": round(sum(floor["trigger_rows"][1:]) / sum(seconds)) if seconds else None,
            "floor_batch_seconds_median": _median(seconds), "floor_batch_seconds_p95": _p95(seconds)}


def run_peer(folder: Path, work: Path, keyed: bool = True) -> dict:
    """What a Spark user writes instead: explode each call into its windows, withWatermark, groupBy, append."""
    from pyspark.sql import SparkSession
    from sql_stream_job import peer_query

    from spanning.app.jobspec import parse_duration as d

    spark = SparkSession.getActiveSession()
    result = peer_query(spark, str(folder), d(QUERY["range"]), d(QUERY["slide"]), d(QUERY["ttp"]), keyed)
    written = []

    def each_batch(batch, batch_id):
        written.append(batch.count())

    began = time.perf_counter()
    query = (result.writeStream.outputMode("append").foreachBatch(each_batch)
             .option("checkpointLocation", str(work / "peer-chk")).trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    wall = time.perf_counter() - began
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in query.recentProgress for op in p["stateOperators"])
    return {"wall": wall, "batch_seconds": [p["durationMs"]["triggerExecution"] / 1000 for p in progress],
            "rows": sum(p["numInputRows"] for p in progress), "windows": sum(written), "dropped": dropped}


def _median(values) -> float | None:
    values = list(values)
    return round(float(np.median(values)), 2) if values else None


def _p95(values) -> float | None:
    values = list(values)
    return round(float(np.percentile(values, 95)), 2) if values else None


def report(result: dict) -> dict:
    batches = [b for b in result["batches"] if b["rows_read"]]
    steady = batches[1:]  # after the warm-up batch; the final flush reads no rows
    triggers = result["summary"].get("trigger_seconds", {})  # each batch's whole trigger, as the peer's is timed
    trigger = np.array([triggers.get(str(b["batch"]), b["seconds"]) for b in steady])
    # each batch from its trigger's start to its record (its outputs written): with batches that overlap
    # (BatchWriter), a batch's reduction and writes run into the next batch's trigger, and count here
    ends = result["summary"].get("batch_seconds", {})
    latency = np.array([ends.get(str(b["batch"]), triggers.get(str(b["batch"]), b["seconds"])) for b in steady])
    # sustained: the rows of the batches after the second over the time from the second's record to the last one's
    # (the second batch is read while the first, the warm-up, is reduced: its read would fall outside the span)
    timed = batches[2:] if len(batches) > 2 and "done_at" in batches[1] else None
    rows = sum(b["rows_read"] for b in (steady if timed is None else timed))
    seconds = float(trigger.sum()) if timed is None else timed[-1]["done_at"] - batches[1]["done_at"]
    state = [sum(v["state_bytes"] for v in b["buckets"].values()) for b in batches]
    held = [sum(v["held_windows"] for v in b["buckets"].values()) for b in batches]
    out = {
        "rows": result["summary"]["rows_read"],
        "wall_seconds": round(result["wall"], 1),
        "sustained_events_per_second": round(rows / seconds) if seconds else None,
        "batch_seconds_median": round(float(np.median(latency)), 2) if len(latency) else None,
        "batch_seconds_p95": _p95(latency),
        "batch_seconds_max": round(float(latency.max()), 2) if len(latency) else None,
        "trigger_seconds_median": _median(trigger.tolist()),
        "trigger_seconds_p95": _p95(trigger.tolist()),
        "collect_seconds_median": _median(b.get("collect_seconds", 0) for b in steady),
        "batch_work_seconds_median": _median(b["seconds"] for b in steady),  # taken, reduced and written
        "compute_seconds_median": _median(b["compute_seconds"] for b in steady),
        "plan_seconds_median": _median(b["plan_seconds"] for b in steady if "plan_seconds" in b),  # executors
        "write_seconds_median": _median(b["write_seconds"] for b in steady),
        "state_bytes_by_batch": state,
        "state_written_by_batch": [b.get("state_written") for b in batches],
        "held_windows_by_batch": held,
        # on the executors, the driver's own part of a trigger: all of it but the action whose tasks reduce the batch
        "driver_seconds_median": _median(t - b["collect_seconds"] for t, b in zip(trigger, steady, strict=True)
                                         if b.get("reduced_on") == "executors"),
        "held_states": result["summary"].get("held_states"),  # groups whose state a worker held, or read anew
        "late": result["summary"]["late"],
        "rows_dropped_by_spark": result["summary"]["rows_dropped_by_spark"],
    }
    return out


def processes(folder: Path, work: Path, shapes: list[tuple[int, int]], rounds: int, archive: bool,
              keyed: bool = True, floor: bool = False, reduce_on: str | None = None,
              master: str = "local[2]") -> None:  # fmt: skip
    """``spanning stream`` against ``bench/sql_stream_job.py`` (and, with ``floor``, ``bench/stream_floor_job.py``),
    whole processes, interleaved (the order rotates every round); a Markdown table."""
    from bench_spark_job import HERE, process_env, ratio_spread, spread, timed_command

    from spanning.app.jobspec import parse_duration as d

    env, ttp = process_env(archive, stream=True), d(QUERY["ttp"])
    print("| ω/β (windows per event) | side | seconds (min-max) | script s / ours s, rounds (min-max) "
          "| ours s / floor s | windows written | late (ours) or rows dropped (script) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for range_, slide in shapes:
        sides = {"ours": [sys.executable, "-m", "spanning.cli", "stream", str(folder), "--range", str(range_),
                          "--slide", str(slide), "--ttp", str(ttp), "--start", "start", "--end", "end",
                          *(["--key", "cell"] if keyed else []),
                          *[x for a in AGGREGATES for x in ("--agg", a)], "--max-files-per-trigger", "1",
                          "--master", master, "--output", str(work / "ours"), "--checkpoint",
                          str(work / "ours-chk"),
                          *([] if reduce_on is None else ["--reduce-on", reduce_on])]}  # fmt: skip
        sides["peer"] = [sys.executable, str(HERE / "sql_stream_job.py"), str(folder), str(work / "peer"), "--range",
                         str(range_), "--slide", str(slide), "--ttp", str(ttp), "--master", master,
                         *([] if keyed else ["--no-key"])]  # fmt: skip
        if floor:
            sides["floor"] = [sys.executable, str(HERE / "stream_floor_job.py"), str(folder), str(work / "floor"),
                              *([] if keyed else ["--no-key"])]  # fmt: skip
        names = list(sides)
        times: dict[str, list[float]] = {side: [] for side in names}
        for round_ in range(rounds):
            shift = round_ % len(names)
            for side in names[shift:] + names[:shift]:  # A, B, C, then B, C, A, ...
                for folder_ in (work / side, work / f"{side}-chk"):
                    shutil.rmtree(folder_, ignore_errors=True)  # a fresh stream each time
                times[side].append(timed_command(sides[side], env))
        peer = json.loads((work / "peer" / "stats.json").read_text())
        peer_windows = len(pd.read_parquet(work / "peer" / "windows", columns=["window_start"]))
        ours = json.loads((work / "ours" / "summary.json").read_text())
        shape = f"{range_ // 60}m/{slide // 60}m ({-(-range_ // slide)})"
        to_floor = ratio_spread(times["floor"], times["ours"]) if floor else ""
        print(f"| {shape} | `spanning stream` | {spread(times['ours'])} | {ratio_spread(times['ours'], times['peer'])} "
              f"| {to_floor} | {ours['windows_written']:,} | {ours['late']:,} |", flush=True)  # fmt: skip
        print(f"| {shape} | hand-written stream | {spread(times['peer'])} | | | {peer_windows:,} "
              f"| {peer['dropped']:,} dropped |", flush=True)
        if floor:
            counted = json.loads((work / "floor" / "floor.json").read_text())
            print(f"| {shape} | floor (read, validate, count) | {spread(times['floor'])} | | | "
                  f"{counted['rows']:,} rows read | {counted['rejected']:,} rejected |", flush=True)


def event_log(folder: Path) -> None:
    """Every Spark application started from here on (this process's, and the ``--processes`` sides') writes its event
    log, uncompressed, into ``folder``: ``SPARK_CONF_DIR`` set to a folder of its own whose ``spark-defaults.conf``
    holds the user's lines and those of the log."""
    from spark_jobs.sessions.session import spark_defaults

    folder = folder.resolve()
    conf = folder / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(f"{spark_defaults()}\nspark.eventLog.enabled true\n"
                                              f"spark.eventLog.dir {folder.as_uri()}\nspark.eventLog.compress false\n")
    os.environ["SPARK_CONF_DIR"] = str(conf)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rows-per-trigger", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--keys", choices=KEY_SHAPES, default="cells",
                        help="cells: --cells cells by Zipf-like popularity (default); hot: 200 cells, one with 38%% "
                        "of the calls; none: the same CDRs, a query without a key")  # fmt: skip
    parser.add_argument("--buckets", type=int, default=None,
                        help="key groups (spanning stream's --buckets; default: the command's for a new checkpoint,"
                             f" {DEFAULT_KEY_GROUPS} reduced on the executors, {DEFAULT_BUCKETS} on the driver)")
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--reduce-on", choices=["executors", "driver"], default=None,
                        help="where spanning stream reduces each batch (default: the build's own default)")
    parser.add_argument("--days", type=float, default=1.0, help="time the CDRs span (default 1: a trigger is 2.4 h)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--peer", action="store_true", help="also the Spark SQL streaming query a user would write")
    parser.add_argument("--floor", action="store_true",
                        help="also the floor: read and validate each batch into a foreachBatch that only counts "
                        "(with --processes: as a whole process, bench/stream_floor_job.py)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (ours, peer, ours, peer, ...)")
    parser.add_argument("--processes", action="store_true",
                        help="whole processes: spanning stream against bench/sql_stream_job.py, per --shapes")
    parser.add_argument("--shapes", default="15m/5m,15m/1m,1h/1m", help="ω/β pairs for --processes")
    parser.add_argument("--range", default=QUERY["range"], help="ω of the in-process runs (default 15m)")
    parser.add_argument("--slide", default=QUERY["slide"], help="β of the in-process runs (default 5m)")
    parser.add_argument("--archive", choices=["on", "off"], default="off",
                        help="--processes: the class archive on both sides (default off)")
    parser.add_argument("--master", default="local[2]",
                        help="Spark master of every side (default local[2]; e.g. local-cluster[2,1,2048])")
    parser.add_argument("--event-log", type=Path, default=None,
                        help="write Spark's event logs into this folder; the in-process runs print what they show")
    args = parser.parse_args()
    if args.floor and args.master != "local[2]":
        parser.error("--floor runs on local[2] only")
    if args.event_log is not None:
        event_log(args.event_log)
    QUERY.update(range=args.range, slide=args.slide)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    try:
        began = time.perf_counter()
        files = make_files(work / "in", args.rows, args.rows_per_trigger, args.cells, args.format, args.days,
                           args.keys)  # fmt: skip
        keyed = args.keys != "none"
        cells = f"{args.cells:,} cells" if args.keys == "cells" else "200 cells, one with 38% of the calls" + \
            ("" if keyed else ", no key")
        print(f"{args.rows:,} CDRs, {cells}, {files} {args.format} files of {args.rows_per_trigger:,} rows"
              f" ({time.perf_counter() - began:.1f} s to generate)")  # fmt: skip
        if args.processes:
            from spanning.app.jobspec import parse_duration as d

            shapes = [tuple(d(x) for x in shape.split("/")) for shape in args.shapes.split(",")]
            print(f"whole processes, {args.rounds} interleaved rounds, class archive {args.archive} on both sides, "
                  f"TTP {QUERY['ttp']}, {' + '.join(AGGREGATES)}, one file per trigger, available-now; "
                  f"{os.cpu_count()} cores; ratio = hand-written s / ours s")  # fmt: skip
            processes(work / "in", work, shapes, args.rounds, args.archive == "on", keyed, args.floor, args.reduce_on,
                      args.master)  # fmt: skip
            return 0
        from spark_jobs.sessions.session import get_session

        get_session(args.master, throughput_gc=True)  # the JVM that spanning stream starts
        ours, peers = [], []
        for round_ in range(args.rounds):
            ours.append(report(run_ours(work / "in", work / f"ours-{round_}", args.buckets, keyed=keyed,
                                        reduce_on=args.reduce_on)))
            print(json.dumps(ours[-1], indent=1))
            if args.floor:
                floor = run_floor(work / "in", work / f"floor-{round_}", keyed)
                ours_rate = ours[-1]["sustained_events_per_second"]
                floor["fraction_of_floor"] = round(ours_rate / floor["floor_events_per_second"], 2) \
                    if ours_rate and floor["floor_events_per_second"] else None
                print(json.dumps(floor, indent=1))
            if args.peer:
                peers.append(run_peer(work / "in", work / f"peer-{round_}", keyed))
                peer = peers[-1]
                print(json.dumps({"peer_wall_seconds": round(peer["wall"], 1),
                                  "peer_sustained_events_per_second": round(sum(peer["batch_seconds"][1:]) and
                                      (peer["rows"] - peer["rows"] / len(peer["batch_seconds"]))
                                      / sum(peer["batch_seconds"][1:])),
                                  "peer_batch_seconds_median": _median(peer["batch_seconds"][1:]),
                                  "peer_batch_seconds_p95": _p95(peer["batch_seconds"][1:]),
                                  "peer_windows": peer["windows"], "peer_rows_dropped_by_watermark": peer["dropped"]},
                                 indent=1))  # fmt: skip
        if peers:
            ratios = [p["wall"] / o["wall_seconds"] for o, p in zip(ours, peers, strict=True)]
            print(f"wall time, peer / ours: {', '.join(f'{r:.2f}' for r in ratios)}")
        if args.event_log is not None:
            from pyspark.sql import SparkSession
            from stream_event_log import batches, summary

            SparkSession.getActiveSession().stop()  # the log complete
            logged = batches(args.event_log)
            for query in dict.fromkeys(b["query"] for b in logged):  # each query's batches (a round's)
                print("event log, query", query, json.dumps(summary([b for b in logged if b["query"] == query])))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
