"""``aggregate``: the batch entry point over a pandas DataFrame or an Arrow table.

The batch form of SE-Slicing. For a fixed set of events, Σ φ over a window's slices plus ϕ of its
last slice is the aggregate over the events that overlap the window (§3.2.2); the TTP adds one
condition, that the window was still open when the event arrived. Both conditions make, for each
event, a contiguous run of window numbers:

    first(e) = max(first window ending after ℓ(e),  first window open at τ(e),  series start)
    last(e)  = last window starting before u(e)

where τ(e) is the clock when e arrives (the running max of ends, e included). Each aggregate then
reduces those runs with array kernels (``spanning.ranges``): no Python loop per event or window.
Events whose run begins after the first window they overlap are late, with
``windows_missed = first(e) - first window ending after ℓ(e)`` (capped at the windows they overlap).

>>> import pandas as pd
>>> calls = pd.DataFrame({"start": [16, 1, 30], "end": [34, 9, 31], "bytes": [10, 5, None]})
>>> out = aggregate(calls, range=15, slide=5, ttp=20, aggregates={"n": "count", "bytes": "sum:bytes"})
>>> out
   window_start  window_end  n  bytes
0             5          20  2   15.0
1            10          25  1   10.0
2            15          30  1   10.0
3            20          35  2   10.0
4            25          40  2   10.0
5            30          45  2   10.0

The series starts at the first window ending after 16, the first event's start, so the call
``[1, 9)``, arriving second, counts in ``[5, 20)`` and misses the three windows before it:

>>> out.attrs["late"]
   start  end  bytes  windows_missed
1      1    9    5.0               3
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spanning.aggregates import Aggregate, BatchColumns, Count
from spanning.engine import Engine, build_aggregates
from spanning.registry import make_technique
from spanning.windows import WindowSpec, as_chronon

__all__ = ["aggregate", "window_runs"]

VECTORISED_TECHNIQUE = "se-slicing"


def aggregate(
    events: pd.DataFrame | Any,
    range: int,  # noqa: A002 - the public name of ω
    slide: int,
    ttp: int = 0,
    offset: int = 0,
    aggregates: Mapping[str, str | Aggregate] | None = None,
    start: str = "start",
    end: str = "end",
    key: str | Sequence[str] | None = None,
    technique: str = "se-slicing",
    height: int = 1,
    series_start: int | None = None,
) -> pd.DataFrame:
    """Sliding-window aggregates of spanning events, rows taken in arrival order (per key).

    Returns one row per key and window: the key columns, ``window_start``, ``window_end``, then one
    column per aggregate in the given order. ``result.attrs["late"]`` holds the late events (their
    columns plus ``windows_missed``). With ``technique="se-slicing"`` (default) and built-in
    aggregates the vectorised batch path runs; other techniques and user-defined aggregates run the
    per-event ``Engine`` and give the same results.
    """
    spec = WindowSpec(range, slide, ttp, offset)
    names, aggs = build_aggregates(aggregates)
    make_technique(technique, spec, aggs, height)  # validates name and height early
    frame = _as_frame(events)
    keys = [key] if isinstance(key, str) else list(key or [])
    needed = [start, end, *keys, *(c for a in aggs for c in a.columns)]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"unknown column {missing[0]!r}: the columns are {', '.join(map(str, frame.columns))}"
        )
    lower = _times(frame[start], "start")
    upper = _times(frame[end], "end")
    bad = np.flatnonzero(upper < lower)
    if len(bad):
        i = bad[0]
        raise ValueError(
            f"row {i}: event end {upper[i]} is before its start {lower[i]} ({len(bad)} such rows)"
        )
    upper = np.where(upper == lower, lower + 1, upper)  # point events [l, l + 1)
    groups, group_rows = _group_codes(frame, keys)
    start_time = None if series_start is None else as_chronon(series_start, "series start")

    if technique == VECTORISED_TECHNIQUE and all(a.vectorised for a in aggs):
        cols = _batch_columns(frame, aggs)
        windows, late_rows, missed = _vectorised(
            spec, aggs, names, lower, upper, groups, group_rows, cols, start_time
        )
    else:
        windows, late_rows, missed = _per_event(
            spec, aggs, names, technique, height, frame, lower, upper, groups, start_time
        )

    for name in names:  # object columns (arg-aggregates, per-event results) as nullable dtypes
        if windows[name].dtype == object:
            windows[name] = windows[name].convert_dtypes(convert_string=False, convert_boolean=False)
    key_rows = group_rows[windows.pop("_group").to_numpy(dtype=np.int64)]
    for i, name in enumerate(keys):  # key columns first, as the first row of each key holds them
        windows.insert(i, name, frame[name].to_numpy()[key_rows])
    late = frame.iloc[late_rows].copy()
    late["windows_missed"] = missed
    windows.attrs["late"] = late
    return windows


def window_runs(spec: WindowSpec, lower: np.ndarray, upper: np.ndarray, clock: np.ndarray) -> tuple:
    """First window each event overlaps, first window still open at its arrival, last window it overlaps."""
    s, o = spec.slide, spec.offset
    overlap_first = (lower - o - spec.range) // s + 1
    open_first = -((o + spec.range + spec.ttp - clock) // s)
    overlap_last = (upper - o - 1) // s
    return overlap_first, open_first, overlap_last


def _vectorised(spec, aggs, names, lower, upper, groups, group_rows, cols, start_time):
    n_groups = len(group_rows)
    clock = _running_max(upper, groups, n_groups)
    final_clock = np.full(n_groups, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(final_clock, groups, upper)
    series_from = lower[group_rows] if start_time is None else np.full(n_groups, start_time)
    k0 = (series_from - spec.offset - spec.range) // spec.slide + 1
    k_last = (final_clock - spec.offset - 1) // spec.slide  # windows starting before the final clock
    n_windows = np.maximum(k_last - k0 + 1, 0)
    base = np.cumsum(n_windows) - n_windows  # where each key's windows begin in the output

    overlap_first, open_first, overlap_last = window_runs(spec, lower, upper, clock)
    k0_e = k0[groups]
    first = np.maximum(np.maximum(overlap_first, open_first), k0_e)
    missed = np.clip(np.minimum(overlap_last + 1, first) - overlap_first, 0, None)
    active = first <= overlap_last
    shift = (base - k0)[groups]
    run_first, run_last = (first + shift)[active], (overlap_last + shift)[active]

    total = int(n_windows.sum())
    active_cols = cols if active.all() else cols.subset(np.flatnonzero(active))
    data: dict[str, Any] = {}
    group_of_window = np.repeat(np.arange(n_groups), n_windows)
    k = np.arange(total) - base[group_of_window] + k0[group_of_window]
    data["_group"] = group_of_window
    data["window_start"] = k * spec.slide + spec.offset
    data["window_end"] = data["window_start"] + spec.range
    for name, agg in zip(names, aggs, strict=True):
        data[name] = agg.lower_partials(agg.window_partials(active_cols, run_first, run_last, total))
    late_rows = np.flatnonzero(missed > 0)
    return pd.DataFrame(data), late_rows, missed[late_rows]


def _per_event(spec, aggs, names, technique, height, frame, lower, upper, groups, start_time):
    """Run the per-event Engine, one per key, over the rows in arrival order."""
    named = dict(zip(names, aggs, strict=True))
    columns = list(dict.fromkeys(c for a in aggs for c in a.columns))
    rows = frame[columns].to_dict("records") if columns else [None] * len(frame)
    engines: dict[int, Engine] = {}
    released: dict[int, list] = {}
    for i in np.arange(len(frame)):
        g = int(groups[i])
        engine = engines.get(g)
        if engine is None:
            engine = engines[g] = Engine(spec, named, technique, height, start_time)
            released[g] = []
        released[g] += engine.insert(int(lower[i]), int(upper[i]), rows[i], seq=int(i))
    records, late = [], []
    for g in sorted(engines):
        released[g] += engines[g].flush()
        records += [(g, w.start, w.end, *w.values.values()) for w in released[g]]
        late += [(ev.seq, ev.windows_missed) for ev in engines[g].late]
    windows = pd.DataFrame.from_records(records, columns=["_group", "window_start", "window_end", *names])
    windows = windows.astype({"window_start": np.int64, "window_end": np.int64}).astype(
        {name: np.int64 for name, agg in named.items() if isinstance(agg, Count)}
    )
    late.sort()
    late_rows = np.array([r for r, _ in late], dtype=np.int64)
    return windows, late_rows, np.array([m for _, m in late], dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# input handling


def _as_frame(events: Any) -> pd.DataFrame:
    if isinstance(events, pd.DataFrame):
        if isinstance(events.index, pd.RangeIndex) and events.index.start == 0 and events.index.step == 1:
            return events  # row labels are already positions: no copy
        return events.reset_index(drop=True)
    to_pandas = getattr(events, "to_pandas", None)  # pyarrow.Table / RecordBatch
    if callable(to_pandas):
        return to_pandas()
    raise ValueError(f"events must be a pandas DataFrame or a pyarrow Table, got {type(events).__name__}")


def _times(series: pd.Series, what: str) -> np.ndarray:
    """A time column as int64 chronons, with a clear error for nulls and non-integers."""
    nulls = series.isna().to_numpy()
    if nulls.any():
        raise ValueError(f"{what} column {series.name!r} has a null at row {int(np.argmax(nulls))}")
    kind = series.dtype.kind
    if kind in "iu":
        return series.to_numpy(dtype=np.int64)
    if kind == "f":
        values = series.to_numpy(dtype=np.float64)
        fractional = values != np.floor(values)
        if fractional.any():
            i = int(np.argmax(fractional))
            raise ValueError(f"{what} column {series.name!r} has a non-integer time {values[i]} at row {i}")
        return values.astype(np.int64)
    if pd.api.types.is_extension_array_dtype(series.dtype) and series.dtype.kind in "iu":
        return series.to_numpy(dtype=np.int64)
    raise ValueError(
        f"{what} column {series.name!r} must hold integer chronons, not {series.dtype}"
        " (convert timestamps to integers first, e.g. epoch seconds)"
    )


def _group_codes(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Key codes in order of first appearance, and the row where each key first appears."""
    if not keys:
        return np.zeros(len(frame), dtype=np.int64), np.zeros(1 if len(frame) else 0, dtype=np.int64)
    codes = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy().astype(np.int64)
    _, first_rows = np.unique(codes, return_index=True)
    return codes, first_rows


