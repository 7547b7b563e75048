"""``spanning run --engine spark``: read, validate, window, and write windows/, rejected/, late/, summary.json."""

from __future__ import annotations

import functools
import time
from dataclasses import replace

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spanning.batch import window_labels
from spanning.height import resolve_height
from spanning.jobspec import EVENTS_COLUMN, RunConfig
from spanning.outputs import finish_output, output_folder
from spark_jobs.prepare import END, REASON, SEQ, START, as_read, events, load, quoted
from spark_jobs.session import get_session
from spark_jobs.windowed import LATE_SEQ, MISSED, window_job

HEIGHT_SAMPLE = 200_000  # events measured for --height auto


def to_time(column, cfg: RunConfig, is_timestamp: bool):
    if not is_timestamp:
        return column
    return F.timestamp_millis(column) if cfg.time_unit == "ms" else F.timestamp_seconds(column)


def compute(spark, cfg: RunConfig) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    """(prepared rows, windows, late events, rejected rows) as lazy DataFrames; prepared is persisted."""
    prepared = load(spark, cfg)
    prepared.rows = prepared.rows.persist(StorageLevel.MEMORY_AND_DISK)
    if cfg.height == "auto":  # Table 4's cost model on the sizes of (a sample of) the events
        keys = [quoted(k) for k in prepared.keys]
        sample = events(prepared, "first").select(START, END, *keys).limit(HEIGHT_SAMPLE).toPandas()
        groups = sample.groupby(prepared.keys, sort=False, dropna=False).ngroup().to_numpy() if keys else None
        cfg.height = resolve_height("auto", cfg.technique, cfg.spec, (sample[START], sample[END], groups))
    rows = events(prepared, cfg.series_start)
    if cfg.windows:  # several specs: one job each (the vectorised batch path shares nothing), tagged and unioned
        labels = window_labels(cfg.specs)
        parts = [
            window_job(
                rows, prepared, replace(cfg, windows=[], range=s.range, slide=s.slide), cfg.series_start != "first"
            ).withColumn("window", F.lit(label))
            for s, label in zip(cfg.specs, labels, strict=True)
        ]
        out = functools.reduce(lambda a, b: a.unionByName(b), parts)
    else:
        out = window_job(rows, prepared, cfg, series_start=cfg.series_start != "first")
    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    tag = [F.col("window")] if cfg.windows else []
    windows = out.where(F.col(LATE_SEQ).isNull())
    if cfg.empty_windows == "skip":
        windows = windows.where(F.col(EVENTS_COLUMN) > 0)
    windows = windows.select(
        *[quoted(k) for k in prepared.keys],
        *tag,
        to_time(F.col("window_start"), cfg, prepared.time_is_timestamp).alias("window_start"),
        to_time(F.col("window_end"), cfg, prepared.time_is_timestamp).alias("window_end"),
        *[quoted(name) for name in cfg.aggregate_columns],
    )
    late_ids = out.where(F.col(LATE_SEQ).isNotNull()).select(F.col(LATE_SEQ).alias(SEQ), *tag, F.col(MISSED))
    late = prepared.rows.join(late_ids, SEQ).select(*as_read(prepared), *tag, F.col(MISSED).alias("windows_missed"))
    rejected = prepared.rows.where(F.col(REASON).isNotNull()).select(*as_read(prepared), F.col(REASON))
    return prepared.rows, windows, late, rejected


def write(frame: DataFrame, path: str, fmt: str) -> None:
    writer = frame.write.mode("overwrite")
    if fmt == "csv":  # RFC 4180 (quotes doubled), timestamps as ISO 8601 in the session's time zone
        writer.options(header=True, escape='"', timestampFormat="yyyy-MM-dd'T'HH:mm:ssXXX").csv(path)
    else:
        writer.parquet(path)


def run_spark(cfg: RunConfig, verbose: bool = False) -> dict:
    """Run the job and write its outputs; returns the summary."""
    began = time.perf_counter()
    spark = get_session(cfg.master, cfg.timezone, verbose, cfg.partitions)
    rows, windows, late, rejected = compute(spark, cfg)  # every user mistake shows here, before any output
    with output_folder(cfg) as output:
        counts = rows.agg(F.count(F.lit(1)).alias("read"), F.count(REASON).alias("rejected")).first()
        write(windows, str(output / "windows"), cfg.format)
        write(rejected, str(output / "rejected"), cfg.format)
        write(late, str(output / "late"), cfg.format)
        reader = spark.read.format(cfg.format).option("header", True)
        return finish_output(
            cfg,
            output,
            rows_read=counts["read"],
            rejected=counts["rejected"],
            late=reader.load(str(output / "late")).count(),
            windows=reader.load(str(output / "windows")).count(),
            seconds=time.perf_counter() - began,
            spark_master=spark.sparkContext.master,
        )
