"""``spanning run --engine local`` over CSV files read in byte ranges (``spanning.app.local_ranges``) writes what the
general way (every row read into memory, ``spanning.app.local_run.prepare_local``) writes: the same windows in the
same order, the same late and rejected rows with their reasons (in read order rather than arrival order), in the
same types, and the same counts. The general way is the
one the oracle tests hold to the definition (tests/test_cli_local.py, tests/test_engine_agreement.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanning.app.csv_partials as csv_partials
import spanning.app.local_ranges as local_ranges
import spanning.app.local_run as local_run
from spanning.aggregates import SumOverflowError
from spanning.app.files import input_files
from spanning.app.local_ranges import reads_in_ranges
from spanning.cli import main
from tests.budget import examples

HEADER = "id,cell,start,end,bytes,rate,note"
OUTPUTS = ("windows", "late", "rejected")


def _record(draw, floats: bool) -> str:
    """One line of the file: mostly good records, and every kind of bad field the reader contract names
    (``floats``: the bytes column may hold a float, which makes it a float column)."""
    start = draw(st.integers(0, 4000))
    end = start + draw(st.one_of(st.integers(0, 900), st.integers(900, 5000), st.integers(-50, -1)))
    fields = [
        str(draw(st.integers(1, 10**6))),
        draw(st.sampled_from(["7", "8", "-3", "12", "", "7", "8", "007", "x", "cell 9"])),  # ints, null, text, 007
        draw(st.sampled_from([str(start)] * 6 + ["", "1e3", "abc", "2024-01-01"])),
        draw(st.sampled_from([str(end)] * 6 + ["", "oops"])),
        draw(st.sampled_from(["10", "-20", "4294967295", "4294967295", "0", "", "x", "9223372036854775807",
                              *(["3.5"] if floats else [])])),  # a sum whose low halves carry; beyond 64 bits
        draw(st.sampled_from(["1.5", "2", "-0.25", "", "nan", "inf"])),
        draw(st.sampled_from(["a", "", "b c"])),
    ]
    shape = draw(st.sampled_from(["good"] * 12 + ["long", "short", "blank"]))
    if shape == "long":
        fields.append("extra")
    elif shape == "short":
        fields = fields[:3]
    elif shape == "blank":
        return ""
    return ",".join(fields)


@st.composite
def cdr_files(draw) -> tuple[str, list[str]]:
    """A CSV file's text and the command's query options."""
    floats = draw(st.booleans())
    lines = [_record(draw, floats) for _ in range(draw(st.integers(0, 40)))]
    text = HEADER + "\n" + "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    slide = draw(st.sampled_from([60, 300, 450]))
    window = slide * draw(st.integers(1, 4)) + draw(st.sampled_from([0, 0, 30]))  # ω mod β = 0 and ≠ 0
    args = ["--range", str(window), "--slide", str(slide), "--ttp", str(draw(st.sampled_from([0, 300, 100_000]))),
            "--start", "start", "--end", "end"]  # fmt: skip
    if draw(st.booleans()):
        args += ["--key", "cell"]
    if draw(st.booleans()):
        args += ["--offset", str(draw(st.integers(0, slide - 1)))]
    if draw(st.booleans()):
        args += ["--series-start", str(draw(st.integers(-1000, 3000)))]
    aggregates = draw(st.lists(st.sampled_from(["count", "count:bytes", "sum:bytes", "mean:bytes", "max:bytes",
                                                "min:bytes", "sum:rate", "mean:rate", "max:rate", "min:rate"]),
                               min_size=1, max_size=4, unique=True))  # fmt: skip
    if "count:bytes" in aggregates and not any(a.endswith(":bytes") and a != "count:bytes" for a in aggregates):
        aggregates.append("max:bytes")  # a column read as a number (count alone reads it as text: the general way)
    for aggregate in aggregates:
        args += ["--agg", aggregate]
    return text, args


def _run(path: Path, args: list[str], out: Path, in_ranges: bool, monkeypatch) -> dict:
    with monkeypatch.context() as patched:
        if not in_ranges:
            patched.setattr(local_run, "reads_in_ranges", lambda cfg, inputs: False)
        code = main(["run", str(path), "--engine", "local", *args, "--output", str(out), "--overwrite"])
    if code != 0:
        return {"code": code}
    summary = json.loads((out / "summary.json").read_text())
    counts = {k: summary[k] for k in ("rows_read", "accepted", "rejected", "late", "windows_written")}
    if "csv" in args:  # --format csv: the caller reads the text
        return {"summary": counts}
    return {"summary": counts, **{name: pq.read_table(out / name) for name in OUTPUTS}}


def _same(ranges: dict, whole: dict) -> None:
    assert ranges.keys() == whole.keys()
    if "code" in whole:
        assert ranges["code"] == whole["code"]
        return
    assert ranges["summary"] == whole["summary"]
    for name in OUTPUTS:
        assert ranges[name].schema == whole[name].schema, name
        if name == "windows":  # in key and window order
            assert ranges[name].to_pylist() == whole[name].to_pylist(), name
        else:  # read order, a range's malformed records last; the general way's late rows are in arrival order
            assert sorted(map(repr, ranges[name].to_pylist())) == sorted(map(repr, whole[name].to_pylist())), name


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 7 bytes and more, so that records meet range boundaries everywhere; and the partials merged 3 rows
    at a time, so that a (key, window)'s rows from several ranges meet slice boundaries too."""
    monkeypatch.setattr(csv_partials, "SMALLEST_PIECE", 7)
    monkeypatch.setattr(local_ranges, "MERGE_ROWS", 3)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cdr_files())
