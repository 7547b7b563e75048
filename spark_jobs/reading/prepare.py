"""Reading CDR files and turning rows into events: times as chronons, values as numbers, or a reason.

Every input row comes out of ``prepare`` once, either with ``reason`` null (an event) or with the
reason it cannot be used (nothing is dropped silently). The rules are the reader contract of
``spanning.engines.reader``, which the local engine follows too: here they are Spark SQL expressions over the
same patterns, and the column kinds come from the same counts (one aggregation over the text columns
the query uses).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import AnalysisException

from spanning.aggregates import ResultKind, parse_aggregate
from spanning.app.csv_records import MALFORMED
from spanning.app.files import Inputs, input_files, plain_name, unknown_column
from spanning.app.jobspec import (
    CORRUPT_RECORD,
    REASONS,
    EventFields,
    RunConfig,
    UsageError,
    WindowQuery,
    key_column,
    value_column,
    with_columns,
)
from spanning.engines.params import valid_flag as valid_column  # the Spark job sends nulls as these flags
from spanning.engines.reader import TIME_LIMIT, ColumnStats, column_kind, java_pattern, text_stats, time_kinds
from spark_jobs.sessions import session_kind
from spark_jobs.sessions.errors import query_context_log_muted

SEQ, START, END, SERIES, REASON = "_seq", "_start", "_end", "_series", "reason"
FRACTION, END_MISSING = "__fraction", "__end_missing"  # prepare's own, between its two projections (renamed on a clash)
EVENT_END = f"greatest({END}, {START} + 1)"  # the event's u: a record with end = start is the point [l, l + 1)
# (SQL). Events arrive in the order of their u, the arrival number breaking ties, on every path.
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def quoted(name: str) -> Column:
    """A column by its exact name, whatever characters it holds."""
    return F.col("`" + name.replace("`", "``") + "`")


def _literal_path(path: str) -> str:
    """A local file name as Spark's reader takes it literally (it expands glob characters in paths)."""
    return path if "://" in path else re.sub(r"([\[\]{}*?\\])", r"\\\1", path)


def read_input(spark: SparkSession, inputs: Inputs) -> DataFrame:
    """The files of ``inputs`` (checked by ``spanning.app.files.input_files``): CSV as text, Parquet, JSON lines."""
    files = [_literal_path(p) for p in inputs.files]  # remote paths (and their globs) go to Spark as given
    reader = spark.read
    if inputs.format == "csv" and inputs.columns is not None:  # local files: the local engine's reader, in the tasks
        return _csv_records(spark, inputs)
    if inputs.format == "csv":  # remote files: Spark lists them and reads their bytes, the tasks parse them with
        # the local engine's reader (rows, reasons and lines as for local files; Spark's own CSV reader would drop
        # a record's extra fields without a word)
        sources = reader.format("binaryFile").load(files)
        names = remote_csv_header(spark, files, inputs.delimiter)
        return csv_file_records(sources, names, inputs.delimiter, same_header=True)
    if inputs.format == "parquet":
        schema = parquet_footer_schema(inputs)  # Spark's own inference is a job over a footer: 0.3-0.5 s cold
        return (reader if schema is None else reader.schema(schema)).parquet(*files)
    return reader.json(files)


def _csv_records(spark: SparkSession, inputs: Inputs) -> DataFrame:
    """Local CSV files read by ``spanning.app.csv_records``, a file a task (a multi-line CSV file is one split
    for Spark's reader too): text columns plus ``MALFORMED``, the rows, reasons and lines of ``--engine local``.
    """
    files = len(inputs.files)
    paths = F.array(*[F.lit(p) for p in inputs.files])
    sources = spark.range(files, numPartitions=files).select(
        F.element_at(paths, F.col("id").cast("int") + 1).alias("path"), F.lit(None).cast("binary").alias("content")
    )
    return csv_file_records(sources, list(inputs.columns), inputs.delimiter)


def remote_csv_header(spark: SparkSession, files: list[str], delimiter: str) -> list[str]:
    """The header of remote CSV files (the first line of the first file Spark lists), as ``input_files`` reads a
    local file's: names stripped of spaces (and of a byte order mark)."""
    import csv

    first = spark.read.format("binaryFile").load(files).select("path").orderBy("path").first()
    if first is None:
        raise UsageError(f"no input file found at {', '.join(files)}")
    line = spark.read.option("lineSep", "\n").text(first["path"]).first()
    names = next(csv.reader([line[0].lstrip("\ufeff").rstrip("\r")], delimiter=delimiter), []) if line else []
    if not names or not any(n.strip() for n in names):
        raise UsageError(f"{first['path']} has no header line: CSV inputs start with their column names")
    return [n.strip() for n in names]


