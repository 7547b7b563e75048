"""Where a stream's micro-batches spend their time, from Spark's event log: the driver's share and the executors'.

    python bench/stream_event_log.py EVENT_LOG [--json]

``EVENT_LOG`` is an uncompressed event log (``spark.eventLog.enabled true``, ``spark.eventLog.compress false``): a
file, or a folder holding ``events_*`` files (Spark's rolling ``eventlog_v2_*`` folder) or such folders (the newest
is read). ``bench/bench_stream.py --event-log DIR`` writes one and reads it with this module.

Per micro-batch of each streaming query (Spark tags every job of a batch with ``streaming.sql.batchId`` and
``sql.streaming.queryId``), it gives:

- ``trigger_s``: the whole trigger as Spark times it (``durationMs.triggerExecution`` of the query's progress);
- ``jobs_s``: from the first of the batch's jobs submitted to the last one ended, the time the driver waits for the
  executors' tasks (it includes the scheduler's own few milliseconds per stage);
- ``driver_s = trigger_s - jobs_s``: the driver's own work, not the tasks' (Spark's planning of the batch, the
  offsets and commit logs, and in ``foreachBatch``: the versions, the renames, the batch's record and summary);
- ``result_bytes``: what the tasks sent the driver (Spark's ``Result Size``, summed over the batch's tasks, as
  ``tests/test_stream_executors.py`` reads it from the status store);
- ``shuffle_bytes``: the bytes the batch wrote to the shuffle (the rows as Spark moves them between stages);
- ``run_s``: the tasks' executor run time, summed over all of the batch's stages, and ``reduce_run_s`` that of its
  last stage (on the executors' path, the tasks that reduce the key groups); the events per core-second are the
  rows over it (``cpu_s``, the JVM's CPU time, leaves out the Python workers' and so most of the reduction);
- the parts of Spark's trigger (``queryPlanning_s``, ``walCommit_s``, ...) and ``foreach_batch_driver_s``, the
  driver's time in ``foreachBatch`` besides the jobs (``addBatch`` - ``jobs_s``);
- ``rows``: the batch's input rows (Spark's ``numInputRows``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

CONTROL = "/spanning/control"  # spanning stream's control files: a source of the query, not of its data
SPARK_PARTS = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets")
PROGRESS = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"


def log_files(path: Path) -> list[Path]:
    """The event files of ``path``: itself, its ``events_*`` files in order, or those of its newest log folder."""
    if path.is_file():
        return [path]
    events = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    if events:
        return events
    logs = sorted((p for p in path.iterdir() if p.name.startswith(("eventlog_v2_", "local-", "app-"))),
                  key=lambda p: p.stat().st_mtime)  # fmt: skip
    if not logs:
        raise SystemExit(f"no event log in {path}")
    return log_files(logs[-1])


def batches(path: Path) -> list[dict]:
    """One dict per (query, batch) that ran a job, in the order the batches ran (see the module's text)."""
    jobs: dict[int, dict] = {}
    stage_job: dict[int, int] = {}
    tasks: dict[int, list[dict]] = defaultdict(list)  # stage -> its tasks' metrics
    progress: dict[tuple[str, int], dict] = {}
    for file in log_files(path):
        with open(file) as lines:
            for line in lines:
                event = json.loads(line)
                kind = event["Event"]
                if kind == "SparkListenerJobStart":
                    props = event.get("Properties") or {}
                    if "streaming.sql.batchId" not in props:
                        continue  # not a stream's (the workers' warm-up, the schema's read)
                    key = (props.get("sql.streaming.queryId"), int(props["streaming.sql.batchId"]))
                    stages = event["Stage IDs"]
                    jobs[event["Job ID"]] = {"key": key, "start": event["Submission Time"], "stages": stages}
                    for stage in event["Stage IDs"]:
                        stage_job[stage] = event["Job ID"]
                elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
                    jobs[event["Job ID"]]["end"] = event["Completion Time"]
                elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_job:
                    metrics = event.get("Task Metrics") or {}
                    tasks[event["Stage ID"]].append({
                        "result": metrics.get("Result Size", 0), "run": metrics.get("Executor Run Time", 0) / 1e3,
                        "cpu": metrics.get("Executor CPU Time", 0) / 1e9,
                        "shuffle": (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)})
                elif kind == PROGRESS:
                    report = event["progress"]
                    progress[(report["id"], report["batchId"])] = report
    by_batch: dict[tuple, list[dict]] = defaultdict(list)
    for job in jobs.values():
        if "end" in job:
            by_batch[job["key"]].append(job)
    out = []
    for key, its_jobs in sorted(by_batch.items(), key=lambda kv: min(j["start"] for j in kv[1])):
        stages = sorted(s for j in its_jobs for s in j["stages"] if tasks.get(s))
        report = progress.get(key, {})
        trigger = report.get("durationMs", {}).get("triggerExecution")
        jobs_s = (max(j["end"] for j in its_jobs) - min(j["start"] for j in its_jobs)) / 1e3
        every = [t for s in stages for t in tasks[s]]
        last = tasks[stages[-1]] if stages else []
        out.append({
            "query": key[0], "batch": key[1],
            "rows": sum(source.get("numInputRows", 0) for source in report.get("sources", [])
                        if CONTROL not in source.get("description", "")) if report else None,
            "trigger_s": None if trigger is None else trigger / 1e3, "jobs_s": jobs_s,
            "driver_s": None if trigger is None else trigger / 1e3 - jobs_s,
            # the driver's share split: Spark's own (planning, offsets, logs) and foreachBatch's besides the jobs
            **{f"{name}_s": report.get("durationMs", {}).get(name, 0) / 1e3 for name in SPARK_PARTS},
            "foreach_batch_driver_s": report.get("durationMs", {}).get("addBatch", 0) / 1e3 - jobs_s,
            "result_bytes": sum(t["result"] for t in every), "shuffle_bytes": sum(t["shuffle"] for t in every),
            "run_s": sum(t["run"] for t in every), "cpu_s": sum(t["cpu"] for t in every),
            "reduce_run_s": sum(t["run"] for t in last), "reduce_cpu_s": sum(t["cpu"] for t in last),
            "tasks": len(every), "stages": len(stages)})  # fmt: skip
    return out


def steady(rows: list[dict]) -> list[dict]:
    """The batches that read rows, but the first of each query (the JVM's and the Python workers' warm-up)."""
    firsts: dict[str, int] = {}
    for row in rows:
        if row["rows"]:
            firsts.setdefault(row["query"], row["batch"])
    return [r for r in rows if r["rows"] and r["batch"] != firsts[r["query"]]]


def summary(rows: list[dict]) -> dict:
    """Medians (and ranges) over the steady batches; the executors' events/s per core from their run time."""
    kept = [r for r in steady(rows) if r["trigger_s"] is not None]

    def median(name: str) -> float:
        return float(np.median([r[name] for r in kept]))

    def spread(name: str, digits: int = 3) -> list[float]:
        values = [r[name] for r in kept]
        return [round(min(values), digits), round(max(values), digits)]

    if not kept:
        return {"batches": 0}
    rows_read = sum(r["rows"] for r in kept)
    return {
        "batches": len(kept), "rows_per_batch": round(rows_read / len(kept)),
        "trigger_s": round(median("trigger_s"), 3), "jobs_s": round(median("jobs_s"), 3),
        "driver_s": round(median("driver_s"), 3), "driver_s_range": spread("driver_s"),
        "result_bytes": round(median("result_bytes")), "result_bytes_range": spread("result_bytes", 0),
        "shuffle_bytes": round(median("shuffle_bytes")),
        "events_per_core_second": round(rows_read / sum(r["run_s"] for r in kept)),
        "events_per_core_second_reduce_stage": round(rows_read / sum(r["reduce_run_s"] for r in kept)),
        **{f"{name}_s": round(median(f"{name}_s"), 3) for name in SPARK_PARTS},
        "foreach_batch_driver_s": round(median("foreach_batch_driver_s"), 3),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("event_log", type=Path)
    parser.add_argument("--json", action="store_true", help="every batch as a JSON line, then the summary")
    args = parser.parse_args()
    rows = batches(args.event_log)
    for row in rows:
        if args.json:
            print(json.dumps(row))
        else:
            print(f"batch {row['batch']:3d}: rows {row['rows'] or 0:>9,}  trigger {row['trigger_s'] or 0:6.3f} s  "
                  f"jobs {row['jobs_s']:6.3f} s  driver {row['driver_s'] or 0:6.3f} s  "
                  f"results {row['result_bytes']:>10,} B  shuffle {row['shuffle_bytes']:>11,} B  "
                  f"run {row['run_s']:6.3f} s (reduce stage {row['reduce_run_s']:6.3f} s)  tasks {row['tasks']}")
    print(json.dumps(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