def test_byte_ranges_write_what_the_whole_file_writes(tmp_path_factory, monkeypatch, small_ranges, case):
    text, args = case
    folder = tmp_path_factory.mktemp("ranges")
    path = folder / "calls.csv"
    path.write_text(text)
    assert reads_in_ranges(_config(path, args), input_files([str(path)]))
    ranges = _run(path, args, folder / "ranges", True, monkeypatch)
    _same(ranges, _run(path, args, folder / "whole", False, monkeypatch))


def _config(path: Path, args: list[str]):
    from spanning.app.run_command import config_from_args
    from spanning.cli import build_parser

    return config_from_args(build_parser().parse_args(["run", str(path), "--engine", "local", *args]))


@pytest.mark.parametrize("late_value", ["x", "3.5", "007"], ids=["text", "float", "leading-zero"])
def test_kinds_the_first_records_mislead_are_read_again(tmp_path, monkeypatch, small_ranges, late_value):
    """The first records give every column plain integers; a record far into the file does not (a key that is text,
    a value that is a float, a leading zero): the ranges are read again with the whole file's kinds, and write what
    the general way writes."""
    monkeypatch.setattr(csv_partials, "FIRST_RECORDS", 60)
    lines = [f"{i},{i % 3},{100 * i},{100 * i + 500},{i}" for i in range(1, 60)]
    lines[50] = f"51,{late_value},5100,5600,{late_value}"
    path = tmp_path / "calls.csv"
    path.write_text("id,cell,start,end,bytes\n" + "\n".join(lines) + "\n")
    args = ["--range", "900", "--slide", "300", "--ttp", "0", "--start", "start", "--end", "end", "--key", "cell",
            "--agg", "count", "--agg", "sum:bytes", "--agg", "max:bytes"]  # fmt: skip
    _same(_run(path, args, tmp_path / "ranges", True, monkeypatch),
          _run(path, args, tmp_path / "whole", False, monkeypatch))  # fmt: skip


