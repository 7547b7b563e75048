"""The reader contract: how both engines of ``spanning run``, and ``spanning.aggregate``, turn rows into events.

The local engine (pandas, ``spanning.app.local_run``) and the Spark engine (``spark_jobs.reading.prepare``) follow
these rules, so that the same file gives the same windows, late rows and rejected rows on both:

* **Files** (``spanning.app.files``). CSV (RFC 4180: a header line, fields quoted with ``"``, a quote inside
  a field doubled, line breaks inside quoted fields), Parquet, or JSON lines, told apart by extension (``.gz``/``.bz2``
  compression is allowed for CSV and JSON). A folder is read file by file, skipping names that start
  with ``_`` or ``.``. Inputs that mix formats, files without a header, files that seem to use another
  delimiter, empty files and CSV files whose headers differ are refused with one line naming the file.
* **CSV fields are text;** an empty field (quoted or not) is null. Columns are typed by what the query
  does with them, from counts over the whole column (``column_kind``):
  time columns hold epoch numbers or date-times, whichever most values are; aggregated columns are
  integers if every number in them is an integer, else floating point; keys and the other columns are
  integers if every value is written as a plain integer (no sign, no leading zero, in 64 bits), so that
  nothing is lost, else text as read.
* **Date-time text** is ``yyyy-M-d[( |T)H:m[:s[.fraction]]][Z|±HH:MM]``. Text without a zone is a wall
  time in ``--timezone``: in a daylight-saving gap it moves forward by the gap, and where the clock goes
  back it is the earlier instant. Fractions of a chronon are cut (floor).
* **Numbers** are ``[+-]digits[.digits][e±digits]``; ``NaN`` (any case) is null, as in SQL; infinite
  values and integers beyond 64 bits are rejected with a reason. A value that is neither is rejected
  with a reason; it never fails the run, and never turns into another value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from spanning.aggregates import INT64_MAX, INT64_MIN

__all__ = [
    "CHRONON_MS",
    "CHRONONS_PER_SECOND",
    "chronon_timestamps",
    "first_reasons",
    "REASONS",
    "UsageError",
    "ColumnStats",
    "column_kind",
    "matches",
    "arrow_text",
    "text_mask",
    "text_stats",
    "time_chronons",
    "number_values",
    "check_timezone",
    "tzinfo",
    "PATTERNS",
    "java_pattern",
]

# The grammar of text values, in the common subset of Python's ``re`` and Java's regex (Spark's rlike).
OFFSET = r"[+-](?:(?:0[0-9]|1[0-7]):[0-5][0-9]|18:00)"  # a fixed UTC offset, within Java's ±18:00
_DATE_TIME = (
    r"[ ]*([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:[ T]([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{1,9}))?)?[ ]*(Z|" + OFFSET + r")?)?[ ]*"
)
PATTERNS = {
    "integer": r"[ ]*[+-]?[0-9]+[ ]*",
    "number": r"[ ]*[+-]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][+-]?[0-9]+)?[ ]*",
    "nan": r"[ ]*[+-]?[Nn][Aa][Nn][ ]*",
    "plain_integer": r"-?(?:0|[1-9][0-9]{0,18})",  # round-trips through int exactly (range checked apart)
    "date_time": _DATE_TIME,
}
_COMPILED = {name: re.compile(pattern) for name, pattern in PATTERNS.items()}
INT64 = (INT64_MIN, INT64_MAX)
CHRONON_MS = {"s": 1000, "ms": 1}  # --time-unit: milliseconds per chronon
CHRONONS_PER_SECOND = {unit: 1000 // ms for unit, ms in CHRONON_MS.items()}

# why an input row could not be used (the `reason` column of rejected/)
REASONS = {
    "start": "start is null or not a time",
    "end": "end is null or not a time",
    "duration": "duration is null or not a number",
    "fraction": "time is not a whole number of chronons",
    "order": "end is before start",
    "value": "non-numeric value in column {column}",
    "range": "integer out of the 64-bit range in column {column}",
    "infinite": "infinite value in column {column}",
    "json": "not a JSON object (malformed line)",
}


class UsageError(ValueError):
    """A mistake in what the user asked for: reported as one line, without a stack trace."""


def matches(name: str, text: str) -> bool:
    """Whether ``text`` is, as a whole, what pattern ``name`` of ``PATTERNS`` describes."""
    return _COMPILED[name].fullmatch(text) is not None


TIME_LIMIT = 2.0**62  # epoch numbers beyond this are not times (and would not fit once scaled)


def java_pattern(name: str) -> str:
    r"""The pattern anchored for Spark's ``rlike`` (Java regex; ``\z`` is the very end of the text)."""
    return f"^(?:{PATTERNS[name]})\\z"


