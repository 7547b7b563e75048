"""CSV records as text columns, every record accounted for: the one CSV reader of both engines.

A record whose field count differs from the header's, or one that opens a quote never closed (it runs to
the end of the file), is not dropped, folded or fatal: it becomes a row whose fields are the ones it has
(the first of them, or padded with nulls) and whose ``MALFORMED`` column says why, with its line. The
reader contract rejects such a row with that reason. ``--engine local`` reads each file with
``csv_batches`` in process; ``--engine spark`` reads each local file with it in one task (a multi-line CSV
file is one split either way), so both give the same rows, reasons and counts.

Parsing is pyarrow's (RFC 4180: quoted fields hold delimiters, line breaks and doubled quotes), one thread
so that each rejected record keeps its line number. Only an odd number of quote characters in a file
(bytes counted, no parsing) makes it look for an unterminated quote, with Python's csv module.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "calls.csv")
>>> _ = open(path, "w").write('id,start,end\\n1,10,20\\n2,30\\n3,40,50,60\\n4,"70,80\\n')
>>> table = read_csv_records(path, ",")
>>> table.column("id").to_pylist(), table.column(MALFORMED).to_pylist()[1:]
(['1', '2', '3', None], ['line 3 has 2 fields, the header 3', 'line 4 has 4 fields, the header 3', \
'line 5 opens a quote that is never closed: 1 line to the end of the file read as one record'])
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

__all__ = ["MALFORMED", "RecordRange", "UnterminatedQuote", "ambiguous_bytes", "csv_batches", "line_at",
           "range_body", "range_records", "read_csv_records", "text_schema", "unterminated_quote"]

MALFORMED = "_malformed"  # why a CSV record is not a row of the header's fields (null for a good record)
_BLOCK = 1 << 24  # bytes parsed at a time: the batches a Spark task hands on
# a byte range's, parsed and typed in its own task: smaller blocks stay in the cache (a 64 MB range of CDRs parsed in
# 0.19 s of CPU by 1-4 MB blocks, 0.24 s by 16 MB ones, 2026-11-29)
_RANGE_BLOCK = 1 << 22


class UnterminatedQuote(NamedTuple):
    """A quote opened at ``line`` and never closed: the rest of the file, ``lines`` lines, is one record."""

    line: int
    lines: int

    def reason(self) -> str:
        plural = "" if self.lines == 1 else "s"
        return (f"line {self.line} opens a quote that is never closed: {self.lines} line{plural} to the end of"
                " the file read as one record")  # fmt: skip


def ambiguous_bytes(path: str, content: bytes | None = None) -> tuple[int, int]:
    """The quote characters of ``path`` (or of its ``content``, as read), and its carriage returns alone: the
    bytes that may end a record elsewhere than at a line feed (a quoted field may hold a line break; pyarrow ends a
    line at a carriage return alone). A file with neither splits into byte ranges of whole records
    (``range_records``). Each is searched for before it is counted: most files have neither (memchr, 0.19 s a GB
    against 0.79 s for a count).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "calls.csv")
    >>> _ = open(path, "wb").write(b'id,note\\r\\n1,"a"\\r\\n2,b\\r3,c\\n')
    >>> ambiguous_bytes(path)
    (2, 1)
    """
    quotes = lone = 0
    with _bytes(path, content) as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            quotes += block.count(b'"') if b'"' in block else 0
            lone += block.count(b"\r") - block.count(b"\r\n") if b"\r" in block else 0  # (a pair cut at a block's end
            # counts as a lone one: the file is then read whole, as it may be anyway)
    return quotes, lone


def unterminated_quote(path: str, delimiter: str, content: bytes | None = None,
                       quotes: int | None = None) -> UnterminatedQuote | None:  # fmt: skip
    """Where a record of ``path`` (or of its ``content``, as read) opens a quote that the file never closes.
    ``quotes``: the file's quote characters, when counted already (``ambiguous_bytes``).

    Quotes come in pairs in a well-formed file (a quoted field's two, doubled quotes inside it), so only a file
    with an odd count is parsed, by Python's csv module, which stops at the end of data inside a quote.
    """
    if quotes is None:
        quotes = ambiguous_bytes(path, content)[0]
    if quotes % 2 == 0:
        return None
    with _text(path, content) as handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)
        ended = 0  # the line the previous record ended on
        while True:
            try:
                next(reader)
            except StopIteration:
                break
            except csv.Error as err:  # strict: also a quote followed by other text, which is not this
                if "end of data" in str(err):
                    return UnterminatedQuote(ended + 1, reader.line_num - ended)
            ended = reader.line_num
    return None  # an odd quote that opens nothing (a quote inside an unquoted field)


def _bytes(path: str, content: bytes | None = None) -> pa.NativeFile:
    """The file's bytes, from disk or as read already, .gz and .bz2 decompressed."""
    if content is None:
        return pa.input_stream(path)  # the compression told by the extension
    codec = {".gz": "gzip", ".bz2": "bz2"}.get(os.path.splitext(path)[1])
    return pa.input_stream(pa.py_buffer(content), compression=codec)


def _text(path: str, content: bytes | None = None) -> io.TextIOWrapper:
    return io.TextIOWrapper(_bytes(path, content), encoding="utf-8-sig", newline="")


def _text_reader(source: pa.NativeFile, delimiter: str, width: int, bad: list, skip_rows: int,
                 include: list[int] | None = None, block: int = _BLOCK) -> pa_csv.CSVStreamingReader:  # fmt: skip
    """pyarrow's reader of CSV records as ``width`` text columns ``f0``, ``f1``, ... (those at ``include`` only,
    in that order, when given); a record of another field count is set aside in ``bad`` as (line, fields, text)."""
    generated = [f"f{i}" for i in range(width)]  # the file's names may repeat or be blank: checked elsewhere
    included = None if include is None else [generated[i] for i in include]

    def keep_aside(row) -> str:
        bad.append((row.number, row.actual_columns, row.text))
        return "skip"

    return pa_csv.open_csv(
        source,
        read_options=pa_csv.ReadOptions(use_threads=False, column_names=generated, skip_rows=skip_rows,
                                        block_size=block),
        parse_options=pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True, invalid_row_handler=keep_aside),
        convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(generated, pa.string()), null_values=[""],
                                              strings_can_be_null=True, quoted_strings_can_be_null=True,
                                              include_columns=included),
    )  # fmt: skip