def test_an_integer_sum_beyond_64_bits_is_the_same_one_line_error(tmp_path, monkeypatch, small_ranges, capsys):
    path = tmp_path / "calls.csv"
    path.write_text("start,end,bytes\n0,10,9223372036854775807\n5,10,9223372036854775807\n")
    args = ["--range", "60", "--slide", "60", "--start", "start", "--end", "end", "--agg", "sum:bytes"]
    messages = []
    for in_ranges in (True, False):
        got = _run(path, args, tmp_path / str(in_ranges), in_ranges, monkeypatch)
        assert got == {"code": 2}
        messages.append(capsys.readouterr().err.strip())
    assert messages[0] == messages[1]
    assert str(SumOverflowError("bytes")) in messages[0] and "Traceback" not in messages[0]


def test_queries_the_ranges_do_not_compute_take_the_general_way(tmp_path):
    path = tmp_path / "calls.csv"
    path.write_text('start,end,cell\n0,10,a\n5,10,"b"\n')
    quoted = _config(path, ["--range", "60", "--slide", "60", "--start", "start", "--end", "end"])
    assert not reads_in_ranges(quoted, input_files([str(path)]))
    path.write_text("start,end,cell\n0,10,a\n5,10,b\n")
    inputs = input_files([str(path)])
    base = ["--start", "start", "--end", "end"]
    one = ["--range", "60", "--slide", "60"]
    assert reads_in_ranges(_config(path, [*base, *one]), inputs)
    for other in (["--agg", "count_distinct:cell"], ["--agg", "occupancy"], ["--empty-windows", "emit"],
                  ["--series-start", "first"]):  # fmt: skip
        assert not reads_in_ranges(_config(path, [*base, *one, *other]), inputs), other
    assert not reads_in_ranges(_config(path, [*base, "--window", "60/60", "--window", "120/60"]), inputs)


def test_integer_sums_carry_their_low_halves(tmp_path, monkeypatch, small_ranges):
    """Σx from its two 32-bit halves: low halves that add up beyond 32 bits carry into the high one."""
    path = tmp_path / "calls.csv"
    path.write_text("start,end,bytes\n0,10,4294967295\n5,10,4294967295\n7,10,-4294967297\n")
    args = ["--range", "60", "--slide", "60", "--start", "start", "--end", "end", "--agg", "sum:bytes",
            "--agg", "mean:bytes"]  # fmt: skip
    ranges = _run(path, args, tmp_path / "ranges", True, monkeypatch)
    _same(ranges, _run(path, args, tmp_path / "whole", False, monkeypatch))
    assert ranges["windows"].column("sum_bytes").to_pylist() == [2 * 4294967295 - 4294967297]


def _calls(times: str, delimiter: str = ",", rows: range = range(40)) -> str:
    """Calls on three cells, a few of them late, as text: epoch seconds or date-times without a zone."""
    lines = []
    for i in rows:
        start = 1_717_401_600 + (i * 97) % 5000
        end = start + 30 + (i * 53) % 1200 + (4000 if i % 13 == 5 else 0)
        if times == "date_time":
            start, end = (f"2024-06-03 {(t - 1_717_372_800) // 3600:02d}:{(t // 60) % 60:02d}:{t % 60:02d}"
                          for t in (start, end))  # fmt: skip
        lines.append(delimiter.join([f"c{i}", "abc"[i % 3], str(start), str(end), str(i * 11)]))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("variant", ["csv-output", "date-times", "two-files", "semicolons", "milliseconds"])