# ------------------------------------------------------------------------------------------------
# column kinds


@dataclass(frozen=True)
class ColumnStats:
    """Counts over one text column: how many values match each form of the grammar."""

    present: int = 0  # non-null values
    integer: int = 0
    number: int = 0  # integers included
    date_time: int = 0
    plain_integer: int = 0  # plain integers that fit in 64 bits


def column_kind(role: str, stats: ColumnStats) -> str | None:
    """The type a text column takes, from its role in the query and its counts.

    >>> column_kind("time", ColumnStats(present=5, integer=4, number=4, date_time=1))
    'number'
    >>> column_kind("value", ColumnStats(present=3, integer=2, number=3))
    'float'
    >>> column_kind("plain", ColumnStats(present=2, integer=2, number=2, plain_integer=1))
    'text'
    """
    if role == "time":  # epoch numbers or date-times, whichever most values are (ties: numbers)
        if stats.number == 0 and stats.date_time == 0:
            return None  # nothing usable: takes the other time column's kind
        return "date_time" if stats.date_time > stats.number else "number"
    if role == "value":
        return "integer" if stats.number == stats.integer else "float"
    if role == "plain":
        return "integer" if stats.present and stats.plain_integer == stats.present else "text"
    raise ValueError(f"unknown column role {role!r}")


def time_kinds(start: str | None, end: str | None) -> str:
    """One kind for the start and end columns, or a clear error when they disagree."""
    if start and end and start != end:
        names = {"number": "epoch numbers", "date_time": "date-times"}
        raise UsageError(f"--start holds {names[start]} but --end holds {names[end]}: give both in one form")
    return start or end or "number"


def check_timezone(name: str) -> str:
    """A time zone both engines understand: a region (Europe/Paris), UTC, or an offset such as +01:00."""
    if re.fullmatch(OFFSET, name) or name in ("UTC", "GMT"):
        return name
    try:  # region ids (Area/City), as Java knows them; not the tz database's own files (localtime, posix/...)
        if "/" not in name or name.split("/")[0] in ("posix", "right", "Etc") and name != "Etc/UTC":
            raise ValueError(name)
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"unknown --timezone {name!r}: give a region such as Europe/Paris, UTC or +01:00") from None
    return name


def arrow_text(series):
    """A column of text (None, NaN or NA for null; a pandas Series or an Arrow string array) as an Arrow
    string array, for pyarrow.compute's RE2."""
    import pyarrow as pa

    if isinstance(series, pa.ChunkedArray):
        series = series.combine_chunks()
    if isinstance(series, pa.Array):
        if pa.types.is_string(series.type) or pa.types.is_large_string(series.type):
            return series  # as it is: RE2 reads both (a cast to large_string copies the offsets)
        return series.cast(pa.large_string())
    return pa.array(series.astype("string"), type=pa.large_string(), from_pandas=True)


def text_mask(text, name: str) -> np.ndarray:
    """Which values of an Arrow string array (``arrow_text``) are, as a whole, pattern ``name`` (False for null).

    RE2 (pyarrow.compute) instead of Python's ``re`` per value: 50-100 times faster on a million values; the
    patterns are in the subset both read alike, and RE2's ``$`` is the very end of the text (Python's
    ``fullmatch``), which ``tests/test_time_parsing.py`` checks against ``re`` on random text.
    """
    import pyarrow.compute as pc

    matched = pc.match_substring_regex(text, f"^(?:{PATTERNS[name]})$")
    return (matched.fill_null(False) if matched.null_count else matched).to_numpy(zero_copy_only=False)


