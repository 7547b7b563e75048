"""Distinct subscribers and quantiles: the Spark job against the SQL a user writes by hand, in one session.

Generated CDRs (7 days, 200 integer cells, Zipf-like; calls of about a minute and 1% sessions of 0.5-4 h)
with a ``subscriber`` column of about 1M distinct values over 3M rows. Per cell and window:

* sketched: ``approx_count_distinct:subscriber`` + ``approx_percentile:duration:0.95`` against the explode
  with Spark's ``approx_count_distinct`` + ``percentile_approx`` (HLL++ and GK, what most users write) and
  against the explode with ``hll_sketch_agg`` + ``kll_sketch_agg_double`` (the same DataSketches sketches);
* exact: ``count_distinct`` + ``percentile`` against the explode with ``count(DISTINCT)`` + ``percentile``.

Interleaved (ours, theirs, ours, theirs, ...), each writing Parquet; the exact answers are compared row for row,
the sketched ones by their largest relative difference. Reports medians, spreads, the ratios of each pair,
and the peak memory of the Python workers (psutil, polled) and of the driver.

    python bench/bench_distinct.py                       # 3,000,000 rows, 3 rounds, 15m/1m and 15m/5m
    python bench/bench_distinct.py --rows 300000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

WORKER_MARKERS = ("pyspark.daemon", "pyspark.worker", "spark_jobs.worker_daemon")


def subscriber_cdr_file(rows: int) -> Path:
    """Integer-keyed CDRs with a subscriber column (about 1M distinct over 3M rows), cached in the temp folder."""
    path = Path(tempfile.gettempdir()) / f"spanning-bench-subscribers-{rows}.parquet"
    if not path.exists():
        from spark_jobs.peers import integer_cdr_frame

        frame, rng, length = integer_cdr_frame(rows, seed=24)
        frame.insert(1, "subscriber", 33_600_000_000 + rng.integers(0, int(rows * 0.4), rows))  # ~0.92·0.4·rows
        frame["duration"] = length.astype(np.float64)
        frame.sort_values("end", kind="stable").to_parquet(path, index=False)
    return path


class PeakMemory:
    """The largest resident memory of the Spark Python workers together, and of this process, while it runs."""

    def __init__(self) -> None:
        import psutil

        self.psutil, self.workers, self.driver = psutil, 0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        me = self.psutil.Process()
        while not self.stop.wait(0.05):
            total = 0
            for process in self.psutil.process_iter(["name", "cmdline", "memory_info"]):
                line = " ".join(process.info["cmdline"] or [])  # a Python process (the JVM's names the daemon too)
                python = (process.info["name"] or "").startswith("python")
                if python and any(marker in line for marker in WORKER_MARKERS) and process.info["memory_info"]:
                    total += process.info["memory_info"].rss
            self.workers = max(self.workers, total)
            self.driver = max(self.driver, me.memory_info().rss)

    def __enter__(self) -> PeakMemory:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def peer_sql(view: str, range_: int, slide: int, aggregates: str) -> str:
    """The explode into windows a user writes, then one group by cell and window."""
    return f"""
        SELECT cell, k * {slide} AS window_start, {aggregates}
        FROM (SELECT cell, subscriber, duration,
                     explode(sequence(floor((s - {range_}) / {slide}) + 1, floor((greatest(e, s + 1) - 1) / {slide})))
                     AS k
              FROM {view})
        GROUP BY cell, k
    """


PEERS = {
    "sketched": {
        "ours": ["approx_count_distinct:subscriber", "approx_percentile:duration:0.95"],
        "SQL approx_count_distinct + percentile_approx": "approx_count_distinct(subscriber) AS subs,"
                                                         " percentile_approx(duration, 0.95) AS p95",
        "SQL hll_sketch_agg + kll_sketch_agg_double": "hll_sketch_estimate(hll_sketch_agg(subscriber)) AS subs,"
            " kll_sketch_get_quantile_double(kll_sketch_agg_double(duration), 0.95) AS p95",
    },
    "exact": {
        "ours": ["count_distinct:subscriber", "percentile:duration:0.95"],
        "SQL count(DISTINCT) + percentile": "count(DISTINCT subscriber) AS subs, percentile(duration, 0.95) AS p95",
    },
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default="900/60,900/300", help="ω/β pairs in seconds")
    parser.add_argument("--kinds", default="sketched,exact")
    parser.add_argument("--plan", default="auto", help="our --plan (auto: python for these aggregates)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import functions as F

    from spanning.app.jobspec import EventFields, InputFiles, RunConfig, SparkOptions, WindowQuery, output_name
    from spark_jobs.run import compute
    from spark_jobs.session import get_session

    path = str(subscriber_cdr_file(args.rows))
    spark = get_session(None)
    frame = spark.read.parquet(path)
    frame.createOrReplaceTempView("cdr")
    distinct = frame.select(F.countDistinct("subscriber")).first()[0]
    longest = int(spark.sql("SELECT max(unix_seconds(end) - unix_seconds(start)) FROM cdr").first()[0])
    raw = "(SELECT cell, subscriber, duration, unix_seconds(start) AS s, unix_seconds(end) AS e FROM cdr)"
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-distinct-"))
    print(f"{args.rows:,} CDRs, {distinct:,} distinct subscribers, 200 cells; {os.cpu_count()} cores, "
          f"{platform.python_version()}, Spark {spark.version}; {args.repeat} interleaved pairs, Parquet out; "
          "ratio = SQL s / ours s")  # fmt: skip
    print("| ω/β | aggregates | ours: plan | ours s (min-max) | peer | peer s (min-max) | peer/ours, pairs (min-max)"
          " | answers | Python workers' peak RSS: ours / peer |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        range_, slide = (int(x) for x in shape.split("/"))
        for kind in args.kinds.split(","):
            peers = dict(PEERS[kind])
            aggs = peers.pop("ours")
            query = WindowQuery(range_, slide, longest + 1, aggregates=aggs)
            cfg = RunConfig(InputFiles([path]), EventFields("start", "end", keys=["cell"]), query,
                            spark=SparkOptions(plan=args.plan))  # fmt: skip
            computed = compute(spark, cfg)
            ours = computed.windows.select("cell", F.unix_seconds("window_start").alias("window_start"),
                                           F.col(output_name(aggs[0])).alias("subs"),
                                           F.col(output_name(aggs[1])).alias("p95"))  # fmt: skip
            for peer_name, sql_aggs in peers.items():
                theirs = spark.sql(peer_sql(raw, range_, slide, sql_aggs))
                times: dict[str, list[float]] = {"ours": [], "peer": []}
                memory: dict[str, int] = {"ours": 0, "peer": 0}
                for _ in range(args.repeat):
                    for name, job in (("ours", ours), ("peer", theirs)):
                        spark.catalog.clearCache()  # the Python plan persists its output: each run computes it
                        with PeakMemory() as peak:
                            began = time.perf_counter()
                            job.write.mode("overwrite").parquet(str(out / name))
                            times[name].append(time.perf_counter() - began)
                        memory[name] = max(memory[name], peak.workers)
                answers = _compare(out, exact=kind == "exact")
                a, b = sorted(times["ours"]), sorted(times["peer"])
                pairs = sorted(y / x for x, y in zip(times["ours"], times["peer"], strict=True))
                print(f"| {range_ // 60}m/{slide // 60}m | {kind} | {computed.choices[0].plan} "
                      f"| {statistics.median(a):.1f} ({a[0]:.1f}-{a[-1]:.1f}) | {peer_name} "
                      f"| {statistics.median(b):.1f} ({b[0]:.1f}-{b[-1]:.1f}) "
                      f"| **{statistics.median(pairs):.2f}×** ({pairs[0]:.2f}-{pairs[-1]:.2f}) | {answers} "
                      f"| {memory['ours'] / 2**20:.0f} / {memory['peer'] / 2**20:.0f} MB |", flush=True)  # fmt: skip
            spark.catalog.clearCache()
    shutil.rmtree(out, ignore_errors=True)


def _compare(out: Path, exact: bool) -> str:
    """Exact: the same windows and values, row for row. Sketched: the largest relative difference of each."""
    frames = []
    for name in ("ours", "peer"):
        frame = pd.read_parquet(out / name)
        frames.append(frame.sort_values(["cell", "window_start"]).reset_index(drop=True))
    ours, peer = frames
    if len(ours) != len(peer) or not (ours[["cell", "window_start"]].to_numpy() == peer[["cell", "window_start"]]
                                      .to_numpy()).all():  # fmt: skip
        return f"different windows ({len(ours):,} vs {len(peer):,})"
    if exact:
        same = (ours["subs"].to_numpy() == peer["subs"].to_numpy()).all() and np.allclose(
            ours["p95"].to_numpy(dtype=float), peer["p95"].to_numpy(dtype=float), rtol=1e-12, equal_nan=True)
        return f"{len(ours):,} windows, {'identical' if same else 'DIFFERENT'}"
    subs = np.abs(ours["subs"] - peer["subs"]) / np.maximum(peer["subs"], 1)
    same_subs = (ours["subs"].to_numpy() == peer["subs"].to_numpy()).mean()
    same_p95 = (ours["p95"].to_numpy() == peer["p95"].to_numpy()).mean()  # a quantile sketch's error is in rank
    return (f"{len(ours):,} windows; subs equal in {same_subs:.1%} (max rel. diff {subs.max():.3f}), "
            f"p95 equal in {same_p95:.1%}")


if __name__ == "__main__":
    main()
