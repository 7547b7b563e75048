"""The Spark job against the Spark SQL query users would write instead (explode into windows, group by).

Both read the same Parquet file of generated CDRs. δ is longer than the longest call and the series
start is "earliest", so both must give identical windows; that is checked before any time is reported.
Used by ``spanning bench peers`` and ``bench/bench_spark_job.py``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spanning.app.cdr import generate_cdr
from spanning.app.jobspec import EventFields, InputFiles, RunConfig, SparkOptions, WindowQuery
from spark_jobs.batch.compute import compute, release
from spark_jobs.reading.prepare import END, START
from spark_jobs.sessions.session import get_session

AGGS = ["count", "sum:bytes", "max:duration"]
SHAPES = [(900, 300), (900, 60), (3600, 60)]  # ω / β: about 3.5, 16 and 60 windows per call
AGG_SETS = {"count+sum+max": AGGS, "count+sum": AGGS[:2]}
SQL_AGGS = {"count": "count(*) AS count", "sum:bytes": "sum(bytes) AS sum_bytes",
            "max:duration": "max(duration) AS max_duration"}  # fmt: skip


def sql_query(view: str, cfg: RunConfig, start: str = START, end: str = END) -> str:
    """The query a user writes: explode each call into the windows it overlaps, then group by cell and window."""
    w, s, o = cfg.query.range, cfg.query.slide, cfg.query.offset
    aggregates = ", ".join(SQL_AGGS[a] for a in cfg.query.aggregates)
    return f"""
        SELECT cell, k * {s} + {o} AS window_start, k * {s} + {o} + {w} AS window_end, {aggregates}
        FROM (
            SELECT cell, bytes, duration,  -- a record with end = start is the point event [start, start + 1)
                   explode(sequence(
                       floor(({start} - {o} - {w}) / {s}) + 1,
                       floor((greatest({end}, {start} + 1) - 1 - {o}) / {s})
                   )) AS k
            FROM {view}
        )
        GROUP BY cell, k
    """


def cdr_file(rows: int) -> Path:
    """Generated CDRs (7 days, 200 cells) as Parquet with timestamp and integer columns, cached in the temp folder."""
    path = Path(tempfile.gettempdir()) / f"spanning-bench-cdr-{rows}.parquet"
    if not path.exists():
        frame = generate_cdr(rows, seed=11, days=7)
        for column in ("start", "end"):
            frame[column] = pd.to_datetime(frame[column]).astype("datetime64[us]").dt.tz_localize("UTC")
        frame["bytes"] = pd.to_numeric(frame["bytes"]).astype("Int64")
        frame.to_parquet(path, index=False)
    return path


def integer_cdr_file(rows: int, keys: str = "zipf", hours: int = 7 * 24) -> Path:
    """CDRs keyed by integer cell ids, cached as Parquet in the temp folder (``integer_cdr_frame``); ``bytes`` a
    long, ``duration`` a double (seconds); written in end order (as calls end), in row groups of 1M rows."""
    shape = "" if (keys, hours) == ("zipf", 7 * 24) else f"-{keys}-{hours}h"
    path = Path(tempfile.gettempdir()) / f"spanning-bench-intcdr-{rows}{shape}.parquet"
    if not path.exists():
        frame, rng, length = integer_cdr_frame(rows, seed=22, keys=keys, hours=hours)
        frame["bytes"] = (length * rng.uniform(1_500, 2_500, rows)).astype(np.int64)
        frame["duration"] = length.astype(np.float64)
        frame = frame.sort_values("end", kind="stable")
        frame.to_parquet(path.with_suffix(".part"), index=False, row_group_size=1_000_000)
        path.with_suffix(".part").rename(path)  # complete or absent: an interrupted run leaves no cached half
    return path


def integer_cdr_csv(rows: int, keys: str = "hot", hours: int = 60, files: int = 1) -> Path:
    """``integer_cdr_file``'s calls as CSV, as a switch exports them: epoch seconds for the times, no quoted field,
    in ``files`` files of equal rows (one file, or a folder of them), cached in the temp folder."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    source = integer_cdr_file(rows, keys, hours)
    path = source.with_name(f"{source.stem}.csv" if files == 1 else f"{source.stem}-{files}-files")
    if path.exists():
        return path
    table = pq.read_table(source)
    seconds = {c: pc.divide(pc.cast(table[c], pa.int64()), 1_000_000) for c in ("start", "end")}
    table = pa.table({"cell": table["cell"], **seconds, "bytes": table["bytes"], "duration": table["duration"]})
    temp = path.with_name(path.name + ".part")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    each = -(-rows // files)
    for i in range(files):
        with open(temp / f"calls-{i:04d}.csv", "wb") as handle:
            handle.write(b"cell,start,end,bytes,duration\n")  # the writer's header would quote the names
            pa_csv.write_csv(table.slice(i * each, each), handle,
                             pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    if files == 1:
        (temp / "calls-0000.csv").rename(path)
        temp.rmdir()
    else:
        temp.rename(path)  # complete or absent
    return path


def integer_cdr_frame(
    rows: int, seed: int, keys: str = "zipf", hours: int = 7 * 24
) -> tuple[pd.DataFrame, np.random.Generator, np.ndarray]:
    """Integer-keyed calls over ``hours``: 1% data sessions of 0.5-4 h and calls of about a minute (lognormal).
    The cells (``keys``): "zipf", 200 cells with weights 1/rank^1.1; "hot", 200 cells of which one holds 38% of
    the calls and the others share the rest by 1/rank^1.1; "uniform", 10,000 cells alike.
    The frame (cell, start, end), the generator (for more columns) and the lengths in seconds."""
    rng = np.random.default_rng(seed)
    begin = pd.Timestamp("2024-03-04").value // 10**9 + rng.integers(0, hours * 3_600, rows)
    length = rng.lognormal(np.log(60), 0.5, rows)
    sessions = rng.random(rows) < 0.01
    length[sessions] = rng.uniform(1_800, 4 * 3_600, sessions.sum())
    length = np.rint(length).astype(np.int64) + 1
    if keys == "uniform":
        cells = rng.integers(0, 10_000, rows)
    else:
        weights = 1.0 / np.arange(1, 201) ** 1.1
        if keys == "hot":
            weights = np.concatenate([[0.38], 0.62 * weights[1:] / weights[1:].sum()])
        cells = rng.choice(200, size=rows, p=weights / weights.sum())
    frame = pd.DataFrame({
        "cell": cells.astype(np.int64),
        "start": pd.to_datetime(begin, unit="s", utc=True).astype("datetime64[us, UTC]"),
        "end": pd.to_datetime(begin + length, unit="s", utc=True).astype("datetime64[us, UTC]"),
    })  # fmt: skip
    return frame, rng, length


def same_rows(mine: DataFrame, theirs: DataFrame) -> tuple[bool, int]:
    """Whether two frames of the same columns hold the same rows, each as often (``exceptAll`` both ways), and how
    many ``mine`` holds: in one Spark job that computes each side once (millions of windows do not fit a driver's
    collect). Nulls are equal to nulls, as grouping takes them."""
    side = "_spanning_side"
    both = mine.withColumn(side, F.lit(1)).unionByName(theirs.withColumn(side, F.lit(-1)))
    per_row = both.groupBy(*mine.columns).agg(F.sum(side).alias("net"), F.count_if(F.col(side) == 1).alias("mine"))
    differing, rows = per_row.agg(F.count_if(F.col("net") != 0), F.sum("mine")).first()
    return differing == 0, int(rows or 0)


def spark_vs_sql(rows: int, repeat: int, progress: Callable[[str], None] = print, master: str | None = None,
                 shapes=SHAPES, agg_sets=None, sink: str = "parquet"):  # fmt: skip
    """The planned job against the hand-written SQL, interleaved (job, SQL, job, SQL, ...), one Spark session.

    Both read the same Parquet file and write ``sink`` (parquet into the temp folder, or noop). δ is longer
    than the longest call and the series start is "earliest", so both must give identical windows: checked
    before any time is reported. Returns (records, agreement).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    progress("peers: starting Spark (its JVM: 5-30 s)")
    spark = get_session(master)
    progress(f"peers: {rows:,} CDRs as Parquet")
    path = str(cdr_file(rows))
    spark.read.parquet(path).createOrReplaceTempView("cdr")
    longest = spark.sql("SELECT max(unix_seconds(end) - unix_seconds(start)) FROM cdr").first()[0]
    ttp = int(longest) + 1
    raw = "(SELECT cell, bytes, duration, unix_seconds(start) AS s, unix_seconds(end) AS e FROM cdr)"
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-out-"))
    records, agreement = [], {}
    for range_, slide in shapes:
        for agg_name, aggs in (agg_sets or AGG_SETS).items():
            query = WindowQuery(range_, slide, ttp, aggregates=aggs)
            cfg = RunConfig(InputFiles([path]), EventFields("start", "end", keys=["cell"]), query,
                            spark=SparkOptions(plan="auto"))  # fmt: skip
            progress(f"peers ω={range_ // 60}m β={slide // 60}m {agg_name}: both queries' windows compared")
            computed = compute(spark, cfg)
            job, choices = computed.windows, computed.choices
            sql = spark.sql(sql_query(raw, cfg, "s", "e"))
            columns = [c.replace(":", "_") for c in aggs]
            mine = job.select("cell", F.unix_seconds("window_start").alias("window_start"), *columns)
            theirs = sql.select("cell", "window_start", *columns)
            same, windows = same_rows(mine, theirs)
            label = f"ω={range_ // 60}m β={slide // 60}m {agg_name}"
            agreement[f"Spark job == Spark SQL {label}"] = bool(same)
            timings = {"job": [], "sql": []}
            for i in range(repeat):
                for name, frame in (("job", job), ("sql", sql)):  # interleaved
                    progress(f"peers {label} {name} {i + 1}/{repeat}")
                    writer = frame.write.mode("overwrite")
                    began = time.perf_counter()
                    writer.format("noop").save() if sink == "noop" else writer.parquet(str(out / name))
                    timings[name].append(time.perf_counter() - began)
            for name, technique in (("job", "Spark job"), ("sql", "Spark SQL explode+group-by")):
                t = sorted(timings[name])
                records.append({"preset": "peers", "range": range_, "slide": slide, "aggregates": agg_name,
                                "rows": rows, "technique": technique, "events": rows, "windows": windows,
                                "events_per_s": rows / statistics.median(t), "seconds_median": statistics.median(t),
                                "seconds_min": t[0], "seconds_max": t[-1],
                                "plan": choices[0].plan if name == "job" else "",
                                "plan_reason": choices[0].reason if name == "job" else "",
                                "ratios": [b / a for a, b in zip(timings["job"], timings["sql"], strict=True)],
                                })  # fmt: skip
            release(computed)  # a job over text input persists its validated rows: free them
    shutil.rmtree(out, ignore_errors=True)
    return records, agreement