def whole_integers(text) -> np.ndarray | None:
    """The values of an Arrow string array (``arrow_text``) whose every value is an integer of the grammar that
    Arrow's own cast reads (digits, a leading minus, within 64 bits), 0 where null; None when some value is not.

    The common case of CSV columns, at a cast's cost (8-11 ns a value, against 23 ns for one pattern and 140 ns
    for ``text_stats``' five); a column with any other value (a sign ``+``, spaces, a fraction, ``NaN``, too many
    digits) takes the grammar's general path. Arrow's cast also reads hexadecimal (``0x10``), which the grammar
    does not: the digits are checked, and such a column takes the general path too.

    >>> import pyarrow as pa
    >>> whole_integers(pa.array(["12", None, "-3", "007"])).tolist(), whole_integers(pa.array(["1", "0x10"]))
    ([12, 0, -3, 7], None)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values, plain = plain_integer_values(text)
    if plain.sum() == len(text) - text.null_count:  # the common case, in one pass
        return values
    try:
        numbers = pc.cast(text, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    digits = pc.match_substring_regex(text, "^-?[0-9]+$")
    if digits.false_count:  # only hexadecimal gets past the cast otherwise
        return None
    return numbers.fill_null(0).to_numpy(zero_copy_only=False)


def text_stats(series, plain_only: bool = False, plain: np.ndarray | None = None) -> ColumnStats:
    """The counts of ``column_kind`` for a column of text (None for null); with ``plain_only`` only what the
    role "plain" reads (present, plain_integer), the others left 0. ``plain``: which values are plain integers
    within 64 bits (``plain_integer_values``), where the caller has read them already.

    A column of plain integers only (the common case of ids, epoch times, counts) is counted from that one
    pattern: each value is also an integer and a number, and no date-time (which has dashes between digits).
    """
    text = arrow_text(series)
    present = int(len(text) - text.null_count)
    if plain is None:
        plain = plain_integer_values(text)[1]
    plain_integers = int(plain.sum())
    counted = plain_stats(present, plain_integers, plain_only)
    if counted is not None:
        return counted
    return ColumnStats(
        present=present,
        integer=int(text_mask(text, "integer").sum()),
        number=int(text_mask(text, "number").sum()),
        date_time=int(text_mask(text, "date_time").sum()),
        plain_integer=plain_integers,
    )


def plain_stats(present: int, plain_integers: int, plain_only: bool) -> ColumnStats | None:
    """``text_stats``' counts of a column from its ``present`` values and its plain integers alone, where they settle
    them: what the role "plain" reads (``plain_only``), or a column of plain integers only (each also an integer and a
    number, and no date-time). None where the other forms must be counted value by value."""
    if plain_only:
        return ColumnStats(present=present, plain_integer=plain_integers)
    if plain_integers == present:
        return ColumnStats(present=present, integer=present, number=present, date_time=0, plain_integer=present)
    return None


def plain_integer_values(text) -> tuple[np.ndarray, np.ndarray]:
    """The values of an Arrow string array that are plain integers within 64 bits (``PATTERNS["plain_integer"]``),
    0 elsewhere, and which they are: the compiled ``plain_integers``, one pass over the bytes. The common case of
    CSV columns (ids, epoch times, counts); measured 2026-11-29 on 10-digit values, 15-19 ns a value against 27 ns
    for Arrow's cast and a look at each value's first two bytes (the forms the cast takes beyond the pattern).

    >>> import pyarrow as pa
    >>> values, plain = plain_integer_values(pa.array(["17", "-3", "0", "007", "-0", "-07", None, "0x10", "+5"]))
    >>> values.tolist(), plain.tolist()
    ([17, -3, 0, 0, 0, 0, 0, 0, 0], [True, True, True, False, True, False, False, False, False])
    """
    from spanning.kernels.compiled import plain_integers

    data = text.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return plain_integers(_offsets(text), data, text.is_valid().to_numpy(zero_copy_only=False))


def _offsets(text) -> np.ndarray:
    import pyarrow as pa

    width = np.int64 if pa.types.is_large_string(text.type) else np.int32
    return np.frombuffer(text.buffers()[1], dtype=width)[text.offset : text.offset + len(text) + 1]


def is_text(series) -> bool:
    """Whether a column (pandas, or an Arrow array) holds text (and nulls) rather than typed values."""
    if not isinstance(series, pd.Series) and hasattr(series, "type"):  # an Arrow array
        import pyarrow as pa

        return pa.types.is_string(series.type) or pa.types.is_large_string(series.type)
    if pd.api.types.is_string_dtype(series.dtype) and not pd.api.types.is_object_dtype(series.dtype):
        return True
    if not pd.api.types.is_object_dtype(series.dtype):
        return False
    kinds = {type(v) for v in series.to_numpy() if v is not None and v is not pd.NA and v == v}
    return kinds <= {str}


@dataclass
class Numbers:
    """A column as numbers: values (0 where absent), which are present, and why rows are rejected."""

    values: np.ndarray  # int64 or float64
    present: np.ndarray  # bool: a value (not null, not NaN)
    garbage: np.ndarray  # bool: a value that is no number
    out_of_range: np.ndarray  # bool: an integer beyond 64 bits
    infinite: np.ndarray  # bool

    def checks(self, column: str) -> list[tuple[np.ndarray, str]]:
        """The rows this column rejects, with their reasons, in the contract's order."""
        return [(self.garbage, REASONS["value"].format(column=column)),
                (self.out_of_range, REASONS["range"].format(column=column)),
                (self.infinite, REASONS["infinite"].format(column=column))]  # fmt: skip

    def nullable(self) -> pd.api.extensions.ExtensionArray:
        """The values as a pandas Int64 or Float64 array, absent ones null."""
        array = pd.arrays.IntegerArray if self.values.dtype.kind == "i" else pd.arrays.FloatingArray
        return array(self.values, ~self.present)


