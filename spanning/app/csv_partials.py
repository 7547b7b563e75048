"""Window partials made where CSV records are read: a byte range of a file in, partials per (key, window) out.

``spanning run --engine spark`` reads local, uncompressed CSV files whose byte ranges hold whole records (no quote,
no carriage return alone: ``spanning.app.files.Inputs.splittable``) in ranges, every core a share, as Spark's own
reader splits a file (``spanning.app.csv_records.range_records``). Each range is read once:

* its columns typed by the kinds the job was planned with (``CsvPlan``), with the reader contract's own functions
  (the local engine's, so that both engines give the same rows), and reduced as
  ``parquet_partials.reduce_events`` reduces typed rows: no row enters the JVM;
* its late and rejected rows written, as read (every column as text, with their windows missed or reason), by the
  task itself as a Parquet part into the run's side folder, from which the job writes late/ and rejected/;
* its counts of the grammar's forms in every column (``text_stats``) written beside them (``kinds/``). A column's
  kind depends on a count over the whole column (``spanning.engines.reader.column_kind``), which no range has: the
  job is planned with the kinds of the files' first records, and the driver checks them against these counts once
  the ranges are read; where they differ, it plans and reads again with the true ones.

>>> import os, tempfile
>>> import pyarrow.parquet as pq
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "calls.csv")
>>> _ = open(path, "w").write("id,cell,start,end,bytes\\n1,7,0,4,10\\n2,7,9,2,20\\n3,8,7,8,x\\n4,7,20,21,5\\n")
>>> read = ReadPlan("start", "end", "s", ["cell"], {"bytes": ("_v0", "integer")}, 10, 5, 0, 3, None,
...                 [("_n", "sum", "one", None), ("_s", "sum", "value", "_v0")])
>>> plan = CsvPlan(read, ["id", "cell", "start", "end", "bytes"], ",", ["id", "cell", "start", "end"], "number",
...                "UTC", ["bytes"], folder, {"start", "end", "bytes"})
>>> [(table.to_pydict(), counts) for table, counts in range_partials(path, 0, os.path.getsize(path), plan)]
[({'cell': [7, 7, 7, 7], '_k': [-1, 0, 3, 4], '_n': [1, 1, 1, 1], '_s': [10, 10, 5, 5]}, (4, 2, 0))]
>>> pq.read_table(os.path.join(folder, "rejected")).to_pydict()["reason"]
['end is before start', 'non-numeric value in column bytes']
>>> read_kinds(folder, plan.names)["bytes"]
ColumnStats(present=4, integer=3, number=3, date_time=0, plain_integer=3)
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spanning.app.csv_records import MALFORMED, line_at, range_body, range_records, text_schema
from spanning.app.files import Inputs
from spanning.app.jobspec import RunConfig
from spanning.engines.parquet_partials import (
    WINDOWS_MISSED,
    ReadPlan,
    piece_name,
    reduce_events,
    write_side_part,
    write_whole_part,
)
from spanning.engines.reader import (
    REASONS,
    ColumnStats,
    Numbers,
    Times,
    first_reasons,
    number_values,
    plain_integer_values,
    plain_stats,
    text_stats,
    time_chronons,
)

__all__ = [
    "CsvPlan",
    "add_stats",
    "byte_pieces",
    "counted_columns",
    "first_records",
    "first_records_stats",
    "range_partials",
    "range_times",
    "ranges_hold",
    "read_kinds",
    "used_columns",
]

# the ranges' sizes are guesses, not measured: PIECE_BYTES keeps a range near the 1M-row Parquet pieces (about 1.6M
# rows of a 40-byte CDR; a 1.87M-row range took 0.73 s), PIECES_PER_CORE follows parquet_partials.pieces
PIECE_BYTES = 64 * 2**20  # a range's bytes at most
SMALLEST_PIECE = 4 * 2**20  # no range below this many bytes (each costs a few milliseconds of its own) ...
PIECES_PER_CORE = 3  # ... else about this many a core, so that cores finishing early take more
REASON = "reason"  # a rejected row's own column, as rejected/ names it
KINDS = "kinds"  # the side folder's counts of the grammar's forms, a JSON file per range
FIRST_RECORDS = 4 * 2**20  # bytes of the first file whose records give the kinds the job is planned with: a guess
# (about 100k records of a CDR, read in tens of milliseconds); a kind they mislead costs a second run


@dataclass(frozen=True)
class CsvPlan:
    """What a task reads and computes: plain values only, so that it pickles to the executors as it is."""

    read: ReadPlan  # the columns, windows and partials (``values``' kinds as planned)
    names: list[str]  # the header's, in file order
    delimiter: str
    integer_columns: list[str]  # read as long: every value in the files a plain integer ("plain" kind), as planned
    time_kind: str  # "number" or "date_time", of both time columns
    timezone: str  # of date-time text without a zone
    checked_values: list[str]  # the numeric value columns, in the order their reasons are tested
    side: str  # the folder whose late/, rejected/ and kinds/ the tasks write their parts into
    counted: set[str]  # the columns whose forms are all counted (time and aggregated ones); the others' plain
    # integers only (``text_stats``' plain_only), as ``spark_jobs.reading.prepare`` asks them

    @property
    def keys(self) -> list[str]:  # what ``parquet_partials.task_batches`` merges by
        return self.read.keys

    @property
    def partials(self) -> list:
        return self.read.partials


def byte_pieces(files: Sequence[tuple[str, int]], cores: int, most: int = PIECE_BYTES) -> list[tuple[str, int, int]]:
    """The tasks' byte ranges ``(path, start, end)`` of files ``(path, size)``: at most ``most`` bytes, about
    ``PIECES_PER_CORE`` per core, not below ``SMALLEST_PIECE`` (a smaller file is one range).

    >>> pieces = byte_pieces([("a", 100 * 2**20), ("b", 10)], cores=2)
    >>> len(pieces), pieces[0], pieces[5], pieces[6]
    (7, ('a', 0, 17476266), ('a', 87381333, 104857600), ('b', 0, 10))
    """
    total = sum(size for _, size in files)
    size = min(max(total // (PIECES_PER_CORE * cores), SMALLEST_PIECE), most)
    pieces = []
    for path, length in files:
        parts = max(-(-length // size), 1)
        bounds = [length * i // parts for i in range(parts + 1)]
        pieces += [(path, bounds[i], bounds[i + 1]) for i in range(parts)]
    return pieces


def add_stats(a: ColumnStats, b: ColumnStats) -> ColumnStats:
    """Two ranges' counts of one column as one."""
    return ColumnStats(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in dataclasses.fields(ColumnStats)})


