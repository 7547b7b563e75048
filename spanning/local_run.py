"""``spanning run --engine local``: the same query through ``spanning.aggregate``, without a JVM.

For files that fit in memory. ``--start``/``--end``/``--duration``/``--key`` must be column names
here (Spark SQL expressions need ``--engine spark``); validation and outputs match the Spark engine.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from spanning.batch import aggregate, aggregate_many
from spanning.jobspec import CHRONON_MS, EVENTS_COLUMN, INPUT_FORMATS, REASONS, RunConfig, UsageError
from spanning.outputs import finish_output, output_folder


def _files(paths: list[str]) -> list[str]:
    files = []
    for path in paths:
        matches = sorted(glob.glob(path))
        if not matches:
            raise UsageError(f"input not found: {path}")
        for match in matches:
            if os.path.isdir(match):
                files += sorted(
                    f for f in glob.glob(os.path.join(match, "*")) if not os.path.basename(f).startswith(("_", "."))
                )
            else:
                files.append(match)
    return files


def read_local(paths: list[str], given_format: str | None) -> pd.DataFrame:
    files = _files(paths)
    frames = []
    for path in files:
        fmt = given_format or INPUT_FORMATS.get(os.path.splitext(path)[1].lower())
        if fmt is None:
            raise UsageError(f"cannot tell the input format of {path!r}: give --input-format csv|parquet|json")
        if fmt == "csv":
            # like Spark's CSV reader: only empty fields are null ("n/a" is text), integers stay integers
            frame = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype_backend="numpy_nullable")
            frame.columns = [c.strip() for c in frame.columns]
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_json(path, lines=True)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _column(frame: pd.DataFrame, text: str, what: str) -> pd.Series:
    if text not in frame.columns:
        raise UsageError(
            f"--{what} {text!r} is not a column ({', '.join(map(str, frame.columns))});"
            " --engine local takes column names, --engine spark also takes Spark SQL expressions"
        )
    return frame[text]


def chronons(series: pd.Series, unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(values, present, fractional, was-a-timestamp) of a time column: timestamps, date-time text or numbers."""
    stamps = None
    if pd.api.types.is_datetime64_any_dtype(series):
        stamps = series
    elif pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series):
        parsed = pd.to_datetime(series, errors="coerce", format="mixed")
        if parsed.notna().any():  # date-time text; otherwise numbers written as text
            stamps = parsed
    if stamps is not None:
        present = stamps.notna().to_numpy()
        nanos = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)
        values = np.where(present, nanos // (1_000_000 * CHRONON_MS[unit]), 0)
        return values, present, np.zeros(len(series), dtype=bool), True
    numbers = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    present = ~np.isnan(numbers)
    safe = np.where(present, numbers, 0)
    return np.floor(safe).astype(np.int64), present, present & (safe != np.floor(safe)), False


def run_local(cfg: RunConfig, verbose: bool = False) -> dict:
    began = time.perf_counter()
    with output_folder(cfg) as output:
        return _run(cfg, output, began)


def _event_bounds(frame: pd.DataFrame, cfg: RunConfig) -> tuple:
    """(start, start present, end, end present, fractional, start was a timestamp) of every row."""
    start, start_ok, start_frac, is_ts = chronons(_column(frame, cfg.start, "start"), cfg.time_unit)
    if cfg.point_events:
        end, end_ok, end_frac = start, start_ok, np.zeros(len(frame), dtype=bool)
    elif cfg.duration is not None:
        length = pd.to_numeric(_column(frame, cfg.duration, "duration"), errors="coerce").to_numpy(dtype=np.float64)
        end_ok = ~np.isnan(length)
        length = np.where(end_ok, length, 0)
        end, end_frac = start + np.floor(length).astype(np.int64), length != np.floor(length)
    else:
        end, end_ok, end_frac, end_ts = chronons(_column(frame, cfg.end, "end"), cfg.time_unit)
        if end_ts != is_ts:
            raise UsageError("--start and --end must both be timestamps or both be numbers")
    return start, start_ok, end, end_ok, start_frac | end_frac, is_ts


def event_times(cfg: RunConfig) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the usable events of the inputs (for tune-height)."""
    start, start_ok, end, end_ok, fractional, _ = _event_bounds(read_local(cfg.inputs, cfg.input_format), cfg)
    usable = start_ok & end_ok & ~fractional & (end >= start)
    return start[usable], end[usable]


def _run(cfg: RunConfig, output: Path, began: float) -> dict:
    frame = read_local(cfg.inputs, cfg.input_format)
    n = len(frame)
    start, start_ok, end, end_ok, fractional, is_ts = _event_bounds(frame, cfg)
    keys = [_column(frame, k, "key").name for k in cfg.keys]

    reason = np.full(n, None, dtype=object)
    checks = [
        (~start_ok, REASONS["start"]),
        (~end_ok, REASONS["duration"] if cfg.duration is not None else REASONS["end"]),
        (fractional, REASONS["fraction"]),
        (end < start, REASONS["order"]),
    ]
    values = {}
    for name in cfg.value_columns:
        column = _column(frame, name, "agg")
        if name in cfg.numeric_columns:
            converted = pd.to_numeric(column, errors="coerce")
            if not pd.api.types.is_integer_dtype(column):  # text columns are read as doubles, as in Spark
                converted = converted.astype("Float64")
            checks.append(
                (column.notna().to_numpy() & converted.isna().to_numpy(), REASONS["value"].format(column=name))
            )
            values[name] = converted
        else:
            values[name] = column
    for failed, text in checks:
        reason = np.where((reason == None) & failed, text, reason)  # noqa: E711 - elementwise
    accepted = np.flatnonzero(reason == None)  # noqa: E711

    events = pd.DataFrame({k: frame[k].to_numpy()[accepted] for k in keys})
    events["start"], events["end"] = start[accepted], end[accepted]
    for name, column in values.items():
        events[name] = column.to_numpy()[accepted]
    events["_row"] = accepted
    order = events.sort_values([*keys, "end", "_row"], kind="stable").index  # the batch job's arrival order
    events = events.loc[order].reset_index(drop=True)
    series = {"earliest": "earliest", "first": None}.get(cfg.series_start, cfg.series_start)
    query = dict(aggregates={**cfg.aggregate_columns, EVENTS_COLUMN: "count"}, key=keys or None,
                 technique=cfg.technique, height=cfg.height, series_start=series, point_events=cfg.point_events,
                 swag=cfg.swag)  # fmt: skip
    if cfg.windows:  # several specs in one pass, rows tagged with their window
        windows = aggregate_many(events, cfg.specs, sharing=cfg.sharing, **query)
    else:
        windows = aggregate(events, cfg.range, cfg.slide, cfg.ttp, cfg.offset, **query)
    late = windows.attrs.pop("late")  # a DataFrame in attrs upsets pandas operations that compare attrs
    if cfg.empty_windows == "skip":
        windows = windows[windows[EVENTS_COLUMN] > 0]
    windows = windows.drop(columns=[EVENTS_COLUMN]).reset_index(drop=True)
    if is_ts:
        unit = "ms" if cfg.time_unit == "ms" else "s"
        for col in ("window_start", "window_end"):
            windows[col] = pd.to_datetime(windows[col], unit=unit)
    late_rows = frame.iloc[events["_row"].to_numpy()[late.index.to_numpy()]].assign(
        **({"window": late["window"].to_numpy()} if "window" in late else {}),
        windows_missed=late["windows_missed"].to_numpy(),
    )
    rejected_rows = frame[reason != None].assign(reason=reason[reason != None])  # noqa: E711
    for name, part in (("windows", windows), ("rejected", rejected_rows), ("late", late_rows)):
        folder = Path(output, name)
        folder.mkdir()
        if cfg.format == "csv":
            part.to_csv(folder / "part-00000.csv", index=False)
        else:
            part.astype({c: str for c in part.columns if part[c].dtype == object}).to_parquet(
                folder / "part-00000.parquet", index=False
            )
    return finish_output(
        cfg, output, rows_read=n, rejected=n - len(accepted), late=len(late_rows), windows=len(windows),
        seconds=time.perf_counter() - began,
    )  # fmt: skip
