"""Reading CDR files and turning rows into events: times as chronons, values as numbers, or a reason.

Every input row comes out of ``prepare`` once, either with ``_reason`` null (an event) or with the
reason it cannot be used (DESIGN.md: nothing is dropped silently).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import AnalysisException

from spanning.jobspec import INPUT_FORMATS, REASONS, RunConfig, UsageError

SEQ, START, END, SERIES, REASON = "_seq", "_start", "_end", "_series", "reason"


def key_column(i: int) -> str:
    """Internal name of the i-th key in prepared rows (its output name may be an input column's)."""
    return f"__key_{i}"


def valid_column(column: str) -> str:
    """Name of the boolean column that says whether ``column`` holds a value."""
    return f"{column}__valid"


def input_format(paths: list[str], given: str | None) -> str:
    if given:
        return given
    for path in paths:
        candidates = [path]
        if os.path.isdir(path):
            candidates = sorted(glob.glob(os.path.join(path, "*")))
        for candidate in candidates:
            ext = os.path.splitext(candidate)[1].lower()
            if ext in INPUT_FORMATS:
                return INPUT_FORMATS[ext]
    raise UsageError(f"cannot tell the input format of {paths[0]!r}: give --input-format csv|parquet|json")


def check_inputs(paths: list[str]) -> None:
    for path in paths:
        if "://" in path:  # hdfs://, s3a://: Spark checks
            continue
        if not glob.glob(path):
            raise UsageError(f"input not found: {path}")


def read_input(spark: SparkSession, paths: list[str], given_format: str | None) -> DataFrame:
    """Files, folders or globs of CSV (with header), Parquet or JSON lines."""
    check_inputs(paths)
    fmt = input_format(paths, given_format)
    reader = spark.read
    if fmt == "csv":
        # infer numbers (integers stay exact), but keep time-looking text as text: inference would turn
        # "11:00:00" into today's date at 11:00, and rejected/ must show rows as read
        inferred = reader.options(header=True, inferSchema=True).csv(paths).schema
        schema = T.StructType(
            [
                T.StructField(f.name, T.StringType(), True)
                if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType, T.DateType))
                else f
                for f in inferred.fields
            ]
        )
        frame = reader.options(header=True, mode="PERMISSIVE").schema(schema).csv(paths)
        renames = {c: c.strip() for c in frame.columns if c != c.strip()}  # " startDate" -> "startDate"
        if renames and len(set(frame.columns) - set(renames) | set(renames.values())) == len(frame.columns):
            frame = frame.withColumnsRenamed(renames)
        return frame
    if fmt == "parquet":
        return reader.parquet(*paths)
    return reader.json(paths)


@dataclass
class Prepared:
    """Rows with their reason, plus what the window job needs to know about the columns."""

    rows: DataFrame  # original columns + _seq + _start + _end + keys + values + _reason
    keys: list[str]  # output names of the key columns
    time_is_timestamp: bool
    value_types: dict[str, T.DataType]  # numeric value columns as sent to the engine
    result_types: dict[str, T.DataType]  # non-numeric columns read by arg-aggregates
    original_columns: list[str]


def _expression(frame: DataFrame, text: str, what: str) -> tuple[Column, T.DataType, str]:
    """A column name or Spark SQL expression, resolved against the input, with its type and name."""
    column = F.col(f"`{text}`") if text in frame.columns else F.expr(text)
    try:
        field = frame.select(column).schema.fields[0]
    except AnalysisException as err:
        first_line = str(err).strip().splitlines()[0]
        raise UsageError(f"cannot use --{what} {text!r}: {first_line}") from err
    except Exception as err:  # parse errors are not AnalysisExceptions in every Spark version
        first_line = str(err).strip().splitlines()[0]
        raise UsageError(f"cannot parse --{what} {text!r}: {first_line}") from err
    return column, field.dataType, field.name


def _chronons(column: Column, dtype: T.DataType, unit: str) -> tuple[Column, Column, bool]:
    """(chronon value or null, is-fractional flag, was-a-timestamp) for a time expression."""
    to_unit = F.unix_millis if unit == "ms" else F.unix_seconds
    no = F.lit(False)
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return to_unit(column.cast("timestamp")), no, True
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return column.cast("long"), no, False
    if isinstance(dtype, T.NumericType):
        value = column.cast("double")
        return F.floor(value).cast("long"), value != F.floor(value), False
    if isinstance(dtype, T.StringType):  # date-time text, else epoch numbers as text
        parsed = to_unit(F.to_timestamp(column))
        number = column.cast("double")
        return F.coalesce(parsed, F.floor(number).cast("long")), parsed.isNull() & (number != F.floor(number)), True
    raise UsageError(f"a time expression has type {dtype.simpleString()}: give a timestamp, date-time text or a number")


def _numeric(column: Column, dtype: T.DataType) -> tuple[Column, T.DataType]:
    """A value column as the engine reads it: long for integers (exact sums), double otherwise."""
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)):
        return column.cast("long"), T.LongType()
    if isinstance(dtype, T.DecimalType) and dtype.scale == 0 and dtype.precision <= 18:
        return column.cast("long"), T.LongType()
    return column.cast("double"), T.DoubleType()