def csv_file_records(sources: DataFrame, names: list[str], delimiter: str, same_header: bool = False) -> DataFrame:
    """The records of the CSV files in ``sources`` (``path``, and ``content`` when read already: ``binaryFile``
    rows), parsed in the tasks by ``spanning.app.csv_records``: ``names`` as text, plus ``MALFORMED``.
    ``same_header``: a file whose header is not ``names`` fails the job with one line, as ``input_files`` refuses
    local files of two layouts (remote files are listed by Spark, so their headers are read in the tasks)."""
    schema = T.StructType([T.StructField(n, T.StringType()) for n in [*names, MALFORMED]])

    def records(batches):  # runs on the executors: pyarrow only
        import csv

        from spanning.app.csv_records import csv_batches

        for batch in batches:
            for path, content in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                if same_header and content is not None:
                    first = bytes(content).split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff")
                    header = [n.strip() for n in next(csv.reader([first.rstrip("\r")], delimiter=delimiter), [])]
                    if header != names:
                        raise ValueError(f"{path} has the columns {', '.join(header)} but the first file has"
                                         f" {', '.join(names)}: give files of one layout per run")  # fmt: skip
                yield from csv_batches(path, delimiter, names, content)

    return sources.select("path", "content").mapInArrow(records, schema)


def _footer_readable(kind) -> bool:
    """Whether Spark reads a Parquet column of this Arrow type as ``from_arrow_schema`` maps it."""
    import pyarrow as pa

    return (pa.types.is_boolean(kind) or pa.types.is_signed_integer(kind) or pa.types.is_float32(kind)
            or pa.types.is_float64(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_date32(kind)
            or (pa.types.is_timestamp(kind) and kind.unit in ("ms", "us") and kind.tz is not None))  # fmt: skip


def parquet_footer_schema(inputs: Inputs) -> T.StructType | None:
    """The schema Spark would infer for local Parquet files, from the footers ``input_files`` read on the driver
    (no Spark job), when every file has the same flat schema of plain columns (integers, floats, booleans,
    text, dates, timestamps with a zone in ms or µs); else None, and Spark infers it."""
    schema = inputs.parquet_schema
    if schema is None or local_input_bytes(inputs) is None:
        return None
    from pyspark.sql.pandas.types import from_arrow_schema

    if not all(_footer_readable(f.type) for f in schema) or len({n.lower() for n in schema.names}) != len(schema):
        return None
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in from_arrow_schema(schema)])


@dataclasses.dataclass(frozen=True)
class ValueBound:
    """What the Parquet footers tell of an integer value column (every row group's statistics)."""

    no_nulls: bool  # no row lacks a value: its count of values is the count of events
    plain_sum_fits: bool  # 2 · rows · max |value| < 2^63: no sum of ± values of some rows leaves 64 bits


@dataclasses.dataclass
class Prepared:
    """Rows with their reason, plus what the window job needs to know about the columns."""

    rows: DataFrame  # original columns + _seq + _start + _end + keys + values + reason
    keys: list[str]  # output names of the key columns
    time_is_timestamp: bool
    value_types: dict[str, T.DataType]  # internal numeric value columns as sent to the engine
    result_types: dict[str, T.DataType]  # internal non-numeric columns read by arg-aggregates
    original_columns: list[str]
    values: dict[str, str]  # input column -> internal name
    key_types: list[T.DataType] = dataclasses.field(default_factory=list)  # of the key columns, in order
    # set by ``load`` from the files (not constructor parameters): read from Parquet, where scanning again is
    # cheaper than caching; the size of the input files, where they are local
    columnar: bool = dataclasses.field(default=False, init=False)
    input_bytes: int | None = dataclasses.field(default=None, init=False)
    inputs: Inputs | None = dataclasses.field(default=None, init=False)  # the files, as checked
    # integer value columns (internal names) of local Parquet inputs whose footers bound them: see value_bounds
    value_bounds: dict[str, ValueBound] = dataclasses.field(default_factory=dict, init=False)

    @property
    def local_parquet(self) -> bool:
        """Whether the input is Parquet files on the driver's file system (whose footers pyarrow can read)."""
        return self.columnar and self.input_bytes is not None

    def aggregates(self, query: WindowQuery) -> dict[str, str]:
        """Output name -> aggregate spec of ``query`` over the internal column names."""
        return {name: with_columns(spec, self.values) for name, spec in query.aggregate_columns.items()}


def _expression(frame: DataFrame, text: str, what: str) -> tuple[Column, T.DataType, str]:
    """A column name or Spark SQL expression, resolved against the input, with its type and name.

    A plain name that no column has fails here, with no analysis; an expression is analysed with PySpark's log of
    a failure muted (``query_context_log_muted``): the mistake is told in one line, as a UsageError."""
    columns = list(frame.columns)
    name = None if text in columns else plain_name(text)
    if name is not None and name.lower() not in {c.lower() for c in columns}:  # Spark resolves names of any case
        raise unknown_column(name, what, columns, text)
    try:
        with query_context_log_muted():
            column = quoted(text) if text in columns else F.expr(text)
            field = frame.select(column).schema.fields[0]
    except AnalysisException as err:
        missing = _unresolved_column(err)
        if missing is not None:  # Spark's UNRESOLVED_COLUMN, in the form of every column mistake
            raise unknown_column(missing, what, columns, text) from err
        first_line = str(err).strip().splitlines()[0]
        raise UsageError(f"cannot use --{what} {text!r}: {first_line}") from err
    except Exception as err:  # parse errors are not AnalysisExceptions in every Spark version
        first_line = str(err).strip().splitlines()[0]
        raise UsageError(f"cannot parse --{what} {text!r}: {first_line}") from err
    return column, field.dataType, field.name


