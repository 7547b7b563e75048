"""``spanning run --engine local``: the same query through ``spanning.aggregate``, without a JVM.

For files that fit in memory. ``--start``/``--end``/``--duration``/``--key`` must be column names
here (Spark SQL expressions need ``--engine spark``). Files are read and typed by the reader contract
of ``spanning.engines.reader``, which the Spark engine follows too, so both give the same outputs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet

from spanning.aggregates import SumOverflowError
from spanning.app.csv_records import MALFORMED
from spanning.app.files import Inputs, check_plain_columns, input_files, read_local, unknown_column
from spanning.app.jobspec import (
    CORRUPT_RECORD,
    REASONS,
    RunConfig,
    UsageError,
    key_column,
    user_errors,
    value_column,
    with_columns,
)
from spanning.app.local_ranges import outputs_in_ranges, reads_in_ranges
from spanning.app.outputs import finish_output, output_folder
from spanning.engines.batch import aggregate, aggregate_many
from spanning.engines.reader import (
    chronon_timestamps,
    column_kind,
    first_reasons,
    is_text,
    number_values,
    plain_values,
    text_stats,
    time_chronons,
    time_kind_of,
    time_kinds,
    tzinfo,
)
from spanning.kernels.windows import event_ends

# internal column names of the events handed to the engine (no clash with any input column)
START, END, ROW, ARRIVAL_END = "__start", "__end", "__row", "__arrival_end"


@dataclass
class Prepared:
    """The rows as read, why each cannot be used (None: usable), and the usable rows as engine events."""

    frame: pd.DataFrame  # every input row, as read
    reason: np.ndarray  # object: None or the reason text
    events: pd.DataFrame  # usable rows, internal names, in the batch job's arrival order (key, end, row)
    keys: list[str]  # output names of the keys
    values: dict[str, str]  # input column -> internal name
    is_timestamp: bool


def _column(frame: pd.DataFrame, text: str, what: str) -> pd.Series:
    if text not in frame.columns:
        mistake = unknown_column(text, what, list(frame.columns))
        raise UsageError(f"{mistake}; --engine local takes column names, --engine spark also takes Spark SQL"
                         " expressions")  # fmt: skip
    return frame[text]


def prepare_local(cfg: RunConfig, inputs: Inputs | None = None) -> Prepared:
    """Read the inputs (``inputs``: listed and checked already) and turn every row into an event or a reason (the
    reader contract)."""
    fields, query = cfg.events, cfg.query
    if inputs is None:
        inputs = input_files(cfg.inputs.paths, cfg.inputs.format, cfg.inputs.delimiter)
        check_plain_columns(cfg, inputs)  # from the header or footer, before reading every row
    frame = read_local(inputs)
    malformed = frame.pop(MALFORMED).to_numpy() if MALFORMED in frame.columns else None  # CSV: why, per record
    n = len(frame)
    start_col = _column(frame, fields.start, "start")
    end_col = None if fields.point_events or fields.duration is not None else _column(frame, fields.end, "end")
    keys = [_column(frame, k, "key") for k in fields.keys]
    for name in query.value_columns:
        if name not in frame.columns:
            raise unknown_column(name, "agg", list(frame.columns))
    kind = time_kinds(time_kind_of(start_col), None if end_col is None else time_kind_of(end_col))

    start = time_chronons(start_col, kind, fields.time_unit, fields.timezone)
    if fields.point_events:
        end_value, end_present, end_fraction = start.values, start.present, np.zeros(n, dtype=bool)
    elif fields.duration is not None:
        length = time_chronons(_column(frame, fields.duration, "duration"), "number", fields.time_unit, fields.timezone)
        end_value, end_present, end_fraction = start.values + length.values, length.present, length.fractional
    else:
        end = time_chronons(end_col, kind, fields.time_unit, fields.timezone)
        end_value, end_present, end_fraction = end.values, end.present, end.fractional

    checks = []
    if malformed is not None:  # the reason itself: it names the record's line
        checks.append((malformed != None, malformed))  # noqa: E711 - elementwise
    if CORRUPT_RECORD in frame.columns:
        checks.append((frame[CORRUPT_RECORD].notna().to_numpy(), REASONS["json"]))
    checks += [
        (~start.present, REASONS["start"]),
        (~end_present, REASONS["duration"] if fields.duration is not None else REASONS["end"]),
        (start.fractional | end_fraction, REASONS["fraction"]),
        (end_value < start.values, REASONS["order"]),
    ]
    internal = {name: value_column(i) for i, name in enumerate(query.value_columns)}
    columns = {}
    for name in query.value_columns:
        column = frame[name]
        if name in query.numeric_columns:
            numbers = number_values(column, column_kind("value", text_stats(column)) if is_text(column) else None)
            checks += numbers.checks(name)
            columns[internal[name]] = numbers.nullable()
        else:
            columns[internal[name]] = plain_values(column, "text").array
    reason = first_reasons(n, checks)
    accepted = np.flatnonzero(reason == None)  # noqa: E711

    events = pd.DataFrame({key_column(i): plain_values(k, "text").array[accepted] for i, k in enumerate(keys)})
    events[START], events[END] = start.values[accepted], end_value[accepted]
    for name, column in columns.items():
        events[name] = column[accepted]
    events[ROW] = accepted
    # arrival: per key in the order of the events' ends u (a point event [l, l + 1) ends at l + 1), then read order
    events[ARRIVAL_END] = event_ends(events[START].to_numpy(), events[END].to_numpy())
    order = [*(key_column(i) for i in range(len(keys))), ARRIVAL_END, ROW]
    events = events.sort_values(order, kind="stable", na_position="first").drop(columns=ARRIVAL_END)
    events = events.reset_index(drop=True)
    return Prepared(frame, reason, events, list(fields.keys), internal, kind == "date_time")


def event_times(cfg: RunConfig) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the usable events of the inputs (for tune-height)."""
    prepared = prepare_local(cfg)
    return prepared.events[START].to_numpy(np.int64), prepared.events[END].to_numpy(np.int64)


