"""``spanning stream``'s micro-batches in the JVM: the batch plans' window arithmetic over a per-key state table.

Each micro-batch (``foreachBatch``) is joined to the state its previous batch left, a Parquet version under the
checkpoint, and reduced with the column arithmetic of ``spark_jobs.plans`` (the batch form of SE-Slicing,
Suzanne et al., §3.2.2), with no row crossing into Python:

* **State** (``StateTable``), per key: the first window of its series (``_k0``), its clock (``_clock``), its
  oldest open window (``_first_open``); per open window that holds events: the merged partial columns of its
  aggregates (``spark_jobs.plans.PartialColumn``: sums, mins and maxes, so a window's partials and a batch's
  contributions merge by the same functions). Released windows leave the state, so its size follows the open
  windows, not the stream's length.
* **The clock at arrival.** Within a batch each key's events are taken in end order (u, then the arrival
  number), as ``spanning run`` takes them, so the clock when an event arrives is ``max(state clock, u)``: the
  key's clock from the state (advanced by the control rows of ``--idle-flush``), then the event's own end. The
  run of windows an event still reaches is then the batch plans' (``plans`` module docstring), with two more
  lower bounds from the state, the series' first window and the oldest open one (after a drain)::

      a = max(first window ending after l, first window w with u(w) + δ ≥ clock, k0, first_open)
      b = last window starting before u,   windows_missed = max(min(b + 1, a) - first window ending after l, 0)

* **Release.** After the batch, a key's clock is the largest of its state clock and its events' u; every
  window ending before clock − δ is released (with ``--drain``'s control row: every window it holds). The rest
  is the next state version.
* **Exactly once.** Batch N reads the newest state version below N and writes version N (a whole folder,
  renamed into place), then its outputs; Spark records the batch only after ``foreachBatch`` returns. A batch
  run again after a crash therefore reads the same state and writes the same rows. Versions older than
  ``--state-versions`` batches are removed.

One Spark action per batch computes everything (released windows, late and rejected rows, the new state) as
one Arrow table on the driver; a second, tiny one reads the batch's control rows (a filter that prunes the
CDR files away).
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, key_column
from spark_jobs.plans import (
    MERGE,
    K,
    _first_overlapped,
    _floordiv,
    _last_overlapped,
    _partials,
    python_only,
)
from spark_jobs.prepare import END, EVENT_END, REASON, SEQ, START, Prepared
from spark_jobs.run import to_time

STATE = "state"  # under CHECKPOINT/spanning/: batch=N/ keys.parquet and windows.parquet
K0, CLOCK, FIRST_OPEN, RELEASE = "_k0", "_clock", "_first_open", "_release"
S_K0, S_CLOCK, S_FIRST_OPEN = "_s_k0", "_s_clock", "_s_first_open"  # the state's, joined to the batch's events
KIND, ORDER = "_kind", "_order"


def jvm_unsupported(cfg: RunConfig) -> str | None:
    """Why a stream's query needs the Python processor, or None: the JVM path merges SQL aggregates only."""
    return python_only(cfg)


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

    def load(self, batch_id: int) -> tuple[pa.Table, pa.Table] | None:
        older = [v for v in self.versions() if v < batch_id]
        if not older:
            return None
        folder = self.folder / f"batch={older[-1]}"
        return pq.read_table(folder / "keys.parquet"), pq.read_table(folder / "windows.parquet")

    def save(self, batch_id: int, keys: pa.Table, windows: pa.Table) -> int:
        """Write version ``batch_id``; its size in bytes."""
        temp, final = self.folder / f"_tmp-batch={batch_id}", self.folder / f"batch={batch_id}"
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir()
        pq.write_table(keys, temp / "keys.parquet")
        pq.write_table(windows, temp / "windows.parquet")
        size = sum(p.stat().st_size for p in temp.iterdir())
        shutil.rmtree(final, ignore_errors=True)
        os.replace(temp, final)
        for version in self.versions():
            if version <= batch_id - self.keep:
                shutil.rmtree(self.folder / f"batch={version}", ignore_errors=True)
        return size