def _unresolved_column(err: AnalysisException) -> str | None:
    """The column that Spark could not resolve, when that is the error (its name without back-quotes)."""
    condition = getattr(err, "getCondition", None) or getattr(err, "getErrorClass", None)
    if condition is None or not str(condition() or "").startswith("UNRESOLVED_COLUMN"):
        return None
    name = (err.getMessageParameters() or {}).get("objectName")
    return None if not name else name.replace("`", "")


def _matches(column: Column, name: str) -> Column:
    return column.rlike(java_pattern(name))


def _text_stats(frame: DataFrame, columns: dict[str, Column], full: set[str] | None = None) -> dict[str, ColumnStats]:
    """The counts of ``spanning.engines.reader.column_kind`` for text columns, in one pass.

    Only the labels in ``full`` (all, if None) get every count; the others get what typing a plain
    column needs (present, plain_integer), which saves regular expressions on wide CSV files.
    """
    if not columns:
        return {}
    exprs = []
    for i, (label, column) in enumerate(columns.items()):
        flags = {
            "present": column.isNotNull(),
            "plain_integer": _matches(column, "plain_integer") & column.cast("long").isNotNull(),
        }
        if full is None or label in full:
            flags.update(integer=_matches(column, "integer"), number=_matches(column, "number"),
                         date_time=_matches(column, "date_time"))  # fmt: skip
        exprs += [F.sum(F.when(flag, 1).otherwise(0)).alias(f"{name}_{i}") for name, flag in flags.items()]
    row = frame.agg(*exprs).first().asDict()
    fields = ("present", "integer", "number", "date_time", "plain_integer")
    return {label: ColumnStats(**{f: int(row.get(f"{f}_{i}") or 0) for f in fields}) for i, label in enumerate(columns)}


class KindCounts:
    """The counts that fix column kinds (``_text_stats``), made over ``rows()`` when first asked for.

    Counts in ``saved`` (the ``saved`` of an earlier run) are not made again: a stream counts once, over the
    files there when it starts, and keeps the counts in its checkpoint, so that a restart reads the same
    kinds without reading every file again.

    ``column_stats`` (a stream over local Parquet files, ``stream.query.local_parquet_stats``; small local CSV
    files, ``local_csv_stats``): ``column_stats(column, plain_only)`` counts an input column on the driver, with the
    local engine's grammar (``spanning.engines.reader.text_stats``, the same patterns as Spark's), or gives None
    where it cannot (a column not in the files as such); a label whose expression is that plain column is then
    counted there, and no Spark job runs (4 s of a stream's start on 600k rows, most of it the JVM's first job).
    """

    def __init__(self, rows: Callable[[], DataFrame], saved: dict[str, dict] | None = None,
                 column_stats: Callable[[str, bool], ColumnStats | None] | None = None) -> None:  # fmt: skip
        self.rows, self.saved, self.column_stats = rows, dict(saved or {}), column_stats
        self.typed: list[Column] | None = None  # the CSV typing prepare applied to the rows before counting

    def __call__(self, prefix: str, columns: dict[str, Column], full: set[str] | None = None,
                 sources: dict[str, str] | None = None) -> dict[str, ColumnStats]:  # fmt: skip
        """The counts of each label's column; ``sources``: the input column a label's expression is, if plain."""
        missing = {label: c for label, c in columns.items() if prefix + label not in self.saved}
        made = {}
        if self.column_stats is not None and self.typed is None:
            for label in [label for label in missing if label in (sources or {})]:
                stats = self.column_stats(sources[label], full is not None and label not in full)
                if stats is not None:  # None: not in the files as such
                    made[label] = stats
                    del missing[label]
        if missing:
            frame = self.rows() if self.typed is None else self.rows().select(*self.typed)
            made.update(_text_stats(frame, missing, full))
        self.saved.update({prefix + label: dataclasses.asdict(stats) for label, stats in made.items()})
        return {label: ColumnStats(**self.saved[prefix + label]) for label in columns}


def _time_kind(dtype: T.DataType, stats: ColumnStats | None) -> str | None:
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return "date_time"
    if isinstance(dtype, T.StringType):
        return column_kind("time", stats)
    if isinstance(dtype, T.NumericType):
        return "number"
    raise UsageError(f"a time expression has type {dtype.simpleString()}: give a timestamp, date-time text or a number")


def _finite(value: Column) -> Column:
    return value.isNotNull() & ~F.isnan(value) & (F.abs(value) != F.lit(float("inf")))


def _chronons(column: Column, dtype: T.DataType, kind: str, unit: str) -> tuple[Column, Column]:
    """(chronon value or null, is-fractional flag) of a time expression under the reader contract."""
    to_unit = F.unix_millis if unit == "ms" else F.unix_seconds
    no = F.lit(False)
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return to_unit(column.cast("timestamp")), no
    if isinstance(dtype, INTEGRAL):
        return column.cast("long"), no
    if isinstance(dtype, T.StringType) and kind == "date_time":
        return F.when(_matches(column, "date_time"), to_unit(F.to_timestamp(column))), no
    if isinstance(dtype, T.StringType):
        number = F.when(_matches(column, "number"), column.cast("double"))
        integer = F.when(_matches(column, "integer"), column.cast("long"))
    else:
        number, integer = column.cast("double"), F.lit(None).cast("long")
    usable = _finite(number) & (F.abs(number) < TIME_LIMIT)
    whole = F.floor(number)
    value = F.coalesce(integer, F.when(usable, whole.cast("long")))
    return value, integer.isNull() & usable & (number != whole)