def read_kinds(side: str, names: list[str]) -> dict[str, ColumnStats]:
    """Each column's counts over every range the tasks read, added up from the side folder's ``kinds/``."""
    totals = {name: ColumnStats() for name in names}
    folder = os.path.join(side, KINDS)
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith("part-"):
            with open(os.path.join(folder, name)) as handle:
                for column, counts in json.load(handle).items():
                    totals[column] = add_stats(totals[column], ColumnStats(*counts))
    return totals


def range_partials(path: str, start: int, end: int, plan: CsvPlan) -> Iterator:
    """One byte range's partials and (read, rejected, late), as ``parquet_partials.row_group_partials`` yields a
    row group's; its late and rejected rows and its columns' counts go to the side folder."""
    import pyarrow as pa

    read = plan.read
    columns = _plain_range(path, start, end, plan) or _text_range(path, start, end, plan)
    n, starts, ends, numbers = columns.rows, columns.starts, columns.ends, columns.numbers
    checks = list(columns.malformed)
    checks += [(~starts.present, REASONS["start"]), (~ends.present, REASONS["end"]),
               (starts.fractional | ends.fractional, REASONS["fraction"]),
               (ends.values < starts.values, REASONS["order"])]  # fmt: skip
    for name in plan.checked_values:
        checks += numbers[name].checks(name)
    shipped = {internal: pa.array(numbers[name].values, mask=~numbers[name].present)
               for name, (internal, _) in read.values.items()}  # fmt: skip
    reasons = first_reasons(n, checks) if any(failed.any() for failed, _ in checks) else None
    accepted = np.ones(n, dtype=bool) if reasons is None else reasons == None  # noqa: E711 - elementwise
    reduced = reduce_events(columns.keys, starts.values, ends.values, accepted, shipped, read)
    piece = piece_name(path, f"{start:013d}")
    if len(reduced.late):  # as read: text, typed by the job once the kinds are known
        write_side_part(pa.table({**columns.text_rows(reduced.late),
                                  WINDOWS_MISSED: pa.array(reduced.missed, pa.int64())}),
                        os.path.join(plan.side, "late"), piece)  # fmt: skip
    if reasons is not None:
        write_side_part(pa.table({**columns.text_rows(np.flatnonzero(~accepted)),
                                  REASON: pa.array(reasons[~accepted].tolist(), pa.string())}),
                        os.path.join(plan.side, "rejected"), piece)  # fmt: skip
    _write_kinds(columns.stats, os.path.join(plan.side, KINDS), piece)
    yield reduced.partials, reduced.counts


