"""``spanning stream``'s micro-batches (``--processor jvm``): each batch reduced where it is read, with the
kernel of ``spanning run``'s ``vector`` plan, and merged with a per-key state table.

Each micro-batch (``foreachBatch``) is reduced by its own tasks against the state its previous batch left, a
Parquet version under the checkpoint (the batch form of SE-Slicing, Suzanne et al., §3.2.2):

* **State** (``StateTable``), per key: the first window of its series (``_k0``), its clock (``_clock``), its
  oldest open window (``_first_open``); per open window that holds events: the merged partial columns of its
  aggregates (``spark_jobs.plans.PartialColumn``: sums, mins and maxes, sets, value lists and sketch bytes, so
  a window's partials and a batch's merge by the same functions). Released windows leave the state, so its
  size follows the open windows, not the stream's length.
* **In the tasks** (``spanning.engines.stream_partials``, with the keys' state handed to every task: no join,
  no broadcast): within a batch each key's events are taken in end order (u, then the arrival number), as
  ``spanning run`` takes them, so the clock when an event arrives is ``max(state clock, u)``: the key's clock
  from the state (advanced by the control files of ``--idle-flush``), then the event's own end. Its run of
  windows is then the batch plans' (``plans`` module docstring), with two more lower bounds from the state,
  the series' first window and the oldest open one (after a drain)::

      a = max(first window ending after l, first window w with u(w) + δ ≥ clock, k0, first_open)
      b = last window starting before u,   windows_missed = max(min(b + 1, a) - first window ending after l, 0)

  and the runs become partials per (key, window) (``window_ranges.run_partials``); with them leave each key's
  counts and first event, the late candidates and the rejected rows (as read). No event crosses a shuffle.
* **Merge and release.** One shuffle merges the tasks' partials with the state's windows per (key, window);
  the driver takes the rest as they came. After the batch a key's clock is the largest of its state clock and
  its events' u; every window ending before clock − δ is released (with ``--drain``'s control file: every window
  it holds). The rest is the next state version.
* **Exactly once.** Batch N reads the newest state version below N and writes version N (a whole folder,
  renamed into place), then its outputs; Spark records the batch only after ``foreachBatch`` returns. A batch
  run again after a crash therefore reads the same state and writes the same rows. Versions older than
  ``--state-versions`` batches are removed.

One Spark action per batch computes everything as one Arrow table on the driver, which then decides per key
(``_release``). The control files of ``--idle-flush`` and ``--drain`` are read by the driver
(``ControlFiles``), not scanned by Spark.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, key_column
from spanning.engines.stream_partials import (
    KIND as TASK_KIND,
)
from spanning.engines.stream_partials import (
    LATE,
    PER_KEY,
    STATE_CLOCK,
    STATE_FIRST_OPEN,
    STATE_K0,
    KeyState,
    U,
)
from spark_jobs.plans import (
    CHUNK_ROWS,
    K,
    _overflow_message,
    _partials,
    partial_fields,
    shipped_values,
)
from spark_jobs.plans import merged as merged_partial
from spark_jobs.prepare import END, EVENT_END, REASON, SEQ, START, Prepared
from spark_jobs.run import to_time

STATE = "state"  # under CHECKPOINT/spanning/: batch=N/ keys.parquet, windows.parquet and controls.json
CONTROLS = "controls.json"  # in a state version: the last control files it applied
K0, CLOCK, FIRST_OPEN = "_k0", "_clock", "_first_open"
KIND, ORDER = "_kind", "_order"


class StateTable:
    """The per-key state as versioned Parquet: ``batch=N/keys.parquet`` and ``batch=N/windows.parquet``.

    ``load(N)`` gives the newest version below N (a batch run again reads what its first run read); ``save``
    writes a whole version under a temporary name, then renames it, and removes versions more than ``keep``
    batches old. Readable with pyarrow or Spark, e.g. ``spark.read.parquet("CHK/spanning/state/batch=7/keys.parquet")``.
    """

    def __init__(self, folder: Path, keep: int) -> None:
        self.folder, self.keep = folder, keep
        folder.mkdir(parents=True, exist_ok=True)
        for orphan in folder.glob("_tmp-batch=*"):  # a process killed while writing one
            shutil.rmtree(orphan, ignore_errors=True)

    def versions(self) -> list[int]:
        return sorted(int(p.name.split("=", 1)[1]) for p in self.folder.glob("batch=*"))

    def load(self, batch_id: int) -> tuple[pa.Table, pa.Table, dict] | None:
        """The newest version below ``batch_id``: its keys, its windows and the control files it had applied."""
        older = [v for v in self.versions() if v < batch_id]
        if not older:
            return None
        folder = self.folder / f"batch={older[-1]}"
        applied = json.loads((folder / CONTROLS).read_text()) if (folder / CONTROLS).exists() else {}
        return pq.read_table(folder / "keys.parquet"), pq.read_table(folder / "windows.parquet"), applied

    def save(self, batch_id: int, keys: pa.Table, windows: pa.Table, applied: dict) -> int:
        """Write version ``batch_id``; its size in bytes."""
        temp, final = self.folder / f"_tmp-batch={batch_id}", self.folder / f"batch={batch_id}"
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir()
        pq.write_table(keys, temp / "keys.parquet")
        pq.write_table(windows, temp / "windows.parquet")
        (temp / CONTROLS).write_text(json.dumps(applied, sort_keys=True))
        size = sum(p.stat().st_size for p in temp.iterdir())
        shutil.rmtree(final, ignore_errors=True)
        os.replace(temp, final)
        for version in self.versions():
            if version <= batch_id - self.keep:
                shutil.rmtree(self.folder / f"batch={version}", ignore_errors=True)
        return size


class ControlFiles:
    """The control files of ``--idle-flush`` (``advance-<batch>.json``, written after that batch) and of
    ``--drain`` (``flush-<ns>.json``), read by the driver: the stream still lists them, so a new one triggers
    a batch, but no batch scans them (a second file source would cost a scan and a job every batch).

    Batch N applies the advance files written after the batches below N and the flush files that the state
    version it reads (the newest below N) had not applied, and records in its own version what it applied.
    A batch run again reads the same version and sees the same files (an advance file written after batch N
    is never an input of N), so it applies the same controls: the replay stays exactly once.
    """

    def __init__(self, folder: Path, clock_field: str) -> None:
        self.folder, self.clock_field = folder, clock_field

    def advances(self) -> dict[int, int]:
        """The advance files there: the batch each was written after -> its clock."""
        return {int(path.stem.split("-", 1)[1]): json.loads(path.read_text().splitlines()[0])[self.clock_field]
                for path in self.folder.glob("advance-*.json")}  # fmt: skip

    def pending(self, batch_id: int, applied: dict) -> tuple[int | None, bool, dict]:
        """The clock to advance every known key to (None: none), whether to drain, and what is then applied."""
        last_advance, last_flush = applied.get("advance", -1), applied.get("flush", "")
        advance, newest = None, last_advance
        for after, clock in self.advances().items():
            if last_advance < after < batch_id:  # advances are maxima: several at once are their largest
                advance, newest = clock if advance is None else max(advance, clock), max(newest, after)
        flushes = sorted(p.name for p in self.folder.glob("flush-*.json") if p.name > last_flush)
        return advance, bool(flushes), {"advance": newest, "flush": flushes[-1] if flushes else last_flush}


class JvmMicroBatch:
    """One micro-batch of the stream's prepared CDR rows into the writer's Arrow table."""

    def __init__(self, prepared: Prepared, cfg: RunConfig, aggregates: dict[str, str], originals: dict[str, str],
                 state: StateTable, controls: ControlFiles) -> None:  # fmt: skip
        self.prepared, self.cfg, self.state, self.controls = prepared, cfg, state, controls
        self.aggregates, self.originals = aggregates, originals  # output name -> internal column
        self.keys = [key_column(i) for i in range(len(prepared.keys))]
        specs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
        self.outputs = {aggregates[name]: spec for name, spec in specs.items()}  # internal column -> aggregate
        self.parts, self.columns = _partials(self.outputs, prepared)

    @staticmethod
    def _state_frame(rows: DataFrame, saved: pa.Table, schema: T.StructType) -> DataFrame:
        """The state's windows as a DataFrame of the batch's session, from their Arrow table."""
        before = SparkSession._activeSession  # createDataFrame makes the batch's session the process's active one
        try:
            return rows.sparkSession.createDataFrame(saved.cast(to_arrow_schema(schema)), schema)
        finally:
            SparkSession._activeSession = before  # the caller's session stays active (its time zone, its conf)

    def table(self, batch: DataFrame, batch_id: int) -> tuple[pa.Table, dict]:
        """The batch's released windows, late and rejected rows in ``stream.BatchWriter``'s columns, and its
        stats (the new state version is written on the way)."""
        cfg = self.cfg
        s, o, w, d = cfg.query.slide, cfg.query.offset, cfg.query.range, cfg.query.ttp
        saved = self.state.load(batch_id)
        advance, drain, applied = self.controls.pending(batch_id, saved[2] if saved else {})
        spark, adaptive = batch.sparkSession, batch.sparkSession.conf.get("spark.sql.adaptive.enabled")
        spark.conf.set("spark.sql.adaptive.enabled", "false")  # one job of a few small stages: no stage-by-stage
        try:
            table, state_keys, state_windows, counted = self._compute(batch, saved and saved[:2], (advance, drain),
                                                                      (s, o, w, d))  # fmt: skip
        finally:
            spark.conf.set("spark.sql.adaptive.enabled", adaptive)
        size = self.state.save(batch_id, state_keys, state_windows, applied)
        stats = {**counted, "keys": state_keys.num_rows, "held_windows": state_windows.num_rows,
                 "state_bytes": size}  # fmt: skip
        return table, stats

    def _task_rows(self, rows: DataFrame, held: pa.Table | None) -> tuple[DataFrame, T.StructType, list[str]]:
        """The rows of the batch's tasks (``stream_partials.micro_batch_partials``) against the keys' state ``held``
        (its clocks raised by --idle-flush; None: no state yet), the schema of the partials per (key, window)
        among them, and the input columns that late and rejected rows carry."""
        keys = [F.col(k) for k in self.keys]
        originals = [F.col(name).alias(internal) for name, internal in self.originals.items()]
        inputs = rows.select(*keys, F.col(START), F.expr(EVENT_END).alias(U), F.col(END), F.col(SEQ), F.col(REASON),
                             *shipped_values(self.prepared, self.columns), *originals)  # fmt: skip
        key_fields = [T.StructField(k, rows.schema[k].dataType, True) for k in self.keys]
        windows_schema = T.StructType([*key_fields, *partial_fields(inputs, self.columns)])
        if held is None:
            held = self._keys_schema(windows_schema).empty_table()
        key_state = KeyState(pa.table({**{k: held.column(k) for k in self.keys}, STATE_K0: held.column(K0),
                                       STATE_CLOCK: held.column(CLOCK),
                                       STATE_FIRST_OPEN: held.column(FIRST_OPEN)}))  # fmt: skip
        carried = list(self.originals.values())
        task_schema = T.StructType([
            T.StructField(TASK_KIND, T.StringType()), *[T.StructField(f.name, f.dataType) for f in windows_schema],
            *[T.StructField(c, T.LongType()) for c in (*PER_KEY, *LATE)],
            T.StructField(REASON, T.StringType()), *[inputs.schema[c] for c in carried],
        ])  # fmt: skip
        reduce_batch = _task_reducer(key_state, self.keys, self.cfg.query.spec, [tuple(c) for c in self.columns],
                                     carried, to_arrow_schema(task_schema))  # fmt: skip
        return inputs.mapInArrow(reduce_batch, task_schema), windows_schema, carried

    def _keys_schema(self, windows_schema: T.StructType) -> pa.Schema:
        """The state's keys table: the key columns, then the first window, the clock and the first open window."""
        return pa.schema([*[to_arrow_schema(windows_schema).field(k) for k in self.keys],
                          *[pa.field(c, pa.int64(), False) for c in (K0, CLOCK, FIRST_OPEN)]])  # fmt: skip

    def _compute(self, rows: DataFrame, saved: tuple[pa.Table, pa.Table] | None, controls: tuple[int | None, bool],
                 window: tuple[int, int, int, int]) -> tuple[pa.Table, pa.Table, pa.Table, dict]:  # fmt: skip
        """One Spark action, then the per-key decisions on the driver (``_release``).

        Each task reduces its own rows against the keys' state, which travels with the task (no join, no
        broadcast): ``spanning.engines.stream_partials`` gives its partials per (key, window), its per-key
        counts, its late candidates and its rejected rows (those two as read). One shuffle merges the partials
        with the state's windows per (key, window); the other rows reach the driver as the tasks made them. No
        event crosses a shuffle, and the batch is read once. What needs a key's clock after the batch (which
        windows are released) or a new key's series start (its first window, which can make an earlier call
        late) is decided on the driver, over the few rows per key.
        """
        keys = [F.col(k) for k in self.keys]
        advance, drain = controls
        if saved and advance is not None:  # --idle-flush: every known key's clock raised, for tasks and driver
            index = saved[0].schema.get_field_index(CLOCK)
            saved = (saved[0].set_column(index, CLOCK, pc.max_element_wise(saved[0].column(CLOCK), advance)),
                     saved[1])  # fmt: skip
        task_rows, windows_schema, carried = self._task_rows(rows, saved and saved[0])
        if not saved:  # the first batch: no state yet
            saved = (self._keys_schema(windows_schema).empty_table(), to_arrow_schema(windows_schema).empty_table())
        state_windows = self._state_frame(rows, saved[1], windows_schema)
        task_rows = task_rows.persist()  # read by both branches, made once
        kind = F.col(TASK_KIND)
        merged = task_rows.where(kind == "w").select(*windows_schema.fieldNames()).unionByName(state_windows).groupBy(
            *keys, K).agg(*[merged_partial(c, False).alias(c.name) for c in self.columns]).withColumn(
            TASK_KIND, F.lit("w"))  # fmt: skip
        others = task_rows.where(kind != "w").select(TASK_KIND, *keys, K, *PER_KEY, *LATE, REASON, *carried)
        merged = merged.unionByName(others, allowMissingColumns=True)
        lowered = [p.lower().alias(name) for p, name in zip(self.parts, self.outputs, strict=True)
                   if p.exact_sum_of is None]  # an exact integer sum is joined on the driver (joined_sums)
        as_time, start = self.prepared.time_is_timestamp, F.col(K) * window[0] + window[1]
        table = merged.select(
            F.when(kind == "w", "windows").when(kind == "k", "keys").when(kind == "l", "late")
            .otherwise("rejected").alias(KIND), *keys, F.col(K).alias(ORDER),
            F.when(kind == "w", to_time(start, self.cfg, as_time)).alias("window_start"),  # K: an arrival number
            F.when(kind == "w", to_time(start + window[2], self.cfg, as_time)).alias("window_end"),  # for the rest
            *[F.col(c.name).alias(f"_p_{c.name}") for c in self.columns], *lowered,
            *PER_KEY, *LATE, REASON, *carried,
        )  # fmt: skip
        try:
            table = table.toArrow()
        finally:
            task_rows.unpersist()
        return self._release(table, saved[0], drain, window)

    def _release(self, table: pa.Table, saved: pa.Table, drain: bool,
                 window: tuple[int, int, int, int]) -> tuple[pa.Table, pa.Table, pa.Table, dict]:  # fmt: skip
        """Per key after the batch (``OpenWindows.feed``, then ``flush`` with --drain): its first window, clock
        and the first window it keeps open; the windows released, the late and rejected rows, the next state.
        ``saved`` is the state's keys, their clocks raised by --idle-flush."""
        import numpy as np

        from spanning.engines.window_ranges import joined_sums

        s, o, w, d = window
        kinds = table.column(KIND)
        wins, per_key, late, rejected = (table.filter(pc.equal(kinds, kind))
                                         for kind in ("windows", "keys", "late", "rejected"))  # fmt: skip
        parts = [saved, per_key, wins, late]
        sizes = [t.num_rows for t in parts]
        key_rows = pa.concat_tables([t.select(self.keys).cast(saved.select(self.keys).schema) for t in parts])
        if self.keys:
            codes = key_rows.to_pandas().groupby(self.keys, dropna=False, sort=False).ngroup().to_numpy()
        else:
            codes = np.zeros(key_rows.num_rows, np.int64)
        at_state, at_batch, at_window, at_late = np.split(codes, np.cumsum(sizes)[:-1])
        groups = int(codes.max()) + 1 if len(codes) else 0
        never = np.iinfo(np.int64).min  # no clock yet: below every u

        def per_group(at: np.ndarray, column: pa.ChunkedArray | np.ndarray) -> np.ndarray:
            """One value per key (the largest where several rows, one per task, have one)."""
            out = np.full(groups, never, np.int64)
            if isinstance(column, pa.ChunkedArray):
                column = column.to_numpy(zero_copy_only=False)
            np.maximum.at(out, at, column.astype(np.int64))
            return out

        known = np.zeros(groups, bool)
        known[at_state] = True
        state_clock = per_group(at_state, saved.column(CLOCK))
        if self.cfg.query.series_start == "first":  # a new key's series starts at its first event in end order
            # each task's first event of the key; the key's is the first of those in (u, arrival number)
            by_order = np.lexsort((per_key.column("_ev_first_seq").to_numpy(), per_key.column("_ev_first_u").to_numpy(),
                                   at_batch))  # fmt: skip
            firsts = by_order[np.flatnonzero(np.diff(at_batch[by_order], prepend=-1) != 0)]
            series = per_group(at_batch[firsts], per_key.column("_ev_first_start").to_numpy()[firsts])
        else:
            series = np.full(groups, int(self.cfg.query.series_start), np.int64)
        k0 = np.where(known, per_group(at_state, saved.column(K0)), (series - (o + w)) // s + 1)
        first_open = np.where(known, per_group(at_state, saved.column(FIRST_OPEN)), never)
        clock = np.maximum(state_clock, per_group(at_batch, per_key.column("_ev_max_u")))
        if drain:  # OpenWindows.flush: nothing stays open
            release = np.maximum(np.maximum(first_open, (clock - o - 1) // s + 1), k0)
        else:  # the first window whose end + TTP the clock has not passed
            release = np.maximum(np.maximum(k0, -((o + w + d - clock) // s)), first_open)

        k = wins.column(ORDER).to_numpy()
        in_series = k >= k0[at_window]  # a new key's runs were cut at its first window on the driver only
        released = wins.filter(pa.array(in_series & (k < release[at_window])))
        kept = wins.filter(pa.array(in_series & (k >= release[at_window])))
        columns = {name: released.column(name) for name in [*self.keys, ORDER, "window_start", "window_end"]}
        for p, name in zip(self.parts, self.outputs, strict=True):
            if p.exact_sum_of is None:
                columns[name] = released.column(name)
            else:  # the count, high and low parts, joined (an OverflowError names the column)
                count, high, low = (released.column(f"_p_{c.name}").to_numpy(zero_copy_only=False)
                                    for c in p.columns)  # fmt: skip
                sums, present = joined_sums(count, high, low, _overflow_message(self.prepared, p.exact_sum_of))
                columns[name] = pa.array(sums, pa.int64(), mask=~present)
        out_windows = pa.table({KIND: pa.array(["windows"] * released.num_rows, pa.string()), **columns})

        # late rows: exact from Spark for known keys; for a new key, its first window may make a call late
        late_new = ~known[at_late]
        a = np.maximum(late.column("_a").to_numpy(), np.where(late_new, k0[at_late], never))
        missed = np.maximum(np.minimum(late.column("_b").to_numpy() + 1, a) - late.column("_first").to_numpy(), 0)
        late = late.set_column(late.schema.get_field_index("windows_missed"), "windows_missed", pa.array(missed))
        late = late.filter(pa.array(missed > 0))

        first_rows = np.unique(codes, return_index=True)[1]
        keys_out = key_rows.take(pa.array(first_rows))
        for name, values in ((K0, k0), (CLOCK, clock), (FIRST_OPEN, release)):
            keys_out = keys_out.append_column(name, pa.array(values))
        windows_out = kept.select([*self.keys, ORDER, *[f"_p_{c.name}" for c in self.columns]]).rename_columns(
            [*self.keys, K, *[c.name for c in self.columns]])  # fmt: skip
        sort = [(k, "ascending") for k in self.keys]
        out = pa.concat_tables([out_windows.sort_by([*sort, (ORDER, "ascending")]),
                                late.sort_by([(ORDER, "ascending")]), rejected.sort_by([(ORDER, "ascending")])],
                               promote_options="permissive")  # fmt: skip
        counts = per_key.column("_ev_n")
        ends = per_key.column("_ev_max_end")
        counted = {"accepted": int(pc.sum(counts).as_py() or 0),
                   "max_end": pc.max(ends).as_py() if per_key.num_rows else None}  # fmt: skip
        return (out, keys_out.sort_by(sort) if sort else keys_out,
                windows_out.sort_by([*sort, (K, "ascending")]), counted)  # fmt: skip


def _task_reducer(state: KeyState, keys: list[str], spec, columns: list[tuple], carried: list[str],
                  schema: pa.Schema):  # fmt: skip
    """The function each task of a micro-batch runs (``mapInArrow``): its events, ``CHUNK_ROWS`` at a time,
    into ``stream_partials.micro_batch_partials``' rows, in ``schema``'s columns (numpy and pyarrow only)."""
    chunk_rows = CHUNK_ROWS

    def reduce_batch(batches):
        import pyarrow as pa

        from spanning.engines.stream_partials import micro_batch_partials
        from spanning.engines.window_ranges import reduced_in_chunks

        def reduced(chunk):
            got = micro_batch_partials(pa.Table.from_batches(chunk), state, keys, spec, columns, carried)
            arrays = [got.column(f.name) if f.name in got.column_names else pa.nulls(got.num_rows, f.type)
                      for f in schema]  # fmt: skip
            return pa.Table.from_arrays(arrays, schema=schema).to_batches(1 << 16)

        yield from reduced_in_chunks(batches, chunk_rows, reduced)

    return reduce_batch