def _value(column: Column, dtype: T.DataType, kind: str | None, name: str):
    """(engine value, its type, present flag, [(rejected-if, reason)]) of an aggregated column."""
    reasons = []
    if isinstance(dtype, (*INTEGRAL, T.BooleanType)) or (
        isinstance(dtype, T.DecimalType) and dtype.scale == 0 and dtype.precision <= 18
    ):
        value, vtype = column.cast("long"), T.LongType()
        return value, vtype, value.isNotNull(), reasons
    if isinstance(dtype, T.StringType) and kind == "integer":
        integer = _matches(column, "integer")
        value = F.when(integer, column.cast("long"))
        reasons += [
            (column.isNotNull() & ~integer & ~_matches(column, "nan"), REASONS["value"].format(column=name)),
            (integer & value.isNull(), REASONS["range"].format(column=name)),
        ]
        return value, T.LongType(), value.isNotNull(), reasons
    if isinstance(dtype, T.StringType):
        number = _matches(column, "number")
        value = F.when(number, column.cast("double"))
        garbage = column.isNotNull() & ~number & ~_matches(column, "nan")
    else:
        value = column.cast("double")
        garbage = column.isNotNull() & value.isNull()
    infinite = value.isNotNull() & (F.abs(value) == F.lit(float("inf")))
    reasons += [(garbage, REASONS["value"].format(column=name)), (infinite, REASONS["infinite"].format(column=name))]
    return value, T.DoubleType(), _finite(value), reasons


def _plain(column: Column, dtype: T.DataType, kind: str) -> Column:
    """A key or result column: plain integers of CSV text as long, NaN as null, else as read."""
    if kind == "integer":
        return column.cast("long")
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        return F.when(~F.isnan(column), column)
    return column