class JvmMicroBatch:
    """One micro-batch of the stream's rows (prepared CDR rows and control rows) into the writer's Arrow table."""

    def __init__(self, prepared: Prepared, cfg: RunConfig, aggregates: dict[str, str], originals: dict[str, str],
                 state: StateTable, control: str, flush: str) -> None:  # fmt: skip
        self.prepared, self.cfg, self.state = prepared, cfg, state
        self.aggregates, self.originals = aggregates, originals  # output name -> internal column
        self.control, self.flush = control, flush
        self.keys = [key_column(i) for i in range(len(prepared.keys))]
        specs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
        self.outputs = {aggregates[name]: spec for name, spec in specs.items()}  # internal column -> aggregate
        self.parts, self.columns = _partials(self.outputs, prepared)

    # -- the schemas of the state, from the batch's own column types
    def _key_fields(self, batch: DataFrame) -> list[T.StructField]:
        return [T.StructField(k, batch.schema[k].dataType, True) for k in self.keys]

    def _state_frames(self, batch: DataFrame, saved: tuple[pa.Table, pa.Table] | None,
                      window_schema: T.StructType) -> tuple[DataFrame, DataFrame]:  # fmt: skip
        spark = batch.sparkSession
        key_schema = T.StructType([*self._key_fields(batch), *[T.StructField(c, T.LongType(), False)
                                                               for c in (K0, CLOCK, FIRST_OPEN)]])  # fmt: skip
        if saved is None:
            return spark.createDataFrame([], key_schema), spark.createDataFrame([], window_schema)
        keys, windows = saved
        return (spark.createDataFrame(keys.cast(_arrow_schema(key_schema)), key_schema),
                spark.createDataFrame(windows.cast(_arrow_schema(window_schema)), window_schema))  # fmt: skip

    def table(self, batch: DataFrame, batch_id: int) -> tuple[pa.Table, dict]:
        """The batch's released windows, late and rejected rows in ``stream.BatchWriter``'s columns, and its
        stats (the new state version is written on the way)."""
        cfg = self.cfg
        s, o, w, d = cfg.query.slide, cfg.query.offset, cfg.query.range, cfg.query.ttp
        controls = batch.where(F.col(self.control).isNotNull()).select(self.control, self.flush).collect()
        advance = max((r[0] for r in controls if not r[1]), default=None)  # --idle-flush: clocks to at least this
        drain = any(r[1] for r in controls)  # --drain: every held window released after this batch
        rows = batch.where(F.col(self.control).isNull()).persist()  # read once, used by every branch
        try:
            table, state_keys, state_windows, counted = self._compute(rows, batch_id, advance, drain, (s, o, w, d))
        finally:
            rows.unpersist()
        size = self.state.save(batch_id, state_keys, state_windows)
        stats = {**counted, "keys": state_keys.num_rows, "held_windows": state_windows.num_rows,
                 "state_bytes": size}  # fmt: skip
        return table, stats

    def _compute(self, rows: DataFrame, batch_id: int, advance: int | None, drain: bool,
                 window: tuple[int, int, int, int]) -> tuple[pa.Table, pa.Table, pa.Table, dict]:  # fmt: skip
        s, o, w, d = window
        keys = [F.col(k) for k in self.keys]
        by_key = Window.partitionBy(*keys) if keys else Window.partitionBy(F.lit(0))
        u = F.expr(EVENT_END)
        events = rows.where(F.col(REASON).isNull())

        # the partial columns an event contributes (over the event's columns), and the state's windows' schema
        contribution = [c.contribution.alias(c.name) for c in self.columns]
        probe = events.select(*keys, F.lit(0).cast("long").alias(K), *contribution)
        window_schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in probe.schema.fields])
        state_keys, state_windows = self._state_frames(rows, self.state.load(batch_id), window_schema)

        same_key = [F.col(k).eqNullSafe(F.col(f"_sk_{k}")) for k in self.keys]
        joined_state = state_keys.select(*[F.col(k).alias(f"_sk_{k}") for k in self.keys],
                                         F.col(K0).alias(S_K0), F.col(CLOCK).alias(S_CLOCK),
                                         F.col(FIRST_OPEN).alias(S_FIRST_OPEN))  # fmt: skip
        if self.keys:
            events = events.join(F.broadcast(joined_state), functools.reduce(lambda x, y: x & y, same_key), "left")
            events = events.drop(*[f"_sk_{k}" for k in self.keys])
        else:
            events = events.join(F.broadcast(joined_state), how="left")
        state_clock = F.col(S_CLOCK) if advance is None else F.greatest(F.col(S_CLOCK), F.lit(advance))
        state_clock = F.when(F.col(S_CLOCK).isNotNull(), state_clock)  # an advance moves known keys only
        if self.cfg.query.series_start == "first":  # a new key's series starts at its first event in end order
            series = F.min_by(F.col(START), F.struct(u, F.col(SEQ))).over(by_key)
        else:
            series = F.lit(int(self.cfg.query.series_start)).cast("long")
        events = events.withColumn("_series_start", series)
        # a new key's first window: the first one ending after its series start
        k0 = F.coalesce(F.col(S_K0), F.expr(f"{_floordiv(f'_series_start - {o + w}', s)} + 1"))
        clock = F.greatest(state_clock, u)  # greatest skips nulls: a new key's clock is the event's own u
        events = events.withColumn(K0, k0).withColumn("_clock_at", clock)
        first = F.expr(_first_overlapped(self.cfg))
        open_first = F.expr(f"(-{_floordiv(f'{o + w + d} - _clock_at', s)})")
        a = F.greatest(first, open_first, F.col(K0), F.col(S_FIRST_OPEN))
        b = F.expr(_last_overlapped(self.cfg))
        events = events.withColumn("_a", a).withColumn("_b", b)
        events = events.withColumn("_missed", F.greatest(F.least(F.col("_b") + 1, F.col("_a")) - first, F.lit(0)))

        # per key after the batch: k0, clock, and the first window it keeps open
        batch_keys = events.groupBy(*keys).agg(F.first(K0).alias(K0), F.max(F.col("_clock_at")).alias(CLOCK),
                                               F.first(S_FIRST_OPEN).alias(S_FIRST_OPEN))  # fmt: skip
        carried = state_keys.select(*keys, F.col(K0), (F.greatest(F.col(CLOCK), F.lit(advance))
                                    if advance is not None else F.col(CLOCK)).alias(CLOCK),
                                    F.col(FIRST_OPEN).alias(S_FIRST_OPEN))  # fmt: skip
        merged_keys = carried.unionByName(batch_keys).groupBy(*keys).agg(
            F.first(K0).alias(K0), F.max(CLOCK).alias(CLOCK), F.max(S_FIRST_OPEN).alias(S_FIRST_OPEN)
        ).where(F.col(CLOCK).isNotNull())  # no key at all: no row (a global aggregate gives one of nulls)
        if drain:  # OpenWindows.flush: nothing stays open
            release = F.greatest(F.col(S_FIRST_OPEN), F.expr(f"{_floordiv(f'{CLOCK} - {o} - 1', s)} + 1"), F.col(K0))
        else:
            release = F.greatest(F.col(K0), F.expr(f"(-{_floordiv(f'{o + w + d} - {CLOCK}', s)})"), F.col(S_FIRST_OPEN))
        key_info = merged_keys.select(*keys, K0, CLOCK, release.alias(RELEASE))

        # the windows: the batch's contributions over [a, b], merged with the state's partials
        exploded = events.where(F.col("_a") <= F.col("_b")).select(
            *keys, F.explode(F.sequence(F.col("_a"), F.col("_b"))).alias(K), *contribution)
        merged = (exploded.unionByName(state_windows).groupBy(*keys, K)
                  .agg(*[MERGE[c.merge](F.col(c.name)).alias(c.name) for c in self.columns]))  # fmt: skip
        info = key_info.select(*[F.col(k).alias(f"_sk_{k}") for k in self.keys], F.col(RELEASE))
        if self.keys:
            merged = merged.join(F.broadcast(info), functools.reduce(lambda x, y: x & y, same_key))
            merged = merged.drop(*[f"_sk_{k}" for k in self.keys])
        else:
            merged = merged.crossJoin(F.broadcast(info))
        released = merged.where(F.col(K) < F.col(RELEASE))
        kept = merged.where(F.col(K) >= F.col(RELEASE)).drop(RELEASE)

        # everything the driver needs, as one table: one Spark action
        as_time = self.prepared.time_is_timestamp
        start = F.col(K) * s + o
        lowered = released.select(
            F.lit("windows").alias(KIND), *keys, F.col(K).alias(ORDER),
            to_time(start, self.cfg, as_time).alias("window_start"),
            to_time(start + w, self.cfg, as_time).alias("window_end"),
            *[p.lower().alias(name) for p, name in zip(self.parts, self.outputs, strict=True)],
        )  # fmt: skip
        late = events.where(F.col("_missed") > 0).select(
            F.lit("late").alias(KIND), F.col(SEQ).alias(ORDER),
            *[F.col(name).alias(internal) for name, internal in self.originals.items()],
            F.col("_missed").cast("long").alias("windows_missed"))  # fmt: skip
        rejected = rows.where(F.col(REASON).isNotNull()).select(
            F.lit("rejected").alias(KIND), F.col(SEQ).alias(ORDER),
            *[F.col(name).alias(internal) for name, internal in self.originals.items()], F.col(REASON))  # fmt: skip
        new_keys = key_info.select(F.lit("state_keys").alias(KIND), *keys, F.col(K0).alias("_sk0"),
                                   F.col(CLOCK).alias("_sclock"), F.col(RELEASE).alias("_sfirst"))  # fmt: skip
        held = kept.select(F.lit("state_windows").alias(KIND), *keys, F.col(K).alias(ORDER),
                           *[F.col(c.name).alias(f"_p_{c.name}") for c in self.columns])  # fmt: skip
        counts = rows.agg(F.lit("stats").alias(KIND), F.count(F.lit(1)).alias("_read"),
                          F.count(REASON).alias("_rejected"),
                          F.max(F.when(F.col(REASON).isNull(), F.col(END))).alias("_max_end"))  # fmt: skip
        everything = functools.reduce(lambda x, y: x.unionByName(y, allowMissingColumns=True),
                                      [lowered, late, rejected, new_keys, held, counts])  # fmt: skip
        table = everything.toArrow()
        order = [(KIND, "ascending"), *[(k, "ascending") for k in self.keys], (ORDER, "ascending")]
        table = table.sort_by(order)  # the same bytes when a batch is run again
        kinds = table.column(KIND)
        state_keys_out = table.filter(pc.equal(kinds, "state_keys")).select([*self.keys, "_sk0", "_sclock", "_sfirst"])
        state_keys_out = state_keys_out.rename_columns([*self.keys, K0, CLOCK, FIRST_OPEN])
        windows_out = table.filter(pc.equal(kinds, "state_windows")).select(
            [*self.keys, ORDER, *[f"_p_{c.name}" for c in self.columns]])
        windows_out = windows_out.rename_columns([*self.keys, K, *[c.name for c in self.columns]])
        out = table.filter(pc.is_in(kinds, pa.array(["windows", "late", "rejected"])))
        (stats,) = table.filter(pc.equal(kinds, "stats")).select(["_read", "_rejected", "_max_end"]).to_pylist()
        counted = {"accepted": stats["_read"] - stats["_rejected"], "max_end": stats["_max_end"]}
        return out, state_keys_out, windows_out, counted


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)