def first_reasons(rows: int, checks: list[tuple[np.ndarray, str | np.ndarray]]) -> np.ndarray:
    """Each row's reason: the first check in ``checks`` that fails it (None: no check does).

    A check is (failed, reason): one reason for all its rows, or an array holding each row's own.
    """
    reasons = np.full(rows, None, dtype=object)
    for failed, text in checks:
        chosen = (reasons == None) & failed  # noqa: E711 - elementwise
        reasons[chosen] = text[chosen] if isinstance(text, np.ndarray) else text
    return reasons


def number_values(series: pd.Series, kind: str | None) -> Numbers:
    """A column as numbers under the contract (``kind``: integer or float for text, None for typed columns)."""
    n = len(series)
    none = np.zeros(n, dtype=bool)
    if is_text(series):
        text = arrow_text(series)
        given = text.is_valid().to_numpy(zero_copy_only=False)
        whole = whole_integers(text)
        if whole is not None:  # every value an integer within 64 bits: as either kind reads it
            values = whole if kind == "integer" else whole.astype(np.float64)
            return Numbers(values, given, none, none, none)
        nan = text_mask(text, "nan")
        if kind == "integer":
            match = text_mask(text, "integer")
            parsed = [int(v) for v in text.filter(match).to_pylist()]
            fits = np.array([INT64[0] <= v <= INT64[1] for v in parsed], dtype=bool)
            values = np.zeros(n, dtype=np.int64)
            rows = np.flatnonzero(match)
            values[rows[fits]] = [v for v, ok in zip(parsed, fits, strict=True) if ok]
            present = np.zeros(n, dtype=bool)
            present[rows[fits]] = True
            out_of_range = np.zeros(n, dtype=bool)
            out_of_range[rows[~fits]] = True
            return Numbers(values, present, given & ~match & ~nan, out_of_range, none)
        match = text_mask(text, "number")
        floats = np.zeros(n, dtype=np.float64)
        floats[match] = [float(v) for v in text.filter(match).to_pylist()]
        infinite = match & np.isinf(floats)
        floats[infinite] = 0
        return Numbers(floats, match & ~infinite, given & ~match & ~nan, none, infinite)
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        present = series.notna().to_numpy()
        if dtype.kind == "u" and dtype.itemsize == 8:  # unsigned 64-bit values beyond int64 do not fit
            big = present & (series.to_numpy(dtype=np.uint64, na_value=0) > np.uint64(INT64_MAX))
            values = np.where(big, 0, series.to_numpy(dtype=np.uint64, na_value=0)).astype(np.int64)
            return Numbers(values, present & ~big, none, big, none)
        return Numbers(series.to_numpy(dtype=np.int64, na_value=0), present, none, none, none)
    if pd.api.types.is_numeric_dtype(dtype):
        floats = series.to_numpy(dtype=np.float64, na_value=np.nan)
        infinite = np.isinf(floats)
        present = ~np.isnan(floats) & ~infinite
        return Numbers(np.where(present, floats, 0.0), present, none, none, infinite)
    # anything else (decimals, booleans with nulls, mixed objects): Python numbers where they are numbers
    values = series.to_numpy(dtype=object)
    present = [v for v in values if v is not None and v is not pd.NA]
    integral = all(isinstance(v, bool) or (isinstance(v, Decimal) and v.is_finite() and v.as_tuple().exponent >= 0
                                           and INT64_MIN <= v <= INT64_MAX) for v in present)  # fmt: skip
    if present and integral:  # as Spark reads booleans and DECIMAL(p, 0) with p <= 18: 64-bit integers
        ints = np.array([0 if v is None or v is pd.NA else int(v) for v in values], dtype=np.int64)
        return Numbers(ints, ~pd.isna(series).to_numpy(), none, none, none)
    floats = np.zeros(n, dtype=np.float64)
    present, garbage = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    for i, v in enumerate(values):
        if v is None or v is pd.NA:
            continue
        try:
            floats[i] = float(v)
        except (TypeError, ValueError):
            garbage[i] = True
            continue
        present[i] = floats[i] == floats[i]
    infinite = present & np.isinf(floats)
    return Numbers(np.where(present & ~infinite, floats, 0.0), present & ~infinite, garbage, none, infinite)


