"""``aggregate``: the batch entry point over a pandas DataFrame or an Arrow table.

The batch form of SE-Slicing. For a fixed set of events, Σ φ over a window's slices plus ϕ of its
last slice is the aggregate over the events that overlap the window (Suzanne et al., §3.2.2); the TTP adds one
condition, that the window was still open when the event arrived. Both conditions make, for each
event, a contiguous run of window numbers:

    first(e) = max(first window ending after ℓ(e),  first window open at τ(e),  series start)
    last(e)  = last window starting before u(e)

where τ(e) is the clock when e arrives (the running max of ends, e included). Each aggregate then
reduces those runs with array kernels (``spanning.kernels.ranges``): no Python loop per event or window.
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
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from spanning.aggregates import Aggregate, Count, nullable_column
from spanning.engines.chunks import batch_columns, key_values, reduce_chunk
from spanning.engines.engine import Engine, build_aggregates
from spanning.kernels.windows import WindowSpec, as_chronon
from spanning.planning.height import resolve_height
from spanning.planning.specs import sharing_plan, window_labels
from spanning.techniques.registry import make_technique

__all__ = ["aggregate", "aggregate_many"]

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
    height: int | str = 1,
    series_start: int | str | None = None,
    point_events: bool = False,
    swag: str | None = None,
    count_based: bool = False,
) -> pd.DataFrame:
    """Sliding-window aggregates of spanning events, rows taken in arrival order (per key).

    Returns one row per key and window: the key columns, ``window_start``, ``window_end``, then one
    column per aggregate in the given order. ``result.attrs["late"]`` holds the late events (their
    columns plus ``windows_missed``; ``attrs.pop("late")`` it before ``pd.concat`` of several results,
    as pandas compares attrs there). With ``technique="se-slicing"`` (default) and built-in
    aggregates the vectorised batch path runs; other techniques and user-defined aggregates run the
    per-event ``Engine`` and give the same results. ``height="auto"`` picks the se-ml-slicing height
    from the event sizes in ``events`` (``spanning.planning.height``).

    Each key's window series starts with the first window ending after the start of its first row,
    or after ``series_start``: a time, or ``"earliest"`` for the key's earliest start in the data
    (what a batch job over files wants: no window before the first row is cut off).

    ``point_events=True``: each row is the point ``[start, start + 1)`` (``end`` is not read);
    ``swag="daba-lite"`` aggregates them through Pairs slices and that FIFO SWAG (per-event path);
    ``count_based=True`` makes ``range``/``slide``/``ttp`` count events: a row's time is its arrival
    number within its key, so window k holds that key's arrivals ``k*slide .. k*slide + range - 1``.
    """
    spec = WindowSpec(range, slide, ttp, offset)
    names, aggs = build_aggregates(aggregates)
    if height != "auto":
        make_technique(technique, spec, aggs, height)  # validates name and height early
    ev = _read_events(events, aggs, start, end, key, series_start, point_events, swag, count_based)
    frame, keys, groups, group_rows = ev.frame, ev.keys, ev.groups, ev.group_rows
    lower, upper, start_time = ev.lower, ev.upper, ev.series_from
    height = resolve_height(height, technique, spec, (lower, upper, groups))  # "auto": measured on these events

    if technique == VECTORISED_TECHNIQUE and swag is None and all(a.vectorised for a in aggs):
        cols = batch_columns(frame, aggs, np.arange(len(frame), dtype=np.int64))
        windows, late_rows, missed = _vectorised(spec, aggs, names, lower, upper, groups, group_rows, cols, start_time)
    else:
        windows, late_rows, missed = _per_event(
            spec, aggs, names, technique, height, frame, lower, upper, groups, start_time, swag
        )

    for name in names:  # object columns (arg-aggregates, per-event results) as nullable dtypes
        if windows[name].dtype == object:
            windows[name] = nullable_column(windows[name])
    key_rows = group_rows[windows.pop("_group").to_numpy(dtype=np.int64)]
    for i, name in enumerate(keys):  # key columns first, as the first row of each key holds them
        windows.insert(i, name, key_values(frame[name])[key_rows])
    late = frame.iloc[late_rows].copy()
    late["windows_missed"] = missed
    windows.attrs["late"] = late
    return windows


class _Events(NamedTuple):
    """The input rows as the engines take them."""

    frame: pd.DataFrame
    keys: list[str]
    groups: np.ndarray  # key code of each row, in order of first appearance
    group_rows: np.ndarray  # row where each key first appears
    lower: np.ndarray  # event starts, chronons
    upper: np.ndarray  # event ends, point events made [l, l + 1)
    series_from: np.ndarray | None  # per key: the explicit series start, or None (each key's first row)


def _read_events(events, aggs, start, end, key, series_start, point_events, swag, count_based) -> _Events:
    """Check the columns and the times, and turn the rows into events (with a clear error for bad input)."""
    frame = _as_frame(events)
    keys = [key] if isinstance(key, str) else list(key or [])
    if count_based and not point_events:
        raise ValueError("count_based=True counts point events: give point_events=True too")
    if swag is not None and not point_events:
        raise ValueError("swag= aggregates point events: give point_events=True too")
    needed = [start, *([] if point_events else [end]), *keys, *(c for a in aggs for c in a.columns)]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(f"unknown column {missing[0]!r}: the columns are {', '.join(map(str, frame.columns))}")
    groups, group_rows = _group_codes(frame, keys)
    if count_based:  # time = arrival number within the key
        lower = pd.Series(np.zeros(len(frame), dtype=np.int64)).groupby(groups).cumcount().to_numpy(np.int64)
    else:
        lower = _times(frame[start], "start")
    upper = lower.copy() if point_events else _times(frame[end], "end")
    bad = np.flatnonzero(upper < lower)
    if len(bad):
        i = bad[0]
        raise ValueError(f"row {i}: event end {upper[i]} is before its start {lower[i]} ({len(bad)} such rows)")
    upper = np.where(upper == lower, lower + 1, upper)  # point events [l, l + 1)
    if series_start == "earliest":  # per key, the earliest start in the data: no window is cut off
        series_from = np.full(len(group_rows), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(series_from, groups, lower)
    elif series_start is None:
        series_from = None
    else:
        series_from = np.full(len(group_rows), as_chronon(series_start, "series start"), dtype=np.int64)
    return _Events(frame, keys, groups, group_rows, lower, upper, series_from)


def _vectorised(spec, aggs, names, lower, upper, groups, group_rows, cols, start_time):
    n_groups = len(group_rows)
    series_from = lower[group_rows] if start_time is None else start_time
    result = reduce_chunk(spec, aggs, lower, upper, groups, n_groups, cols, series_from)
    data: dict[str, Any] = {
        "_group": result.window_group,
        "window_start": result.window_start,
        "window_end": result.window_end,
    }
    data.update(zip(names, result.values, strict=True))
    return pd.DataFrame(data), result.late_rows, result.windows_missed


def _per_event(spec, aggs, names, technique, height, frame, lower, upper, groups, start_time, swag=None):
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
            series = None if start_time is None else int(start_time[g])
            engine = engines[g] = Engine(spec, named, technique, height, series, swag=swag)
            released[g] = []
        released[g] += engine.insert(int(lower[i]), int(upper[i]), rows[i], seq=int(i))
    records, late = [], []
    for g in sorted(engines):
        released[g] += engines[g].flush()
        records += [(g, w.start, w.end, *w.values.values()) for w in released[g]]
        late += [(ev.seq, ev.windows_missed) for ev in engines[g].late]
    columns = list(zip(*records, strict=True)) if records else [()] * (3 + len(names))
    windows = pd.DataFrame(
        {
            "_group": np.array(columns[0], dtype=np.int64),
            "window_start": np.array(columns[1], dtype=np.int64),
            "window_end": np.array(columns[2], dtype=np.int64),
            **{
                name: np.array(col, dtype=np.int64 if isinstance(named[name], Count) else object)
                for name, col in zip(names, columns[3:], strict=True)
            },
        }
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
    """Key codes in order of first appearance, and the row where each key first appears.

    Null keys (None, NaN, pandas NA, in any mix) form one ordinary group; "" is a key like any other.
    """
    n = len(frame)
    if not keys:
        return np.zeros(n, dtype=np.int64), np.zeros(1 if n else 0, dtype=np.int64)
    if len(keys) == 1 and n:
        runs = _key_runs(frame[keys[0]])
        if runs is not None:
            return runs
    grouped = frame.groupby(keys, sort=False, dropna=False, observed=True)  # dropna=False: nulls are one group
    codes = grouped.ngroup().to_numpy().astype(np.int64)
    _, first_rows = np.unique(codes, return_index=True)
    return codes, first_rows


def _key_runs(series: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """Codes of a key column whose rows are grouped by key (None if some key has two runs).

    Sorted input, as the Spark job and batch files have it: number the runs, a neighbour comparison
    instead of hashing every key (4x faster on 1M string keys). Nulls need care: pd.NA has no truth
    value, NaN != NaN, and a masked (Int64, boolean) column's nulls are read as 0, so nulls are found
    through the mask, or, for the cost of the run heads only, with ``pd.isna`` on them.
    """
    n = len(series)
    dtype = series.dtype
    null = None
    if pd.api.types.is_extension_array_dtype(dtype) and dtype.kind in "iufb":  # exact numbers, no float detour
        null = series.isna().to_numpy()  # the column's mask
        values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=False if dtype.kind == "b" else 0)
    else:
        values = series.to_numpy()
    change = np.empty(n, dtype=bool)
    change[0] = True
    try:
        change[1:] = values[1:] != values[:-1]
    except TypeError:  # "boolean value of NA is ambiguous": set the nulls aside, compare the rest
        null = series.isna().to_numpy()
        values = values.copy()
        values[null] = None
        change[1:] = values[1:] != values[:-1]
    if null is not None:  # a null run ends where a non-null starts, and the other way round
        change[1:] = np.where(null[1:] | null[:-1], null[1:] != null[:-1], change[1:])
        starts = np.flatnonzero(change)
        null_heads = null[starts]
    else:  # NaN (and None next to NaN) start a run at each row: adjacent null runs are one key
        starts = np.flatnonzero(change)
        null_heads = pd.isna(values[starts])
        if null_heads.any():
            change[starts[1:][null_heads[1:] & null_heads[:-1]]] = False
            starts = np.flatnonzero(change)
            null_heads = pd.isna(values[starts])
    null_runs = int(null_heads.sum())
    if null_runs > 1 or len(pd.unique(values[starts][~null_heads])) + null_runs != len(starts):
        return None  # some key in two runs: hash them all
    return np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, n))), starts


def aggregate_many(
    events: pd.DataFrame | Any,
    windows: Sequence[WindowSpec],
    aggregates: Mapping[str, str | Aggregate] | None = None,
    start: str = "start",
    end: str = "end",
    key: str | Sequence[str] | None = None,
    technique: str = "se-slicing",
    height: int | str = 1,
    series_start: int | str | None = None,
    point_events: bool = False,
    swag: str | None = None,
    count_based: bool = False,
    sharing: str = "all",
) -> pd.DataFrame:
    """``aggregate`` for several window specs over the same events, rows tagged in a ``window`` column.

    With the vectorised path (se-slicing, built-in aggregates) each spec runs on its own (a batch has
    nothing to share). Otherwise the specs run in one pass per ``sharing`` group on a
    ``spanning.engines.multi_window.MultiEngine`` (one slice sequence, or one SWAG with range queries):
    ``"all"`` (one group), ``"none"``, or ``"weaveshare"`` (the optimizer of Shein and Chrysanthis, §3.1.1).
    ``attrs["late"]`` has the late events with their ``window`` and ``windows_missed``.
    """
    specs = list(windows)
    if not specs or not all(isinstance(s, WindowSpec) for s in specs):
        raise ValueError("windows must be a non-empty list of WindowSpec")
    labels = window_labels(specs)
    common = dict(aggregates=aggregates, start=start, end=end, key=key, technique=technique, height=height,
                  series_start=series_start, point_events=point_events, swag=swag, count_based=count_based)  # fmt: skip
    names, aggs = build_aggregates(aggregates)
    keys = [key] if isinstance(key, str) else list(key or [])
    if len(specs) == 1 or (technique == VECTORISED_TECHNIQUE and swag is None and all(a.vectorised for a in aggs)):
        parts, late_parts = [], []
        for spec, label in zip(specs, labels, strict=True):
            out = aggregate(events, spec.range, spec.slide, spec.ttp, spec.offset, **common)
            late = out.attrs.pop("late")
            out.insert(len(keys), "window", label)
            parts.append(out)
            late_parts.append(late.assign(window=label))
        result = pd.concat(parts, ignore_index=True)
        result.attrs["late"] = pd.concat(late_parts)
        return result
    # per-event path: one MultiEngine per key and sharing group, fed the rows in arrival order
    ev = _read_events(events, aggs, start, end, key, series_start, point_events, swag, count_based)
    frame, groups = ev.frame, ev.groups
    frame_rows = frame.to_dict("records")
    from spanning.engines.multi_window import MultiEngine

    plan = sharing_plan(specs, sharing, swag)
    engines: dict = {}
    records, late_records = [], []
    for i in range(len(frame)):
        g = int(groups[i])
        for p, members in enumerate(plan):
            eng = engines.get((g, p))
            if eng is None:
                series = None if ev.series_from is None else int(ev.series_from[g])
                eng = engines[(g, p)] = MultiEngine([specs[m] for m in members], aggregates, technique, height,
                                                    series, swag=swag)  # fmt: skip
            for j, w in eng.insert(int(ev.lower[i]), int(ev.upper[i]), frame_rows[i], seq=i):
                records.append((g, members[j], w.start, w.end, *w.values.values()))
    for (g, p), eng in engines.items():
        members = plan[p]
        records += [(g, members[j], w.start, w.end, *w.values.values()) for j, w in eng.flush()]
        late_records += [(ev.seq, labels[members[j]], ev.windows_missed) for j, ev in eng.late]
    records.sort(key=lambda r: (r[0], r[1], r[2]))
    data = {k: [frame[k].iloc[ev.group_rows[r[0]]] for r in records] for k in keys}
    data["window"] = [labels[r[1]] for r in records]
    data["window_start"] = np.array([r[2] for r in records], dtype=np.int64)
    data["window_end"] = np.array([r[3] for r in records], dtype=np.int64)
    for n, name in enumerate(names):
        data[name] = nullable_column(r[4 + n] for r in records)
    result = pd.DataFrame(data).astype({n: np.int64 for n, a in zip(names, aggs, strict=True) if isinstance(a, Count)})
    late_records.sort()
    late = frame.iloc[[r[0] for r in late_records]].copy()
    late["window"] = [r[1] for r in late_records]
    late["windows_missed"] = [r[2] for r in late_records]
    result.attrs["late"] = late
    return result
