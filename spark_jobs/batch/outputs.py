"""The batch job's outputs: windows/, rejected/ and late/ written and counted, and summary.json.

Each output is counted while it is written (an ``Observation``), or known from the windows' pass to be empty and
then written on the driver; the windows go through the Python workers' Parquet writer (``worker_parquet``) where
that pays, else through Spark's writer.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from spanning.aggregates import SumOverflowError
from spanning.app.jobspec import RunConfig
from spanning.app.local_run import write_arrow_part
from spanning.app.outputs import finish_output, output_folder
from spark_jobs.batch.compute import Computed
from spark_jobs.batch.worker_parquet import write_in_workers, writes_in_workers
from spark_jobs.sessions import session_kind
from spark_jobs.sessions.session import job_settings


def counted(job: Computed, name: str) -> int | None:
    """The rows of output ``name`` (rejected, late) as the windows' pass counted them, once the windows are
    written: a JVM plan's counts, or the Python plan's late rows (``Computed.late_counts``); None if uncounted."""
    if name == "late" and job.late_counts is not None:
        return job.late_counts.get["late"]
    return job.counts.get.get(name) if job.counted_by_windows else None


EMPTY_RELATION = "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation"


@contextlib.contextmanager
def observed_metrics_kept(spark) -> Iterator[None]:
    """Keep Spark's adaptive execution from replacing a plan whose shuffle came out empty by an empty relation
    (``AQEPropagateEmptyRelation``): that drops the query stages below it, and the metrics their ``observe``
    collected (the rows read and rejected) with them. Found on 2026-11-28: ``--plan vector`` over Parquet whose
    every row was rejected stopped in PySpark's ``Observation.get`` with a bare assertion error."""
    rules = "spark.sql.adaptive.optimizer.excludedRules"
    with job_settings(spark, {rules: ",".join(filter(None, [spark.conf.get(rules, None), EMPTY_RELATION]))}):
        yield


def write(frame: DataFrame, path: str, fmt: str, in_workers: bool = False) -> None:
    """``frame`` into the folder ``path`` as ``fmt``: by the Python workers with pyarrow (``in_workers``, see
    ``spark_jobs.batch.worker_parquet``) or by Spark's writer."""
    if in_workers:
        write_in_workers(frame, path)
        return
    writer = frame.write.mode("overwrite")
    if fmt == "csv":  # RFC 4180 (quotes doubled), timestamps as ISO 8601 in the session's time zone
        writer.options(header=True, escape='"', timestampFormat="yyyy-MM-dd'T'HH:mm:ssXXX").csv(path)
    else:
        writer.parquet(path)
    for marker in [Path(path, "_SUCCESS"), *Path(path).glob(".*.crc")]:  # Hadoop's commit marker and local
        marker.unlink(missing_ok=True)  # checksums: noise to a reader of the folder, which summary.json vouches for


def write_outputs(spark, cfg: RunConfig, job: Computed, began: float, few_windows: bool = False) -> dict:
    """The job's three outputs and summary.json, each output counted as it is written; the windows by the Python
    workers where they are ``few_windows`` and ``writes_in_workers`` holds."""
    with output_folder(cfg) as output:
        written = {}
        plans = [c.plan for c in job.choices]
        for name in ("windows", "rejected", "late"):
            carried = name != "windows" and job.side is not None and job.side.carries(name)
            rows = job.side.table(name) if carried else None
            if rows is not None:  # the tasks' rows, few enough to write on the driver, as the local engine does
                (output / name).mkdir()
                write_arrow_part(rows, output / name, cfg)
                written[name] = rows.num_rows
                continue
            frame = job.output(name)
            if name != "windows" and counted(job, name) == 0:
                # counted while windowing: none, so no pass over the input for them, and no Spark job to write
                # a part with no rows: the driver writes it (the schema, or the header), as the local engine does
                (output / name).mkdir()
                write_arrow_part(to_arrow_schema(frame.schema, timezone="UTC").empty_table(), output / name, cfg)
                written[name] = 0
                continue
            observed = Observation(name)  # counted while written: no second pass over the output
            in_workers = name == "windows" and writes_in_workers(frame, cfg.output.format, plans, few_windows)
            try:
                with observed_metrics_kept(spark):
                    write(frame.observe(observed, F.count(F.lit(1)).alias("rows")), str(output / name),
                          cfg.output.format, in_workers)
            except Exception as err:  # an overflowing sum stops a JVM plan with raise_error: the same error as Python
                overflow = re.search(r"integer sum of column '(.+?)' exceeds the 64-bit range", str(err))
                if overflow is None:
                    raise
                raise SumOverflowError(overflow.group(1)) from None
            written[name] = observed.get["rows"]
        counts = job.counts.get
        for name in ("rejected", "late"):  # late rows are counted by a windows pass only
            expected = job.late_counts.get["late"] if name == "late" and job.late_counts is not None else None
            expected = counts.get(name) if expected is None else expected
            if expected is not None and expected != written[name]:
                raise RuntimeError(f"{name} rows counted {expected} but written {written[name]}")
        return finish_output(
            cfg,
            output,
            rows_read=counts["read"],
            rejected=counts["rejected"],
            late=written["late"],
            windows=written["windows"],
            seconds=time.perf_counter() - began,
            spark_master=session_kind.master(spark),
            plans=[vars(c) for c in job.choices],
        )