def test_the_command_s_other_options_give_the_whole_file_s_outputs(tmp_path, monkeypatch, small_ranges, variant):
    delimiter = ";" if variant == "semicolons" else ","
    header = delimiter.join(["id", "cell", "start", "end", "bytes"]) + "\n"
    times = "date_time" if variant == "date-times" else "number"
    folder = tmp_path / "in"
    folder.mkdir()
    if variant == "two-files":
        (folder / "a.csv").write_text(header + _calls(times, rows=range(0, 25)))
        (folder / "b.csv").write_text(header + _calls(times, rows=range(25, 40)))
    else:
        (folder / "calls.csv").write_text(header + _calls(times, delimiter))
    args = ["--range", "15m", "--slide", "5m", "--ttp", "30m", "--start", "start", "--end", "end", "--key", "cell",
            "--agg", "count", "--agg", "sum:bytes", "--agg", "mean:bytes", "--agg", "min:bytes"]  # fmt: skip
    args += {"csv-output": ["--format", "csv"], "date-times": ["--timezone", "Europe/Paris"],
             "semicolons": ["--delimiter", ";"], "milliseconds": ["--time-unit", "ms"]}.get(variant, [])  # fmt: skip
    if variant == "milliseconds":
        args[1:4:2] = ["900000", "300000"]
        args[5] = "1800000"
    assert reads_in_ranges(_config(folder, args), input_files([str(folder)], None, delimiter))
    ranges, whole = (_run(folder, args, tmp_path / name, name == "ranges", monkeypatch) for name in ("ranges", "w"))
    if variant == "csv-output":
        assert ranges["summary"] == whole["summary"] and ranges["summary"]["late"] > 0
        for name in OUTPUTS:  # late and rejected rows in read order here, in arrival order there
            texts = [[p.read_text().splitlines() for p in sorted(Path(out, name).glob("*.csv"))]
                     for out in (tmp_path / "ranges", tmp_path / "w")]  # fmt: skip
            assert [(lines[0], sorted(lines[1:])) for lines in texts[0]] == [
                (lines[0], sorted(lines[1:])) for lines in texts[1]], name  # fmt: skip
        return
    _same(ranges, whole)
    assert ranges["summary"]["windows_written"] > 0
    assert ranges["summary"]["late"] > 0 or variant == "milliseconds"  # the calls are milliseconds long there


PLAIN_NAMES = ["id", "cell", "start", "end", "bytes", "note"]


def _plain_plan(folder: Path, bytes_kind: str) -> csv_partials.CsvPlan:
    from spanning.engines.parquet_partials import ReadPlan

    read = ReadPlan("start", "end", "s", ["cell"], {"bytes": ("_v0", bytes_kind)}, 10, 5, 0, 3, None,
                    [("_n", "sum", "one", None), ("_s", "sum", "value", "_v0")])  # fmt: skip
    return csv_partials.CsvPlan(read, PLAIN_NAMES, ",", ["id", "cell", "start", "end", "bytes"], "number", "UTC",
                                ["bytes"], str(folder), {"start", "end", "bytes"})  # fmt: skip


@st.composite
def plain_ranges(draw) -> tuple[bytes, int, int]:
    """A CSV file's bytes (lines ending in a line feed, or in a carriage return and a line feed), mostly plain integer
    records, with now and then what pyarrow reads otherwise or names malformed (a sign, a leading zero, 19 and 20
    digits, an empty field, text, non-ASCII text and bytes that are no UTF-8, a carriage return, a field more or
    less, an empty line), and a byte range of it."""
    odd = ["-0", "-7", "007", "", "x", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
           "12345678901234567890", "é", "<ff>", "1\r", "-"]  # fmt: skip
    lines = []
    for _ in range(draw(st.integers(0, 25))):
        start = draw(st.integers(0, 400))
        fields = [str(draw(st.integers(0, 999))), str(draw(st.integers(0, 3))), str(start),
                  str(start + draw(st.integers(-5, 60))), str(draw(st.integers(-10**6, 10**6))),
                  draw(st.sampled_from(["a", "", "b c", "17"] * 4 + ["é", "<ff>", "1\r"]))]  # fmt: skip
        if draw(st.integers(0, 9)) == 0:
            fields[draw(st.integers(0, 5))] = draw(st.sampled_from(odd))
        shape = draw(st.sampled_from(["good"] * 20 + ["long", "short", "empty"]))
        lines.append({"good": fields, "long": [*fields, "1"], "short": fields[:4], "empty": []}[shape])
    ending = draw(st.sampled_from(["\n", "\r\n"]))  # a Windows export's lines end in a carriage return too
    text = ending.join(",".join(fields) for fields in lines) + (ending if draw(st.booleans()) else "")
    data = (",".join(PLAIN_NAMES) + ending + text).encode().replace(b"<ff>", b"\xff")  # no UTF-8: pyarrow refuses it
    start = draw(st.integers(0, len(data)))
    return data, start, draw(st.integers(start, len(data)))


