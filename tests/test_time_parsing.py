"""One time parser, two backends: the reader contract's times through pandas and through Spark SQL.

The local engine parses times in pandas/NumPy (``spanning.engines.reader.time_chronons``), the Spark engine in
the JVM (``spark_jobs.reading.prepare._chronons``); both follow one specification, the patterns of
``spanning.engines.reader.PATTERNS`` and the reasons of ``spanning.app.jobspec.REASONS``. Here one corpus of
time values (date-times with and without a zone or a fraction, dates, epoch numbers as text and as typed
numbers, timestamps, empty, garbage, out of range, end before start) goes through both prepare functions
(``spanning.app.local_run.prepare_local`` and ``spark_jobs.reading.prepare.load``), under each time unit and a few
time zones: every row must come out with the same chronons or the same reason on both. A few rows also
carry the value worked out by hand (with ``datetime``/``zoneinfo``, not with the code under test).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.app.jobspec import REASONS, EventFields, InputFiles, RunConfig, UsageError, WindowQuery
from spanning.app.local_run import END, ROW, START, prepare_local
from tests.budget import examples

START_BAD, END_BAD, DURATION_BAD = REASONS["start"], REASONS["end"], REASONS["duration"]
FRACTION, ORDER = REASONS["fraction"], REASONS["order"]


def seconds(text: str, zone: str = "UTC") -> int:
    """Epoch seconds of an ISO wall time in ``zone`` (Java's rules: fold=0 in gaps and overlaps)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC if zone == "UTC" else ZoneInfo(zone))
    return int(moment.timestamp())


# date-time text: (start, end, what the contract says of the row in UTC: None or a reason)
DATE_TIMES = [
    ("2024-03-04 10:00:00", "2024-03-04 10:05:00", None),
    ("2024-03-04T10:00:00Z", "2024-03-04T10:00:30+01:00", ORDER),  # the end is 09:00:30 UTC
    ("2024-03-04 10:00:00.123456", "2024-03-04 10:00:01.999", None),  # fractions of a chronon are cut
    ("2024-03-04 10:00:00.5", "2024-03-04T10:00:00.5Z", None),
    ("2024-03-04", "2024-03-05", None),  # dates: midnight
    ("2024-3-4 9:5", "2024-3-4 9:6:7", None),  # one-digit fields
    (" 2024-03-04 10:00 ", "2024-03-04 10:01  ", None),  # spaces around
    ("2024-03-04 10:00:00+18:00", "2024-03-04 10:00:00-17:59", None),  # the widest offsets Java takes
    ("2024-03-04 10:00:00+19:00", "2024-03-04 11:00:00", START_BAD),
    ("0001-01-01 00:00:00", "9999-12-31 23:59:59", None),  # the first and last seconds (Paris: LMT, +00:09:21)
    ("2024-02-29 00:00:00", "2024-03-01 00:00:00", None),  # a leap day
    ("2023-02-29 00:00:00", "2024-03-01 00:00:00", START_BAD),  # no such day
    ("2024-02-30 10:00:00", "2024-03-01 00:00:00", START_BAD),
    ("2024-13-01 00:00:00", "2024-03-01 00:00:00", START_BAD),
    ("2024-03-04 24:00:00", "2024-03-05 00:00:00", START_BAD),
    ("2024-03-04 10:60:00", "2024-03-05 00:00:00", START_BAD),
    ("2024-03-04 10:00:60", "2024-03-05 00:00:00", START_BAD),
    ("10000-01-01 00:00:00", "2024-03-05 00:00:00", START_BAD),
    ("2024-03-31 02:30:00", "2024-03-31 03:30:00", None),  # a gap in Europe/Paris (not in UTC)
    ("2024-10-27 02:30:00", "2024-10-27 02:45:00", None),  # twice in Europe/Paris
    ("", "2024-03-04 10:00:00", START_BAD),
    ("garbage", "2024-03-04 10:00:00", START_BAD),
    ("today", "2024-03-04 10:00:00", START_BAD),
    ("1709546400", "2024-03-04 10:00:00", START_BAD),  # an epoch number in a column of date-times
    ("2024-03-04 10:00:00", "tomorrow", END_BAD),
    ("2024-03-04 10:00:00", "", END_BAD),
    ("2024-03-04 10:00:00", "2024-03-04 09:59:59", ORDER),
    ("2024-03-04 10:00:00 Z", "2024-03-04 10:00:00", None),
    ("2024-03-04T10:00", "2024-03-04 10:00:00", None),
    ("2024/03/04 10:00:00", "2024-03-04 10:00:00", START_BAD),
    ("2024-03-04 10:00:00 UTC", "2024-03-04 10:00:00", START_BAD),
    ("1600-06-15 12:00:00.5", "2300-07-01 12:00:00", None),  # beyond pandas' nanoseconds (1677 to 2262)
    ("2300-03-25 02:30:00", "2300-10-28 02:30:00", None),  # a gap and an overlap in Europe/Paris, in 2300
]

# epoch numbers as text (a column that is not all plain integers stays text): numbers are chronons
EPOCH_TEXT = [
    ("1000", "1300", None),
    (" 1200 ", "1500", None),
    ("+1300", "1700.0", None),
    ("1250.5", "1600", FRACTION),
    ("1e3", "1.5e3", None),
    (".5", "1", FRACTION),
    ("1e-3", "1", FRACTION),
    ("-5", "10", None),
    ("-0", "0", None),
    ("9223372036854775807", "9223372036854775807", None),  # the largest 64-bit integer, exactly
    ("9223372036854775808", "9223372036854775809", START_BAD),  # beyond 64 bits
    ("12345678901234567890123", "1", START_BAD),
    ("4611686018427387904", "4611686018427387905", None),  # 2^62 as an integer: exact
    ("4.7e18", "4.8e18", START_BAD),  # as a float beyond 2^62: not a time
    ("-4.7e18", "1", START_BAD),
    ("4.6e18", "4.6e18", None),
    ("1e400", "1", START_BAD),
    ("NaN", "100", START_BAD),
    ("nan", "100", START_BAD),
    ("inf", "100", START_BAD),
    ("-Infinity", "100", START_BAD),
    ("", "100", START_BAD),
    ("abc", "100", START_BAD),
    ("0x10", "100", START_BAD),
    ("1_000", "2000", START_BAD),
    ("1,5", "2000", START_BAD),
    ("2024-03-04", "2000", START_BAD),  # a date in a column of numbers
    ("100", "twelve", END_BAD),
    ("500", "400", ORDER),
    ("400.5", "400.25", FRACTION),  # fraction comes before order
    ("007", "010", None),
]

# a start and a length in chronons (--duration): numbers as text again
DURATIONS = [
    ("2024-03-04 10:00:00", "60", None),
    ("2024-03-04 10:00:00", "0", None),
    ("2024-03-04 10:00:00", "2.5", FRACTION),
    ("2024-03-04 10:00:00", "1e2", None),
    ("2024-03-04 10:00:00", "-1", ORDER),
    ("2024-03-04 10:00:00", "", DURATION_BAD),
    ("2024-03-04 10:00:00", "long", DURATION_BAD),
    ("2024-03-04 10:00:00", "NaN", DURATION_BAD),
    ("2024-03-04 10:00:00", "1e400", DURATION_BAD),
    ("", "60", START_BAD),
]

NINE_AM = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


def _stamps(*texts: str | None, utc: bool = False) -> pd.Series:
    """Timestamps in microseconds, so years 1 to 9999 (pandas' nanoseconds stop at 1677 and 2262)."""
    stamps = pd.Series(np.array([t or "NaT" for t in texts], dtype="datetime64[us]"))
    return stamps.dt.tz_localize("UTC") if utc else stamps


def _dates(*texts: str | None) -> list[date | None]:
    return [None if t is None else date.fromisoformat(t) for t in texts]


# typed columns (Parquet): numbers, timestamps with and without a zone, dates
TYPED = pd.DataFrame(
    {
        "int_start": pd.array([100, None, -5, 2**62, 500, 7, 1, 2], dtype="Int64"),
        "int_end": pd.array([200, 300, 10, 2**62 + 1, 400, None, 2, 3], dtype="Int64"),
        "float_start": [100.0, np.nan, np.inf, 1e30, 1250.5, 1300.0, 1.0, 2.0],
        "float_end": [200.0, 300.0, 300.0, 2e30, 1300.0, 1200.0, 2.0, 3.0],
        "utc_start": _stamps(
            "2024-03-04 10:00:00.123456",
            None,
            "2024-03-31 01:30",
            "1970-01-01",
            "2024-10-27 01:30",
            "2024-03-04 10:00",
            "0001-01-01",
            "1600-06-15 12:00",
            utc=True,
        ),
        "utc_end": _stamps(
            "2024-03-04 10:00:01",
            "2024-03-04",
            "2024-03-31 01:45",
            "1970-01-01 00:00:01",
            None,
            "2024-03-04 09:00",
            "9999-12-31 23:59:59.999999",
            "2300-07-01 12:00",
            utc=True,
        ),
        "wall_start": _stamps(
            "2024-03-04 10:00:00.5",
            "2024-03-31 02:30",
            "2024-10-27 02:30",
            None,
            "1900-01-01",
            "2024-03-04 10:00",
            "0001-01-01",  # before Europe/Paris' first transition: LMT, +00:09:21
            "1600-06-15 12:00:00.5",
        ),
        "wall_end": _stamps(
            "2024-03-04 10:00:01",
            "2024-03-31 03:30",
            "2024-10-27 02:45",
            "2024-03-04",
            "1900-01-02",
            "2024-03-04 09:00",
            "9999-12-31 23:59:59.999999",
            "2300-10-28 02:30",  # twice in Europe/Paris
        ),
        # the last two rows of dates and timestamps lie beyond pandas' nanoseconds (1677 to 2262)
        "date_start": _dates(
            "2024-03-04", "2024-03-31", None, "1970-01-01", "2024-02-29", "2024-03-05", "0001-01-01", "1600-01-01"
        ),
        "date_end": _dates(
            "2024-03-05",
            "2024-04-01",
            "2024-03-04",
            "1970-01-02",
            "2024-03-01",
            "2024-03-04",
            "9999-12-31",
            "2300-03-25",
        ),
        "stamp_start": [NINE_AM] * 8,  # a timestamp start with a numeric duration
        "duration": [60.0, 0.5, np.nan, -1.0, 1e300, 3600.0, 1.0, 2.0],
    }
)


@dataclass
class Case:
    name: str
    file: str  # calls.csv or calls.parquet
    rows: list[tuple] | None  # CSV rows (start, end-or-duration, expected), or None for TYPED
    start: str = "start"
    end: str | None = "end"
    duration: str | None = None
    expected: dict[int, str | None] = field(default_factory=dict)  # TYPED: id -> reason (under UTC)


CASES = [
    Case("date-time text", "calls.csv", DATE_TIMES),
    Case("epoch text", "calls.csv", EPOCH_TEXT),
    Case("duration text", "calls.csv", DURATIONS, end=None, duration="end"),
    Case("typed integers", "calls.parquet", None, "int_start", "int_end",
         expected={0: None, 1: START_BAD, 2: None, 3: None, 4: ORDER, 5: END_BAD, 6: None, 7: None}),
    Case("typed floats", "calls.parquet", None, "float_start", "float_end",
         expected={0: None, 1: START_BAD, 2: START_BAD, 3: START_BAD, 4: FRACTION, 5: ORDER, 6: None, 7: None}),
    Case("timestamps with a zone", "calls.parquet", None, "utc_start", "utc_end",
         expected={0: None, 1: START_BAD, 2: None, 3: None, 4: END_BAD, 5: ORDER, 6: None, 7: None}),
    Case("timestamps without a zone", "calls.parquet", None, "wall_start", "wall_end",
         expected={0: None, 1: None, 2: None, 3: START_BAD, 4: None, 5: ORDER, 6: None, 7: None}),
    Case("dates", "calls.parquet", None, "date_start", "date_end",
         expected={0: None, 1: None, 2: START_BAD, 3: None, 4: None, 5: ORDER, 6: None, 7: None}),
    Case("a timestamp and a typed duration", "calls.parquet", None, "stamp_start", None, "duration",
         expected={0: None, 1: FRACTION, 2: DURATION_BAD, 3: ORDER, 4: DURATION_BAD, 5: None, 6: None, 7: None}),
]  # fmt: skip
SETTINGS = [("s", "UTC"), ("ms", "UTC"), ("s", "Europe/Paris"), ("ms", "+05:30")]


def _write(case: Case, folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / case.file
    if case.rows is None:
        TYPED.assign(id=range(len(TYPED))).to_parquet(path, index=False, coerce_timestamps="us")
        return str(path)
    lines = ["id,start,end"] + [f'{i},"{s}","{e}"' for i, (s, e, _) in enumerate(case.rows)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _config(case: Case, path: str, unit: str, zone: str) -> RunConfig:
    fields = EventFields(case.start, end=case.end, duration=case.duration, time_unit=unit, timezone=zone)
    return RunConfig(InputFiles([path]), fields, WindowQuery(60, 60, 0))


def _local(cfg: RunConfig) -> tuple[dict, bool]:
    """id -> (reason, start, end) of every row, through the local engine's prepare."""
    prepared = prepare_local(cfg)
    ids = [int(i) for i in prepared.frame["id"]]
    times = {int(r): (int(s), int(e)) for s, e, r in prepared.events[[START, END, ROW]].itertuples(index=False)}
    rows = {ids[i]: (prepared.reason[i], *times.get(i, (None, None))) for i in range(len(ids))}
    return rows, prepared.is_timestamp


def _spark(spark, cfg: RunConfig) -> tuple[dict, bool]:
    """id -> (reason, start, end) of every row, through the Spark engine's prepare (in the run's time zone)."""
    from spark_jobs.reading.prepare import END as S_END
    from spark_jobs.reading.prepare import REASON, load
    from spark_jobs.reading.prepare import START as S_START
    from spark_jobs.sessions.session import get_session

    get_session(None, cfg.events.timezone)  # the active session, set to the run's time zone as a run sets it
    prepared = load(spark, cfg)
    rows = {}
    for row in prepared.rows.select("id", S_START, S_END, REASON).collect():
        reason = row[REASON]
        start, end = (None, None) if reason is not None else (row[S_START], row[S_END])
        rows[int(row["id"])] = (reason, start, end)
    return rows, prepared.time_is_timestamp


@pytest.fixture
def utc_session(spark):
    yield spark
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # as the other tests expect it


@pytest.mark.parametrize(("unit", "zone"), SETTINGS, ids=[f"{u}-{z}" for u, z in SETTINGS])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_engines_read_every_time_alike(utc_session, tmp_path, case, unit, zone):
    path = _write(case, tmp_path / "in")
    cfg = _config(case, path, unit, zone)
    local, local_stamp = _local(cfg)
    spark_rows, spark_stamp = _spark(utc_session, cfg)
    assert local_stamp == spark_stamp
    differ = {i: (local[i], spark_rows.get(i)) for i in local if local[i] != spark_rows.get(i)}
    assert not differ, f"local != spark for ids {differ}"
    assert sorted(local) == sorted(spark_rows)
    if zone == "UTC":  # what the contract says of each row
        expected = case.expected or {i: row[2] for i, row in enumerate(case.rows)}
        assert {i: reason for i, (reason, *_) in local.items()} == expected


def test_times_worked_out_by_hand(tmp_path):
    """A few rows of the corpus against values computed with ``datetime``, not with the code under test."""
    paris = "Europe/Paris"
    checks = [  # (case, unit, zone, id, start, end)
        (CASES[0], "s", "UTC", 0, seconds("2024-03-04 10:00:00"), seconds("2024-03-04 10:05:00")),
        (CASES[0], "ms", "UTC", 2, seconds("2024-03-04 10:00:00") * 1000 + 123,
         seconds("2024-03-04 10:00:01") * 1000 + 999),
        (CASES[0], "s", paris, 4, seconds("2024-03-04", paris), seconds("2024-03-05", paris)),
        (CASES[0], "s", paris, 7, seconds("2024-03-04T10:00:00+18:00"), seconds("2024-03-04T10:00:00-17:59")),
        (CASES[0], "s", paris, 18, seconds("2024-03-31 03:30:00", paris), seconds("2024-03-31 03:30:00", paris)),
        (CASES[0], "s", paris, 19, seconds("2024-10-27 02:30:00", paris), seconds("2024-10-27 02:45:00", paris)),
        (CASES[0], "s", "+05:30", 0, seconds("2024-03-04T10:00:00+05:30"), seconds("2024-03-04T10:05:00+05:30")),
        (CASES[1], "ms", "UTC", 4, 1000, 1500),  # numbers are chronons, whatever the unit
        (CASES[1], "s", "UTC", 9, 2**63 - 1, 2**63 - 1),
        (CASES[2], "s", "UTC", 3, seconds("2024-03-04 10:00:00"), seconds("2024-03-04 10:00:00") + 100),
        (CASES[6], "ms", paris, 0, seconds("2024-03-04 10:00:00", paris) * 1000 + 500,
         seconds("2024-03-04 10:00:01", paris) * 1000),
        (CASES[7], "s", paris, 0, seconds("2024-03-04", paris), seconds("2024-03-05", paris)),  # midnight in the zone
        # beyond pandas' nanoseconds: before Europe/Paris' first transition (1891) its offset is the local mean
        # time of Paris, +00:09:21, as in Java (so Spark); after 2262 the zone's rules go on
        (CASES[0], "s", paris, 9, seconds("0001-01-01T00:00:00+00:09:21"), seconds("9999-12-31T23:59:59+01:00")),
        (CASES[0], "ms", paris, 31, seconds("1600-06-15T12:00:00+00:09:21") * 1000 + 500,
         seconds("2300-07-01T12:00:00+02:00") * 1000),
        (CASES[0], "s", paris, 32, seconds("2300-03-25T03:30:00+02:00"), seconds("2300-10-28T02:30:00+02:00")),
        (CASES[0], "s", "+05:30", 9, seconds("0001-01-01T00:00:00+05:30"), seconds("9999-12-31T23:59:59+05:30")),
        (CASES[5], "s", "UTC", 6, seconds("0001-01-01"), seconds("9999-12-31 23:59:59")),
        (CASES[6], "s", paris, 6, seconds("0001-01-01T00:00:00+00:09:21"), seconds("9999-12-31T23:59:59+01:00")),
        (CASES[6], "ms", paris, 7, seconds("1600-06-15T12:00:00+00:09:21") * 1000 + 500,
         seconds("2300-10-28T02:30:00+02:00") * 1000),
        (CASES[7], "s", "UTC", 6, seconds("0001-01-01"), seconds("9999-12-31")),
        (CASES[7], "s", paris, 7, seconds("1600-01-01T00:00:00+00:09:21"), seconds("2300-03-25T00:00:00+01:00")),
    ]  # fmt: skip
    for case, unit, zone, row_id, start, end in checks:
        cfg = _config(case, _write(case, tmp_path / case.name), unit, zone)
        rows, _ = _local(cfg)
        assert rows[row_id] == (None, start, end), (case.name, unit, zone, row_id)


def test_both_engines_refuse_a_start_and_end_of_two_kinds(utc_session, tmp_path):
    case = Case("mixed", "calls.csv", [("100", "2024-03-04 10:00:00", None), ("200", "2024-03-04 10:05:00", None)])
    cfg = _config(case, _write(case, tmp_path / "in"), "s", "UTC")
    messages = []
    for read in (_local, lambda c: _spark(utc_session, c)):
        with pytest.raises(UsageError) as caught:
            read(cfg)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and messages[0].startswith("--start holds epoch numbers but --end holds")


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.text(alphabet="0123456789 +-:.TZeEnNaA\n\t", max_size=30),
                                 st.sampled_from([v for rows in (DATE_TIMES, EPOCH_TEXT, DURATIONS) for row in rows
                                                  for v in row[:2] if isinstance(v, str)])),
                       max_size=40))  # fmt: skip
