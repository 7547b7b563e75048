"""Window partials made where CSV records are read: a byte range of a file in, partials per (key, window) out.

``spanning run --engine spark`` over local, uncompressed CSV files reads them in byte ranges, every core a share,
as Spark's own reader splits a file (``spanning.app.csv_records.range_records``), in two passes:

1. ``range_stats``: each range's counts of the grammar's forms in every column (``text_stats``), and of its
   quote characters and lone carriage returns. Added up, the counts fix the column kinds of the reader contract as
   a count over the whole column does (``spanning.engines.reader.column_kind``); and with none of those bytes in
   any file, a range holds whole records.
2. ``range_partials``: each range read again, only the columns the query uses, typed by those kinds with the
   contract's own functions (the local engine's, so that both engines give the same rows), then reduced as
   ``parquet_partials.reduce_events`` reduces typed rows. No row enters the JVM. The range's late and rejected
   rows, as read (every column, typed as the job types them) with their windows missed or reason, are written by
   the task itself as a Parquet part into the run's side folder (``write_side_part``), from which the job writes
   late/ and rejected/: no second pass over the input for them.

>>> import os, tempfile
>>> import pyarrow.parquet as pq
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "calls.csv")
>>> _ = open(path, "w").write("id,cell,start,end,bytes\\n1,7,0,4,10\\n2,7,9,2,20\\n3,8,7,8,x\\n4,7,20,21,5\\n")
>>> read = ReadPlan("start", "end", "s", ["cell"], {"bytes": ("_v0", "integer")}, 10, 5, 0, 3, None,
...                 [("_n", "sum", "one", None), ("_s", "sum", "value", "_v0")])
>>> plan = CsvPlan(read, ["id", "cell", "start", "end", "bytes"], ",", ["id", "cell", "start", "end"], "number",
...                "UTC", ["bytes"], folder)
>>> [(table.to_pydict(), counts) for table, counts in range_partials(path, 0, os.path.getsize(path), plan)]
[({'cell': [7, 7, 7, 7], '_k': [-1, 0, 3, 4], '_n': [1, 1, 1, 1], '_s': [10, 10, 5, 5]}, (4, 2, 0))]
>>> pq.read_table(os.path.join(folder, "rejected")).to_pydict()["reason"]
['end is before start', 'non-numeric value in column bytes']
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from spanning.app.csv_records import MALFORMED, range_records, text_schema
from spanning.engines.parquet_partials import WINDOWS_MISSED, ReadPlan, reduce_events, write_side_part
from spanning.engines.reader import REASONS, ColumnStats, first_reasons, number_values, text_stats, time_chronons

__all__ = ["CsvPlan", "add_stats", "byte_pieces", "range_partials", "range_stats"]

PIECE_BYTES = 64 * 2**20  # a range's bytes at most: about 1.6M rows of a 40-byte CDR, as a Parquet piece holds 1M
SMALLEST_PIECE = 4 * 2**20  # no range below this many bytes (each costs a few milliseconds of its own) ...
PIECES_PER_CORE = 3  # ... else about this many a core, so that cores finishing early take more
REASON = "reason"  # a rejected row's own column, as rejected/ names it


@dataclass(frozen=True)
class CsvPlan:
    """What a task reads and computes: plain values only, so that it pickles to the executors as it is."""

    read: ReadPlan  # the columns, windows and partials (``values``' kinds as the counts fixed them)
    names: list[str]  # the header's, in file order
    delimiter: str
    integer_columns: list[str]  # read as long: every value in the files is a plain integer ("plain" kind)
    time_kind: str  # "number" or "date_time", of both time columns
    timezone: str  # of date-time text without a zone
    checked_values: list[str]  # the numeric value columns, in the order their reasons are tested
    side: str  # the folder whose late/ and rejected/ the tasks write their parts into

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


def range_stats(path: str, start: int, end: int, names: list[str], delimiter: str,
                full: set[str]) -> tuple[dict[str, ColumnStats], int, int]:  # fmt: skip
    """The counts of each column of one byte range (``text_stats``; all of them for the columns in ``full``, the
    plain integers only for the others), its records, and its bytes that forbid reading ranges (``ambiguous``)."""
    import pyarrow as pa

    records = range_records(path, start, end, delimiter, names)
    table = pa.Table.from_batches(records.batches, schema=text_schema(names))
    stats = {name: text_stats(table.column(name), plain_only=name not in full) for name in names}
    return stats, records.rows, records.ambiguous


def range_partials(path: str, start: int, end: int, plan: CsvPlan) -> Iterator:
    """One byte range's partials and (read, rejected, late), as ``parquet_partials.row_group_partials`` yields a
    row group's; its late and rejected rows go to the side folder (``write_side_part``)."""
    import pyarrow as pa

    read = plan.read
    used = list(dict.fromkeys([read.start, read.end, *read.keys, *read.values]))
    table = pa.Table.from_batches(range_records(path, start, end, plan.delimiter, plan.names, used).batches,
                                  schema=text_schema(used))  # fmt: skip
    n = table.num_rows
    starts = time_chronons(_text(table, read.start), plan.time_kind, read.time_unit, plan.timezone)
    ends = time_chronons(_text(table, read.end), plan.time_kind, read.time_unit, plan.timezone)
    malformed = _text(table, MALFORMED)
    checks = [] if not malformed.null_count < n else [(malformed.is_valid().to_numpy(zero_copy_only=False),
                                                       np.asarray(malformed.to_pylist(), dtype=object))]  # fmt: skip
    checks += [(~starts.present, REASONS["start"]), (~ends.present, REASONS["end"]),
               (starts.fractional | ends.fractional, REASONS["fraction"]),
               (ends.values < starts.values, REASONS["order"])]  # fmt: skip
    shipped = {}
    numbers = {name: number_values(_text(table, name), kind) for name, (_, kind) in read.values.items()}
    for name in plan.checked_values:
        checks += numbers[name].checks(name)
    for name, (internal, kind) in read.values.items():
        kind_of = pa.int64() if kind == "integer" else pa.float64()
        shipped[internal] = pa.array(numbers[name].values, kind_of, mask=~numbers[name].present)
    reasons = first_reasons(n, checks) if any(failed.any() for failed, _ in checks) else None
    accepted = np.ones(n, dtype=bool) if reasons is None else reasons == None  # noqa: E711 - elementwise
    keys = {k: _typed(_text(table, k), k in plan.integer_columns) for k in read.keys}
    reduced = reduce_events(keys, starts.values, ends.values, accepted, shipped, read)
    if reasons is not None or len(reduced.late):  # the range's every column, as read, for those rows
        whole = pa.Table.from_batches(range_records(path, start, end, plan.delimiter, plan.names).batches,
                                      schema=text_schema(plan.names))  # fmt: skip
        as_read = {name: _typed(_text(whole, name), name in plan.integer_columns) for name in plan.names}
        piece = f"{uuid.uuid5(uuid.NAMESPACE_URL, os.path.abspath(path)).hex[:12]}-{start:013d}"
        if len(reduced.late):
            rows = pa.array(reduced.late)
            write_side_part(pa.table({**{k: c.take(rows) for k, c in as_read.items()},
                                      WINDOWS_MISSED: pa.array(reduced.missed, pa.int64())}),
                            os.path.join(plan.side, "late"), piece)  # fmt: skip
        if reasons is not None:
            rows = pa.array(np.flatnonzero(~accepted))
            write_side_part(pa.table({**{k: c.take(rows) for k, c in as_read.items()},
                                      REASON: pa.array(reasons[~accepted].tolist(), pa.string())}),
                            os.path.join(plan.side, "rejected"), piece)  # fmt: skip
    yield reduced.partials, reduced.counts


def _text(table, name: str):
    return table.column(name).combine_chunks()


def _typed(text, integer: bool):
    """A column as read: long where every value in the files is a plain integer, else its text."""
    import pyarrow as pa

    return text.cast(pa.int64()) if integer else text
