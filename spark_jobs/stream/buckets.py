"""The stream's stateful step: a micro-batch's rows against each key group's (bucket's) open windows.

``BucketReducer`` feeds each bucket's rows to its ``OpenWindows`` (``spanning.engines.open_windows``: the vectorised
SE-Slicing of ``reduce_chunk`` on the compiled kernel, Suzanne et al., §3.2.2) in end order, after the control rows'
``advance`` and before their ``flush``. Each bucket's state is kept in the checkpoint by ``stream.bucket_store`` (a
snapshot and the changed keys of each batch since), and the reducer keeps the state it wrote (``held``), so a stream
that runs on reads no state file.

It runs where the batch is reduced (``spanning stream --reduce-on``; ``auto``, the default, picks the executors on
any master but a local one, where the driver was faster): in the executors' tasks, each over
the rows of its key groups (``stream.tasks``, since 2026-11-29: the driver receives a stats row per group), or on the
driver over the whole batch, taken there as Arrow (``stream.writer``, since 2026-11-28). Until 2026-11-28 it
ran in Spark's ``applyInPandasWithState``, one group per bucket, whose state store commits and hand-over of the
windows through files cost more than the reduction itself (docs/STREAMING-DESIGN.md).

**Exactly once.** Which files make each bucket's state after batch N (its ``Version``) is kept in the batch's
record (``BatchWriter``), written once its outputs are. Batch N starts from the versions of the last record before
it, so a batch that Spark runs again after a crash (its commit lost) reads the state its first run read and writes
the same next versions, windows and late rows again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, key_column
from spanning.engines.inputs import arrow_frame
from spanning.kernels import threads
from spark_jobs.reading.prepare import END, REASON, SEQ, START, Prepared, result_type, valid_column
from spark_jobs.stream.bucket_store import NONE, BucketStore, Held, Version

__all__ = ["BucketReducer", "Reduced", "SpecReducers", "warm_up_in_background", "BUCKET", "CONTROL", "FLUSH"]

BUCKET, CONTROL, FLUSH = "_bucket", "_control_clock", "_control_flush"
FAIL_ONCE: tuple[str, int] | None = None  # recovery tests: (flag file, end): a batch fails once past that end
_FAILING = threading.Lock()


@dataclass
class Reduced:
    """One micro-batch reduced: its outputs (Arrow tables in the internal column names) and each bucket's stats."""

    windows: Any  # key columns, window_start, window_end, the aggregates' internal columns
    late: Any  # the input row's internal columns, windows_missed
    rejected: Any  # the input row's internal columns, reason
    buckets: dict[int, dict]  # per bucket that the batch touched: its Version, stats and state
    accepted: int = 0  # the batch's accepted rows (each counted once, whatever the number of window specs)


