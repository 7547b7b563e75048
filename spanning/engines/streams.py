"""The sorted-stream faces of the keyed driver: DataFrame chunks sorted by (key, end) in, frames out.

Each Spark partition of the ``python`` plan (``spark_jobs/batch/windowed.py``) feeds its Arrow batches, sorted by
(key, end, seq), to one of them: ``SortedStreamAggregator`` through the vectorised batch form of SE-Slicing
(Suzanne et al., §3.2.2; ``spanning.engines.chunks.reduce_chunk``), ``SortedEngineStream`` through the
per-event ``Engine`` of any technique. Both drive ``spanning.engines.keyed.KeyedDriver``, which carries
one key's open windows from batch to batch, so memory stays bounded whatever the key sizes.

With distinct counts or quantiles (aggregates with ``window_results``), ``SortedStreamAggregator`` first holds
the rows of a batch's last key back for the next batch, up to ``HELD_ROWS`` of them: a key that fits is then
reduced whole, its windows lowered with no set or sketch per window, instead of carrying the partials of all
its open windows (every window of the key, under a long TTP) from batch to batch; only a larger key is cut,
and carries them as before. Memory stays bounded: ``HELD_ROWS`` rows plus one key's open windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from spanning.aggregates import Aggregate, BatchColumns, nullable_column
from spanning.engines.chunks import batch_columns, key_values
from spanning.engines.engine import Engine
from spanning.engines.keyed import KeyedBatch, KeyedDriver, KeyEngine, PerEventKeys, RunKeys, VectorisedKeys
from spanning.engines.params import ChunkColumns
from spanning.kernels.windows import WindowSpec

__all__ = ["HELD_ROWS", "SortedEngineStream", "SortedStreamAggregator"]

HELD_ROWS = 2_000_000  # the most rows of one key a sorted stream holds back to lower its windows whole


class SortedStreamAggregator:
    """Feeds DataFrame chunks sorted by (key, end) through the keyed driver, vectorised (``VectorisedKeys``).

    Each chunk is a DataFrame with the key columns, ``start``/``end`` (int chronons), ``seq`` (arrival
    number, for tie-breaks), optionally the column ``series_start`` names, and the value columns, where
    each value column ``c`` may come with a boolean ``columns.valid(c)`` (else nulls are read from the
    values); ``columns`` (``ChunkColumns``) renames start, end and seq.
    ``feed`` and ``finish`` return DataFrames of released windows and of late events.
    """

    def __init__(
        self,
        spec: WindowSpec,
        aggregates: Sequence[Aggregate],
        names: Sequence[str],
        keys: Sequence[str],
        series_start: str | None = None,
        columns: ChunkColumns | None = None,
    ) -> None:
        columns = columns or ChunkColumns()
        self.spec, self.aggregates, self.names = spec, list(aggregates), list(names)
        self.keys, self.start, self.end, self.seq = list(keys), columns.start, columns.end, columns.seq
        self.series_start_column = series_start
        self.valid_column = columns.valid
        self._columns = list(dict.fromkeys(c for a in self.aggregates for c in a.columns))
        self.driver = KeyedDriver(self._engine())
        # the last key's rows wait for the next chunk (up to HELD_ROWS of them) when an aggregate lowers whole
        # windows faster than it carries their partials (distinct counts and quantiles: no set or sketch)
        self._hold = bool(self.keys) and any(type(a).window_results is not Aggregate.window_results
                                             for a in self.aggregates)  # fmt: skip
        self._held: list[pd.DataFrame] = []  # the held rows, one key's, batch after batch (one concat at the end)

    def _engine(self) -> KeyEngine:
        return VectorisedKeys(self.spec, self.aggregates)

    def _batch(self, chunk: pd.DataFrame) -> tuple[KeyedBatch, list]:
        """The chunk as a keyed batch, and one array per key column with each run's key."""
        if self.keys:
            grouped = chunk.groupby(self.keys, sort=False, dropna=False, observed=True)  # nulls: one key
            groups = grouped.ngroup().to_numpy().astype(np.int64)
            group_rows = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
            if len(group_rows) != groups.max() + 1:
                raise ValueError("chunks must be sorted by key: a key appears in two runs of one chunk")
            key_columns = [key_values(chunk[k])[group_rows] for k in self.keys]  # one entry per key run
        else:
            groups = np.zeros(len(chunk), dtype=np.int64)
            group_rows = np.zeros(1, dtype=np.int64)
            key_columns = []
        starts = chunk[self.start].to_numpy(dtype=np.int64)
        ends = chunk[self.end].to_numpy(dtype=np.int64)
        ends = np.where(ends == starts, starts + 1, ends)
        seqs = chunk[self.seq].to_numpy(dtype=np.int64)
        series_start = None
        if self.series_start_column:
            series_start = chunk[self.series_start_column].to_numpy(dtype=np.int64)[group_rows]
        valid = {c: self.valid_column(c) for c in self._columns if self.valid_column(c) in chunk.columns}
        cols = batch_columns(chunk, self.aggregates, seqs, valid)
        batch = KeyedBatch(RunKeys(self._run_key_columns(chunk, group_rows, key_columns), len(group_rows)),
                           groups, starts, ends, seqs, series_start, cols)  # fmt: skip
        return batch, key_columns

    def _run_key_columns(self, chunk: pd.DataFrame, group_rows: np.ndarray, key_columns: list) -> list:
        return key_columns

    def feed(self, chunk: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        if not self._hold or not len(chunk):
            return self._reduce(chunk)
        tail = int(len(chunk) - np.argmin(self._of_key(chunk, chunk.iloc[-1:])[::-1]))  # the last key's first row
        tail = 0 if self._of_key(chunk.iloc[:1], chunk.iloc[-1:])[0] else tail  # the chunk is one key
        held = sum(len(h) for h in self._held)
        one_key = self._held and tail == 0 and self._of_key(chunk.iloc[:1], self._held[-1].iloc[-1:])[0]
        if one_key and held + len(chunk) <= HELD_ROWS:  # the held key goes on: its rows keep waiting
            self._held.append(chunk)
            return self._reduce(chunk.iloc[:0])
        if self._held:  # the held rows come first
            tail = 0 if one_key else held + tail
            chunk, self._held = pd.concat([*self._held, chunk], ignore_index=True), []
        if len(chunk) - tail > HELD_ROWS:  # a key too long to hold: cut, its open windows carried
            return self._reduce(chunk)
        self._held = [chunk.iloc[tail:]]  # its rows wait: the key may go on in the next chunk
        return self._reduce(chunk.iloc[:tail], last_key_ends=True)  # what is left ends with a whole key

    def _of_key(self, chunk: pd.DataFrame, row: pd.DataFrame) -> np.ndarray:
        """Which rows of ``chunk`` hold the key of the one-row frame ``row`` (nulls: one key)."""
        same = np.ones(len(chunk), dtype=bool)
        for k in self.keys:
            column, value = chunk[k], row[k].iloc[0]
            same &= column.isna().to_numpy() if pd.isna(value) else (column == value).to_numpy(dtype=bool)
        return same

    def _reduce(self, chunk: pd.DataFrame, last_key_ends: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
        if len(chunk) == 0:
            return self._windows([], [], []), self._late(chunk, np.zeros(0, np.int64), [])
        chunk = chunk.reset_index(drop=True)
        batch, key_columns = self._batch(chunk)
        released, result = self.driver.feed(batch, last_key_ends)
        keys = [c[result.window_group] for c in key_columns]
        windows = self._windows(result.window_start, keys, result.values, result.window_end)
        late = self._late(chunk, result.late_rows, result.windows_missed)
        if released is not None:
            released = self._carried_frame(*released)
            if len(released):
                windows = pd.concat([released, windows], ignore_index=True) if len(windows) else released
        return windows, late

    def finish(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """End of the partition: the windows of the rows still held and of the key still carried, and the
        held rows' late events."""
        held, self._held = self._held, []
        windows, late = self._reduce(pd.concat(held, ignore_index=True), last_key_ends=True) if held else (None, None)
        released = self.driver.finish()
        released = self._windows([], [], []) if released is None else self._carried_frame(*released)
        if windows is None:
            return released, self._late(pd.DataFrame(), np.zeros(0, np.int64), [])
        return (pd.concat([windows, released], ignore_index=True) if len(released) else windows), late

    def _carried_frame(self, key: tuple, start: np.ndarray, end: np.ndarray, values: list) -> pd.DataFrame:
        keys = [np.repeat(np.array([v], dtype=object), len(start)) for v in key]
        return self._windows(start, keys, values, end)

    def _windows(self, start, keys, values, end=None) -> pd.DataFrame:
        """A frame of windows; ``keys`` holds one array per key column (or is empty for no windows)."""
        data = {k: (keys[i] if keys else []) for i, k in enumerate(self.keys)}
        data["window_start"] = np.asarray(start, dtype=np.int64)
        data["window_end"] = data["window_start"] + self.spec.range if end is None else end
        if not len(values):
            values = [agg.lower_partials(agg.identity_partials(0)) if agg.capabilities.vectorised
                      else np.array([], dtype=object) for agg in self.aggregates]  # fmt: skip
        data.update(zip(self.names, values, strict=True))
        return pd.DataFrame(data)

    def _late(self, chunk: pd.DataFrame, rows: np.ndarray, missed) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "seq": chunk[self.seq].to_numpy(dtype=np.int64)[rows] if len(chunk) else rows,
                "windows_missed": np.asarray(missed, dtype=np.int64),
            }
        )


class SortedEngineStream(SortedStreamAggregator):
    """The same contract as ``SortedStreamAggregator``, through the per-event ``Engine`` of any technique.

    Used for techniques without a batch form and for point events through a SWAG (``swag=``): one Engine
    for the key in progress (``PerEventKeys``), flushed when the next key starts, so memory stays bounded
    by one key's open windows.
    """

    def __init__(
        self, *args: Any, technique: str = "se-slicing", height: int = 1, swag: str | None = None, **kwargs: Any
    ) -> None:
        self.technique, self.height, self.swag = technique, height, swag
        super().__init__(*args, **kwargs)

    def _engine(self) -> KeyEngine:
        named = dict(zip(self.names, self.aggregates, strict=True))
        spec, technique, height, swag = self.spec, self.technique, self.height, self.swag
        return PerEventKeys(lambda series_start: Engine(spec, named, technique, height, series_start, swag=swag))

    def _run_key_columns(self, chunk: pd.DataFrame, group_rows: np.ndarray, key_columns: list) -> list:
        return [chunk[k].take(group_rows).tolist() for k in self.keys]  # plain Python keys, as rows give them

    def feed(self, chunk: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        if len(chunk) == 0:
            return self._engine_windows([]), _late_frame([])
        chunk = chunk.reset_index(drop=True)
        batch, _ = self._batch(chunk)
        cols: BatchColumns = batch.values
        values = {c: cols.values(c) for c in self._columns}
        valid = {c: cols.valid(c) for c in self._columns}
        rows = [{c: (values[c][i].item() if hasattr(values[c][i], "item") else values[c][i]) if valid[c][i] else None
                 for c in self._columns} for i in range(len(chunk))]  # fmt: skip
        released, (windows, late) = self.driver.feed(
            KeyedBatch(batch.run_keys, batch.groups, batch.starts, batch.ends, batch.seqs, batch.series_start, rows)
        )
        return self._engine_windows((released or []) + windows), _late_frame(late)

    def finish(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return self._engine_windows(self.driver.finish() or []), _late_frame([])

    def _engine_windows(self, windows: list) -> pd.DataFrame:
        if not windows:
            return self._windows([], [], [])
        keys = [np.array([key[i] for key, _ in windows], dtype=object) for i in range(len(self.keys))]
        start = np.array([w.start for _, w in windows], dtype=np.int64)
        values = [nullable_column(w.values[name] for _, w in windows) for name in self.names]
        return self._windows(start, keys, values, start + self.spec.range)


def _late_frame(late: list) -> pd.DataFrame:
    """Late events of the per-event engines as the sorted streams report them: ``seq``, ``windows_missed``."""
    return pd.DataFrame(
        {"seq": [e.seq for e in late], "windows_missed": [e.windows_missed for e in late]}, dtype=np.int64
    )
