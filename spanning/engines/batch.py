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

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spanning.aggregates import Aggregate, BatchColumns, Count, nullable_column, seconds_columns
from spanning.aggregates.capabilities import ResultKind
from spanning.engines.chunks import KeyedEvents, batch_columns, key_values, reduce_chunk
from spanning.engines.engine import Engine, build_aggregates, per_event_refusal
from spanning.engines.inputs import FrameEvents, read_events
from spanning.engines.keyed import KeyedBatch, KeyedDriver, PerEventKeys, SharedPlan, vectorised_path
from spanning.engines.params import EventColumns, Execution
from spanning.engines.reader import CHRONONS_PER_SECOND, chronon_timestamps
from spanning.kernels.windows import WindowSpec
from spanning.planning.height import resolve_height
from spanning.planning.specs import sharing_plan, window_labels
from spanning.techniques.registry import make_technique

__all__ = ["aggregate", "aggregate_many"]


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
    time_unit: str = "s",
    timezone: str = "UTC",
    empty_windows: str = "emit",
) -> pd.DataFrame:
    """Sliding-window aggregates of spanning events, rows taken in arrival order (per key).

    Returns one row per key and window: the key columns, ``window_start``, ``window_end``, then one
    column per aggregate in the given order. Every window of a key's series is returned, those that no
    event overlaps too (count 0, the other aggregates null), unless ``empty_windows="skip"``: then only the windows
    with a member (count above 0), as ``spanning run`` writes by default and as an explode-and-group query gives
    them. ``result.attrs["late"]`` holds the late events (their columns plus ``windows_missed``),
    ``result.attrs["rejected"]`` the rows that are no events (their columns plus ``reason``); ``attrs.pop`` them
    before ``pd.concat`` of several results, as pandas compares attrs there.

    Times are read as ``spanning run`` reads them (``spanning.engines.reader``): integer columns are
    chronons as they are; timestamps, date-time text (in ``timezone`` unless it carries a zone) and epoch
    numbers become chronons of ``time_unit`` (``"s"`` or ``"ms"``), and the window bounds come back as UTC
    timestamps when the times were timestamps or text. A row without a start or end, with a fraction of a
    chronon, ending before it starts, or whose summed column holds text that is no number is rejected with
    the command's reason; text columns of numbers are parsed (integers if all are, else floats).

    With ``technique="se-slicing"`` (default) and built-in aggregates the vectorised batch path runs;
    other techniques and user-defined aggregates run the per-event ``Engine`` and give the same results.
    ``height="auto"`` picks the se-ml-slicing height from the event sizes in ``events``
    (``spanning.planning.height``).

    Each key's window series starts with the first window ending after the start of its first row,
    or after ``series_start``: a time, or ``"earliest"`` for the key's earliest start in the data
    (what a batch job over files wants: no window before the first row is cut off).

    ``point_events=True``: each row is the point ``[start, start + 1)`` (``end`` is not read);
    ``swag="daba-lite"`` aggregates them through Pairs slices and that FIFO SWAG (per-event path);
    ``count_based=True`` makes ``range``/``slide``/``ttp`` count events: a row's time is its arrival
    number within its key, so window k holds that key's arrivals ``k*slide .. k*slide + range - 1``.
    """
    spec = WindowSpec(range, slide, ttp, offset)
    columns = EventColumns.of(start, end, key, point_events, count_based, time_unit, timezone)
    return _aggregate(events, spec, aggregates, columns, Execution(technique, height, swag), series_start,
                      _skips_empty(empty_windows))  # fmt: skip


def _skips_empty(empty_windows: str) -> bool:
    if empty_windows not in ("emit", "skip"):
        raise ValueError(f"empty_windows must be 'emit' or 'skip', got {empty_windows!r}")
    return empty_windows == "skip"


def _with_events(aggregates: Mapping[str, str | Aggregate] | None) -> tuple[dict[str, str | Aggregate], str]:
    """``aggregates`` and a count of each window's events under a name of its own, where an empty window is skipped
    and no count says which it is (the per-event path)."""
    given = dict(aggregates) if aggregates is not None else {"count": "count"}
    name = "__spanning_events__"
    while name in given:
        name += "_"
    return {**given, name: "count"}, name


