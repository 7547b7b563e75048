"""The files of ``spanning run``: listing and checking the inputs, and reading them for the local engine.

The first rule of the reader contract (``spanning.engines.reader``): CSV (RFC 4180), Parquet or JSON lines, told
apart by extension (``.gz``/``.bz2`` for CSV and JSON); a folder is read file by file, skipping names that
start with ``_`` or ``.``; inputs that mix formats, files without a header, files that seem to use another
delimiter, empty files and CSV files whose headers differ are refused with one line naming the file.
``input_files`` serves both engines; ``read_local`` reads the rows for the local engine (pandas), typed
as the Spark engine types them.
"""

from __future__ import annotations

import bz2
import csv
import glob
import gzip
import io
import json
import os
import re
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from spanning.aggregates import INT64_MAX, INT64_MIN
from spanning.app.csv_records import MALFORMED, ambiguous_bytes, read_csv_records, unterminated_quote
from spanning.app.jobspec import CORRUPT_RECORD, INPUT_FORMATS, UsageError
from spanning.engines.reader import column_kind, matches, plain_values, text_stats

__all__ = [
    "Inputs",
    "check_plain_columns",
    "check_plain_names",
    "input_files",
    "plain_name",
    "read_local",
    "typed_csv",
    "unknown_column",
]


@dataclass
class Inputs:
    """The input files of a run, checked: their format and, for CSV, the header they share."""

    files: list[str]
    format: str
    columns: list[str] | None  # CSV header names, stripped of spaces (None where unknown: remote files)
    delimiter: str = ","
    parquet_schema: object | None = None  # Parquet: the Arrow schema every file has (None if they differ)
    splittable: bool = False  # CSV: local, uncompressed files with no quote and no carriage return alone, whose byte
    # ranges hold whole records (``csv_records.range_records``)

    @property
    def column_names(self) -> list[str] | None:
        """The columns every input has, where a header or footer told them (local CSV and Parquet); else None."""
        if self.columns is not None:
            return self.columns
        return None if self.parquet_schema is None else list(self.parquet_schema.names)


#: A plain column name (or a `quoted` one), as the options that also take Spark SQL expressions give it
_PLAIN_NAME = re.compile(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)")
#: Names that Spark SQL reads as expressions without parentheses: never column mistakes
_BARE_FUNCTIONS = frozenset({"current_date", "current_timestamp", "current_time", "current_user", "user",
                             "session_user", "current_catalog", "current_database", "current_schema",
                             "localtimestamp", "true", "false", "null"})  # fmt: skip


def unknown_column(name: str, option: str, columns: list[str], expression: str | None = None) -> UsageError:
    """The one form of every column mistake: the name, the option (and its expression), the columns that exist."""
    where = f"--{option}" if expression in (None, name) else f"--{option} {expression!r}"
    return UsageError(f"unknown column {name!r} in {where}: the columns are {', '.join(map(str, columns))}")


def plain_name(text: str) -> str | None:
    """The column that ``text`` names when it is a plain name (``start``) or one between back-quotes, not a Spark
    SQL expression; else None (``current_date`` and the like are expressions)."""
    plain = _PLAIN_NAME.fullmatch(text.strip())
    if plain is None or (plain.group(2) and plain.group(2).lower() in _BARE_FUNCTIONS):
        return None
    return plain.group(1) or plain.group(2)


def check_plain_columns(cfg, inputs: Inputs) -> None:
    """Fail with ``unknown_column`` for an option that names a column the inputs lack, from their header or
    footer alone (no engine started): ``check_plain_names`` over the columns every input has, where known."""
    columns = inputs.column_names
    if columns is not None:
        check_plain_names(cfg.events, cfg.query, columns)


def check_plain_names(fields, query, columns: list[str], as_given: bool = False) -> None:
    """Fail with ``unknown_column`` for an option that names a column not in ``columns``. ``--start``, ``--end``,
    ``--duration`` and ``--key`` may be Spark SQL expressions: only plain names (``plain_name``) are checked here,
    regardless of case as Spark resolves them; the engines report a missing column inside an expression in the
    same form. ``--agg`` takes column names as written. ``as_given``: the message quotes the option's text where
    it is not the bare name (a name between back-quotes), as the Spark job's check of an expression words it."""
    folded = {str(c).lower() for c in columns}
    named = [("start", fields.start), ("end", fields.end), ("duration", fields.duration),
             *[("key", k) for k in fields.keys]]  # fmt: skip
    for option, text in named:
        if text is None or text in columns:
            continue
        name = plain_name(text)
        if name is not None and name.lower() not in folded:
            raise unknown_column(name, option, list(columns), text if as_given else None)
    for name in query.value_columns:
        if name not in columns:
            raise unknown_column(name, "agg", list(columns))