def plain_values(series: pd.Series, kind: str) -> pd.Series:
    """A key or other column: plain integers as Int64 when ``kind`` says so, NaN as null, else as read."""
    if kind == "integer":  # every value is a plain integer within 64 bits (column_kind): Arrow's cast reads them
        import pyarrow as pa
        import pyarrow.compute as pc

        numbers = pc.cast(arrow_text(series), pa.int64())
        missing = ~numbers.is_valid().to_numpy(zero_copy_only=False)
        values = numbers.fill_null(0).to_numpy(zero_copy_only=False)
        return pd.Series(pd.arrays.IntegerArray(values, missing), name=series.name)
    if series.dtype.kind == "f":  # NaN is null
        return series.astype("Float64")
    return series


@dataclass
class Times:
    """A time column in chronons: values, which are present, which are fractional, and its kind."""

    values: np.ndarray
    present: np.ndarray
    fractional: np.ndarray


def time_kind_of(series: pd.Series) -> str | None:
    """The kind of a time column before any row is parsed (None: no usable value to tell)."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return "date_time"
    if is_text(series):
        return column_kind("time", text_stats(series))
    if pd.api.types.is_bool_dtype(series.dtype):
        raise UsageError(f"the time column {series.name!r} holds booleans: give timestamps, date-time text or numbers")
    if pd.api.types.is_numeric_dtype(series.dtype):
        return "number"
    sample = next((v for v in series.to_numpy() if v is not None and v is not pd.NA), None)
    if hasattr(sample, "year"):  # datetime.date / datetime objects (Parquet dates)
        return "date_time"
    return "number"


def time_chronons(series: pd.Series, kind: str, unit: str, zone: str) -> Times:
    """A time column as chronons under the contract: date-times in ``zone`` unless they carry a zone.

    Date-times are held in microseconds since the epoch, as Spark holds them (years 1 to 9999).
    """
    n = len(series)
    per_chronon = 1000 * CHRONON_MS[unit]  # microseconds per chronon
    if kind == "date_time":
        if is_text(series):
            micros, present = _date_time_text(series, zone)
        else:
            stamps = pd.to_datetime(series, errors="coerce")
            present = stamps.notna().to_numpy()
            if getattr(stamps.dtype, "tz", None) is None:  # wall times (Parquet TIMESTAMP_NTZ, dates)
                wall = stamps.to_numpy(dtype="datetime64[us]").astype(np.int64)
                _python_wall_times(series, wall, present)
                micros = _localize(wall, present, zone)
            else:
                micros = stamps.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy(dtype="datetime64[us]")
                micros = micros.astype(np.int64)
        values = np.where(present, micros, 0) // per_chronon
        return Times(values, present, np.zeros(n, dtype=bool))
    if is_text(series):  # integers exactly (epoch nanoseconds pass 2^53), other numbers through floats
        integers = number_values(series, "integer")
        if not (integers.garbage.any() or integers.out_of_range.any()):  # each value an integer or null (or NaN)
            return Times(integers.values, integers.present, np.zeros(n, dtype=bool))
        floats = number_values(series, "float")
        present = integers.present | (floats.present & ~integers.out_of_range)
        whole = _whole_chronons(np.where(integers.present, 0.0, floats.values), present & ~integers.present)
        values = np.where(integers.present, integers.values, whole.values)
        return Times(values, integers.present | whole.present, whole.fractional)
    numbers = number_values(series, None)
    if numbers.values.dtype.kind == "f":
        return _whole_chronons(numbers.values, numbers.present)
    return Times(numbers.values, numbers.present, np.zeros(n, dtype=bool))


def chronon_timestamps(values: np.ndarray, unit: str) -> pd.Series:
    """Chronons of ``unit`` (s or ms) as UTC instants in microseconds, as both engines write window bounds."""
    micros = values.astype(np.int64) * (1000 * CHRONON_MS[unit])
    return pd.Series(pd.to_datetime(micros, unit="us", utc=True).astype("datetime64[us, UTC]"))


def _whole_chronons(values: np.ndarray, present: np.ndarray) -> Times:
    """Floating-point times (or durations) as whole chronons: floor, fractional flagged, huge ones absent."""
    present = present & (np.abs(values) < TIME_LIMIT)
    whole = np.floor(np.where(present, values, 0))
    return Times(whole.astype(np.int64), present, present & (whole != values))


_GROUP = re.compile(r"\((?!\?)")  # a capturing group's opening parenthesis
_FIELDS = ("year", "month", "day", "hour", "minute", "second", "fraction", "offset")  # the date-time's groups


def _named(pattern: str, names: tuple[str, ...]) -> str:
    """``pattern`` with its capturing groups named ``names`` in order (pyarrow's ``extract_regex`` needs names)."""
    given = iter(names)
    return _GROUP.sub(lambda _: f"(?P<{next(given)}>", pattern)


def _date_time_text(text: pd.Series, zone: str) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since the epoch of date-time text (the contract's grammar), and which rows parsed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = pc.extract_regex(arrow_text(text), f"^(?:{_named(PATTERNS['date_time'], _FIELDS)})$")
    matched = parts.is_valid().to_numpy(zero_copy_only=False)

    def field(name: str):  # "" where an optional part is absent, null where the text did not match
        return pc.fill_null(parts.field(name), "")

    def number(name: str) -> np.ndarray:  # the digits as an integer, 0 where absent
        digits = field(name)
        digits = pc.if_else(pc.equal(digits, ""), "0", digits)
        return pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)

    y, m, d, hh, mm, ss = (number(name) for name in _FIELDS[:6])
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    month_days = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)[np.clip(m - 1, 0, 11)]
    month_days = month_days + ((m == 2) & leap)
    valid = matched & (y >= 1) & (m >= 1) & (m <= 12) & (d >= 1) & (d <= month_days)
    valid &= (hh < 24) & (mm < 60) & (ss < 60)
    fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(field("fraction"), 6, "0"), 0, 6)  # Spark keeps microseconds
    sub = pc.cast(fraction, pa.int64()).to_numpy(zero_copy_only=False)
    seconds = (_days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss) * 1_000_000
    wall = np.where(valid, seconds + sub, 0)
    offset = field("offset")
    zoned = pc.not_equal(offset, "").to_numpy(zero_copy_only=False) & valid
    micros = _localize(wall, valid & ~zoned, zone)
    if zoned.any():
        shift = np.array([_offset_seconds(z) for z in offset.filter(zoned).to_pylist()], dtype=np.int64) * 1_000_000
        micros[zoned] = wall[zoned] - shift
    return micros, valid