def run_local(cfg: RunConfig, verbose: bool = False, in_ranges: bool = True) -> dict:
    """``spanning run --engine local``: CSV files read in byte ranges by every core where ``reads_in_ranges``
    holds (unless ``in_ranges`` is False), else every row read into memory (``prepare_local``)."""
    began = time.perf_counter()
    inputs = input_files(cfg.inputs.paths, cfg.inputs.format, cfg.inputs.delimiter)  # listed and scanned once
    check_plain_columns(cfg, inputs)  # from the header or footer, before reading every row
    if in_ranges and reads_in_ranges(cfg, inputs):
        got = outputs_in_ranges(cfg, inputs)  # every user mistake shows here, before the output folder is touched
        if got is not None:
            # an integer sum beyond 64 bits (SumOverflowError, naming the user's column) fails as windows/ is written
            with output_folder(cfg) as output:
                for name in ("windows", "rejected", "late"):
                    Path(output, name).mkdir()
                windows = write_arrow_parts(got.windows, Path(output, "windows"), cfg)
                write_arrow_part(got.rejected, Path(output, "rejected"), cfg)
                write_arrow_part(got.late, Path(output, "late"), cfg)
                return finish_output(
                    cfg, output, rows_read=got.rows_read, rejected=got.rejected_rows, late=got.late_rows,
                    windows=windows, seconds=time.perf_counter() - began,
                )  # fmt: skip
    prepared = prepare_local(cfg, inputs)  # every user mistake shows here, before the output folder is touched
    with output_folder(cfg) as output:
        return _run(cfg, prepared, output, began)