@settings(max_examples=examples(300), deadline=None)
@given(case=plain_ranges(), bytes_kind=st.sampled_from(["integer", "float"]))
def test_plain_records_read_from_bytes_are_what_pyarrow_reads(tmp_path_factory, case, bytes_kind):
    """``_plain_range`` types a range of plain records from its bytes; where it takes a range, everything the range's
    reduction reads equals what the text columns give (``_text_range``): rows, times, values, keys, every column's
    counts, and the text of every row as the side outputs write it."""
    data, start, end = case
    folder = tmp_path_factory.mktemp("plain")
    path = folder / "calls.csv"
    path.write_bytes(data)
    plan = _plain_plan(folder, bytes_kind)
    plain = csv_partials._plain_range(str(path), start, end, plan)
    if plain is None:
        return
    text = csv_partials._text_range(str(path), start, end, plan)
    assert plain.rows == text.rows and plain.malformed == text.malformed == []
    pairs = ((plain.starts, text.starts), (plain.ends, text.ends), (plain.numbers["bytes"], text.numbers["bytes"]))
    for got, want in pairs:
        for field in dataclasses.fields(got):
            got_values, want_values = getattr(got, field.name), getattr(want, field.name)
            assert got_values.dtype == want_values.dtype and got_values.tolist() == want_values.tolist(), field.name
    assert plain.keys["cell"].to_pylist() == text.keys["cell"].to_pylist()
    assert plain.keys["cell"].type == text.keys["cell"].type
    assert plain.stats == text.stats
    rows = np.arange(plain.rows)
    assert {k: v.to_pylist() for k, v in plain.text_rows(rows).items()} == \
        {k: v.to_pylist() for k, v in text.text_rows(rows).items()}


def test_plain_records_are_read_from_their_bytes(tmp_path, monkeypatch):
    """A range of plain records takes the bytes' way (pyarrow's text reader never runs) and hands on what pyarrow's
    text columns give, late rows included; one odd record sends the range to pyarrow."""
    path = tmp_path / "calls.csv"
    path.write_text(",".join(PLAIN_NAMES) + "\n1,2,10,20,5,a\n2,2,12,30,-5,\n\n3,1,15,16,7,b c\n4,2,1,9,3,\n")
    outputs = []
    for way in ("bytes", "pyarrow"):
        plan = _plain_plan(tmp_path / way, "integer")
        with monkeypatch.context() as patched:
            if way == "bytes":
                patched.setattr(csv_partials, "range_records", lambda *a, **k: pytest.fail("pyarrow read the range"))
            else:
                patched.setattr(csv_partials, "_plain_range", lambda *a, **k: None)
            [(partials, counts)] = csv_partials.range_partials(str(path), 0, path.stat().st_size, plan)
        outputs.append((partials.to_pylist(), counts, pq.read_table(tmp_path / way / "late").to_pylist()))
    assert outputs[0] == outputs[1]
    assert outputs[0][1][2] == len(outputs[0][2]) > 0  # late rows, their text from the bytes
    path.write_text(",".join(PLAIN_NAMES) + "\n1,2,10,20,5,a\n2,2,12,30,-5\n")
    assert csv_partials._plain_range(str(path), 0, path.stat().st_size, _plain_plan(tmp_path, "integer")) is None