def tzinfo(zone: str) -> ZoneInfo | timezone:
    """The tzinfo of a ``--timezone``: a region, UTC, or a fixed offset such as ``+01:00``."""
    if re.fullmatch(OFFSET, zone):
        return timezone(timedelta(seconds=_offset_seconds(zone)))
    return ZoneInfo(zone)


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (the era arithmetic of H. Hinnant's date algorithms)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    year_of_era = y - era * 400
    day_of_year = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _offset_seconds(text: str) -> int:
    if text == "Z":
        return 0
    sign = -1 if text[0] == "-" else 1
    return sign * (int(text[1:3]) * 3600 + int(text[4:6]) * 60)


_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
# the wall times (microseconds) that pandas' tz_localize places: its nanosecond range, with a margin of days
_PANDAS_WALL = tuple(int(np.datetime64(day, "us").astype(np.int64)) for day in ("1678-01-01", "2262-01-01"))


def _python_wall_times(series: pd.Series, wall: np.ndarray, present: np.ndarray) -> None:
    """Fill in (``wall`` in microseconds, ``present``) the Python dates and naive datetimes that
    ``pd.to_datetime`` made NaT: those outside its nanosecond range (Parquet DATE before 1677 or after 2262).

    Spark reads years 1 to 9999; only these rare rows go through Python, one by one.
    """
    if not pd.api.types.is_object_dtype(series.dtype):
        return
    values = series.to_numpy()
    lost = np.flatnonzero(~present)
    for i in lost[pd.notna(values[lost])]:
        value = values[i]
        if isinstance(value, datetime):
            if value.tzinfo is not None:
                continue
            micros = (value - _EPOCH) // _MICROSECOND
        elif isinstance(value, date):
            micros = (value - _EPOCH.date()).days * 86_400_000_000
        else:
            continue
        wall[i], present[i] = micros, True


def _localize(wall: np.ndarray, rows: np.ndarray, zone: str) -> np.ndarray:
    """UTC microseconds of wall times (microseconds) in ``zone``, as Java resolves them (Spark's rules).

    A wall time in a gap moves forward by the gap's length; one that occurs twice is the earlier
    instant. Python's ``fold=0`` gives exactly that, so the rare rows pandas cannot place go through it:
    those in a gap or an overlap, and those outside pandas' nanosecond range (years 1 to 1677 and 2262
    to 9999; before a zone's first transition Java and ``zoneinfo`` both take its earliest offset, the
    local mean time: +00:09:21 for Europe/Paris).
    The zone is a ``zoneinfo`` one (pytz stops daylight saving in 2037 and rounds old offsets).
    """
    out = wall.copy()
    if not rows.any() or zone in ("UTC", "GMT", "Etc/UTC"):
        return out
    if re.fullmatch(OFFSET, zone):
        out[rows] = wall[rows] - _offset_seconds(zone) * 1_000_000
        return out
    tz = ZoneInfo(zone)
    local = wall[rows]
    inside = (local >= _PANDAS_WALL[0]) & (local < _PANDAS_WALL[1])
    utc = local.copy()
    slow = ~inside
    if inside.any():
        index = pd.DatetimeIndex(local[inside].astype("datetime64[us]"))
        placed = index.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
        utc[inside] = placed.tz_convert("UTC").tz_localize(None).to_numpy(dtype="datetime64[us]").astype(np.int64)
        slow[np.flatnonzero(inside)[placed.isna()]] = True
    for i in np.flatnonzero(slow):
        micros = int(local[i])
        offset = (_EPOCH + timedelta(microseconds=micros)).replace(tzinfo=tz, fold=0).utcoffset() or timedelta(0)
        utc[i] = micros - offset // _MICROSECOND
    out[rows] = utc
    return out
