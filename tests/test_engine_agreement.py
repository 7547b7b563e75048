"""One answer from both engines: messy files through ``--engine local``, ``--engine spark`` and ``spanning.aggregate``.

Each case is a small file a user could meet, with what the reader contract (``spanning.engines.reader``) says
it holds, written by hand here: the usable events (times worked out with ``zoneinfo``, not with the
code under test) and the reason of every rejected row. The expected windows come from
``spanning.aggregate`` over those events; both engines must write exactly them, the same rejected rows
with the same reasons, and the same late rows, with the same column types.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spanning
from spanning.cli import main

PARIS = ZoneInfo("Europe/Paris")


def epoch(text: str, zone=PARIS) -> int:
    """Seconds since the epoch of a wall time in ``zone`` (Java's rules: fold=0 in gaps and overlaps)."""
    return int(datetime.fromisoformat(text).replace(tzinfo=zone).timestamp())


@dataclass
class Case:
    name: str
    files: dict[str, bytes | pd.DataFrame]  # file name -> CSV/JSON bytes, or a frame written as Parquet
    args: list[str]
    events: list[dict] = field(default_factory=list)  # usable rows: id, key, start, end, values (as parsed)
    rejected: dict[object, str] = field(default_factory=dict)  # id -> reason
    key: str | None = "cell"
    aggregates: dict[str, str] = field(default_factory=lambda: {"count": "count", "sum_bytes": "sum:bytes"})
    timestamps: bool = True


RANGE = ["--range", "10m", "--slide", "5m", "--ttp", "0"]
CSV_ARGS = ["--start", "start", "--end", "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes"]

CASES = [
    Case(
        "time zone across a DST change, text without a zone, with Z, with an offset",
        {"calls.csv": b"id,start,end,cell,bytes\n"
                      b"1,2024-03-31 01:50:00,2024-03-31 03:10:00,a,10\n"
                      b"2,2024-03-31 02:30:00,2024-03-31 03:40:00,a,20\n"  # 02:30 does not exist in Paris
                      b"3,2024-10-27 02:30:00,2024-10-27 02:50:00,b,30\n"  # 02:30 happens twice
                      b"4,2024-03-31T00:00:00Z,2024-03-31 03:00:00+02:00,b,40\n"},
        [*CSV_ARGS, "--timezone", "Europe/Paris"],
        [
            dict(id=1, cell="a", start=epoch("2024-03-31 01:50:00"), end=epoch("2024-03-31 03:10:00"), bytes=10),
            dict(id=2, cell="a", start=epoch("2024-03-31 03:30:00"), end=epoch("2024-03-31 03:40:00"), bytes=20),
            dict(id=3, cell="b", start=epoch("2024-10-27 02:30:00"), end=epoch("2024-10-27 02:50:00"), bytes=30),
            dict(id=4, cell="b", start=1711843200, end=1711846800, bytes=40),
        ],
    ),
    Case(
        "epoch numbers as text with garbage in one column, words pandas would parse, fractions",
        {"calls.csv": b"id,start,end,cell,bytes\n"
                      b"1,1000,1300,a,5\n"
                      b"2,today,1400,a,6\n"
                      b"3,1100,now,a,7\n"
                      b"4, 1200 ,1500,a,8\n"
                      b"5,1250.5,1600,a,9\n"
                      b"6,1300,1700.0,a,10\n"
                      b"7,2024-01-01,1800,a,11\n"},
        CSV_ARGS,
        [
            dict(id=1, cell="a", start=1000, end=1300, bytes=5),
            dict(id=4, cell="a", start=1200, end=1500, bytes=8),
            dict(id=6, cell="a", start=1300, end=1700, bytes=10),
        ],
        {2: "start is null or not a time", 3: "end is null or not a time",
         5: "time is not a whole number of chronons", 7: "start is null or not a time"},
        timestamps=False,
    ),
    Case(
        "RFC 4180 quoting: line breaks and doubled quotes in fields, a comma in a key",
        {"calls.csv": b'id,start,end,cell,bytes,note\n'
                      b'1,100,400,"north, 1",10,"hello\nworld"\n'
                      b'2,200,500,"north, 1",20,"say ""hi"""\n'
                      b'3,300,200,plain,30,"bad ""order"""\n'},
        CSV_ARGS,
        [
            dict(id=1, cell="north, 1", start=100, end=400, bytes=10),
            dict(id=2, cell="north, 1", start=200, end=500, bytes=20),
        ],
        {3: "end is before start"},
        timestamps=False,
    ),
    Case(
        "NaN is null; infinities, huge integers and words are rejected with their reason",
        {"calls.csv": b"id,start,end,cell,bytes\n"
                      b"1,100,400,a,NaN\n"
                      b"2,200,500,a,nan\n"
                      b"3,300,600,a,12\n"
                      b"4,300,600,a,1e400\n"
                      b"5,300,600,a,lots\n"
                      b"6,300,600,a,2.5\n"},
        CSV_ARGS,
        [
            dict(id=1, cell="a", start=100, end=400, bytes=None),
            dict(id=2, cell="a", start=200, end=500, bytes=None),
            dict(id=3, cell="a", start=300, end=600, bytes=12.0),
            dict(id=6, cell="a", start=300, end=600, bytes=2.5),
        ],
        {4: "infinite value in column bytes", 5: "non-numeric value in column bytes"},
        timestamps=False,
    ),
    Case(
        "integers beyond 64 bits in an integer column",
        {"calls.csv": b"id,start,end,cell,bytes\n"
                      b"1,100,400,a,9223372036854775807\n"
                      b"2,200,500,b,9223372036854775808\n"
                      b"3,200,500,b,-9223372036854775808\n"},
        CSV_ARGS,
        [
            dict(id=1, cell="a", start=100, end=400, bytes=9223372036854775807),
            dict(id=3, cell="b", start=200, end=500, bytes=-9223372036854775808),
        ],
        {2: "integer out of the 64-bit range in column bytes"},
        timestamps=False,
    ),
    Case(
        "null and empty keys from CSV are one ordinary group; keys that only look like numbers stay text",
        {"calls.csv": b'id,start,end,cell,bytes\n'
                      b'1,100,400,,10\n'
                      b'2,200,500,"",20\n'
                      b'3,200,500,007,30\n'
                      b'4,250,500,7,40\n'},
        CSV_ARGS,
        [
            dict(id=1, cell=None, start=100, end=400, bytes=10),
            dict(id=2, cell=None, start=200, end=500, bytes=20),
            dict(id=3, cell="007", start=200, end=500, bytes=30),
            dict(id=4, cell="7", start=250, end=500, bytes=40),
        ],
        timestamps=False,
    ),
    Case(
        "Parquet: NaN is null, null and empty keys are two groups, a late call",
        {"calls.parquet": pd.DataFrame({
            "id": [1, 2, 3, 4, 5],
            "cell": [None, "", None, "a", "a"],
            "start": [100, 100, 200, 0, 0],
            "end": [400, 400, 500, 610, 2000],
            "bytes": [1.5, float("nan"), 2.0, 4.0, 8.0],
        })},
        CSV_ARGS,
        [
            dict(id=1, cell=None, start=100, end=400, bytes=1.5),
            dict(id=2, cell="", start=100, end=400, bytes=None),
            dict(id=3, cell=None, start=200, end=500, bytes=2.0),
            dict(id=4, cell="a", start=0, end=610, bytes=4.0),
            dict(id=5, cell="a", start=0, end=2000, bytes=8.0),  # windows before 610 were released: late
        ],
        timestamps=False,
    ),
    Case(
        "column names with a dot and a space; an arg-aggregate over the key column",
        {"calls.csv": b"id,start,end,cell,call.bytes,call bytes\n"
                      b"1,100,400,a,10,1\n"
                      b"2,200,500,a,30,2\n"
                      b"3,300,600,b,20,3\n"},
        ["--start", "start", "--end", "end", "--key", "cell", "--agg", "sum:call.bytes", "--agg", "max:call bytes",
         "--agg", "argmax:call.bytes:cell", "--agg", "count"],
        [
            {"id": 1, "cell": "a", "start": 100, "end": 400, "call.bytes": 10, "call bytes": 1},
            {"id": 2, "cell": "a", "start": 200, "end": 500, "call.bytes": 30, "call bytes": 2},
            {"id": 3, "cell": "b", "start": 300, "end": 600, "call.bytes": 20, "call bytes": 3},
        ],
        aggregates={"sum_call.bytes": "sum:call.bytes", "max_call bytes": "max:call bytes",
                    "argmax_call.bytes_cell": "argmax:call.bytes:cell", "count": "count"},
        timestamps=False,
    ),
    Case(
        "malformed CSV records: too many fields, too few, a quote never closed; the rows around them kept",
        {"calls.csv": b"id,start,end,cell,bytes\n"
                      b"1,100,400,a,10\n"
                      b"2,200,500,a,20,extra,more\n"  # line 3: 7 fields
                      b"3,250,550\n"  # line 4: 3 fields
                      b"4,300,600,b,5\n"
                      b'5,320,620,"b,7\n'  # line 6: the quote runs to the end of the file
                      b"6,330,630,b,8\n"},
        CSV_ARGS,
        [dict(id=1, cell="a", start=100, end=400, bytes=10), dict(id=4, cell="b", start=300, end=600, bytes=5)],
        {2: "line 3 has 7 fields, the header 5", 3: "line 4 has 3 fields, the header 5",
         None: "line 6 opens a quote that is never closed: 2 lines to the end of the file read as one record"},
        timestamps=False,
    ),
    Case(
        "JSON lines: a malformed line is rejected, NaN is null, integers stay exact",
        {"calls.json": b'{"id": 1, "start": 100, "end": 400, "cell": "a", "bytes": 9007199254740993}\n'
                       b'{"id": 2, "start": 200, "end": 500, "cell": "a", "bytes": NaN}\n'
                       b'{"id": 3, "start": 200, "end": \n'
                       b'\n'
                       b'{"id": 4, "start": "2024-01-01", "end": 600, "cell": "b", "bytes": 1}\n'},
        CSV_ARGS,
        [
            dict(id=1, cell="a", start=100, end=400, bytes=9007199254740993.0),
            dict(id=2, cell="a", start=200, end=500, bytes=None),
        ],
        {None: "not a JSON object (malformed line)", 4: "start is null or not a time"},
        timestamps=False,
    ),
]


def _write(folder: Path, files: dict) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if isinstance(content, pd.DataFrame):
            content.to_parquet(folder / name, index=False)
        else:
            (folder / name).write_bytes(content)
    return [str(folder / name) for name in files]


def _run(engine: str, inputs: list[str], args: list[str], output: Path) -> int:
    extra = ["--master", "local[2]"] if engine == "spark" else []
    return main(["run", *inputs, *RANGE, *args, "--engine", engine, "--output", str(output), *extra])


def _both_engines(inputs: list[str], args: list[str], tmp_path: Path) -> dict[str, dict[str, pa.Table]]:
    """Each engine's windows, rejected and late rows over ``inputs``, run into ``tmp_path`` / engine."""
    results = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine
        assert _run(engine, inputs, args, out) == 0, engine
        results[engine] = {part: _table(out / part) for part in ("windows", "rejected", "late")}
    return results


def _table(folder: Path) -> pa.Table:
    parts = sorted(folder.glob("*.parquet"))
    tables = [pq.read_table(p) for p in parts]
    return pa.concat_tables(tables) if tables else pq.read_table(folder)


def _rows(table: pa.Table, order: list[str]) -> list[tuple]:
    frame = table.to_pandas()
    values = [tuple(None if _null(v) else v for v in row) for row in frame.itertuples(index=False)]
    names = list(frame.columns)
    position = [names.index(c) for c in order]
    return sorted(values, key=lambda r: tuple((r[i] is None, "" if r[i] is None else str(r[i])) for i in position))


def _null(value) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _expected_windows(case: Case) -> pd.DataFrame:
    """``spanning.aggregate`` over the case's usable events, in the batch job's arrival order."""
    events = pd.DataFrame(case.events)
    u = events["end"].where(events["end"] > events["start"], events["start"] + 1)  # a point event ends at l + 1
    events = events.assign(_null_key=events[case.key].isna(), _u=u).sort_values(
        ["_null_key", case.key, "_u", "id"], ascending=[False, True, True, True], kind="stable"
    ).drop(columns=["_null_key", "_u"]).reset_index(drop=True)
    out = spanning.aggregate(events, 600, 300, 0, aggregates={**case.aggregates, "_n": "count"}, key=case.key,
                             series_start="earliest")  # fmt: skip
    late = out.attrs.pop("late")
    out = out[out["_n"] > 0].drop(columns="_n").reset_index(drop=True)
    if case.timestamps:
        for col in ("window_start", "window_end"):
            out[col] = pd.to_datetime(out[col], unit="s", utc=True)
    out.attrs["late_ids"] = sorted(late["id"].tolist())
    return out


@pytest.fixture
def csv_read_in_ranges(monkeypatch):
    """``spanning run --engine spark`` reads even these small CSV files in byte ranges (``spark_jobs.batch.csv_read``),
    every few bytes a range of its own, so that records meet range boundaries everywhere."""
    import spanning.app.csv_partials as csv_partials
    import spark_jobs.batch.csv_read as csv_read
    import spark_jobs.batch.plans as plans

    monkeypatch.setattr(csv_read, "READ_SIDE_FROM", 0)
    monkeypatch.setattr(plans, "READ_SIDE_FROM", 0)
    monkeypatch.setattr(csv_partials, "SMALLEST_PIECE", 7)


def _reads_input(output: Path) -> bool:
    return json.loads((output / "summary.json").read_text())["plans"][0]["reads_input"]


@pytest.mark.parametrize("case", CASES, ids=[c.name.split(":")[0].split(",")[0] for c in CASES])
def test_both_engines_and_the_api_agree(spark, tmp_path, case):
    inputs = _write(tmp_path / "in", case.files)
    results = _both_engines(inputs, case.args, tmp_path)

    local, spark_out = results["local"], results["spark"]
    _same_outputs(local, spark_out, case.key)
    order = [case.key, "window_start"]

    expected = _expected_windows(case)  # the API over the events the contract says the file holds
    got = local["windows"].to_pandas()
    assert list(got.columns) == list(expected.columns)
    assert _rows(local["windows"], order) == _rows(pa.Table.from_pandas(expected, preserve_index=False), order)
    rejected = local["rejected"].to_pandas()
    got_reasons = {(None if _null(i) else i): r for i, r in zip(rejected.get("id", [None] * len(rejected)),
                                                                 rejected["reason"], strict=True)}  # fmt: skip
    assert got_reasons == case.rejected
    assert sorted(local["late"].to_pandas()["id"].tolist()) == expected.attrs["late_ids"]


def _same_outputs(local: dict, spark_out: dict, key: str) -> None:
    for part in ("windows", "rejected", "late"):  # the same columns with the same types
        assert local[part].schema.names == spark_out[part].schema.names, part
        assert [f.type for f in local[part].schema] == [f.type for f in spark_out[part].schema], part
    order = [key, "window_start"]
    assert _rows(local["windows"], order) == _rows(spark_out["windows"], order)
    for part in ("rejected", "late"):
        assert _rows(local[part], ["id"]) == _rows(spark_out[part], ["id"]), part


READ_CASES = [c for c in CASES if all(name.endswith((".csv", ".parquet")) for name in c.files)]


@pytest.mark.parametrize("case", READ_CASES, ids=[c.name.split(":")[0].split(",")[0] for c in READ_CASES])
def test_inputs_read_by_the_tasks_give_the_local_engines_rows(spark, tmp_path, case, csv_read_in_ranges):
    """The Spark job's tasks reading the input themselves (CSV byte ranges of 7 bytes and more, Parquet row
    groups), and writing the late rows (and CSV's rejected rows) as they go, write what the local engine writes:
    the same windows, late rows and rejected rows with their reasons and lines; or, where the tasks cannot read
    (a quote in a CSV file, a query they do not compute), the general way's."""
    inputs = _write(tmp_path / "in", case.files)
    results = _both_engines(inputs, case.args, tmp_path)
    _same_outputs(results["local"], results["spark"], case.key)
    quoted = any(b'"' in content for content in case.files.values())
    computed = not any(a.startswith(("argmax", "argmin", "p", "count_distinct")) for a in case.args)
    if not quoted and computed:
        assert _reads_input(tmp_path / "spark"), "the tasks read the byte ranges themselves"


def test_malformed_records_met_in_byte_ranges_keep_their_lines(spark, tmp_path, csv_read_in_ranges):
    """Records of too many or too few fields, blank lines and CRLF endings, read in byte ranges: each rejected with
    the line the local engine names, every other row kept, the counts reconciled."""
    content = (b"id,start,end,cell,bytes\r\n1,100,400,a,10\r\n2,200,500,a,20,extra,more\r\n\r\n3,250,550\r\n"
               b"4,300,600,b,5\r\n5,310,620,b,x\r\n" + b"".join(b"%d,%d,%d,c,1\r\n" % (i, 400 + i, 700 + i)
                                                              for i in range(6, 40)) + b"40,1,2\r\n")  # fmt: skip
    inputs = _write(tmp_path / "in", {"calls.csv": content})
    results = _both_engines(inputs, CSV_ARGS, tmp_path)
    _same_outputs(results["local"], results["spark"], "cell")
    assert _reads_input(tmp_path / "spark")
    reasons = sorted(results["spark"]["rejected"].column("reason").to_pylist())
    # a line as pyarrow numbers records: the header's and every non-empty line (the empty one, 4, is not counted)
    assert reasons == ["line 3 has 7 fields, the header 5", "line 4 has 3 fields, the header 5",
                       "line 41 has 3 fields, the header 5", "non-numeric value in column bytes"]  # fmt: skip
    summary = json.loads((tmp_path / "spark" / "summary.json").read_text())
    assert (summary["rows_read"], summary["accepted"], summary["rejected"]) == (40, 36, 4)


def test_a_file_with_lone_carriage_returns_is_read_whole(spark, tmp_path, csv_read_in_ranges):
    """pyarrow ends a line at a carriage return alone, where a byte range looks for line feeds only: such a file is
    not split (``Inputs.splittable``) and gives the local engine's rows."""
    content = b"id,start,end,cell,bytes\r" + b"".join(b"%d,%d,%d,a,1\r" % (i, 100 * i, 100 * i + 250) for i in range(9))
    inputs = _write(tmp_path / "in", {"calls.csv": content})
    results = _both_engines(inputs, CSV_ARGS, tmp_path)
    _same_outputs(results["local"], results["spark"], "cell")
    assert results["spark"]["windows"].num_rows > 0 and not _reads_input(tmp_path / "spark")


MISLEADING_FIRST_RECORDS = {  # the first records' kinds, then a later record's value that changes one
    "an aggregated column's decimal": ("bytes", "2.5", True),
    "a key with a leading zero": ("cell", "007", True),
    "text in a column only late/ and rejected/ carry": ("note", "n/a", False),
}


@pytest.mark.parametrize("changed", MISLEADING_FIRST_RECORDS, ids=list(MISLEADING_FIRST_RECORDS))
def test_kinds_the_first_records_mislead_are_checked_against_the_whole_files(spark, tmp_path, csv_read_in_ranges,
                                                                             monkeypatch, changed):  # fmt: skip
    """The job over CSV byte ranges is planned with the kinds of the files' first records. Where a later record
    gives a column the windows read another kind, the job runs again with the true counts; where only the rows
    of late/ and rejected/ carry that column, those are typed by the true kind. Either way the outputs are the
    local engine's, which counts every row first."""
    import spark_jobs.batch.compute as compute
    import spark_jobs.batch.csv_read as csv_read

    column, value, rerun = MISLEADING_FIRST_RECORDS[changed]
    import spanning.app.csv_partials as csv_partials

    monkeypatch.setattr(csv_partials, "FIRST_RECORDS", 60)  # the header and a record or two
    raised = []

    def checked(*args):
        try:
            return csv_read.checked_kinds(*args)
        except csv_read.KindsChanged:
            raised.append(True)
            raise

    monkeypatch.setattr(compute, "checked_kinds", checked)
    rows = [dict(id=i, start=100 * i, end=100 * i + 350, cell=i % 3, bytes=i, note=i) for i in range(1, 30)]
    rows[20][column] = value
    rows[25]["end"] = 1  # a rejected row, and late ones (TTP 0), carrying the note
    content = "id,start,end,cell,bytes,note\n" + "".join(
        f"{r['id']},{r['start']},{r['end']},{r['cell']},{r['bytes']},{r['note']}\n" for r in rows)
    inputs = _write(tmp_path / "in", {"calls.csv": content.encode()})
    results = _both_engines(inputs, CSV_ARGS, tmp_path)
    _same_outputs(results["local"], results["spark"], "cell")
    assert _reads_input(tmp_path / "spark") and raised == ([True] if rerun else [])
    assert results["spark"]["rejected"].num_rows == 1 and results["spark"]["late"].num_rows > 0


def test_an_unclosed_quote_is_a_warning_and_the_counts_reconcile_on_both_engines(spark, tmp_path, capsys):
    malformed = next(c for c in CASES if c.name.startswith("malformed CSV"))
    inputs = _write(tmp_path / "in", malformed.files)
    for engine in ("local", "spark"):
        assert _run(engine, inputs, CSV_ARGS, tmp_path / engine) == 0
        err = capsys.readouterr().err
        assert f"warning: {inputs[0]}: line 6 opens a quote that is never closed: 2 lines" in err, engine
        summary = json.loads((tmp_path / engine / "summary.json").read_text())
        assert (summary["rows_read"], summary["accepted"], summary["rejected"]) == (5, 2, 3), engine


REFUSED = [
    ("an empty file", {"calls.csv": b""}, "is empty"),
    ("a JSON file of blank lines", {"calls.json": b"\n\n"}, "is empty"),
    ("no header line", {"calls.csv": b"1,100,400,a,10\n2,200,500,a,20\n"}, "has no header line"),
    ("another delimiter", {"calls.csv": b"id;start;end;cell;bytes\n1;100;400;a;10\n"},
     "seems to separate fields with ';'"),
    ("a folder mixing CSV and Parquet",
     {"a.csv": b"id,start,end,cell,bytes\n1,100,400,a,10\n", "b.parquet": pd.DataFrame({"id": [2]})},
     "the inputs mix file formats"),
    ("CSV files with other headers",
     {"a.csv": b"id,start,end,cell,bytes\n1,100,400,a,10\n", "b.csv": b"id,end,start,cell,bytes\n2,400,100,a,1\n"},
     "give files of one layout per run"),
    ("a file of unknown format", {"a.csv": b"id,start,end,cell,bytes\n1,100,400,a,10\n", "notes.txt": b"hello"},
     "cannot tell the input format"),
    ("epoch numbers for the start, date-times for the end",
     {"calls.csv": b"id,start,end,cell,bytes\n1,100,2024-01-01 00:00:00,a,10\n"}, "--start holds epoch numbers"),
]


@pytest.mark.parametrize(("files", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_both_engines_refuse_the_same_files_in_one_line(spark, tmp_path, capsys, files, message):
    folder = tmp_path / "in"
    _write(folder, files)
    for engine in ("local", "spark"):
        assert _run(engine, [str(folder)], CSV_ARGS, tmp_path / engine) == 2, engine
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("spanning: error:") and message in err[0], (engine, err)
        assert str(folder) in err[0] or "--start" in err[0] or "mix" in err[0]
        assert not (tmp_path / engine).exists()


def test_unknown_time_zone_is_a_usage_error(tmp_path, capsys):
    inputs = _write(tmp_path / "in", CASES[0].files)
    assert _run("local", inputs, [*CSV_ARGS, "--timezone", "Mars/Olympus"], tmp_path / "out") == 2
    assert "unknown --timezone 'Mars/Olympus'" in capsys.readouterr().err


def test_csv_output_round_trips_quotes_and_line_breaks(spark, tmp_path):
    """Both engines write RFC 4180 CSV that pandas and Spark read back to the same rows."""
    inputs = _write(tmp_path / "in", CASES[2].files)  # line breaks and doubled quotes in the note column
    read = {}
    for engine in ("local", "spark"):
        assert _run(engine, inputs, [*CSV_ARGS, "--format", "csv"], tmp_path / engine) == 0
        for part in ("rejected", "late"):
            files = sorted((tmp_path / engine / part).glob("*.csv"))
            frame = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files], ignore_index=True)
            back = spark.read.options(header=True, multiLine=True, escape='"').csv(str(tmp_path / engine / part))
            assert sorted(map(tuple, frame.values.tolist())) == sorted(
                tuple("" if v is None else v for v in row) for row in back.collect()
            )
            read[engine, part] = sorted(map(tuple, frame.values.tolist()))
    assert read["local", "rejected"] == read["spark", "rejected"] == [("3", "300", "200", "plain", "30",
                                                                       'bad "order"', "end is before start")]
    assert read["local", "late"] == read["spark", "late"]
    assert ("1", "100", "400", "north, 1", "10", "hello\nworld", "1") in read["local", "late"]


def test_a_sum_beyond_64_bits_stops_both_engines_and_the_api_naming_the_column(spark, tmp_path, capsys):
    big = 9223372036854775000
    inputs = _write(tmp_path / "in", {"calls.csv": f"id,start,end,cell,bytes\n1,100,400,a,{big}\n2,200,500,a,{big}\n"
                                                   f"3,200,500,b,{big}\n".encode()})  # fmt: skip
    for engine in ("local", "spark"):
        (tmp_path / engine).mkdir()
        (tmp_path / engine / "keep.txt").write_text("previous")
        assert _run(engine, inputs, CSV_ARGS, tmp_path / engine / "out") == 2, engine
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "SumOverflowError" in err[0] and "'bytes'" in err[0] and "64-bit" in err[0], err
        assert sorted(p.name for p in (tmp_path / engine).iterdir()) == ["keep.txt"]  # nothing half-written
    for plan in ("vector",):  # auto took the explode above; vector finishes sums elsewhere
        output = tmp_path / plan / "out"
        assert _run("spark", inputs, [*CSV_ARGS, "--plan", plan], output) == 2, plan
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "SumOverflowError" in err[0] and "'bytes'" in err[0] and "64-bit" in err[0], err
        assert not output.exists()
    events = pd.DataFrame({"start": [100, 200], "end": [400, 500], "bytes": [big, big]})
    with pytest.raises(spanning.SumOverflowError, match="'bytes'"):
        spanning.aggregate(events, 600, 300, aggregates={"b": "sum:bytes"})
    assert spanning.aggregate(events.iloc[:1], 600, 300, aggregates={"b": "sum:bytes"})["b"].max() == big
