"""The Spark job against the Spark SQL query users would write instead (explode into windows, group by).

Both start from the same prepared events (read and validated once, cached). δ is longer than the
longest call and the series start is "earliest", so both must give identical windows; that is checked
before any time is reported. Used by ``spanning bench --preset peers`` and ``bench/bench_spark_job.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import functions as F

from spanning.bench.measure import repeated
from spanning.cdr import generate_cdr
from spanning.jobspec import RunConfig
from spark_jobs.prepare import END, START, events, load
from spark_jobs.session import get_session
from spark_jobs.windowed import LATE_SEQ, window_job

AGGS = ["count", "sum:bytes", "max:duration"]
COLUMNS = ["cell", "window_start", "window_end", "count", "sum_bytes", "max_duration"]


def sql_query(view: str, cfg: RunConfig) -> str:
    w, s, o = cfg.range, cfg.slide, cfg.offset
    return f"""
        SELECT cell, k * {s} + {o} AS window_start, k * {s} + {o} + {w} AS window_end,
               count(*) AS count, sum(bytes) AS sum_bytes, max(duration) AS max_duration
        FROM (
            SELECT cell, bytes, duration,  -- a record with end = start is the point event [start, start + 1)
                   explode(sequence(
                       floor(({START} - {o} - {w}) / {s}) + 1,
                       floor((greatest({END}, {START} + 1) - 1 - {o}) / {s})
                   )) AS k
            FROM {view}
        )
        GROUP BY cell, k
    """


def cdr_file(rows: int) -> Path:
    """A generated CDR CSV of ``rows`` rows (7 days, 200 cells), cached in the temp folder."""
    path = Path(tempfile.gettempdir()) / f"spanning-bench-cdr-{rows}.csv"
    if not path.exists():
        generate_cdr(rows, seed=11, days=7).to_csv(path, index=False)
    return path


def spark_vs_sql(rows: int, repeat: int, progress: Callable[[str], None] = print, master: str | None = None):
    """Records (wall time median/spread of writing each result to a no-op sink) and agreement, β = 1m and 5m."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_session(master)
    path = str(cdr_file(rows))
    probe = RunConfig(inputs=[path], range=900, slide=60, start="start", end="end", keys=["cell"], ttp=0)
    longest = events(load(spark, probe), "first").agg(F.max(F.col(END) - F.col(START)))
    ttp = int(longest.first()[0]) + 1
    records, agreement = [], {}
    for slide in (60, 300):
        cfg = RunConfig(inputs=[path], range=900, slide=slide, ttp=ttp, start="start", end="end", keys=["cell"],
                        aggregates=AGGS)  # fmt: skip
        prepared = load(spark, cfg)
        cached = events(prepared, "earliest").persist(StorageLevel.MEMORY_ONLY)
        cached.count()
        cached.withColumnsRenamed({v: c for c, v in prepared.values.items()}).createOrReplaceTempView("calls")
        job = window_job(cached, prepared, cfg, series_start=True).where(F.col(LATE_SEQ).isNull())
        job = job.where(F.col("__events") > 0).select(*COLUMNS)
        sql = spark.sql(sql_query("calls", cfg))
        got = job.toPandas().sort_values(["cell", "window_start"]).reset_index(drop=True)
        want = sql.toPandas().sort_values(["cell", "window_start"]).reset_index(drop=True)
        same = len(got) == len(want) and (got["cell"] == want["cell"]).all()
        numbers = [got[COLUMNS[1:]].astype("int64").to_numpy(), want[COLUMNS[1:]].astype("int64").to_numpy()]
        agreement[f"Spark job == Spark SQL β={slide}"] = bool(same and (numbers[0] == numbers[1]).all())
        for name, frame in (("Spark job", job), ("Spark SQL explode+group-by", sql)):
            progress(f"peers {name} β={slide}")
            _, summary = repeated(frame.write.format("noop").mode("overwrite").save, repeat)
            speed = rows / summary["seconds_median"]
            records.append({"preset": "peers", "slide": slide, "rows": rows, "technique": name, "events": rows,
                            "windows": len(got), "events_per_s": speed, **summary})  # fmt: skip
        cached.unpersist()
    return records, agreement