def prepare(frame: DataFrame, cfg: RunConfig, csv: bool = False, kinds: KindCounts | None = None) -> Prepared:
    """Add ``_seq``, ``_start``, ``_end``, keys, engine-ready values and ``reason`` to the input rows.

    The kinds of text columns (epoch numbers or date-times, integers or decimals) come from counts over
    ``frame``, or from ``kinds`` (over rows of the same schema: a stream's files already there, or saved)
    when ``frame`` is a stream, which no count can read.
    """
    counts = kinds if kinds is not None else KindCounts(lambda rows=frame: rows)  # the frame as read
    fields, query = cfg.events, cfg.query
    malformed = MALFORMED in frame.columns  # CSV read by ``_csv_records``: why a record is no row, with its line
    original = [c for c in frame.columns if c != MALFORMED]
    raw = {}  # counts of CSV columns as read: also the kinds of the time and value columns that stay text
    if csv:  # CSV text: columns of plain integers become long (nothing lost), the others stay text
        roles = {fields.start, fields.end, fields.duration, *query.numeric_columns}
        raw = stats = counts("raw:", {name: quoted(name) for name in original}, roles, {n: n for n in original})
        typed = [_plain(quoted(n), T.StringType(), column_kind("plain", stats[n])).alias(n) for n in original]
        counts.typed = typed
        frame = frame.select(*typed, *([quoted(MALFORMED)] if malformed else []))
    start, start_type, _ = _expression(frame, fields.start, "start")
    end = duration = None
    if fields.duration is not None:
        duration, duration_type, _ = _expression(frame, fields.duration, "duration")
        if not isinstance(duration_type, (T.NumericType, T.StringType)):
            raise UsageError(f"--duration must be a number of chronons, not {duration_type.simpleString()}")
    elif not fields.point_events:
        end, end_type, _ = _expression(frame, fields.end, "end")
    keys, key_exprs = [], []
    for i, text in enumerate(fields.keys):
        column, dtype, name = _expression(frame, text, "key")
        keys.append(name if name not in (SEQ, START, END) else f"key_{i}")
        key_exprs.append((column, dtype))
    if len(set(keys)) != len(keys):
        raise UsageError("two --key expressions have the same name: rename one with 'expr AS name'")
    missing = [name for name in query.value_columns if name not in frame.columns]
    if missing:
        raise unknown_column(missing[0], "agg", original)

    # counts over the text columns whose kind depends on their values (CSV columns have theirs already)
    text = {}
    if isinstance(start_type, T.StringType):
        text["start"] = (fields.start, start)
    if end is not None and isinstance(end_type, T.StringType):
        text["end"] = (fields.end, end)
    for name in query.numeric_columns:
        if isinstance(frame.schema[name].dataType, T.StringType):
            text[f"value {name}"] = (name, quoted(name))
    stats = {label: raw[name] for label, (name, _) in text.items() if name in raw}
    plain = {label: name for label, (name, _) in text.items() if name in frame.columns}
    stats.update(counts("", {label: column for label, (name, column) in text.items() if name not in raw}, None, plain))

    kind = time_kinds(
        _time_kind(start_type, stats.get("start")), None if end is None else _time_kind(end_type, stats.get("end"))
    )
    start_value, start_fraction = _chronons(start, start_type, kind, fields.time_unit)
    if fields.point_events:
        end_value, end_fraction, end_missing = start_value, F.lit(False), F.lit(False)
    elif duration is not None:  # a number of chronons, read as a numeric time is
        length, end_fraction = _chronons(duration, duration_type, "number", fields.time_unit)
        end_value, end_missing = start_value + length, length.isNull()
    else:
        end_value, end_fraction = _chronons(end, end_type, kind, fields.time_unit)
        end_missing = end_value.isNull()

    values = {name: value_column(i) for i, name in enumerate(query.value_columns)}
    value_types, result_types, value_exprs, reasons = {}, {}, [], []
    for name, internal in values.items():
        dtype = frame.schema[name].dataType
        label = f"value {name}"
        if name in query.numeric_columns:
            kind_of = column_kind("value", stats[label]) if label in stats else None
            value, value_types[internal], present, checks = _value(quoted(name), dtype, kind_of, name)
            reasons += checks
            value_exprs += [
                F.when(present, value).otherwise(F.lit(0).cast(value_types[internal])).alias(internal),
                present.alias(valid_column(internal)),
            ]
        else:
            result_types[internal] = dtype
            value_exprs.append(_plain(quoted(name), dtype, "text").alias(internal))
    key_columns = [_plain(column, dtype, "text").alias(key_column(i)) for i, (column, dtype) in enumerate(key_exprs)]

    if frame.isStreaming:  # no row numbers in a stream: a hash of the row breaks ties of equal ends, the same on replay
        seq = F.xxhash64(*[quoted(c) for c in original])
    else:
        seq = F.monotonically_increasing_id()  # arrival number, after user expressions
    frame = frame.withColumn(SEQ, seq)
    # the times parsed once, in a projection of their own that the reason then reads: in one projection, each text
    # date-time's pattern and parse ran again in every test of the reason naming its time (600k rows of text times
    # validated in 0.80-1.12 s, now 0.42-0.51 s; 2026-11-28)
    fraction, length_missing = (_free_name(name, frame.columns) for name in (FRACTION, END_MISSING))
    staged = {fraction: start_fraction | end_fraction}
    if fields.duration is not None:  # the length's own test: the end is start + length
        staged[length_missing], end_missing = end_missing, F.col(length_missing)
    elif not fields.point_events:
        end_missing = F.col(END).isNull()
    rows = frame.select(
        *[quoted(c) for c in original],
        F.col(SEQ),
        start_value.alias(START),
        end_value.alias(END),
        *key_columns,
        *value_exprs,
        *[value.alias(name) for name, value in staged.items()],
        *([quoted(MALFORMED)] if malformed else []),
    )
    reason = F.when(F.lit(False), F.lit(None).cast("string"))
    if malformed:
        reason = reason.when(quoted(MALFORMED).isNotNull(), quoted(MALFORMED))
    if CORRUPT_RECORD in original:
        reason = reason.when(quoted(CORRUPT_RECORD).isNotNull(), REASONS["json"])
    reason = (
        reason.when(F.col(START).isNull(), REASONS["start"])
        .when(end_missing, REASONS["duration"] if fields.duration is not None else REASONS["end"])
        .when(F.col(fraction), REASONS["fraction"])
        .when(F.col(END) < F.col(START), REASONS["order"])
    )
    for condition, text_reason in reasons:
        reason = reason.when(condition, text_reason)
    rows = rows.select(
        *[quoted(c) for c in rows.columns if c not in (*staged, MALFORMED)],
        reason.alias(REASON),
    )
    key_types = [dtype for _, dtype in key_exprs]
    return Prepared(rows, keys, kind == "date_time", value_types, result_types, original, values, key_types)


def _free_name(name: str, taken: list[str]) -> str:
    """``name``, with underscores added in front until no column of ``taken`` has it (Spark's names are
    case-insensitive)."""
    lowered = {c.lower() for c in taken}
    while name.lower() in lowered:
        name = "_" + name
    return name


def local_input_bytes(inputs: Inputs) -> int | None:
    """The size of the input files, when they are all local (a remote path's size is Spark's to find)."""
    return None if any("://" in path for path in inputs.files) else sum(os.path.getsize(p) for p in inputs.files)


#: local CSV files under this many bytes in all have their column kinds counted on the driver (``local_csv_stats``).
#: Not tuned: the quick compiler's "small local input" (``QUICK_JIT_INPUT``) taken over. The driver
#: parsed 1.6 MB (20k rows) in 0.033 s and 3.2 MB (42k rows) in 0.036 s (2026-11-28, 2 cores), against a Spark
#: job's 0.3 s in a warm session to 3.5 s in a fresh JVM; the bound keeps the whole table off a big input's driver.
DRIVER_COUNTS_BELOW = 4 * 2**20


