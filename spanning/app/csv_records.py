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

import pyarrow as pa
import pyarrow.csv as pa_csv

__all__ = ["MALFORMED", "UnterminatedQuote", "csv_batches", "read_csv_records", "unterminated_quote"]

MALFORMED = "_malformed"  # why a CSV record is not a row of the header's fields (null for a good record)
_BLOCK = 1 << 24  # bytes parsed at a time: the batches a Spark task hands on


class UnterminatedQuote(NamedTuple):
    """A quote opened at ``line`` and never closed: the rest of the file, ``lines`` lines, is one record."""

    line: int
    lines: int

    def reason(self) -> str:
        plural = "" if self.lines == 1 else "s"
        return (f"line {self.line} opens a quote that is never closed: {self.lines} line{plural} to the end of"
                " the file read as one record")  # fmt: skip


def unterminated_quote(path: str, delimiter: str, content: bytes | None = None) -> UnterminatedQuote | None:
    """Where a record of ``path`` (or of its ``content``, as read) opens a quote that the file never closes.

    Quotes come in pairs in a well-formed file (a quoted field's two, doubled quotes inside it), so only a file
    with an odd count is parsed, by Python's csv module, which stops at the end of data inside a quote.
    """
    with _bytes(path, content) as handle:
        quotes = sum(block.count(b'"') for block in iter(lambda: handle.read(1 << 24), b""))
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


def csv_batches(path: str, delimiter: str, names: list[str], content: bytes | None = None) -> Iterator[pa.RecordBatch]:
    """The records of one CSV file (header line skipped) as batches of text columns ``names`` + ``MALFORMED``;
    ``content``: the file's bytes when they were read already (a stream's file).

    Good records come in file order; the malformed ones follow in one last batch, their fields as they are
    (the first ``len(names)``, or padded with nulls; none for an unterminated quote). Empty fields are null.
    """
    width = len(names)
    generated = [f"f{i}" for i in range(width)]  # the file's names may repeat or be blank: checked elsewhere
    bad: list[tuple[int | None, int, str]] = []

    def keep_aside(row) -> str:
        bad.append((row.number, row.actual_columns, row.text))
        return "skip"

    reader = pa_csv.open_csv(
        _bytes(path, content),
        read_options=pa_csv.ReadOptions(use_threads=False, column_names=generated, skip_rows=1, block_size=_BLOCK),
        parse_options=pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True, invalid_row_handler=keep_aside),
        convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(generated, pa.string()), null_values=[""],
                                              strings_can_be_null=True, quoted_strings_can_be_null=True),
    )  # fmt: skip
    schema = pa.schema([*(pa.field(n, pa.string()) for n in names), pa.field(MALFORMED, pa.string())])
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
        values = next(csv.reader(io.StringIO(text), delimiter=delimiter), [])
        values = [v or None for v in values[:width]] + [None] * (width - len(values))
        plural = "" if fields == 1 else "s"
        malformed.append((line, values, f"line {line} has {fields} field{plural}, the header {width}"))
    if malformed:
        malformed.sort(key=lambda m: m[0])
        columns = [pa.array([m[1][c] for m in malformed], pa.string()) for c in range(width)]
        yield pa.record_batch([*columns, pa.array([m[2] for m in malformed], pa.string())], schema=schema)


def _good(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Good records under the header's names, with no reason."""
    return pa.record_batch([*batch.columns, pa.nulls(batch.num_rows, pa.string())], schema=schema)


def read_csv_records(path: str, delimiter: str, names: list[str] | None = None) -> pa.Table:
    """``csv_batches`` of a whole file as one table (``names``: the header's, stripped, unless given)."""
    if names is None:
        with _text(path) as handle:
            names = [n.strip() for n in next(csv.reader(handle, delimiter=delimiter), [])]
    schema = pa.schema([*(pa.field(n, pa.string()) for n in names), pa.field(MALFORMED, pa.string())])
    return pa.Table.from_batches(list(csv_batches(path, delimiter, names)), schema=schema)