def _running_max(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """The clock at each arrival: running max of ends within each key."""
    if len(values) == 0 or (len(values) > 1 and bool(np.all(values[1:] >= values[:-1]))):
        return values  # already in end order: the clock is the event's own end
    if n_groups == 1:
        return np.maximum.accumulate(values)
    return pd.Series(values).groupby(groups).cummax().to_numpy()


def _batch_columns(frame: pd.DataFrame, aggs: list[Aggregate]) -> BatchColumns:
    columns = {}
    numeric = {c for a in aggs for c in a.numeric_columns}
    for name in dict.fromkeys(c for a in aggs for c in a.columns):
        series = frame[name]
        valid = ~series.isna().to_numpy()
        if name in numeric:
            values = _numeric(series, valid)
        else:
            values = series.to_numpy()
        columns[name] = (values, valid)
    return BatchColumns(columns, np.arange(len(frame), dtype=np.int64))


def _numeric(series: pd.Series, valid: np.ndarray) -> np.ndarray:
    dtype = series.dtype
    if dtype.kind in "iub":
        if pd.api.types.is_extension_array_dtype(dtype):
            return series.to_numpy(dtype=np.int64, na_value=0)
        return series.to_numpy().astype(np.int64)
    if dtype.kind == "f":
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna().to_numpy() & valid
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"column {series.name!r} must be numeric: row {i} holds {series.iloc[i]!r}")
    return _numeric(converted, valid)
