"""The stream's outputs: a reduced batch's windows, late and rejected rows as the job writes them, and their files.

``OutputShape`` turns a ``Reduced`` (internal column names) into the three output tables, wherever the batch was
reduced (the driver, ``stream.writer``, or an executor's task, ``stream.tasks``): it is small and picklable. A batch's
files go into ``kind/_tmp-batch=N/`` (``write_part``, each file whole and flushed to disk), and ``publish`` renames
each such folder to ``kind/batch=N`` once every part is there: a batch run again replaces its own folders.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanning.aggregates import seconds_columns
from spanning.app.jobspec import EVENTS_COLUMN, key_column
from spanning.engines.reader import CHRONONS_PER_SECOND
from spark_jobs.reading.prepare import REASON
from spark_jobs.stream.bucket_store import synced, write_whole

__all__ = ["KINDS", "OutputShape", "clear", "publish", "temp_folder", "write_part"]

KINDS = ("windows", "late", "rejected")


@dataclass
class OutputShape:
    """How a reduced batch's tables are named and typed for the user: ``columns`` per kind (output name -> internal
    column), the window bounds as times in ``zone`` when ``time_is_timestamp`` (as Spark hands timestamps to Arrow;
    ``spark_jobs.batch.compute.to_time``), and ``seconds`` (internal columns of aggregates in chronons, such as
    ``occupancy``) in seconds, as ``spanning run``'s SQL makes them (``spark_jobs.batch.compute.to_seconds``);
    ``renames``: the windows' columns as the caller of ``spanning.spark.aggregate`` named them."""

    columns: dict[str, dict[str, str]]
    time_is_timestamp: bool
    per_second: int
    seconds: list[str]
    zone: str
    renames: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, job: Any, zone: str, renames: dict[str, str] | None = None) -> OutputShape:
        """The shape of a ``StreamQuery``'s outputs."""
        keys = {k: key_column(i) for i, k in enumerate(job.prepared.keys)}
        tag = {"window": "window"} if job.cfg.query.windows else {}  # the window spec's label (SpecReducers)
        unit = job.cfg.events.time_unit
        columns = {
            "windows": {**keys, **tag, "window_start": "window_start", "window_end": "window_end",
                        **{n: i for n, i in job.aggregates.items() if n != EVENTS_COLUMN}},
            "late": {**job.originals, **tag, "windows_missed": "windows_missed"},
            "rejected": {**job.originals, REASON: REASON},
        }  # fmt: skip
        seconds = [job.aggregates[name] for name in seconds_columns(job.cfg.query.aggregate_columns, unit)]
        return cls(columns, job.prepared.time_is_timestamp, CHRONONS_PER_SECOND[unit], seconds, zone,
                   dict(renames or {}))  # fmt: skip

    def tables(self, reduced: Any) -> dict[str, Any]:
        """The three outputs of ``reduced`` (a ``stream.buckets.Reduced``) as Arrow tables, named for the user."""
        import pyarrow as pa

        given = {"windows": self._windows(reduced.windows), "late": reduced.late, "rejected": reduced.rejected}
        tables = {kind: pa.table({name: given[kind].column(internal) for name, internal in self.columns[kind].items()})
                  for kind in KINDS}  # fmt: skip
        if self.renames:
            windows = tables["windows"]
            tables["windows"] = windows.rename_columns([self.renames.get(n, n) for n in windows.column_names])
        return tables

    def _windows(self, windows: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.time_is_timestamp:
            for name in ("window_start", "window_end"):
                micros = pc.multiply_checked(windows.column(name), 1_000_000 // self.per_second)
                windows = windows.set_column(windows.schema.get_field_index(name), name,
                                             micros.cast(pa.timestamp("us", self.zone)))  # fmt: skip
        for internal in self.seconds:  # chronons / chronons per second
            seconds = pc.divide(windows.column(internal).cast(pa.float64()), float(self.per_second))
            windows = windows.set_column(windows.schema.get_field_index(internal), internal, seconds)
        return windows


def temp_folder(output: Path, kind: str, batch_id: int) -> Path:
    """Where a batch's files of ``kind`` are written before ``publish`` renames the folder whole."""
    return output / kind / f"_tmp-batch={batch_id}"


def write_part(output: Path, kind: str, batch_id: int, name: str, rows: Any) -> None:
    """One Parquet file of a batch's ``kind`` (``rows``, an Arrow table) in its temporary folder, whole and on disk
    with its folder (``write_whole``): a task run again replaces its own file."""
    import pyarrow.parquet as pq

    folder = temp_folder(output, kind, batch_id)
    folder.mkdir(parents=True, exist_ok=True)
    write_whole(folder / name, lambda temp: pq.write_table(rows, temp))


def publish(output: Path, batch_id: int) -> None:
    """Each kind's temporary folder of a batch renamed to ``kind/batch=N``, replacing the folder of an earlier run
    of the batch; the hidden temporaries a killed task left are removed first. A kind with no file is not written."""
    for kind in KINDS:
        temp = temp_folder(output, kind, batch_id)
        if not temp.exists():
            continue
        for leftover in temp.glob(".*"):
            leftover.unlink(missing_ok=True)
        if not any(temp.iterdir()):
            temp.rmdir()
            continue
        synced(temp)
        final = output / kind / f"batch={batch_id}"
        shutil.rmtree(final, ignore_errors=True)
        os.replace(temp, final)
        synced(final.parent)


def clear(output: Path, batch_id: int) -> None:
    """The temporary folders of a batch, removed before it is written (a run before it may have left some)."""
    for kind in KINDS:
        shutil.rmtree(temp_folder(output, kind, batch_id), ignore_errors=True)