def _without_empty(windows: pd.DataFrame, events: str) -> pd.DataFrame:
    """The windows whose count ``events`` is above 0, without that column (attrs kept)."""
    attrs = dict(windows.attrs)
    windows.attrs.clear()
    kept = windows[windows[events].to_numpy() > 0].drop(columns=[events]).reset_index(drop=True)
    kept.attrs.update(attrs)
    return kept


def _aggregate(
    events: Any,
    spec: WindowSpec,
    aggregates: Mapping[str, str | Aggregate] | None,
    columns: EventColumns,
    execution: Execution,
    series_start: int | str | None,
    skip_empty: bool = False,
) -> pd.DataFrame:
    names, aggs = build_aggregates(aggregates)
    if skip_empty and not vectorised_path(execution, aggs):  # the per-event path counts the windows' events
        counted, name = _with_events(aggregates)
        return _without_empty(_aggregate(events, spec, counted, columns, execution, series_start), name)
    if execution.height != "auto":
        make_technique(execution.technique, spec, aggs, execution.height)  # validates name and height early
    ev = read_events(events, aggs, columns, execution, series_start)
    frame = ev.frame
    sample = (ev.starts, ev.ends, ev.groups)  # "auto": the height measured on these events
    execution = execution.with_height(resolve_height(execution.height, execution.technique, spec, sample))

    refusal = None if vectorised_path(execution, aggs) else per_event_refusal(aggs)
    if refusal:
        raise ValueError(f"technique={execution.technique!r}{' with a swag' if execution.swag else ''} cannot"
                         f" compute {refusal}")  # fmt: skip
    if vectorised_path(execution, aggs):
        cols = batch_columns(frame, aggs, len(frame))  # arrival numbers: the row positions
        windows, late_rows, missed = _vectorised(spec, aggs, names, ev, cols, skip_empty)
    else:
        windows, late_rows, missed = _per_event(spec, dict(zip(names, aggs, strict=True)), execution, ev)

    for name, agg in zip(names, aggs, strict=True):  # object columns (arg-aggregates, per-event results) as nullable
        if windows[name].dtype == object or not len(windows):
            windows[name] = _result_column(agg, windows[name], frame)
    if "_group" in windows:  # the key columns are not in yet (``_vectorised`` puts them in where it can)
        key_rows = ev.group_rows[windows.pop("_group").to_numpy(dtype=np.int64)]
        for i, name in enumerate(ev.keys):  # key columns first, as the first row of each key holds them
            windows.insert(i, name, key_values(frame[name])[key_rows])
    if ev.timestamps:  # the bounds as the times were given: instants
        for name in ("window_start", "window_end"):
            windows[name] = chronon_timestamps(windows[name].to_numpy(np.int64), columns.time_unit).array
    for name in seconds_columns(dict(zip(names, aggs, strict=True)), columns.time_unit):  # occupancy in seconds
        windows[name] = windows[name].to_numpy(np.int64) / CHRONONS_PER_SECOND[columns.time_unit]
    late = frame.iloc[late_rows].copy()
    late["windows_missed"] = missed
    windows.attrs["late"] = late
    windows.attrs["rejected"] = ev.rejected
    return windows


def _result_column(agg: Aggregate, values: pd.Series, frame: pd.DataFrame) -> Any:
    """An aggregate's results as a nullable column (``nullable_column``: Int64 or Float64 where they are numbers). Where
    no window has a value (no window at all, or each one's result is null) the dtype is the aggregate's declared one
    (``_declared_dtype``), not the values' (objects, or floats for no value): a call's dtypes do not hang on its
    rows."""
    declared = _declared_dtype(agg, frame)
    if not len(values):
        return values if declared is None else pd.Series([], dtype=declared)
    column = nullable_column(values)
    if declared is None or declared == np.dtype(object):
        return column
    if declared == np.dtype(np.int64):  # counts are never null: int64 on every path, as the vectorised one gives them
        return np.asarray(column, dtype=np.int64)
    if column.dtype != object or any(v is not None for v in column):
        return column
    return pd.array([None] * len(column), dtype=declared)