def local_csv_stats(inputs: Inputs | None) -> Callable[[str, bool], ColumnStats | None] | None:
    """For local CSV files of under ``DRIVER_COUNTS_BELOW`` bytes in all: ``KindCounts``'s counts of a column of them,
    read on the driver by the reader the tasks run (``spanning.app.csv_records``), without a Spark job (a fresh
    JVM's first job: 3.5 s of a 20-row stream's 18 s, pyinstrument, 2026-11-28); None for other inputs. Larger files
    are counted by Spark's tasks, in parallel."""
    if inputs is None or inputs.format != "csv" or inputs.columns is None:
        return None
    size = local_input_bytes(inputs)
    if size is None or size >= DRIVER_COUNTS_BELOW:
        return None

    @functools.cache
    def records() -> Any:  # every file read once, when the first column is asked for
        import pyarrow as pa

        from spanning.app.csv_records import read_csv_records

        names = list(inputs.columns)
        return pa.concat_tables([read_csv_records(path, inputs.delimiter, names) for path in inputs.files])

    def column_stats(name: str, plain_only: bool) -> ColumnStats | None:
        table = records()
        if name not in table.column_names or name == MALFORMED:
            return None
        return text_stats(table.column(name), plain_only=plain_only)

    return column_stats


def load(spark: SparkSession, cfg: RunConfig, inputs: Inputs | None = None) -> Prepared:
    """Check the inputs (unless ``inputs`` are checked ones), read them and prepare every row (the reader contract)."""
    inputs = inputs or input_files(cfg.inputs.paths, cfg.inputs.format, cfg.inputs.delimiter)
    return prepared_frame(read_input(spark, inputs), cfg, inputs)


def prepared_frame(frame: DataFrame, cfg: RunConfig, inputs: Inputs | None = None, *,
                   column_stats: Callable[[str, bool], ColumnStats | None] | None = None,
                   kinds: KindCounts | None = None, csv: bool = False) -> Prepared:  # fmt: skip
    """``frame`` as the prepared frame: every row with its times in chronons, its values as numbers, or a reason
    (the reader contract). The one way in, for ``spanning.spark.aggregate``'s batch DataFrames and streams, ``spanning
    run`` and ``spanning stream``: the contract is asked here once, for the files, the column kinds and the rows.

    A batch ``frame``: ``inputs`` are the files it is a plain read of (``read_input``, as ``spanning run`` knows them),
    else found here when it is a plain read of local Parquet (``plain_parquet_files``), else None (any other
    DataFrame); their footers and sizes serve the plans. The kinds of its text columns are counted over ``frame``
    (on the driver for small local CSV files, ``local_csv_stats``), or taken from ``column_stats`` where they were
    counted already (``spark_jobs.batch.csv_read.KindsChanged``).

    A streaming ``frame`` (which no count can read): the kinds come from ``kinds``, counted over rows of the same
    schema (the files there at the stream's start, ``kinds_from``, or the checkpoint's saved counts); ``csv``: its
    rows are CSV records as ``csv_file_records`` reads them.
    """
    if frame.isStreaming:
        return prepare(frame, cfg, csv=csv, kinds=kinds)
    if inputs is None:
        inputs = plain_parquet_files(frame)
    kinds = KindCounts(lambda rows=frame: rows, column_stats=column_stats or local_csv_stats(inputs))
    prepared = prepare(frame, cfg, csv=inputs is not None and inputs.format == "csv", kinds=kinds)
    # a DataFrame of the caller's is recomputed rather than cached, as Parquet is (they may cache it themselves)
    prepared.columnar = inputs is None or inputs.format == "parquet"
    if inputs is not None:
        prepared.input_bytes = local_input_bytes(inputs)
        prepared.inputs = inputs
        prepared.value_bounds = value_bounds(prepared, cfg.query.numeric_columns)
    return prepared


def value_bounds(prepared: Prepared, columns: list[str]) -> dict[str, ValueBound]:
    """Bounds of the integer value ``columns`` of a local Parquet input, from the files' footers (no Spark job).

    Integer sums are otherwise carried as two parts so that none can overflow (``spark_jobs.batch.plans``); where
    every row group has statistics, 2 · rows · max |value| < 2^63 proves that a plain long sum of any
    contributions, including the range update's +x and −x, stays exact. Columns without statistics, or
    not plain integer columns, are left out.
    """
    if not prepared.local_parquet:
        return {}
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = {name: internal for name, internal in prepared.values.items()
              if name in columns and isinstance(prepared.value_types.get(internal), T.LongType)}  # fmt: skip
    found = {name: [0, True] for name in wanted}  # max |value|, no nulls
    rows = 0
    try:
        for path in prepared.inputs.files:
            meta = pq.ParquetFile(path).metadata
            paths = [meta.schema.column(j).path for j in range(meta.num_columns)]
            rows += meta.num_rows
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for name in list(found):
                    stats = group.column(paths.index(name)).statistics if name in paths else None
                    if stats is None or not stats.has_min_max or not stats.has_null_count or not isinstance(
                        stats.min, int) or isinstance(stats.min, bool):  # fmt: skip
                        del found[name]
                        continue
                    found[name][0] = max(found[name][0], abs(stats.min), abs(stats.max))
                    found[name][1] = found[name][1] and stats.null_count == 0
    except (OSError, pa.ArrowException):
        return {}
    return {wanted[name]: ValueBound(no_nulls, 2 * rows * biggest < 2**63)
            for name, (biggest, no_nulls) in found.items()}  # fmt: skip