@dataclass
class _RangeColumns:
    """A byte range's records as ``range_partials`` reduces them: typed columns, counts, and their text on demand."""

    rows: int
    starts: Times
    ends: Times
    numbers: dict[str, Numbers]  # the value columns, by their names in the file
    keys: dict  # the key columns as Arrow arrays
    stats: dict[str, ColumnStats]  # every column's counts of the grammar's forms (``text_stats``)
    malformed: list  # (which rows, their reasons) of records that are no rows of the header's fields
    text_rows: Callable[[np.ndarray], dict]  # rows (positions) -> every column's text, as pyarrow reads it


def _text_range(path: str, start: int, end: int, plan: CsvPlan) -> _RangeColumns:
    """A range read by pyarrow as text columns (``range_records``), then typed by the reader contract's functions."""
    import pyarrow as pa

    read = plan.read
    table = pa.Table.from_batches(range_records(path, start, end, plan.delimiter, plan.names).batches,
                                  schema=text_schema(plan.names))  # fmt: skip
    n = table.num_rows
    text = {name: table.column(name).combine_chunks() for name in plan.names}
    integers = {name: plain_integer_values(column) for name, column in text.items()}  # one pass over each column
    stats = {name: text_stats(column, plain_only=name not in plan.counted, plain=integers[name][1])
             for name, column in text.items()}  # fmt: skip
    malformed = table.column(MALFORMED).combine_chunks()
    checks = [] if malformed.null_count == n else [(malformed.is_valid().to_numpy(zero_copy_only=False),
                                                     np.asarray(malformed.to_pylist(), dtype=object))]  # fmt: skip
    numbers = {name: _numbers(text[name], kind, _all_plain(text[name], integers[name]))
               for name, (_, kind) in read.values.items()}  # fmt: skip
    keys = {k: _integer_array(text[k], integers[k]) if k in plan.integer_columns else text[k] for k in read.keys}

    def text_rows(rows: np.ndarray) -> dict:
        taken = pa.array(rows)
        return {name: column.take(taken) for name, column in text.items()}

    return _RangeColumns(n, range_times(text[read.start], plan, integers[read.start]),
                         range_times(text[read.end], plan, integers[read.end]), numbers, keys, stats, checks,
                         text_rows)  # fmt: skip


def _plain_range(path: str, start: int, end: int, plan: CsvPlan) -> _RangeColumns | None:
    """A range of plain records typed straight from its bytes (``compiled.plain_records``): every record of the
    header's field count, the time, key and value columns plain integers, the text ASCII. None where the plan or a
    record is not so: then pyarrow reads it (``_text_range``), which gives the same rows, and names the malformed.
    Measured 2026-11-29 on a 64 MB range of CDRs: 0.14 s of CPU, against 0.33 s for pyarrow's text columns and
    ``plain_integer_values`` of each."""
    import pyarrow as pa

    from spanning.kernels.compiled import plain_records

    read = plan.read
    wanted = list(dict.fromkeys([read.start, read.end, *read.keys, *read.values]))
    if (plan.time_kind != "number" or not set(read.keys) <= set(plan.integer_columns)
            or not plan.counted <= set(wanted) or len(plan.delimiter.encode()) != 1):  # fmt: skip
        return None
    _, body = range_body(path, start, end)
    slots = np.array([wanted.index(name) if name in wanted else -1 for name in plan.names], np.int64)
    plain, values, line_starts, present, plain_counts = plain_records(body,
                                                                      ord(plan.delimiter), slots, len(wanted))
    if not plain:
        return None
    n = values.shape[1]
    column = dict(zip(wanted, values, strict=True))
    # a counted column is a used one (checked above), so plain in every record: its forms settled by its plain count
    stats = {name: plain_stats(int(present[i]), int(plain_counts[i]), plain_only=name not in plan.counted)
             for i, name in enumerate(plan.names)}  # fmt: skip
    every, none = np.ones(n, bool), np.zeros(n, bool)
    numbers = {name: _plain_numbers(column[name], kind, every) for name, (_, kind) in read.values.items()}

    def text_rows(rows: np.ndarray) -> dict:
        fields = [_fields(body, int(line_starts[r]), plan.delimiter) for r in rows]
        return {name: pa.array([f[i] for f in fields], pa.string()) for i, name in enumerate(plan.names)}

    return _RangeColumns(n, Times(column[read.start], every, none), Times(column[read.end], every, none), numbers,
                         {k: pa.array(column[k]) for k in read.keys}, stats, [], text_rows)  # fmt: skip


def _fields(body: np.ndarray, at: int, delimiter: str) -> list[str | None]:
    """The fields of the record at byte ``at`` of ``body`` (no quote in it), as pyarrow's text: null where empty."""
    return [field or None for field in line_at(body, at).decode().split(delimiter)]