def _malformed(line: int, fields: int, text: str, width: int, delimiter: str) -> tuple[int, list[str | None], str]:
    """A record of ``fields`` fields where the header has ``width``: (line, its first ``width`` fields or padded
    with nulls, the reason)."""
    values = next(csv.reader(io.StringIO(text), delimiter=delimiter), [])
    values = [v or None for v in values[:width]] + [None] * (width - len(values))
    plural = "" if fields == 1 else "s"
    return line, values, f"line {line} has {fields} field{plural}, the header {width}"


def _malformed_batch(malformed: list[tuple[int, list[str | None], str]], schema: pa.Schema) -> pa.RecordBatch:
    malformed.sort(key=lambda m: m[0])
    width = len(schema) - 1
    columns = [pa.array([m[1][c] for m in malformed], pa.string()) for c in range(width)]
    return pa.record_batch([*columns, pa.array([m[2] for m in malformed], pa.string())], schema=schema)


def csv_batches(path: str, delimiter: str, names: list[str], content: bytes | None = None) -> Iterator[pa.RecordBatch]:
    """The records of one CSV file (header line skipped) as batches of text columns ``names`` + ``MALFORMED``;
    ``content``: the file's bytes when they were read already (a stream's file).

    Good records come in file order; the malformed ones follow in one last batch, their fields as they are
    (the first ``len(names)``, or padded with nulls; none for an unterminated quote). Empty fields are null.
    """
    width = len(names)
    bad: list[tuple[int | None, int, str]] = []
    reader = _text_reader(_bytes(path, content), delimiter, width, bad, skip_rows=1)
    schema = text_schema(names)
    unclosed = unterminated_quote(path, delimiter, content)
    held = None  # the last good batch: its last record may be the unterminated one
    for batch in reader:
        if batch.num_rows:
            if held is not None:
                yield _good(held, schema)
            held = batch
    malformed: list[tuple[int, list[str | None], str]] = []  # (line, fields, reason)
    if unclosed is not None and not (bad and bad[-1][0] == unclosed.line):  # the last good record swallowed the rest
        held = held.slice(0, held.num_rows - 1) if held is not None else None
        malformed.append((unclosed.line, [None] * width, unclosed.reason()))
    if held is not None and held.num_rows:
        yield _good(held, schema)
    for line, fields, text in bad:
        if unclosed is not None and line == unclosed.line:
            malformed.append((line, [None] * width, unclosed.reason()))
            continue
        malformed.append(_malformed(line, fields, text, width, delimiter))
    if malformed:
        yield _malformed_batch(malformed, schema)


def text_schema(names: list[str]) -> pa.Schema:
    """The schema of ``csv_batches``: ``names`` as text, then ``MALFORMED``."""
    return pa.schema([*(pa.field(n, pa.string()) for n in names), pa.field(MALFORMED, pa.string())])


class RecordRange(NamedTuple):
    """The records of a CSV file that start in a byte range, as ``range_records`` reads them."""

    batches: list[pa.RecordBatch]  # text columns and ``MALFORMED``, as ``csv_batches`` gives them
    rows: int