TimesSample = tuple[np.ndarray, ...]  # starts and ends in chronons, read on the driver (and key group numbers)


def parquet_times_sample(inputs: Inputs | None, fields: EventFields, limit: int,
                         with_keys: bool = False) -> TimesSample | None:  # fmt: skip
    """Starts and ends (chronons) of the first ``limit`` rows of a local Parquet input, read on the driver (pyarrow,
    no Spark job), when ``--start`` and ``--end`` or ``--duration`` are plain timestamp or integer columns; else None.
    ``with_keys``: a third array, each row's key as a group number (``--key`` columns that are plain names).

    For the planner's estimates only: rows the job would reject are skipped, not reported.
    """
    if inputs is None or inputs.format != "parquet" or local_input_bytes(inputs) is None or fields.point_events:
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    names = [fields.start, fields.end if fields.duration is None else fields.duration]
    keys = list(fields.keys) if with_keys else []
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
    chronon = 1_000 if fields.time_unit == "ms" else 1
    batch = _first_rows(inputs.files[0], list(dict.fromkeys([*names, *keys])), limit)
    if batch is None:
        return None
    values = []
    for column in [batch.column(name) for name in names]:
        if pa.types.is_timestamp(column.type):  # floor to chronons, as unix_seconds and unix_millis do
            ticks = pc.cast(column, pa.timestamp(column.type.unit), safe=False).cast(pa.int64())
            values.append(np.floor_divide(ticks.to_numpy(zero_copy_only=False).astype("float64"),
                                          per_second[column.type.unit] / chronon))  # fmt: skip
        elif pa.types.is_integer(column.type):
            values.append(column.cast(pa.float64()).to_numpy(zero_copy_only=False))
        else:
            return None
    starts, ends = values[0], values[1] if fields.duration is None else values[0] + values[1]
    usable = np.isfinite(starts) & np.isfinite(ends) & (ends >= starts)
    sample = starts[usable].astype(np.int64), ends[usable].astype(np.int64)
    if not with_keys:
        return sample
    return *sample, key_groups(batch, keys, usable)


def key_groups(rows: Any, keys: list[str], usable: np.ndarray) -> np.ndarray:
    """Each ``usable`` row's key (``keys``, columns of the pyarrow Table or RecordBatch ``rows``) as a group
    number, nulls a key of their own; zeros with no key: a planner's sample (``parquet_times_sample``,
    ``csv_read.csv_merge_is_small``)."""
    if not keys:
        return np.zeros(int(usable.sum()), np.int64)
    from spanning.engines.inputs import arrow_frame

    frame = arrow_frame(rows.select(list(keys)))  # integer keys with nulls exact, not float64
    frame.columns = [str(i) for i in range(len(keys))]
    frame = frame[usable]
    return frame.groupby(list(frame.columns), dropna=False).ngroup().to_numpy(np.int64)