def _run(cfg: RunConfig, prepared: Prepared, output: Path, began: float) -> dict:
    events, frame, q, execution = prepared.events, prepared.frame, cfg.query, cfg.execution
    keys = [key_column(i) for i in range(len(prepared.keys))]
    series = {"earliest": "earliest", "first": None}.get(q.series_start, q.series_start)
    specs = {name: with_columns(spec, prepared.values) for name, spec in q.aggregate_columns.items()}
    query = dict(aggregates=specs, start=START, end=END, key=keys or None, empty_windows=q.empty_windows,
                 technique=execution.technique, height=execution.height, series_start=series,
                 point_events=cfg.events.point_events, swag=execution.swag,
                 time_unit=cfg.events.time_unit)  # integer chronons as they are; occupancy written in seconds
    try:
        if q.windows:  # several specs in one pass, rows tagged with their window
            windows = aggregate_many(events, q.specs, sharing=execution.sharing, **query)
        else:
            windows = aggregate(events, q.range, q.slide, q.ttp, q.offset, **query)
    except SumOverflowError as err:
        raise user_errors(err, {v: c for c, v in prepared.values.items()}) from None
    late = windows.attrs.pop("late")  # a DataFrame in attrs upsets pandas operations that compare attrs
    windows = windows.rename(columns=dict(zip(keys, prepared.keys, strict=True)))
    if prepared.is_timestamp:
        for col in ("window_start", "window_end"):
            windows[col] = chronon_timestamps(windows[col].to_numpy(np.int64), cfg.events.time_unit).array
    late_rows = frame.iloc[events[ROW].to_numpy()[late.index.to_numpy()]].assign(
        **({"window": late["window"].to_numpy()} if "window" in late else {}),
        windows_missed=late["windows_missed"].to_numpy(),
    )
    rejected = prepared.reason != None  # noqa: E711
    rejected_rows = frame[rejected].assign(reason=prepared.reason[rejected])
    for name, part in (("windows", windows), ("rejected", rejected_rows), ("late", late_rows)):
        folder = Path(output, name)
        folder.mkdir()
        write_part(part.reset_index(drop=True), folder, cfg)
    return finish_output(
        cfg, output, rows_read=len(frame), rejected=int(rejected.sum()), late=len(late_rows), windows=len(windows),
        seconds=time.perf_counter() - began,
    )  # fmt: skip


def write_part(part: pd.DataFrame, folder: Path, cfg: RunConfig) -> None:
    """One output part, as the Spark engine writes it: Parquet, or RFC 4180 CSV with ISO timestamps."""
    write_arrow_part(_arrow(part), folder, cfg)


def write_arrow_part(table: pa.Table, folder: Path, cfg: RunConfig) -> None:
    """``table`` as one output part in ``folder``: Parquet, or RFC 4180 CSV with ISO timestamps (a header alone
    when empty)."""
    write_arrow_parts([table], folder, cfg)


def write_arrow_parts(tables: Iterable[pa.Table], folder: Path, cfg: RunConfig) -> int:
    """Tables of one schema (at least one) as one output part in ``folder``, each written as it comes
    (``write_arrow_part``'s forms); returns the rows written."""
    parquet = cfg.output.format == "parquet"
    path = folder / f"part-00000.{'parquet' if parquet else 'csv'}"
    writer, rows = None, 0
    try:
        for table in tables:
            if not parquet:
                table = _iso_text(table, cfg.events.timezone)
            if writer is None:
                writer = pyarrow.parquet.ParquetWriter(path, table.schema) if parquet else pyarrow.csv.CSVWriter(
                    path, table.schema, write_options=pyarrow.csv.WriteOptions(quoting_style="needed"))  # fmt: skip
            writer.write_table(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def _iso_text(table: pa.Table, zone: str) -> pa.Table:
    """``table`` with its timestamps as ISO text (``_iso_times``), as the CSV output writes them."""
    columns = {}
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(field.type):
            column = pa.array(_iso_times(column.to_pandas(), zone), type=pa.string())
        columns[field.name] = column
    return pa.table(columns)


def _arrow(part: pd.DataFrame) -> pa.Table:
    columns = {}
    for name in part.columns:
        series = part[name]
        text = series.dtype == object and all(isinstance(v, str) for v in series if v is not None)
        try:  # text columns stay strings even when empty or all null, as Spark types them
            columns[str(name)] = pa.array(series, type=pa.string() if text else None, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed objects: their text, nulls kept
            columns[str(name)] = pa.array([None if v is None else str(v) for v in series], type=pa.string())
    return pa.table(columns)


def _iso_times(stamps: pd.Series, zone: str) -> list[str | None]:
    """``2024-03-04T10:00:00Z`` / ``…+01:00``: the instant in ``zone``, as Spark's CSV writer is told to write."""
    naive = stamps.dt.tz is None  # wall times (TIMESTAMP_NTZ): written without an offset, as Spark does
    local = stamps if naive else stamps.dt.tz_convert(tzinfo(zone))
    out = []
    for stamp in local:
        if stamp is pd.NaT or stamp is None:
            out.append(None)
            continue
        text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
        offset = "" if naive else stamp.strftime("%z")
        out.append(text + ("" if naive else "Z" if offset == "+0000" else f"{offset[:3]}:{offset[3:]}"))
    return out
