"""The stream's writer: each micro-batch reduced against the key groups' open windows and written exactly once.

``BatchWriter`` is ``foreachBatch``'s function (through ``batch_function``). By default it runs one Spark action per
batch in which the executors' tasks reduce their key groups and write their windows, late and rejected files
(``stream.tasks``), then renames the batch's folders to ``kind/batch=N`` and writes the batch's record
(``stream.batch_records``). With ``--reduce-on driver`` (``reduce_on="driver"``, and on Spark Connect) the batch's
rows come to the driver as Arrow and the reducer (``stream.buckets``) runs there, the batches overlapping.
With ``--idle-flush``, ``IdleFlush`` writes the control file that the next batch hands to every key group.

``foreach_batch`` on the executors (``handed``): the tasks write the batch's parts into a folder of the checkpoint
(``HANDED_FOLDER``) as for ``write_stream``; the driver renames them, hands the batch's folders to the caller's
function (which reads them as DataFrames), writes the batch's record, then removes them.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from spanning.engines.reader import CHRONON_MS, tzinfo
from spark_jobs.stream import buckets as reducing
from spark_jobs.stream.batch_records import BatchRecords, save_json
from spark_jobs.stream.bucket_store import Version, write_whole
from spark_jobs.stream.buckets import BUCKET, CONTROL, FLUSH
from spark_jobs.stream.outputs import KINDS, OutputShape, clear, publish, write_part
from spark_jobs.stream.query import StreamQuery, control_file
from spark_jobs.stream.tasks import STATS, GroupTask, task_of_group

TRIGGERS_KEPT = 1000  # summary.json's trigger_seconds: the last this many batches


PENDING_FOLDER = "pending"  # in checkpoint/spanning/: the rows of batches Spark committed, until they are written
#: in checkpoint/spanning/: ``foreach_batch``'s batch on the executors, as ``kind/batch=N`` folders of Parquet, from
#: its tasks' writes until the caller's function has returned (one batch at a time)
HANDED_FOLDER = "foreach_batch"


class BatchWriter:
    """``foreachBatch``: one micro-batch of ``StreamQuery.rows`` into windows/, late/, rejected/ and the summary.

    ``overlap``: the batch's reduction and writes run in a thread of their own while Spark goes on to the next batch,
    whose rows the executors read meanwhile (one batch in flight: the next waits for it before it is handed over).
    Spark commits a batch once ``foreachBatch`` returns, so its rows are first kept in the checkpoint
    (``PENDING_FOLDER``) until its record is written; a restart writes any batch kept there before Spark starts."""

    def __init__(self, job: StreamQuery, output: Path | None, progress: Any = print,
                 sink: Callable[[dict, int], None] | None = None, overlap: bool = False,
                 zone: str | None = None, renames: dict[str, str] | None = None, executors: bool = False,
                 parallelism: int | None = None,
                 handed: Callable[[Path, int], None] | None = None) -> None:  # fmt: skip
        """``output``: the folder of windows/, late/, rejected/ and summary.json; or None with ``sink``, which is
        given each batch's three outputs as Arrow tables (name -> table) and its id, and writes them. ``zone``: the
        query's session time zone, when ``job`` has no DataFrame to read it from (``stream.remote``); ``renames``:
        the windows' columns as the caller named them. ``executors``: each batch reduced and written in the
        executors' tasks (``stream.tasks``, into ``output``; not with ``sink``), ``parallelism`` of them (default:
        Spark's default parallelism); otherwise on the driver (``overlap`` applies there only). ``handed`` (with
        ``executors``; ``output`` then a folder of the checkpoint, ``HANDED_FOLDER``, and no summary written): given
        that folder and each batch's id once the batch's ``kind/batch=N`` folders are there (each kind's, one with
        no rows as an empty file), before the batch's record; the folders are removed once it returns."""
        self.job, self.output, self.progress = job, output, progress
        self.sink = sink if sink is not None else self._write_files
        # the session's time zone, which the batches' sessions (Spark's copies) keep: the windows' bounds are in it
        self.zone = zone or job.rows.sparkSession.conf.get("spark.sql.session.timeZone")
        self.shape = OutputShape.of(job, self.zone, renames)
        self.executors = executors and sink is None and output is not None
        self.parallelism = parallelism
        self.handed = handed if self.executors else None
        self._empty: dict | None = None  # the three outputs with no rows (``handed``), made at the first need
        self.token = uuid.uuid4().hex  # this query's: the executors' workers hold its states apart (stream.tasks)
        self.held = {"hits": 0, "misses": 0}  # this run's groups whose state was held, and those read from files
        if self.executors:
            overlap = False  # the action reduces and writes the batch: there is nothing left to overlap
        for orphan in [] if output is None else output.glob("*/_tmp-batch=*"):  # a batch killed while writing:
            shutil.rmtree(orphan, ignore_errors=True)  # it runs again from the checkpoint
        if self.handed is not None:  # batches handed before (a batch not committed runs again, and writes anew)
            self._let_go(None)
        self.lock = threading.Lock()
        # read once: the batches of earlier runs (a batch run again replaces its record), the oldest folded
        self.records = BatchRecords(Path(job.options.checkpoint) / "spanning")
        previous = None if output is None else self.output / "summary.json"
        summary = json.loads(previous.read_text()) if previous is not None and previous.exists() else {}
        self.dropped_by_spark = summary.get("rows_dropped_by_spark", 0)  # over every run of the stream
        self.trigger_seconds: dict[str, float] = summary.get("trigger_seconds", {})  # batch -> Spark's trigger time
        self.trigger_started: dict[str, float] = {}  # batch -> its trigger's start (epoch seconds), this run's
        self.pending = Path(job.options.checkpoint) / "spanning" / PENDING_FOLDER
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="spanning-batch") if overlap else None
        self._in_flight: Future | None = None
        self._write_kept()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.executors:
            self._on_executors(batch, batch_id)
            return
        began = time.perf_counter()
        rows = batch.toArrow()  # the one Spark action of a batch
        collected = round(time.perf_counter() - began, 3)
        if self._worker is None:  # no overlap
            self._finish(rows, batch_id, collected)
            return
        self._keep(rows, batch_id)  # before Spark commits the batch
        self.finish()  # the batch before, whose failure fails this one (its rows are kept: a restart writes them)
        self._in_flight = self._worker.submit(self._finish, rows, batch_id, collected)

    def finish(self, quietly: bool = False) -> None:
        """Wait for the batch in flight (``overlap``), raising its failure (``quietly``: not, while another error is
        on its way; the failed batch's rows stay kept for a restart). Interrupted (Ctrl-C), it is still in flight."""
        in_flight = self._in_flight
        if in_flight is None:
            return
        try:
            in_flight.result()
        except Exception:
            if not quietly:
                raise
        finally:
            if in_flight.done():  # its outcome given once
                self._in_flight = None

    def failure(self) -> BaseException | None:
        """The failure of the batch in flight, once it has failed (``_wait`` stops the stream then, rather than at
        the next batch, which may be long in coming)."""
        in_flight = self._in_flight
        return in_flight.exception() if in_flight is not None and in_flight.done() else None

    def _on_executors(self, batch: DataFrame, batch_id: int) -> None:
        """A batch reduced and written by the executors' tasks, each over its key groups (``stream.tasks``), in one
        Spark action whose result is a stats row per group and per task; then its folders renamed and its record."""
        from pyspark.sql import functions as F

        began = time.perf_counter()
        before = self.versions_before(batch_id)
        clear(self.output, batch_id)  # what an earlier run of the batch left: its tasks write anew
        task = GroupTask(self.job.reducer, self.shape, str(self.output), batch_id,
                         {g: tuple(v) for g, v in before.items()}, self.token, reducing.FAIL_ONCE)  # fmt: skip
        tasks = self.parallelism or batch.sparkSession.sparkContext.defaultParallelism
        planned = time.perf_counter()
        stats = batch.repartition(tasks, task_of_group(F.col(BUCKET), tasks)).mapInArrow(task, STATS).toArrow()
        reduced = time.perf_counter()
        received = stats.nbytes
        stats = stats.to_pylist()
        publish(self.output, batch_id)
        if self.handed is not None:
            self._hand(batch, batch_id)
        groups = [s for s in stats if s["group"] >= 0]
        done = [s for s in stats if s["group"] < 0]
        counts = {kind: sum(t[kind] for t in done) for kind in ("windows", "late", "rejected")}
        ends = [g["max_end"] for g in groups if g["max_end"] is not None]
        held = self._tally_held(groups)
        after = {**{str(b): list(v) for b, v in before.items()},
                 **{str(g["group"]): [g[v] for v in Version._fields] for g in groups}}  # fmt: skip
        record = {"batch": batch_id, "rows_read": sum(t["accepted"] for t in done) + counts["rejected"], **counts,
                  "max_end": max(ends) if ends else None, "reduced_on": "executors", "tasks": tasks,
                  "collect_seconds": round(reduced - began, 3), "plan_seconds": round(planned - began, 3),
                  "compute_seconds": max((t["seconds"] for t in done), default=0.0),
                  "state_written": sum(g["state_written"] for g in groups),
                  "write_seconds": round(time.perf_counter() - reduced, 3),
                  "buckets": {str(g["group"]): {k: g[k] for k in ("keys", "held_windows", "state_bytes",
                                                                   "state_written")} for g in groups},
                  "versions": after, "held": held, "stats_rows": len(stats), "stats_bytes": received,
                  "seconds": round(time.perf_counter() - began, 3), "done_at": round(time.time(), 3)}  # fmt: skip
        self._recorded(record)
        if self.handed is not None:
            self._let_go(batch_id)

    def _hand(self, batch: DataFrame, batch_id: int) -> None:
        """A batch's folders handed over (``handed``): a kind with no rows gets an empty file of its columns, so that
        each folder reads as a DataFrame of the same columns and types as one with rows."""
        missing = [kind for kind in KINDS if not (self.output / kind / f"batch={batch_id}").exists()]
        if missing:
            if self._empty is None:  # the batch's columns with no row: no row is read (Spark plans an empty relation)
                self._empty = self.shape.tables(self.job.reducer(batch.limit(0).toArrow(), {}, workers=1))
            for kind in missing:
                write_part(self.output, kind, batch_id, "part-empty.parquet", self._empty[kind])
            publish(self.output, batch_id)
        self.handed(self.output, batch_id)

    def _let_go(self, batch_id: int | None) -> None:
        """The handed folders of ``batch_id`` removed (None: of every batch)."""
        for kind in KINDS:
            for folder in (self.output / kind).glob("batch=*" if batch_id is None else f"batch={batch_id}"):
                shutil.rmtree(folder, ignore_errors=True)

    def _finish(self, rows: Any, batch_id: int, collected: float) -> None:
        """A batch's rows, taken to the driver in ``collected`` seconds, reduced and written, then its record."""
        began = time.perf_counter()
        counts = self._write(rows, batch_id)
        record = {"batch": batch_id, **counts, "collect_seconds": collected,
                  "seconds": round(collected + time.perf_counter() - began, 3), "done_at": round(time.time(), 3)}
        self._recorded(record)

    def _recorded(self, record: dict) -> None:
        """A batch's record written (its outputs are), its kept rows let go, its line and the summary."""
        batch_id = record["batch"]
        with self.lock:
            self.records.add(record)
        self._kept(batch_id).unlink(missing_ok=True)
        self.progress(self.describe(record))
        self.write_summary()

    def _keep(self, rows: Any, batch_id: int) -> None:
        """A batch's rows in ``PENDING_FOLDER`` as an Arrow file, whole (written under a hidden name, then renamed)."""
        import pyarrow as pa

        def write(temp: Path) -> None:
            with pa.OSFile(str(temp), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as file:
                file.write_table(rows)

        self.pending.mkdir(parents=True, exist_ok=True)
        write_whole(self._kept(batch_id), write)

    def _kept(self, batch_id: int) -> Path:
        """Where a batch's rows are kept until it is written."""
        return self.pending / f"{batch_id:08d}.arrow"

    def _write_kept(self) -> None:
        """The batches that Spark committed before their outputs were written (the process stopped in between):
        written from their kept rows, in batch order, before Spark starts the next."""
        import pyarrow as pa

        for path in sorted(self.pending.glob("[0-9]*.arrow")) if self.pending.exists() else []:
            if not path.stem.isdigit():  # not one of ours
                continue
            batch_id = int(path.stem)
            if batch_id in self.records.by_batch:  # written, its rows not yet removed
                path.unlink()
                continue
            with pa.OSFile(str(path)) as source:  # read into memory: the file goes once the batch is written
                rows = pa.ipc.open_file(source).read_all()
            self.progress(f"batch {batch_id}: committed by Spark before it was written; written from {path}")
            self._finish(rows, batch_id, 0.0)

    def _write(self, rows: Any, batch_id: int) -> dict:
        """A batch's rows (as Arrow, on the driver) reduced against the buckets' state as it was before this batch,
        then each output's files, whole or not at all."""
        began = time.perf_counter()
        before = self.versions_before(batch_id)
        reduced = self.job.reducer(rows, before)
        tables = self.shape.tables(reduced)
        computed = time.perf_counter()
        counts = {kind: rows.num_rows for kind, rows in tables.items()}
        self.sink(tables, batch_id)
        stats = reduced.buckets
        held = self._tally_held(stats.values())
        ends = [b["max_end"] for b in stats.values() if b["max_end"] is not None]
        # every bucket's state version after this batch: those it left alone carried over
        after = {**{str(b): list(v) for b, v in before.items()}, **{str(b): s["version"] for b, s in stats.items()}}
        return {"rows_read": reduced.accepted + counts["rejected"], **counts,
                "max_end": max(ends) if ends else None, "compute_seconds": round(computed - began, 3),
                "state_written": sum(b["state_written"] for b in stats.values()),
                "write_seconds": round(time.perf_counter() - computed, 3),
                "buckets": {str(b): {k: v[k] for k in ("keys", "held_windows", "state_bytes", "state_written")}
                            for b, v in stats.items()},
                "versions": after, "reduced_on": "driver", "held": held}  # fmt: skip

    def _tally_held(self, groups: Any) -> dict[str, int]:
        """A batch's groups whose state was held (``cached``) and those read from files, added to this run's."""
        cached = [g["cached"] for g in groups]
        held = {"hits": sum(c is True for c in cached), "misses": sum(c is False for c in cached)}
        for name, n in held.items():
            self.held[name] += n
        return held

    def versions_before(self, batch_id: int) -> dict[int, Version]:
        """Each bucket's state version as the last batch before ``batch_id`` left it (a batch that Spark runs again
        starts from the state its first run started from)."""
        with self.lock:
            return self.records.versions_before(batch_id)

    def _write_files(self, tables: dict, batch_id: int) -> None:
        """Each non-empty output of a batch as ``kind/batch=N/``, renamed in whole: a batch run again after a crash
        replaces its own folders."""
        clear(self.output, batch_id)
        for kind, rows in tables.items():
            if rows.num_rows:
                write_part(self.output, kind, batch_id, "part-00000.parquet", rows)
        publish(self.output, batch_id)

    def describe(self, record: dict) -> str:
        watermark = self.watermark()
        if watermark is not None and self.job.prepared.time_is_timestamp:  # as a time in --timezone
            events = self.job.cfg.events
            seconds = watermark * CHRONON_MS[events.time_unit] / 1000
            watermark = datetime.fromtimestamp(seconds, tzinfo(events.timezone)).isoformat(sep=" ")
        rate = record["rows_read"] / record["seconds"] if record.get("seconds") else 0.0
        return (f"batch {record['batch']}: {record['rows_read']} rows, {record['windows']} windows released,"
                f" {record['late']} late, {record['rejected']} rejected, watermark {watermark},"
                f" {record.get('seconds', 0):.2f} s ({rate:,.0f} rows/s)")  # fmt: skip

    def watermark(self) -> int | None:
        """The stream's watermark: the largest end seen, minus --max-disorder."""
        largest = self.records.max_end()
        return None if largest is None else largest - self.job.options.max_disorder

    def recent_triggers(self) -> dict[str, float]:
        """``trigger_seconds`` of the last ``TRIGGERS_KEPT`` batches (a stream that runs for months stays small)."""
        recent = sorted(self.trigger_seconds, key=int)[-TRIGGERS_KEPT:]
        self.trigger_seconds = {batch: self.trigger_seconds[batch] for batch in recent}
        self.trigger_started = {b: t for b, t in self.trigger_started.items() if b in self.trigger_seconds}
        return dict(self.trigger_seconds)

    def batch_seconds(self) -> dict[str, float]:
        """Of this run's batches whose records are kept: from the start of the batch's trigger to its record, written
        once its outputs are (with ``overlap``, that runs into the next batch's trigger)."""
        return {str(r["batch"]): round(r["done_at"] - self.trigger_started[str(r["batch"])], 3)
                for r in self.records.records() if "done_at" in r and str(r["batch"]) in self.trigger_started}

    def write_summary(self, extra: dict | None = None) -> dict:
        with self.lock:
            totals = self.records.totals()
            read, rejected = totals["rows_read"], totals["rejected"]
            # the names of spanning run's summary.json (a batch's record keeps its own short names)
            total = {"rows_read": read, "accepted": read - rejected, "rejected": rejected, "late": totals["late"],
                     "windows_written": totals["windows"]}  # fmt: skip
            state = totals["buckets"]  # each bucket as its last batch left it
            summary = {
                **total, "batches": totals["batches"], "watermark": self.watermark(),
                **{name: sum(b[name] for b in state.values()) for name in ("keys", "held_windows", "state_bytes")},
                "rows_dropped_by_spark": self.dropped_by_spark, "trigger_seconds": self.recent_triggers(),
                "batch_seconds": self.batch_seconds(), "held_states": dict(self.held),
                "output": None if self.output is None else str(self.output),
                "checkpoint": str(Path(self.job.options.checkpoint).resolve()),
                **(extra or {}),
            }  # fmt: skip
            if self.output is not None and self.handed is None:
                save_json(self.output / "summary.json", summary)
            return summary


class IdleFlush:
    """With ``--idle-flush``: after a batch that moved the watermark, a control file for every bucket (``advance``)."""

    def __init__(self, job: StreamQuery, writer: BatchWriter) -> None:
        self.job, self.writer = job, writer
        self.folder = Path(job.options.checkpoint) / "spanning" / "control"
        # the clock of the last control file: only a later one is written
        self.last = max((json.loads(path.read_text().splitlines()[0])[CONTROL]
                         for path in self.folder.glob("advance-*.json")), default=None)  # fmt: skip

    def after_batch(self, batch_id: int) -> None:
        options, spec = self.job.options, self.job.cfg.query.spec
        watermark = self.writer.watermark()
        if options.idle_flush is None or watermark is None:
            return
        # windows whose end the watermark passed by --idle-flush: released by a clock past end + TTP
        clock = watermark - options.idle_flush + spec.ttp + 1
        if self.last is not None and clock <= self.last:
            return  # nothing new to release (and no batch of its own to trigger)
        control_file(self.folder, f"advance-{batch_id:08d}.json",
                      [{BUCKET: b, CONTROL: clock, FLUSH: False} for b in range(options.buckets)])  # fmt: skip
        self.last = clock


def batch_function(job: StreamQuery, writer: BatchWriter) -> Callable[[DataFrame, int], None]:
    """``foreachBatch``'s function: the batch written, then (``--idle-flush``) the control file its watermark calls
    for. One per stream, for all its queries (the drained round's too): ``IdleFlush`` remembers its last clock."""
    idle = IdleFlush(job, writer)

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        writer(batch, batch_id)
        idle.after_batch(batch_id)

    return each_batch