class BucketReducer:
    """A micro-batch's rows (``prepare``'s, with ``_bucket`` and the control columns) against every bucket's
    ``OpenWindows``; ``aggregates``: output name -> internal column; ``originals``: input column -> internal column.
    ``offset``: added to a bucket's number where its state is kept and named (``SpecReducers``: each window spec's
    buckets numbered apart in the one store and the batches' records)."""

    def __init__(self, prepared: Prepared, cfg: RunConfig, aggregates: dict[str, str], originals: dict[str, str],
                 store: Path, offset: int = 0) -> None:  # fmt: skip
        self.offset = offset
        specs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
        self.specs = {aggregates[name]: spec for name, spec in specs.items()}  # internal column -> aggregate
        self.events_column = aggregates[EVENTS_COLUMN] if cfg.query.empty_windows == "skip" else None
        self.originals = originals
        spec = cfg.query.spec
        self.window = (spec.range, spec.slide, spec.ttp, spec.offset)
        self.keys = [key_column(i) for i in range(len(prepared.keys))]
        self.series_start = None if cfg.query.series_start == "first" else int(cfg.query.series_start)
        self.value_columns = [*prepared.value_types, *[valid_column(c) for c in prepared.value_types],
                              *prepared.result_types]  # fmt: skip
        self.store = store  # the buckets' files (``bucket_store``)
        self.held: Held = {}  # the states this reducer wrote last, by bucket: its next batch goes on from them
        fields = prepared.rows.schema
        key_fields = [T.StructField(k, fields[k].dataType) for k in self.keys]
        input_fields = [T.StructField(internal, fields[name].dataType) for name, internal in originals.items()]
        self.schemas = {kind: to_arrow_schema(T.StructType(kind_fields), timezone="UTC") for kind, kind_fields in {
            "windows": [*key_fields, T.StructField("window_start", T.LongType()),
                        T.StructField("window_end", T.LongType()),
                        *[T.StructField(c, result_type(s, prepared)) for c, s in self.specs.items()]],
            "late": [*input_fields, T.StructField("windows_missed", T.LongType())],
            "rejected": [*input_fields, T.StructField(REASON, T.StringType())],
        }.items()}  # fmt: skip

    def _empty_state(self) -> Any:
        from spanning.engines.engine import build_aggregates
        from spanning.engines.open_windows import OpenWindows
        from spanning.engines.params import ChunkColumns
        from spanning.kernels.windows import WindowSpec

        names, aggs = build_aggregates(self.specs)
        return OpenWindows(WindowSpec(*self.window), aggs, names, self.keys, self.series_start,
                           ChunkColumns(START, END, SEQ), skip_empty=self.events_column)  # fmt: skip

    def __getstate__(self) -> dict:
        """Pickled (into an executor's task, or a Connect server's Python) without the states it holds."""
        return {**self.__dict__, "held": {}}

    def __call__(self, rows: Any, versions: Mapping[int, Version], workers: int | None = None) -> Reduced:
        """``rows``: one micro-batch as an Arrow table; ``versions``: each bucket's state before it; ``workers``:
        the threads that reduce the buckets (default: one per core)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        is_control = pc.is_valid(rows.column(CONTROL)).to_numpy(zero_copy_only=False)
        is_rejected = pc.is_valid(rows.column(REASON)).to_numpy(zero_copy_only=False) & ~is_control
        control = rows.take(np.flatnonzero(is_control)).select([BUCKET, CONTROL, FLUSH]).to_pylist()
        rejected = rows.take(np.flatnonzero(is_rejected))
        # the accepted rows in bucket order (each bucket's in arrival order), in one gather: a bucket's are a slice
        accepted = np.flatnonzero(~is_control & ~is_rejected)
        buckets = rows.column(BUCKET).take(accepted).to_numpy()
        order = np.argsort(buckets, kind="stable")
        buckets = buckets[order]
        columns = [*self.keys, START, END, SEQ, *self.value_columns, *self.originals]
        accepted = rows.select(columns).take(accepted[order])
        touched = sorted(set(np.unique(buckets).tolist()) | {c[BUCKET] for c in control})
        first, after = np.searchsorted(buckets, touched), np.searchsorted(buckets, touched, side="right")
        parts = [(bucket, accepted.slice(lo, hi - lo), [c for c in control if c[BUCKET] == bucket])
                 for bucket, lo, hi in zip(touched, first.tolist(), after.tolist(), strict=True)]  # fmt: skip

        def reduce(part: tuple) -> tuple[list, Any, dict]:
            return self._bucket(*part, versions.get(part[0] + self.offset, NONE))

        # the buckets on threads, one per core: a bucket's reduction is mostly numpy, Arrow and the compiled kernel,
        # which release the GIL (at 100k rows a batch, 15m/1m: 2 buckets on 2 threads 0.11-0.13 s, against 0.19-0.21
        # s for 16 buckets on one; docs/STREAMING.md)
        with ThreadPoolExecutor(max(1, min(len(parts), workers or threads.available_cores()))) as pool:
            done = list(pool.map(reduce, parts))  # in bucket order; all finish before a failure is raised
        windows = [table for tables, _, _ in done for table in tables]
        late = [table for _, table, _ in done if table is not None]
        return Reduced(
            pa.concat_tables(windows) if windows else self.schemas["windows"].empty_table(),
            pa.concat_tables(late) if late else self.schemas["late"].empty_table(),
            self._table("rejected", {REASON: rejected.column(REASON),
                                     **{i: rejected.column(n) for n, i in self.originals.items()}}),
            {bucket + self.offset: stats for (bucket, _, _), (_, _, stats) in zip(parts, done, strict=True)},
            len(accepted),
        )  # fmt: skip

    def _bucket(self, bucket: int, mine: Any, controls: list[dict], saved: Version) -> tuple[list, Any, dict]:
        """One bucket's rows of a batch (``mine``) and control rows against its state as it was (``saved``): the
        windows it releases and its late rows (Arrow tables; None for no late row) and the bucket's stats."""
        import os

        import pyarrow as pa
        import pyarrow.compute as pc

        store = BucketStore(self.store, bucket + self.offset, self.held)
        state = store.load(self._empty_state, saved)  # an empty state built only when none is held (1.7 ms)
        windows = []
        for c in controls:  # the watermark (an idle flush), then the batch
            if not c[FLUSH]:
                windows.append(state.advance(int(c[CONTROL])))
        released, missed = state.feed(arrow_frame(mine.select([*self.keys, START, END, SEQ, *self.value_columns])))
        windows.append(released)
        if any(c[FLUSH] for c in controls):  # the end of an available-now run
            windows.append(state.flush())
        version, written = store.save(state, saved)
        max_end = pc.max(mine.column(END)).as_py()
        if FAIL_ONCE and max_end is not None and max_end >= FAIL_ONCE[1]:
            with _FAILING:  # one bucket's thread takes the flag, after its state's files (the record never names them)
                failing = os.path.exists(FAIL_ONCE[0])
                if failing:
                    os.remove(FAIL_ONCE[0])
            if failing:
                raise RuntimeError("injected failure (FAIL_ONCE, a recovery test)")
        late = None
        if len(missed):
            late = self._table("late", {
                "windows_missed": missed["windows_missed"].to_numpy(),
                **{internal: mine.column(name).take(pa.array(missed["row"].to_numpy()))
                   for name, internal in self.originals.items()}})  # fmt: skip
        stats = {"version": list(version), "accepted": mine.num_rows, "max_end": max_end, "keys": state.n_keys,
                 "held_windows": state.held_windows, "state_bytes": version.snapshot_bytes + version.delta_bytes,
                 "state_written": written, "cached": store.cached}  # fmt: skip
        # each frame to Arrow on its own: concatenated in pandas first, a bucket whose null key made its key column
        # float would make every bucket's float, and large integer keys would lose their low bits
        return [self._table("windows", frame) for frame in windows if len(frame)], late, stats

    def _table(self, kind: str, columns: Any) -> Any:
        """An Arrow table of ``kind``'s schema from ``columns`` (a name -> values mapping or a pandas frame)."""
        import pyarrow as pa

        schema = self.schemas[kind]
        rows = len(columns) if hasattr(columns, "columns") else len(next(iter(columns.values()), []))
        arrays = []
        for field in schema:
            if field.name not in columns:  # no rows at all
                arrays.append(pa.nulls(rows, field.type))
                continue
            values = columns[field.name]
            if not isinstance(values, (pa.Array, pa.ChunkedArray)):
                values = pa.array(values, from_pandas=True)
            arrays.append(values.cast(field.type))
        return pa.Table.from_arrays(arrays, schema=schema)