def range_times(text, plan: CsvPlan, integers: tuple[np.ndarray, np.ndarray] | None = None) -> Times:
    """A time column in chronons (``time_chronons``); plain integers, the common case, as they are (``integers``:
    ``plain_integer_values`` of ``text``, where the caller read them already)."""
    plain = _all_plain(text, integers)
    if plain is not None and plan.time_kind == "number":
        return Times(plain, text.is_valid().to_numpy(zero_copy_only=False), np.zeros(len(text), bool))
    return time_chronons(text, plan.time_kind, plan.read.time_unit, plan.timezone)


def _all_plain(text, integers: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray | None:
    """The values of a text column whose every value is a plain integer (``integers``: ``plain_integer_values``
    of it, read here if not given), else None."""
    values, plain = plain_integer_values(text) if integers is None else integers
    return values if plain.sum() == len(text) - text.null_count else None


def _numbers(text, kind: str, plain: np.ndarray | None) -> Numbers:
    """An aggregated column as numbers of ``kind`` (``number_values``); plain integers (``plain``: their values,
    where every value is one, ``_all_plain``) as they are."""
    if plain is None:
        return number_values(text, kind)
    return _plain_numbers(plain, kind, text.is_valid().to_numpy(zero_copy_only=False))


def _plain_numbers(values: np.ndarray, kind: str, present: np.ndarray) -> Numbers:
    """A value column of plain integers ``values`` as numbers of ``kind``: none garbage, out of range or infinite."""
    none = np.zeros(len(values), bool)
    return Numbers(values if kind == "integer" else values.astype(np.float64), present, none, none, none)


def _integer_array(text, read: tuple[np.ndarray, np.ndarray]):
    """A key column planned as integers, as an Arrow int64 array (null where null); a value that is no plain
    integer (the first records misled the plan, which ``checked_kinds`` finds) reads as 0 meanwhile."""
    import pyarrow as pa

    values, _ = read
    return pa.array(values, mask=None if text.null_count == 0 else ~text.is_valid().to_numpy(zero_copy_only=False))


def _write_kinds(stats: dict[str, ColumnStats], folder: str, piece: str) -> None:
    """A range's counts, as ``read_kinds`` adds them up."""
    counts = {name: dataclasses.astuple(counted) for name, counted in stats.items()}
    write_whole_part(folder, f"part-{piece}.json", lambda temp: Path(temp).write_text(json.dumps(counts)))


def ranges_hold(cfg: RunConfig, inputs: Inputs | None) -> bool:
    """Whether ``cfg``'s rows can be read in byte ranges and reduced where they are read, by either engine (each adds
    what its own plans compute): local CSV files with a header whose ranges hold whole records
    (``Inputs.splittable``); times from two columns (no duration, no point events); one window spec, windows not
    from each key's first arriving event; every column the query reads in the header."""
    if inputs is None or inputs.format != "csv" or inputs.columns is None or not inputs.splittable:
        return False
    fields, query = cfg.events, cfg.query
    if query.windows or query.series_start == "first" or fields.duration is not None or fields.point_events:
        return False
    names = set(inputs.columns)
    return all(c in names for c in [fields.start, fields.end, *fields.keys, *query.value_columns])


def counted_columns(cfg: RunConfig, names: list[str]) -> set[str]:
    """The columns whose forms ``prepare`` counts in full (time and aggregated ones); of the others, their plain
    integers only."""
    fields, query = cfg.events, cfg.query
    return {fields.start, fields.end, *query.numeric_columns} & set(names)


def first_records(inputs: Inputs, columns: list[str]):
    """The ``columns`` (as text) of the records in the first ``FIRST_RECORDS`` bytes of the first file, read on the
    driver as the tasks read a range."""
    import pyarrow as pa

    path = inputs.files[0]
    records = range_records(path, 0, min(FIRST_RECORDS, os.path.getsize(path)), inputs.delimiter,
                            list(inputs.columns), columns)  # fmt: skip
    return pa.Table.from_batches(records.batches, schema=text_schema(columns))


def first_records_stats(cfg: RunConfig, inputs: Inputs, table=None) -> dict[str, ColumnStats]:
    """Each column's counts over the first records (``first_records``): the kinds the job is planned with.
    ``table``: those records with every column, where the caller has read them already."""
    names = list(inputs.columns)
    table = first_records(inputs, names) if table is None else table
    counted = counted_columns(cfg, names)
    return {name: text_stats(table.column(name), plain_only=name not in counted) for name in names}


def used_columns(plan: CsvPlan) -> dict:
    """What of a plan the windows depend on: the used columns' kinds, the time kind, the values' kinds."""
    read = plan.read
    used = [read.start, read.end, *read.keys, *read.values]
    return {"integer": sorted(c for c in used if c in plan.integer_columns), "time": plan.time_kind,
            "read": read}  # fmt: skip