_COMPRESSION = {".gz": gzip.open, ".bz2": bz2.open}


def _format_of(path: str) -> str | None:
    stem, ext = os.path.splitext(path.lower())
    if ext in _COMPRESSION:
        stem, ext = os.path.splitext(stem)
    return INPUT_FORMATS.get(ext)


def _open_text(path: str) -> io.TextIOBase:
    opener = _COMPRESSION.get(os.path.splitext(path.lower())[1], open)
    return opener(path, "rt", encoding="utf-8-sig", newline="")


def _listed(paths: list[str]) -> list[str]:
    files = []
    for path in paths:
        matches = sorted(glob.glob(path))
        if not matches:
            raise UsageError(f"input not found: {path}")
        for match in matches:
            if not os.path.isdir(match):
                files.append(match)
                continue
            inside = sorted(f for f in os.listdir(match) if not f.startswith(("_", ".")))
            folders = [f for f in inside if os.path.isdir(os.path.join(match, f))]
            if folders:
                raise UsageError(f"input folder {match} holds the folder {folders[0]!r}: give the files or a glob")
            if not inside:
                raise UsageError(f"input folder {match} holds no input files")
            files += [os.path.join(match, f) for f in inside]
    return files


def input_files(paths: list[str], given_format: str | None = None, delimiter: str = ",", warn: bool = True) -> Inputs:
    """List and check the inputs: one format, no empty file, and for CSV one valid header for all.

    ``warn``: say on standard error which CSV file opens a quote it never closes (off where a run checks its
    files a second time).
    """
    if len(delimiter) != 1 or delimiter in '"\r\n':
        raise UsageError(f"bad --delimiter {delimiter!r}: give one character other than a quote or a line break")
    if any("://" in p for p in paths):  # hdfs://, s3a://: Spark lists and reads them
        fmt = given_format or _format_of(paths[0].rstrip("/"))
        if fmt is None:
            raise UsageError(f"cannot tell the input format of {paths[0]!r}: give --input-format csv|parquet|json")
        return Inputs(list(paths), fmt, None, delimiter)
    files = _listed(paths)
    formats = {}
    for path in files:
        fmt = given_format or _format_of(path)
        if fmt is None:
            raise UsageError(f"cannot tell the input format of {path}: give --input-format csv|parquet|json")
        formats.setdefault(fmt, path)
        if os.path.getsize(path) == 0:
            raise UsageError(f"input file {path} is empty")
    if len(formats) > 1:
        mixed = ", ".join(f"{fmt} ({os.path.basename(p)})" for fmt, p in formats.items())
        raise UsageError(f"the inputs mix file formats: {mixed}; run one format at a time")
    fmt = next(iter(formats))
    schemas = set()
    if fmt == "parquet":
        schemas = {_check_parquet(path) for path in files}
    columns, splittable = None, True
    if fmt == "csv":
        for path in files:
            header = _csv_header(path, delimiter)
            if columns is None:
                columns, first = header, path
            elif header != columns:
                raise UsageError(
                    f"{path} has the columns {', '.join(header)} but {first} has {', '.join(columns)}: "
                    "give files of one layout per run"
                )
            quotes, lone = ambiguous_bytes(path)
            splittable = splittable and quotes == lone == 0 and os.path.splitext(path)[1].lower() not in _COMPRESSION
            unclosed = unterminated_quote(path, delimiter, quotes=quotes)  # a silent fold of the rest otherwise
            if unclosed is not None and warn:
                print(f"spanning: warning: {path}: {unclosed.reason()}; it is rejected", file=sys.stderr)
    elif fmt == "json":
        for path in files:
            with _open_text(path) as handle:
                if not any(line.strip() for line in handle):
                    raise UsageError(f"input file {path} is empty")
    schema = next(iter(schemas)) if len(schemas) == 1 else None
    return Inputs(files, fmt, columns, delimiter, schema, fmt == "csv" and splittable)


def _check_parquet(path: str):
    """A Parquet file both engines can read: readable, and no timestamps in nanoseconds (Spark refuses them).
    Returns its Arrow schema, read from the footer (without the writer's metadata)."""
    import pyarrow.parquet

    try:
        source = pyarrow.parquet.ParquetFile(path)
        schema = source.schema_arrow
        int96 = {source.schema.column(i).name for i in range(len(source.schema))
                 if source.schema.column(i).physical_type == "INT96"}  # fmt: skip
    except Exception as err:  # pyarrow raises several kinds for a file that is not Parquet
        raise UsageError(f"cannot read {path} as Parquet: {str(err).strip().splitlines()[0]}") from None
    for field in schema:  # Spark's INT96 timestamps (its default) read as ns in pyarrow, and in Spark as they are
        if getattr(field.type, "unit", None) == "ns" and str(field.type).startswith("timestamp") and (
                field.name not in int96):  # fmt: skip
            raise UsageError(
                f"{path}: column {field.name!r} holds timestamps in nanoseconds, which Spark cannot "
                "read: write it in microseconds (pandas: df.to_parquet(..., coerce_timestamps='us'))"
            )
    return schema.remove_metadata()