def _declared_dtype(agg: Aggregate, frame: pd.DataFrame) -> Any:
    """The dtype of an aggregate's results by the kind it declares (``ResultKind``), that of its input column's
    values for the kinds that take it (int64 for counts, Int64 or Float64 for numbers that may be null, objects for
    sketches' bytes); None where the values decide (text, times, user-defined aggregates)."""
    kind = agg.capabilities.result
    if kind in (ResultKind.INPUT, ResultKind.RESULT_COLUMN):
        numbers = frame[agg.result_column].dtype.kind if agg.result_column in frame else None
        kind = ResultKind.INTEGER if numbers == "i" or numbers == "u" else ResultKind.FLOAT if numbers == "f" else None
    return {ResultKind.COUNT: np.dtype(np.int64), ResultKind.INTEGER: pd.Int64Dtype(),
            ResultKind.FLOAT: pd.Float64Dtype(), ResultKind.BINARY: np.dtype(object)}.get(kind)  # fmt: skip


def _vectorised(
    spec: WindowSpec, aggs: Sequence[Aggregate], names: Sequence[str], ev: FrameEvents, cols: BatchColumns,
    skip_empty: bool = False,
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    series_start = ev.starts[ev.group_rows] if ev.series_start is None else ev.series_start
    events = KeyedEvents(ev.starts, ev.ends, ev.groups, len(ev.group_rows), series_start)
    result = reduce_chunk(spec, aggs, events, cols, skip_empty=skip_empty)
    data: dict[str, Any] = {}
    if len(set(ev.keys)) == len(ev.keys) and not set(ev.keys) & {"window_start", "window_end", *names}:
        for name in ev.keys:  # key columns first, as the first row of each key holds them: one gather each
            data[name] = key_values(ev.frame[name])[ev.group_rows][result.window_group]
    else:  # names that clash: ``_aggregate`` inserts the key columns (and says so)
        data["_group"] = result.window_group
    data["window_start"] = result.window_start
    data["window_end"] = result.window_end
    seen: set[int] = set()
    for name, values in zip(names, result.values, strict=True):  # an array two columns share is copied for one
        data[name] = values.copy() if id(values) in seen else values
        seen.add(id(values))
    # no copy, no consolidation: the arrays are the chunk's own, and stacking the int64 columns into one block cost
    # 0.4 s at 9M windows (10k keys, 15m/1m)
    return pd.DataFrame(data, copy=False), result.late_rows, result.windows_missed


def _per_event(
    spec: WindowSpec, named: Mapping[str, Aggregate], execution: Execution, ev: FrameEvents
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Run the per-event Engine, one per key (the keyed driver), over each key's rows in arrival order."""
    frame, names = ev.frame, list(named)
    columns = list(dict.fromkeys(c for a in named.values() for c in a.columns))
    rows = frame[columns].to_dict("records") if columns else [None] * len(frame)
    technique, height, swag = execution.technique, execution.height, execution.swag
    driver = KeyedDriver(PerEventKeys(lambda series: Engine(spec, named, technique, height, series, swag=swag)))
    _, result = driver.feed(KeyedBatch.in_key_order(ev.groups, ev.starts, ev.ends, rows, ev.series_start))
    released, late_events = result or ([], [])
    released += driver.finish() or []
    records = [(g, w.start, w.end, *w.values.values()) for g, w in released]
    late = [(le.seq, le.windows_missed) for le in late_events]
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


def aggregate_many(
    events: pd.DataFrame | Any,
    windows: Sequence[WindowSpec],
    aggregates: Mapping[str, str | Aggregate] | None = None,
    *,
    sharing: str = "all",
    **options: Any,
) -> pd.DataFrame:
    """``aggregate`` for several window specs over the same events, rows tagged in a ``window`` column.

    ``options`` are ``aggregate``'s keywords after ``aggregates`` (``start``, ``end``, ``key``, ``technique``,
    ``height``, ``series_start``, ``point_events``, ``swag``, ``count_based``, ``empty_windows``), with the same
    defaults.
    With the vectorised path (se-slicing, built-in aggregates) each spec runs on its own (a batch has
    nothing to share). Otherwise the specs run in one pass per ``sharing`` group on a
    ``spanning.engines.multi_window.MultiEngine`` (one slice sequence, or one SWAG with range queries):
    ``"all"`` (one group), ``"none"``, or ``"weaveshare"`` (the optimizer of Shein and Chrysanthis, §3.1.1).
    ``attrs["late"]`` has the late events with their ``window`` and ``windows_missed``.
    """
    unknown = [name for name in options if name not in _OPTIONS]
    if unknown:
        raise TypeError(f"aggregate_many() got an unexpected keyword argument {unknown[0]!r}")
    given = {**_OPTIONS, **options}
    columns = EventColumns.of(given["start"], given["end"], given["key"], given["point_events"], given["count_based"],
                              given["time_unit"], given["timezone"])  # fmt: skip
    execution = Execution(given["technique"], given["height"], given["swag"], sharing)
    series_start = given["series_start"]
    specs = list(windows)
    if not specs or not all(isinstance(s, WindowSpec) for s in specs):
        raise ValueError("windows must be a non-empty list of WindowSpec")
    labels = window_labels(specs)
    names, aggs = build_aggregates(aggregates)
    skip_empty = _skips_empty(given["empty_windows"])
    if skip_empty and not (len(specs) == 1 or vectorised_path(execution, aggs)):  # the MultiEngine counts them
        given["empty_windows"] = "emit"
        counted, name = _with_events(aggregates)
        return _without_empty(aggregate_many(events, specs, counted, sharing=sharing, **{
            option: given[option] for option in _OPTIONS}), name)
    keys = list(columns.keys)
    if len(specs) == 1 or vectorised_path(execution, aggs):
        parts, late_parts = [], []
        for spec, label in zip(specs, labels, strict=True):
            out = _aggregate(events, spec, aggregates, columns, execution, series_start, skip_empty)
            rejected = out.attrs.pop("rejected")  # the same rows for every spec
            late = out.attrs.pop("late")
            out.insert(len(keys), "window", label)
            parts.append(out)
            late_parts.append(late.assign(window=label))
        result = pd.concat(parts, ignore_index=True)
        result.attrs["late"] = pd.concat(late_parts)
        result.attrs["rejected"] = rejected
        return result
    # per-event path: per key (the keyed driver), one MultiEngine per sharing group, rows in arrival order
    ev = read_events(events, aggs, columns, execution, series_start)
    frame = ev.frame
    plan = sharing_plan(specs, sharing, execution.swag)
    driver = KeyedDriver(PerEventKeys(lambda series: SharedPlan(specs, plan, aggregates, execution, series)))
    batch = KeyedBatch.in_key_order(ev.groups, ev.starts, ev.ends, frame.to_dict("records"), ev.series_start)
    _, result = driver.feed(batch)
    released, late_events = result or ([], [])
    released += driver.finish() or []
    records = [(g, m, w.start, w.end, *w.values.values()) for g, (m, w) in released]
    late_records = [(le.seq, labels[m], le.windows_missed) for m, le in late_events]
    records.sort(key=lambda r: (r[0], r[1], r[2]))
    data = {k: [frame[k].iloc[ev.group_rows[r[0]]] for r in records] for k in keys}
    data["window"] = [labels[r[1]] for r in records]
    data["window_start"] = np.array([r[2] for r in records], dtype=np.int64)
    data["window_end"] = np.array([r[3] for r in records], dtype=np.int64)
    for n, name in enumerate(names):
        data[name] = nullable_column(r[4 + n] for r in records)
    result = pd.DataFrame(data).astype({n: np.int64 for n, a in zip(names, aggs, strict=True) if isinstance(a, Count)})
    if ev.timestamps:
        for name in ("window_start", "window_end"):
            result[name] = chronon_timestamps(result[name].to_numpy(np.int64), columns.time_unit).array
    late_records.sort()
    late = frame.iloc[[r[0] for r in late_records]].copy()
    late["window"] = [r[1] for r in late_records]
    late["windows_missed"] = [r[2] for r in late_records]
    result.attrs["late"] = late
    result.attrs["rejected"] = ev.rejected
    return result


#: ``aggregate``'s keywords after ``aggregates``, with their defaults: what ``aggregate_many`` also takes
_OPTIONS = {
    name: parameter.default
    for name, parameter in inspect.signature(aggregate).parameters.items()
    if name not in ("events", "range", "slide", "ttp", "offset", "aggregates")
}