def test_re2_masks_are_python_s_fullmatch(values):
    """The patterns through pyarrow's RE2 (``text_mask``) match exactly what Python's ``re.fullmatch`` matches,
    a trailing newline included (Python's ``$`` would match before it; ``fullmatch`` and RE2's ``$`` do not)."""
    from spanning.engines.reader import PATTERNS, arrow_text, matches, text_mask

    text = arrow_text(pd.Series(values, dtype=object))
    for name in PATTERNS:
        want = [v is not None and matches(name, v) for v in values]
        assert text_mask(text, name).tolist() == want, name


INTEGER_TEXT = st.one_of(
    st.none(),
    st.integers(-(2**64), 2**64).map(str),  # within 64 bits and beyond
    st.text(alphabet="0123456789-+xX ", min_size=1, max_size=21),  # signs, leading zeros, hexadecimal, spaces
    st.sampled_from(["0", "-0", "007", "-007", "0x10", "+5", "9223372036854775807", "9223372036854775808",
                     "-9223372036854775808", "-9223372036854775809", "00000000000000000001"]),
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(INTEGER_TEXT, max_size=30), sliced=st.integers(0, 3))
def test_plain_integers_read_by_the_cast_or_the_kernel_are_the_pattern_s(values, sliced):
    """``plain_integer_values`` (Arrow's cast and the first two bytes of each value where the cast reads every value,
    the compiled ``plain_integers`` elsewhere) and the kernel itself tell the plain integers that fit in 64 bits, and
    read their values, exactly as the pattern and Python's ``int`` do; and ``text_stats`` counts the same (an array
    sliced from a larger one too)."""
    import numpy as np
    import pyarrow as pa

    from spanning.engines.reader import INT64, ColumnStats, _offsets, matches, plain_integer_values, text_stats
    from spanning.kernels.compiled import plain_integers

    text = pa.array(["1"] * sliced + values, pa.string()).slice(sliced)
    want = [v is not None and matches("plain_integer", v) and INT64[0] <= int(v) <= INT64[1] for v in values]
    want_values = [int(v) if plain else 0 for v, plain in zip(values, want, strict=True)]
    data = np.frombuffer(text.buffers()[2], np.uint8) if text.buffers()[2] is not None else np.zeros(0, np.uint8)
    kernel = plain_integers(_offsets(text), data, text.is_valid().to_numpy(zero_copy_only=False))
    for got_values, got in (plain_integer_values(text), kernel):
        assert got.tolist() == want
        assert got_values.tolist() == want_values
    present = sum(v is not None for v in values)
    stats = text_stats(text)
    assert stats.plain_integer == sum(want) and stats.present == present
    if sum(want) == present:
        assert stats == ColumnStats(present, present, present, 0, present)
    else:
        assert stats.integer == sum(v is not None and matches("integer", v) for v in values)


