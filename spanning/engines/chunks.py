"""The batch path over chunks: many keys per chunk, one key's state carried between chunks.

``reduce_chunk`` is the vectorised batch form of SE-Slicing (see ``spanning.engines.batch``) for a chunk of
events of several keys. The first key may continue the stream of the previous chunk (``carry``: its
clock, series start and the partials of its open windows) and the last key may go on in the next
chunk (``hold_last``: its open windows are returned as a new carry instead of being released).

``SortedStreamAggregator`` feeds chunks sorted by (key, end) - Arrow batches of a Spark partition -
through it. It keeps the state of one key only, so a key with tens of millions of events streams in
bounded memory, while the many small keys of a chunk are reduced together with array operations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from spanning.aggregates import INT64_MAX, INT64_MIN, Aggregate, BatchColumns, is_null, nullable_column
from spanning.kernels.windows import WindowSpec

__all__ = [
    "OpenKey",
    "ChunkResult",
    "reduce_chunk",
    "running_max",
    "batch_columns",
    "key_values",
    "SortedStreamAggregator",
]


@dataclass
class OpenKey:
    """A key whose stream goes on in the next chunk: what its open windows need."""

    k0: int  # first window of its series
    clock: int  # τ, the largest end seen
    first_open: int  # oldest open window; partials[i][*][0] belongs to it
    partials: list[tuple]  # per aggregate, partial arrays over windows first_open, first_open + 1, ...


@dataclass
class ChunkResult:
    """Released windows (``window_group`` indexes the chunk's keys), late events, and the held key."""

    window_group: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    values: list  # per aggregate, one lowered array aligned with the windows
    late_rows: np.ndarray  # positions in the chunk
    windows_missed: np.ndarray
    held: OpenKey | None


def running_max(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """The clock at each arrival: the running max of ends within each key."""
    if len(values) == 0 or (len(values) > 1 and bool(np.all(values[1:] >= values[:-1]))):
        return values  # in end order already (the Spark job sorts): the clock is the event's own end
    if n_groups == 1:
        return np.maximum.accumulate(values)
    return pd.Series(values).groupby(groups).cummax().to_numpy()


def reduce_chunk(
    spec: WindowSpec,
    aggregates: Sequence[Aggregate],
    lower: np.ndarray,
    upper: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    cols: BatchColumns,
    series_from: np.ndarray,
    carry: OpenKey | None = None,
    hold_last: bool = False,
) -> ChunkResult:
    """Windows of a chunk of events ``[lower, upper)`` of keys ``groups`` (0 .. n_groups-1), in arrival order.

    ``series_from[g]`` is the time the series of key g starts after (its first event's start, or an
    explicit start). ``carry`` continues key 0; ``hold_last`` keeps key n_groups-1 open.
    """
    s, o = spec.slide, spec.offset
    clock = running_max(upper, groups, n_groups)
    final_clock = np.full(n_groups, np.iinfo(np.int64).min, dtype=np.int64)
    if n_groups == 1 and len(upper):  # one key (no key columns): a max, not a scatter
        final_clock[0] = upper.max()
    else:
        np.maximum.at(final_clock, groups, upper)
    k0 = (series_from - o - spec.range) // s + 1  # first window ending after the series start
    range_from = k0.copy()  # first window each key emits in this chunk
    if carry is not None and n_groups:
        in_first = groups == 0
        clock = np.where(in_first, np.maximum(clock, carry.clock), clock)
        final_clock[0] = max(final_clock[0], carry.clock)
        k0[0] = carry.k0
        range_from[0] = carry.first_open
    k_last = (final_clock - o - 1) // s  # last window starting before the clock
    n_windows = np.maximum(k_last - range_from + 1, 0)
    base = np.cumsum(n_windows) - n_windows  # where each key's windows begin in the chunk's arrays
    total = int(n_windows.sum())

    # each event's run of windows: overlapping, open when it arrives, in the series
    overlap_first = (lower - o - spec.range) // s + 1
    open_first = -((o + spec.range + spec.ttp - clock) // s)
    overlap_last = (upper - o - 1) // s
    first = np.maximum(np.maximum(overlap_first, open_first), _spread(k0, groups))
    missed = np.clip(np.minimum(overlap_last + 1, first) - overlap_first, 0, None)
    active = first <= overlap_last
    shift = _spread(base - range_from, groups)
    run_first, run_last = first + shift, overlap_last + shift
    active_cols = cols
    if not active.all():
        run_first, run_last = run_first[active], run_last[active]
        active_cols = cols.subset(np.flatnonzero(active))
    partials = [agg.window_partials(active_cols, run_first, run_last, total) for agg in aggregates]

    if carry is not None and n_groups and carry.partials:  # older partials of key 0 go first
        m = len(carry.partials[0][0])
        for i, (agg, carried) in enumerate(zip(aggregates, carry.partials, strict=True)):
            merged = agg.merge(carried, tuple(a[:m] for a in partials[i]))
            partials[i] = tuple(np.concatenate([x, a[m:]]) for x, a in zip(merged, partials[i], strict=True))

    emit = np.ones(total, dtype=bool)
    held = None
    if hold_last and n_groups:
        g = n_groups - 1
        first_open = max(int(k0[g]), int(-((o + spec.range + spec.ttp - final_clock[g]) // s)))
        first_open = max(first_open, int(range_from[g]))
        keep_from = base[g] + max(first_open - range_from[g], 0)
        keep_to = base[g] + n_windows[g]
        keep_to = max(keep_to, keep_from)
        emit[keep_from:keep_to] = False
        held = OpenKey(
            int(k0[g]),
            int(final_clock[g]),
            first_open,
            [tuple(a[keep_from:keep_to].copy() for a in p) for p in partials],
        )

    group_of_window = np.repeat(np.arange(n_groups), n_windows)
    k = np.arange(total) - base[group_of_window] + range_from[group_of_window]
    if not emit.all():
        group_of_window, k = group_of_window[emit], k[emit]
        partials = [tuple(a[emit] for a in p) for p in partials]
    values = [agg.lower_partials(p) for agg, p in zip(aggregates, partials, strict=True)]
    late_rows = np.flatnonzero(missed > 0)
    window_start = k * s + o
    return ChunkResult(
        group_of_window, window_start, window_start + spec.range, values, late_rows, missed[late_rows], held
    )


def _spread(per_key: np.ndarray, groups: np.ndarray) -> np.ndarray | np.integer:
    """A per-key array at each event: ``per_key[groups]``, or a scalar for a single key (no 1M-element gather)."""
    return per_key[0] if len(per_key) == 1 else per_key[groups]


def release_open_key(spec: WindowSpec, aggregates: Sequence[Aggregate], key: OpenKey) -> tuple:
    """End of stream for a held key: release its windows that start before its clock (flush)."""
    s, o = spec.slide, spec.offset
    n = max((key.clock - o - 1) // s - key.first_open + 1, 0)
    have = len(key.partials[0][0]) if key.partials else 0
    values = []
    for agg, p in zip(aggregates, key.partials, strict=True):
        if have < n:  # windows no event reached yet
            p = tuple(np.concatenate([a, e]) for a, e in zip(p, agg.identity_partials(n - have), strict=True))
        values.append(agg.lower_partials(tuple(a[:n] for a in p)))
    window_start = (key.first_open + np.arange(n)) * s + o
    return window_start, window_start + spec.range, values


class SortedStreamAggregator:
    """Feeds chunks sorted by (key, end) through ``reduce_chunk``, carrying one key between chunks.

    Each chunk is a DataFrame with the key columns, ``start``/``end`` (int chronons), ``seq`` (arrival
    number, for tie-breaks), optionally ``series_start``, and the value columns, where each value
    column ``c`` may come with a boolean ``valid_column(c)`` (else nulls are read from the values).
    ``feed`` and ``finish`` return DataFrames of released windows and of late events.
    """

    def __init__(
        self,
        spec: WindowSpec,
        aggregates: Sequence[Aggregate],
        names: Sequence[str],
        keys: Sequence[str],
        start: str = "start",
        end: str = "end",
        seq: str = "seq",
        series_start: str | None = None,
        valid_column=lambda column: f"{column}__valid",
    ) -> None:
        self.spec, self.aggregates, self.names = spec, list(aggregates), list(names)
        self.keys, self.start, self.end, self.seq = list(keys), start, end, seq
        self.series_start = series_start
        self.valid_column = valid_column
        self._open: OpenKey | None = None
        self._open_key: tuple | None = None
        self._columns = list(dict.fromkeys(c for a in self.aggregates for c in a.columns))

    def feed(self, chunk: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        if len(chunk) == 0:
            return self._windows([], [], []), self._late(chunk, np.zeros(0, np.int64), [])
        chunk = chunk.reset_index(drop=True)
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
        lower = chunk[self.start].to_numpy(dtype=np.int64)
        upper = chunk[self.end].to_numpy(dtype=np.int64)
        upper = np.where(upper == lower, lower + 1, upper)
        if self.series_start:
            series_from = chunk[self.series_start].to_numpy(dtype=np.int64)[group_rows]
        else:
            series_from = lower[group_rows]
        carry = None
        released_before: list[pd.DataFrame] = []
        if self._open is not None:
            if _same_key(self._open_key, tuple(c[0] for c in key_columns)):
                carry = self._open
            else:
                released_before.append(self._release_open())
        self._open = None
        valid = {c: self.valid_column(c) for c in self._columns if self.valid_column(c) in chunk.columns}
        cols = batch_columns(chunk, self.aggregates, chunk[self.seq].to_numpy(dtype=np.int64), valid)
        result = reduce_chunk(
            self.spec, self.aggregates, lower, upper, groups, len(group_rows), cols, series_from, carry, True
        )
        self._open, self._open_key = result.held, tuple(c[-1] for c in key_columns)
        keys = [c[result.window_group] for c in key_columns]
        windows = self._windows(result.window_start, keys, result.values, result.window_end)
        late = self._late(chunk, result.late_rows, result.windows_missed)
        if released_before and len(released_before[0]):
            windows = pd.concat([*released_before, windows], ignore_index=True) if len(windows) else released_before[0]
        return windows, late

    def finish(self) -> pd.DataFrame:
        """End of the partition: release the windows of the key still open."""
        if self._open is None:
            return self._windows([], [], [])
        return self._release_open()

    def _release_open(self) -> pd.DataFrame:
        start, end, values = release_open_key(self.spec, self.aggregates, self._open)
        keys = [np.repeat(np.array([v], dtype=object), len(start)) for v in self._open_key]
        frame = self._windows(start, keys, values, end)
        self._open = self._open_key = None
        return frame

    def _windows(self, start, keys, values, end=None) -> pd.DataFrame:
        """A frame of windows; ``keys`` holds one array per key column (or is empty for no windows)."""
        data = {k: (keys[i] if keys else []) for i, k in enumerate(self.keys)}
        data["window_start"] = np.asarray(start, dtype=np.int64)
        data["window_end"] = data["window_start"] + self.spec.range if end is None else end
        if not len(values):
            values = [agg.lower_partials(agg.identity_partials(0)) for agg in self.aggregates]
        data.update(zip(self.names, values, strict=True))
        return pd.DataFrame(data)

    def _late(self, chunk: pd.DataFrame, rows: np.ndarray, missed) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "seq": chunk[self.seq].to_numpy(dtype=np.int64)[rows] if len(chunk) else rows,
                "windows_missed": np.asarray(missed, dtype=np.int64),
            }
        )


def batch_columns(
    frame: pd.DataFrame,
    aggs: Sequence[Aggregate],
    seq: np.ndarray,
    valid_columns: Mapping[str, str] | None = None,
) -> BatchColumns:
    """The columns the aggregates read, as numpy arrays with null masks.

    ``valid_columns`` maps a column to a boolean column of the frame that says which values are
    present (the Spark job sends nulls that way, values filled with 0, to keep integer dtypes).
    NaN is null (docs/SEMANTICS.md §10) even where such a column says present (Spark's NaN is not null).
    """
    columns = {}
    numeric = {c for a in aggs for c in a.numeric_columns}
    for name in dict.fromkeys(c for a in aggs for c in a.columns):
        series = frame[name]
        flagged = bool(valid_columns) and name in valid_columns
        if flagged:
            valid = frame[valid_columns[name]].to_numpy(dtype=bool)
        else:
            valid = ~series.isna().to_numpy()
        values = _numeric(series, valid) if name in numeric else series.to_numpy()
        if flagged and values.dtype.kind == "f":
            valid = valid & ~np.isnan(values)
        columns[name] = (values, valid)
    return BatchColumns(columns, seq)


def _numeric(series: pd.Series, valid: np.ndarray) -> np.ndarray:
    dtype = series.dtype
    extension = pd.api.types.is_extension_array_dtype(dtype)
    if dtype.kind == "u":  # unsigned values past 2^63 - 1 have no int64 form: refuse rather than wrap
        values = series.to_numpy(dtype=np.uint64, na_value=0) if extension else series.to_numpy()
        if len(values) and int(np.where(valid, values, 0).max()) > INT64_MAX:
            raise _out_of_range(series, int(values[valid].max()))
        return values.astype(np.int64)
    if dtype.kind in "ib":
        if extension:
            return series.to_numpy(dtype=np.int64, na_value=0)
        return series.to_numpy().astype(np.int64, copy=False)
    if dtype.kind == "f":
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna().to_numpy() & valid
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"column {series.name!r} must be numeric: row {i} holds {series.iloc[i]!r}")
    if converted.dtype.kind in "fu":  # Python ints past int64 would become floats (inexact) or wrap
        huge = [v for v in series[valid] if type(v) is int and not INT64_MIN <= v <= INT64_MAX]
        if huge:
            raise _out_of_range(series, huge[0])
    return _numeric(converted, valid)


def _out_of_range(series: pd.Series, value: int) -> ValueError:
    return ValueError(
        f"column {series.name!r} holds the integer {value}, outside the 64-bit range (±{INT64_MAX}):"
        " spanning never wraps integers; exclude or fix the value, or give the column as floating point"
    )


def key_values(series: pd.Series) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """A key column's values, exact: nullable (extension) columns keep their dtype (Int64 would become float)."""
    return series.array if pd.api.types.is_extension_array_dtype(series.dtype) else series.to_numpy()


def _same_key(a: tuple | None, b: tuple) -> bool:
    """Same key tuple; null keys (None, NaN, pd.NA) are one key, "" is not null."""
    if a is None or len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        x_null, y_null = is_null(x), is_null(y)
        if x_null or y_null:
            if not (x_null and y_null):
                return False
        elif not bool(x == y):
            return False
    return True


class SortedEngineStream(SortedStreamAggregator):
    """The same contract as ``SortedStreamAggregator``, through the per-event ``Engine`` of any technique.

    Used for techniques other than se-slicing (whose batch form is vectorised) and for point events
    through a SWAG (``swag=``): one Engine for the key
    in progress, flushed when the next key starts, so memory stays bounded by one key's open windows.
    """

    def __init__(
        self, *args, technique: str = "se-slicing", height: int = 1, swag: str | None = None, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.technique, self.height, self.swag = technique, height, swag
        self._engine = None
        self._engine_key: tuple | None = None
        self._named = dict(zip(self.names, self.aggregates, strict=True))

    def feed(self, chunk: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        from spanning.engines.engine import Engine  # the per-event path sits above this module

        chunk = chunk.reset_index(drop=True)
        starts = chunk[self.start].to_numpy(dtype=np.int64).tolist()
        ends = chunk[self.end].to_numpy(dtype=np.int64).tolist()
        seqs = chunk[self.seq].to_numpy(dtype=np.int64).tolist()
        series = chunk[self.series_start].to_numpy(dtype=np.int64).tolist() if self.series_start else None
        keys = list(zip(*(chunk[k].tolist() for k in self.keys), strict=True)) if self.keys else [()] * len(chunk)
        flags = {c: self.valid_column(c) for c in self._columns if self.valid_column(c) in chunk.columns}
        cols = batch_columns(chunk, self.aggregates, np.asarray(seqs, dtype=np.int64), flags)
        values = {c: cols.values(c) for c in self._columns}
        valid = {c: cols.valid(c) for c in self._columns}
        windows, late = [], []
        for i, key in enumerate(keys):
            if self._engine is None or not _same_key(self._engine_key, key):
                if self._engine is not None:
                    windows += [(self._engine_key, w) for w in self._engine.flush()]
                    late += [(ev.seq, ev.windows_missed) for ev in self._engine.late]
                self._engine = Engine(self.spec, self._named, self.technique, self.height,
                                      None if series is None else series[i], swag=self.swag)  # fmt: skip
                self._engine_key = key
            row = {c: (values[c][i].item() if hasattr(values[c][i], "item") else values[c][i]) if valid[c][i] else None
                   for c in self._columns}  # fmt: skip
            windows += [(key, w) for w in self._engine.insert(starts[i], ends[i], row, seq=seqs[i])]
        late += [(ev.seq, ev.windows_missed) for ev in self._engine.late] if self._engine else []
        if self._engine is not None:
            self._engine.late.clear()
        return self._engine_windows(windows), pd.DataFrame(
            {"seq": [s for s, _ in late], "windows_missed": [m for _, m in late]}, dtype=np.int64
        )

    def finish(self) -> pd.DataFrame:
        if self._engine is None:
            return self._windows([], [], [])
        windows = [(self._engine_key, w) for w in self._engine.flush()]
        self._engine = None
        return self._engine_windows(windows)

    def _engine_windows(self, windows: list) -> pd.DataFrame:
        if not windows:
            return self._windows([], [], [])
        keys = [np.array([key[i] for key, _ in windows], dtype=object) for i in range(len(self.keys))]
        start = np.array([w.start for _, w in windows], dtype=np.int64)
        values = [nullable_column(w.values[name] for _, w in windows) for name in self.names]
        return self._windows(start, keys, values, start + self.spec.range)