class SpecReducers:
    """Several window specs over one stream (``windows=``): a ``BucketReducer`` per spec over each batch's rows, its
    buckets numbered after the specs before it (spec i's bucket b is ``i * buckets + b`` in the store and the
    records), its windows and late rows tagged with the spec's ``window`` label, as the batch job tags them; the
    rejected rows once."""

    def __init__(self, reducers: list[BucketReducer], labels: list[str]) -> None:
        self.reducers, self.labels = reducers, labels

    def __call__(self, rows: Any, versions: Mapping[int, Version], workers: int | None = None) -> Reduced:
        import pyarrow as pa

        def tagged(table: Any, label: str, before: str) -> Any:
            return table.add_column(table.schema.get_field_index(before), "window",
                                    pa.array([label] * table.num_rows, pa.string()))  # fmt: skip

        each = [reducer(rows, versions, workers) for reducer in self.reducers]
        return Reduced(
            pa.concat_tables([tagged(r.windows, label, "window_start") for r, label in zip(each, self.labels,
                                                                                            strict=True)]),
            pa.concat_tables([tagged(r.late, label, "windows_missed") for r, label in zip(each, self.labels,
                                                                                           strict=True)]),
            each[0].rejected,
            {bucket: stats for r in each for bucket, stats in r.buckets.items()},
            each[0].accepted,
        )  # fmt: skip


def warm_up_in_background() -> threading.Thread:
    """The driver's compiled kernel loaded from its cache (compiled where there is none) in a background thread while
    the stream is planned, so that the first batch's reduction finds it ready. ``every``: the stream feeds the kernel
    read-only Arrow columns and int32 key codes, which numba compiles apart (``compiled.warm_up``)."""

    def warm() -> None:
        from spanning.kernels import compiled

        compiled.warm_up(every=True)

    thread = threading.Thread(target=warm, name="spanning-warm-up-driver-kernel", daemon=True)
    thread.start()
    return thread