def _csv_header(path: str, delimiter: str) -> list[str]:
    """The header names of a CSV file, with the checks that catch a missing header or another delimiter."""
    try:
        with _open_text(path) as handle:
            header = next((row for row in csv.reader(handle, delimiter=delimiter) if row), None)
    except (UnicodeDecodeError, OSError, csv.Error) as err:
        raise UsageError(f"cannot read {path} as CSV text: {err}") from None
    if header is None:
        raise UsageError(f"input file {path} is empty")
    names = [name.strip() for name in header]
    if len(names) == 1:
        for other in (";", "\t", "|", ","):
            if other != delimiter and other in names[0]:
                shown = {"\t": "\\t"}.get(other, other)
                raise UsageError(f"{path} seems to separate fields with {shown!r}, not {delimiter!r}: "
                                 f"give --delimiter '{shown}'")  # fmt: skip
    values = sum(1 for n in names if matches("number", n) or matches("date_time", n))
    if 2 * values > len(names):  # column names are rarely numbers or times: this line is data
        raise UsageError(f"{path} has no header line: its first line holds values ({', '.join(names[:4])})")
    if not all(names):
        raise UsageError(f"{path} has an empty column name in its header (column {names.index('') + 1})")
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated:
        raise UsageError(f"{path} has the column name {repeated!r} twice in its header")
    return names


# ------------------------------------------------------------------------------------------------
# the local engine's side: pandas


def read_local(inputs: Inputs) -> pd.DataFrame:
    """All rows of the inputs as one DataFrame, as read: Parquet and JSON typed, CSV typed by ``typed_csv``."""
    frames = [_read_file(path, inputs) for path in inputs.files]
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return typed_csv(frame) if inputs.format == "csv" else frame


def typed_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """CSV text with every column of plain integers as Int64 (nothing lost), the others as text."""
    for name in frame.columns.drop(MALFORMED, errors="ignore"):  # the reason stays text
        frame[name] = plain_values(frame[name], column_kind("plain", text_stats(frame[name], plain_only=True)))
    return frame


def _read_file(path: str, inputs: Inputs) -> pd.DataFrame:
    if inputs.format == "csv":  # every record a row; a malformed one with its reason in MALFORMED
        try:
            table = read_csv_records(path, inputs.delimiter, inputs.columns)
        except (pa.ArrowInvalid, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read {path} as CSV: {str(err).strip().splitlines()[0]}") from None
        frame = table.to_pandas()
        return frame.astype(object).where(frame.notna(), None)  # text, None for null
    if inputs.format == "parquet":
        try:
            import pyarrow.parquet as pq

            from spanning.engines.inputs import arrow_frame

            return arrow_frame(pq.read_table(path))  # integer columns with nulls exact (pd.read_parquet: float64)
        except Exception as err:  # pyarrow raises several kinds for a file that is not Parquet
            raise UsageError(f"cannot read {path} as Parquet: {str(err).strip().splitlines()[0]}") from None
    return _read_json_lines(path)


def _read_json_lines(path: str) -> pd.DataFrame:
    """JSON lines typed as Spark types them: integers, floats, booleans, or text when a column mixes kinds.

    A line that is not a JSON object is kept whole in ``_corrupt_record`` (and rejected), as Spark does.
    """
    records, corrupt = [], []
    with _open_text(path) as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if isinstance(record, dict):
                records.append(record)
                corrupt.append(None)
            else:
                records.append({})
                corrupt.append(line.rstrip("\r\n"))
    names = {k for r in records for k in r}
    if any(c is not None for c in corrupt):
        names.add(CORRUPT_RECORD)
    data = {}
    for name in sorted(names):  # by name, as Spark's JSON reader orders inferred columns
        column = corrupt if name == CORRUPT_RECORD else [r.get(name) for r in records]
        data[name] = _json_column(column)
    return pd.DataFrame(data, index=pd.RangeIndex(len(records)))


def _json_column(values: list) -> object:
    kinds = {type(v) for v in values if v is not None}
    if kinds == {bool}:
        return pd.array(values, dtype="boolean")
    if kinds == {int} and all(INT64_MIN <= v <= INT64_MAX for v in values if v is not None):
        return pd.array(values, dtype="Int64")
    if kinds <= {int, float} and kinds:
        return pd.array([None if v is None else float(v) for v in values], dtype="Float64")
    out = np.empty(len(values), dtype=object)
    out[:] = [v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in values]
    return out