@pytest.mark.parametrize("by", ["end", "duration"])
def test_input_columns_named_like_prepare_s_own_are_kept_and_the_reasons_stay(utc_session, tmp_path, by):
    """``prepare`` parses the times in a projection of their own and reads them for the reason in a second, through
    helper columns of its own (``__fraction``, ``__end_missing``): input columns of those names are kept as read,
    and the reasons are those worked out by hand."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_jobs.reading.prepare import END_MISSING, FRACTION, REASON, REASONS, load

    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({
        "id": [0, 1, 2, 3],
        "s": ["2024-03-04 00:00:00", "garbage", "2024-03-04 00:00:00", "2024-03-04 00:00:00"],
        "e": ["2024-03-04 00:01:00", "2024-03-04 00:01:00", "2024-03-03 00:00:00", "2024-03-04 00:00:01"],
        "d": [60.0, 60.0, None, 1.5],
        FRACTION: ["a", "b", "c", "d"],
        END_MISSING: [True, False, True, False],
    }), path)  # fmt: skip
    fields = EventFields("s", end="e") if by == "end" else EventFields("s", duration="d")
    prepared = load(utc_session, RunConfig(InputFiles([str(path)]), fields, WindowQuery(60, 60, 0)))
    rows = {r["id"]: r for r in prepared.rows.collect()}
    assert [rows[i][FRACTION] for i in range(4)] == ["a", "b", "c", "d"]
    assert [rows[i][END_MISSING] for i in range(4)] == [True, False, True, False]
    expected = {"end": [None, REASONS["start"], REASONS["order"], None],
                "duration": [None, REASONS["start"], REASONS["duration"], REASONS["fraction"]]}[by]  # fmt: skip
    assert [rows[i][REASON] for i in range(4)] == expected