def _first_rows(path: str, columns: list[str], limit: int):
    """The first ``limit`` rows of ``columns`` of a Parquet file, as one pyarrow RecordBatch, read on the driver;
    None when a column is missing or the file cannot be read (the Spark job then reports what is wrong)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(path)
        if any(name not in source.schema_arrow.names for name in columns):
            return None
        return next(source.iter_batches(batch_size=limit, columns=columns), None)
    except (OSError, pa.ArrowException):
        return None


_ARROW_KEY_TYPES = {"string": T.StringType(), "large_string": T.StringType(), "int8": T.ByteType(),
                    "int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType()}  # fmt: skip


def parquet_key_values(prepared: Prepared, texts: list[str], limit: int) -> list[tuple] | None:
    """The distinct values of the keys of a local Parquet input, read on the driver (pyarrow, no Spark job), when
    every ``--key`` is a plain text or integer column: at most ``limit + 1`` of them; else None.

    Keys of every row, rejected ones included: a superset of the events' keys, which is what ``key_ids`` needs.
    """
    if not prepared.local_parquet or list(texts) != prepared.keys:  # an expression or a renamed key: Spark's
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    spark_types = {k: prepared.rows.schema[key_column(i)].dataType for i, k in enumerate(prepared.keys)}
    seen: set[tuple] = set()
    try:
        for path in prepared.inputs.files:
            one = len(texts) == 1  # one text key read as dictionary indices: only the distinct values are hashed
            source = pq.ParquetFile(path, read_dictionary=texts if one else None)
            schema = source.schema_arrow
            types = {f.name: f.type.value_type if pa.types.is_dictionary(f.type) else f.type for f in schema}
            if any(_ARROW_KEY_TYPES.get(str(types.get(k))) != spark_types[k] for k in texts):
                return None
            if one:
                seen.update((value,) for value in pc.unique(source.read(columns=texts).column(0)).to_pylist())
            else:
                table = source.read(columns=list(texts)).group_by(list(texts)).aggregate([])
                seen.update(zip(*[table.column(k).to_pylist() for k in texts], strict=True))
            if len(seen) > limit:
                break
    except (OSError, pa.ArrowException):
        return None
    return sorted(seen, key=lambda row: [(v is None, v if v is not None else 0) for v in row])[: limit + 1]


def as_read(prepared: Prepared) -> list[Column]:
    """The original columns of a prepared row, as read."""
    return [quoted(c) for c in prepared.original_columns]


def events(
    prepared: Prepared, series_start: str, counts: Observation | None = None, late: Column | None = None
) -> DataFrame:
    """The usable rows as engine input: keys, _seq, _start, _end, _series and value columns.

    With ``counts``, the rows read and rejected are counted on the way (``read``, ``rejected``), so the
    query that consumes these events also yields the counts, with no pass of its own; with ``late`` (a
    flag over _start and _end), the usable rows it flags too (``late``).
    """
    rows = prepared.rows
    if counts is not None:  # observed over the columns used only: the scan stays as narrow as without
        used = [*[key_column(i) for i in range(len(prepared.keys))], SEQ, START, END, *prepared.value_types,
                *[valid_column(c) for c in prepared.value_types], *prepared.result_types, REASON]  # fmt: skip
        late_count = [] if late is None else [F.count_if(F.col(REASON).isNull() & late).alias("late")]
        rows = rows.select(*[quoted(c) for c in used]).observe(
            counts, F.count(F.lit(1)).alias("read"), F.count(REASON).alias("rejected"), *late_count
        )
    rows = rows.where(F.col(REASON).isNull())
    columns = [
        *[F.col(key_column(i)).alias(k) for i, k in enumerate(prepared.keys)],
        F.col(SEQ),
        F.col(START),
        F.col(END),
        *[F.col(c) for c in prepared.value_types],
        *[F.col(valid_column(c)) for c in prepared.value_types],
        *[F.col(c) for c in prepared.result_types],
    ]
    rows = rows.select(*columns)
    if series_start == "first":
        return rows
    if series_start == "earliest":
        if prepared.keys:
            by_key = Window.partitionBy(*[quoted(k) for k in prepared.keys])
            return rows.withColumn(SERIES, F.min(START).over(by_key))
        first = prepared.rows.where(F.col(REASON).isNull()).agg(F.min(START)).first()[0]  # not the observed rows
        return rows.withColumn(SERIES, F.lit(first).cast("long"))
    return rows.withColumn(SERIES, F.lit(int(series_start)).cast("long"))


def plain_parquet_files(df: DataFrame) -> Any:
    """The local Parquet files that ``df`` is a plain read of (``spark.read.parquet(...)``, no projection, filter,
    partition column or other schema), checked as ``spanning run`` checks its inputs; else None.

    The vector plan's tasks then read those files' row groups themselves (``plans.read_plan``), as they do for
    ``spanning run`` on the same files: no row enters the JVM. The read is found in the DataFrame's plan
    (``session_kind.is_plain_parquet_read``: the analysed plan on a classic session, the client's plan on Connect),
    its files by ``inputFiles()``; on Connect they must also be files this process sees at the same paths (a local
    server, or a file system both mount), since the plan reads their footers here.
    """
    try:
        if not session_kind.is_plain_parquet_read(df):
            return None
        uris = list(df.inputFiles())
    except Exception:  # noqa: BLE001 - another kind of plan, or a Spark without these classes: the general path
        return None
    if not uris or any(urlparse(uri).scheme not in ("", "file") for uri in uris):
        return None
    try:
        inputs = input_files([unquote(urlparse(uri).path) for uri in uris], "parquet", warn=False)
    except UsageError:  # an empty file, say: the general path reads what Spark reads
        return None
    footer = parquet_footer_schema(inputs)
    if footer is None or [(f.name, f.dataType) for f in footer] != [(f.name, f.dataType) for f in df.schema]:
        return None  # a schema of the caller's that reads the files otherwise than their footers say
    return inputs


def result_type(spec: str, prepared: Prepared) -> T.DataType:
    """Spark type of an aggregate's result column, from the kind of result it declares."""
    agg = parse_aggregate(spec)
    kind = agg.capabilities.result
    if kind in (ResultKind.COUNT, ResultKind.INTEGER):
        return T.LongType()
    if kind is ResultKind.FLOAT:
        return T.DoubleType()
    if kind is ResultKind.BINARY:
        return T.BinaryType()
    if kind is ResultKind.INPUT:
        return prepared.value_types[agg.result_column]
    if kind is ResultKind.RESULT_COLUMN:
        return prepared.value_types.get(agg.result_column) or prepared.result_types[agg.result_column]
    raise ValueError(f"no Spark type for aggregate {spec!r}")


QUICK_JIT_INPUT = 4 * 2**20  # below this, the JVM's quick compiler alone: 1-2 s less at 20k rows, about even at


def small_local_input(inputs: Inputs) -> bool:
    """Local input files of under ``QUICK_JIT_INPUT`` bytes in all: there the JVM's quick compiler alone pays."""
    size = local_input_bytes(inputs)
    return size is not None and size < QUICK_JIT_INPUT