def prepare(frame: DataFrame, cfg: RunConfig) -> Prepared:
    """Add ``_seq``, ``_start``, ``_end``, keys, engine-ready values and ``reason`` to the input rows."""
    original = list(frame.columns)
    start, start_type, _ = _expression(frame, cfg.start, "start")
    start_value, start_fraction, start_ts = _chronons(start, start_type, cfg.time_unit)
    if cfg.point_events:
        end_value, end_fraction, end_missing = start_value, F.lit(False), F.lit(False)
    elif cfg.duration is not None:
        duration, duration_type, _ = _expression(frame, cfg.duration, "duration")
        if not isinstance(duration_type, (T.NumericType, T.StringType)):
            raise UsageError(f"--duration must be a number of chronons, not {duration_type.simpleString()}")
        length = duration.cast("double")
        end_value = start_value + F.floor(length).cast("long")
        end_fraction, end_missing = length != F.floor(length), length.isNull()
    else:
        end, end_type, _ = _expression(frame, cfg.end, "end")
        end_value, end_fraction, end_ts = _chronons(end, end_type, cfg.time_unit)
        end_missing = end_value.isNull()
        if end_ts != start_ts:
            raise UsageError("--start and --end must both be timestamps or both be numbers")

    keys, key_columns = [], []
    for i, text in enumerate(cfg.keys):
        column, _, name = _expression(frame, text, "key")
        keys.append(name if name not in (SEQ, START, END) else f"key_{i}")
        key_columns.append(column.alias(key_column(i)))
    if len(set(keys)) != len(keys):
        raise UsageError("two --key expressions have the same name: rename one with 'expr AS name'")

    value_types, result_types, value_exprs, reasons = {}, {}, [], []
    for name in cfg.value_columns:
        if name not in frame.columns:
            raise UsageError(f"unknown column {name!r} in --agg: the columns are {', '.join(original)}")
        dtype = frame.schema[name].dataType
        if name in cfg.numeric_columns:
            value, value_types[name] = _numeric(F.col(f"`{name}`"), dtype)
            present = value.isNotNull()
            reasons.append((F.col(f"`{name}`").isNotNull() & ~present, REASONS["value"].format(column=name)))
            value_exprs += [
                F.coalesce(value, F.lit(0).cast(value_types[name])).alias(name),
                present.alias(valid_column(name)),
            ]
        else:
            result_types[name] = dtype
            value_exprs.append(F.col(f"`{name}`"))

    reason = (
        F.when(start_value.isNull(), REASONS["start"])
        .when(end_missing, REASONS["duration"] if cfg.duration is not None else REASONS["end"])
        .when(start_fraction | end_fraction, REASONS["fraction"])
        .when(end_value < start_value, REASONS["order"])
    )
    for condition, text in reasons:
        reason = reason.when(condition, text)
    frame = frame.withColumn(SEQ, F.monotonically_increasing_id())  # arrival number, after user expressions
    rows = frame.select(
        *[F.col(f"`{c}`") for c in original if c not in cfg.value_columns],
        *[F.col(f"`{c}`").alias(f"__in_{c}") for c in cfg.value_columns],
        F.col(SEQ),
        start_value.alias(START),
        end_value.alias(END),
        *key_columns,
        *value_exprs,
        reason.alias(REASON),
    )
    return Prepared(rows, keys, start_ts, value_types, result_types, original)


def as_read(prepared: Prepared) -> list[Column]:
    """The original columns of a prepared row, as read."""
    return [
        F.col(f"`__in_{c}`").alias(c) if f"__in_{c}" in prepared.rows.columns else F.col(f"`{c}`")
        for c in prepared.original_columns
    ]


def events(prepared: Prepared, series_start: str) -> DataFrame:
    """The usable rows as engine input: keys, _seq, _start, _end, _series and value columns."""
    rows = prepared.rows.where(F.col(REASON).isNull())
    columns = [
        *[F.col(key_column(i)).alias(k) for i, k in enumerate(prepared.keys)],
        F.col(SEQ),
        F.col(START),
        F.col(END),
        *[F.col(f"`{c}`") for c in prepared.value_types],
        *[F.col(f"`{valid_column(c)}`") for c in prepared.value_types],
        *[F.col(f"`{c}`") for c in prepared.result_types],
    ]
    rows = rows.select(*columns)
    if series_start == "first":
        return rows
    if series_start == "earliest":
        if prepared.keys:
            by_key = Window.partitionBy(*[F.col(f"`{k}`") for k in prepared.keys])
            return rows.withColumn(SERIES, F.min(START).over(by_key))
        first = rows.agg(F.min(START)).first()[0]
        return rows.withColumn(SERIES, F.lit(first).cast("long"))
    return rows.withColumn(SERIES, F.lit(int(series_start)).cast("long"))