def range_records(path: str, start: int, end: int, delimiter: str, names: list[str],
                  columns: list[str] | None = None) -> RecordRange:  # fmt: skip
    """The records of an uncompressed CSV file that start at a byte in ``[start, end)``, the header line excluded,
    as ``csv_batches`` reads them (malformed ones last, named by their line in the file); of the header's
    ``names``, only ``columns`` (and ``MALFORMED``) when given.

    A record starts after a line break (or the header's), as Spark's own reader splits a file: exact where no
    field holds a line break, which only a quoted field can, and every line ends with a line feed; so the caller
    splits only files with no ``ambiguous_bytes``, and reads the others whole. A malformed record's line is counted
    from the file's start.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "calls.csv")
    >>> _ = open(path, "w").write("id,start\\n1,10\\n2,20,9\\n3,30\\n")
    >>> [pa.Table.from_batches(range_records(path, a, b, ",", ["id", "start"]).batches).to_pydict()
    ...  for a, b in [(0, 12), (12, 40)]]
    [{'id': ['1'], 'start': ['10'], '_malformed': [None]}, \
{'id': ['3', '2'], 'start': ['30', '20'], '_malformed': [None, 'line 3 has 3 fields, the header 2']}]
    """
    begin, body = range_body(path, start, end)
    width = len(names)
    include = None if columns is None else [names.index(c) for c in columns]
    schema = text_schema(names if columns is None else columns)
    bad: list[tuple[int | None, int, str]] = []
    batches = []
    # pyarrow refuses a source with no record (line feeds and carriage returns alone)
    if len(body) and (body[0] not in (10, 13) or ((body != 10) & (body != 13)).any()):
        reader = _text_reader(pa.py_buffer(body), delimiter, width, bad, 0, include, _RANGE_BLOCK)
        batches = [_good(batch, schema) for batch in reader if batch.num_rows]
    if bad:
        before = _records_before(path, begin)
        malformed = [_malformed(before + line, fields, text, width, delimiter) for line, fields, text in bad]
        if include is not None:
            malformed = [(line, [values[i] for i in include], reason) for line, values, reason in malformed]
        batches.append(_malformed_batch(malformed, schema))
    return RecordRange(batches, sum(b.num_rows for b in batches))


def range_body(path: str, start: int, end: int) -> tuple[int, np.ndarray]:
    """The bytes of the records of a CSV file that start at a byte in ``[start, end)`` (``range_records``'), and the
    offset of the first: whole lines, the header's excluded, the last one read past ``end`` to its line feed.

    The bytes are the file's pages mapped into memory (a read-only ``uint8`` array), not a copy: measured 2026-11-29
    on a 1 GB file in 64 MB ranges, 0.39 s of CPU against 1.5 s for reading each range into bytes (most of it the
    system's, faulting in the fresh buffers)."""
    import mmap

    size = os.path.getsize(path)
    if size == 0:
        return 0, np.zeros(0, np.uint8)
    with open(path, "rb") as handle:
        pages = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)  # stays valid once the file is closed
    line_feed = pages.find(b"\n", max(start - 1, 0))  # the header's end, or the line feed before the first record
    begin = size if line_feed < 0 else line_feed + 1
    if begin >= end:
        return begin, np.zeros(0, np.uint8)
    line_feed = pages.find(b"\n", end - 1)  # the last record started in the range: all of it
    stop = size if line_feed < 0 else line_feed + 1
    return begin, np.frombuffer(pages, np.uint8, count=stop - begin, offset=begin)


def line_at(body: np.ndarray, at: int) -> bytes:
    """The line of ``body`` (``range_body``'s bytes) that starts at ``at``, without its line feed (nor the carriage
    return before it)."""
    stop = at
    while True:
        found = np.flatnonzero(body[stop : stop + 4096] == 10)
        if len(found) or stop + 4096 >= len(body):
            line = body[at : stop + int(found[0])] if len(found) else body[at:]
            return line[:-1].tobytes() if len(line) and line[-1] == 13 else line.tobytes()
        stop += 4096


def _records_before(path: str, offset: int) -> int:
    """The lines that pyarrow numbers among the first ``offset`` bytes of a file (a line start): its records'
    lines, the header's included, and not the empty ones (nothing, or a carriage return alone, before a line feed),
    which pyarrow skips and does not count."""
    import numpy as np

    lines, previous = 0, b"\n\n"  # the two bytes before the block: as if the file began after an empty line
    with open(path, "rb") as handle:
        while offset > 0:
            block = handle.read(min(offset, 1 << 24))
            if not block:
                break
            data = np.frombuffer(previous + block, dtype=np.uint8)
            ends = np.flatnonzero(data[2:] == 10) + 2  # the line feeds of the block, in ``data``
            empty = (data[ends - 1] == 10) | ((data[ends - 1] == 13) & (data[ends - 2] == 10))
            lines += len(ends) - int(empty.sum())
            previous = (previous + block)[-2:]
            offset -= len(block)
    return lines


def _good(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Good records under the header's names, with no reason."""
    return pa.record_batch([*batch.columns, pa.nulls(batch.num_rows, pa.string())], schema=schema)


def read_csv_records(path: str, delimiter: str, names: list[str] | None = None) -> pa.Table:
    """``csv_batches`` of a whole file as one table (``names``: the header's, stripped, unless given)."""
    if names is None:
        with _text(path) as handle:
            names = [n.strip() for n in next(csv.reader(handle, delimiter=delimiter), [])]
    schema = text_schema(names)
    return pa.Table.from_batches(list(csv_batches(path, delimiter, names)), schema=schema)
