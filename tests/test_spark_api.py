"""``spanning.spark.aggregate`` on a session made the way a user makes one: DataFrames in, DataFrames out.

The session runs with a zone of its own (America/New_York), ANSI on (Spark 4's default) and 7 shuffle partitions;
the windows must equal the oracle's (``tests/oracle.py``, the definition evaluated directly), the late and rejected
rows those of ``spanning run`` over the same rows, and the session's settings must be as they were.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from spanning.app.jobspec import UsageError
from spanning.cli import main
from tests.oracle import oracle
from tests.test_spark_job import assert_frames_match, read_output

ZONE = "America/New_York"
USER_SETTINGS = {"spark.sql.session.timeZone": ZONE, "spark.sql.ansi.enabled": "true",
                 "spark.sql.shuffle.partitions": "7"}  # fmt: skip
ARROW = ("spark.sql.execution.arrow.pyspark.enabled", "spark.sql.execution.arrow.maxRecordsPerBatch",
         "spark.sql.parquet.outputTimestampType")  # the session's own values, whatever they are
RANGE, SLIDE, TTP = 900, 300, 1800
AGGS = {"n": "count", "bytes": "sum:bytes", "longest": "max:bytes"}
CELLS = ["a", "b", "c", "d"]
BATCHES_OF_EVERYTHING = {0: (73, 6, 1), 1: (35, 0, 0)}  # foreach_batch over all the calls: the rows of each batch
CALL_TYPES = (("call_id", "string"), ("cell", "string"), ("start", "timestamp"), ("end", "timestamp"),
              ("bytes", "bigint"))  # the streamed calls' columns (stream_halves), as late and rejected rows carry them
BASE = int(datetime(2024, 6, 3, 8, tzinfo=ZoneInfo(ZONE)).timestamp())  # far from a change of summer time


@pytest.fixture
def user_session(spark):
    """The test run's session with a user's settings, given back afterwards (other tests share the session).
    ``spanning run`` over the same rows runs with ``--engine local`` here: in-process, the Spark engine takes the
    active session and sets its own zone on it (the command's session is the command's)."""
    before = {name: spark.conf.get(name) for name in USER_SETTINGS}
    for name, value in USER_SETTINGS.items():
        spark.conf.set(name, value)
    yield spark
    for name, value in before.items():
        spark.conf.set(name, value)


def calls() -> pd.DataFrame:
    """Calls on 4 cells with out-of-order ends, a few late by more than the TTP, and rows no job can use."""
    rows = []
    for i in range(240):
        start = BASE + (i * 37) % 5400 + (3600 if i % 50 == 7 else 0)  # some arrive long after their windows
        length = 5 + (i * 53) % 1300 + (4000 if i % 40 == 9 else 0)  # longer than range + TTP: late
        rows.append({"call_id": f"c{i:03d}", "cell": CELLS[i % 4], "start": start, "end": start + length,
                     "bytes": (i * 7919) % 100_000})  # fmt: skip
    frame = pd.DataFrame(rows)
    frame.loc[3, "end"] = frame.loc[3, "start"] - 10  # ends before it starts
    frame.loc[11, "start"] = None  # no start
    frame.loc[12, "bytes"] = None  # no bytes: a null, not a rejection
    return frame


def as_text(seconds) -> str | None:
    if pd.isna(seconds):
        return None
    return datetime.fromtimestamp(int(seconds), ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M:%S")


def text_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The calls as a CSV file holds them: local date-time text without a zone, numbers as text."""
    out = frame.astype(object)
    for col in ("start", "end"):
        out[col] = frame[col].map(as_text)
    out["bytes"] = frame["bytes"].map(lambda v: None if pd.isna(v) else str(int(v)))
    out.loc[5, "bytes"] = "n/a"  # not a number: rejected, naming bytes (ANSI on would fail the query instead)
    out.loc[7, "start"] = "2024-06-31 25:61:00"  # no such time: rejected, naming start
    return out


def expected_windows(frame: pd.DataFrame, keys: list[str], series_start: str = "earliest") -> pd.DataFrame:
    """The oracle's windows of the usable rows, each key's rows in the batch job's arrival order (by end, then by
    their order in the input); windows with no event are left out, as the job skips them."""
    usable = frame.dropna(subset=["start", "end"])
    usable = usable[usable["end"] >= usable["start"]].copy()
    usable["_u"] = usable[["start", "end"]].max(axis=1).where(usable["end"] > usable["start"], usable["start"] + 1)
    usable = usable.sort_values("_u", kind="stable")
    out = []
    for key, rows in usable.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        events = [(key, int(r.start), int(r.end), {"bytes": None if pd.isna(r.bytes) else int(r.bytes)})
                  for r in rows.itertuples()]  # fmt: skip
        first = int(rows["start"].min()) if series_start == "earliest" else None
        windows, _ = oracle(events, RANGE, SLIDE, TTP, 0, AGGS, series_start=first)
        for _, got in windows.items():
            for start, end, values in got:
                if values["n"]:
                    out.append({**dict(zip(keys, key, strict=True)), "window_start": start, "window_end": end,
                                **values})  # fmt: skip
    return pd.DataFrame(out)


def seconds_of(frame):
    """A Spark frame of windows with their bounds as epoch seconds (``toPandas`` gives local wall-clock times)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    for col in ("window_start", "window_end"):
        if isinstance(frame.schema[col].dataType, T.TimestampType):
            frame = frame.withColumn(col, F.unix_seconds(col))
    return frame.toPandas()


def windows_of(result, keys: list[str]) -> pd.DataFrame:
    return seconds_of(result.windows)


def run_command(tmp_path: Path, source: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    args = ["run", str(source), "--range", str(RANGE), "--slide", str(SLIDE), "--ttp", str(TTP), "--start", "start",
            "--end", "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes", "--agg", "max:bytes",
            "--engine", "local", "--timezone", ZONE, "--output", str(out), *extra]  # fmt: skip
    assert main(args) == 0
    return out


def rows_by_id(frame: pd.DataFrame, column: str) -> dict:
    return dict(zip(frame["call_id"], frame[column], strict=True))


def test_a_table_and_a_joined_filtered_frame_give_the_oracles_windows_and_the_commands_late_and_rejected_rows(
        user_session, tmp_path):  # fmt: skip
    import spanning.spark

    spark = user_session
    frame = calls()
    source = tmp_path / "calls.csv"
    text_frame(frame).to_csv(source, index=False)
    cells = spark.createDataFrame(pd.DataFrame({"cell": CELLS, "region": ["north", "north", "south", "east"]}))
    spark.read.option("header", True).csv(str(source)).createOrReplaceTempView("cdr")
    kept = frame[frame["cell"] != "d"]  # the filter drops the east's cell
    kept_source = tmp_path / "kept.csv"
    text_frame(frame)[frame["cell"] != "d"].to_csv(kept_source, index=False)
    inputs = {
        "table": (spark.table("cdr"), frame, source),
        "join": (spark.table("cdr").join(cells, "cell").where("region <> 'east'").drop("region"), kept, kept_source),
    }
    arrow = {n: spark.conf.get(n) for n in ARROW}
    for name, (df, rows, same_rows) in inputs.items():
        result = spanning.spark.aggregate(df, range=RANGE, slide=SLIDE, ttp="30m", aggregates=AGGS, start="start",
                                          end="end", key="cell")  # fmt: skip
        got = windows_of(result, ["cell"])
        late, rejected, counts = result.late.toPandas(), result.rejected.toPandas(), result.counts
        # after the call and all its actions
        assert {n: spark.conf.get(n) for n in USER_SETTINGS} == USER_SETTINGS, name
        assert {n: spark.conf.get(n) for n in ARROW} == arrow, name
        assert list(got.columns) == ["cell", "window_start", "window_end", "n", "bytes", "longest"]
        usable = rows.drop(index=[5, 7], errors="ignore")  # the text frame's bad bytes and bad start
        assert_frames_match(got, expected_windows(usable, ["cell"]), ["cell"])

        command = run_command(tmp_path, same_rows, name)
        their_late, their_rejected = pd.read_parquet(command / "late"), pd.read_parquet(command / "rejected")
        unusable = len({3, 5, 7, 11} & set(rows.index))  # end before start, bytes n/a, no such time, no start
        assert len(late) > 0 and len(rejected) == unusable > 0, (name, len(late), len(rejected))
        assert rows_by_id(late, "windows_missed") == rows_by_id(their_late, "windows_missed"), name
        assert rows_by_id(rejected, "reason") == rows_by_id(their_rejected, "reason"), name
        assert sorted(rejected.columns) == sorted(their_rejected.columns), name  # a join puts its key first
        assert counts == {"read": len(rows), "accepted": len(rows) - unusable, "rejected": unusable,
                          "late": len(late)}, name  # fmt: skip
        assert result.plans[0]["plan"] == result.plan and result.plans[0]["reason"]

    # the session still runs the user's queries, with the user's settings: ANSI still fails a bad cast
    assert spark.range(10).selectExpr("sum(id)").first()[0] == 45
    with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
        spark.sql("SELECT CAST('x' AS INT)").collect()
    assert spark.sql("SELECT hour(TIMESTAMP '2024-06-03 12:00:00Z')").first()[0] == 8  # New York's summer time


TIME_TYPES = ["timestamp", "timestamp_ntz", "text", "epoch_double", "chronons"]


def typed(spark, frame: pd.DataFrame, kind: str):
    """The calls with their times as ``kind``, built in Spark (as a user builds a DataFrame in code)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(frame.astype({"start": "Int64", "end": "Int64", "bytes": "Int64"}))
    for col in ("start", "end"):
        seconds = F.col(col)
        column = {
            "timestamp": F.timestamp_seconds(seconds),
            "timestamp_ntz": F.to_timestamp_ntz(F.date_format(F.timestamp_seconds(seconds), "yyyy-MM-dd HH:mm:ss")),
            "text": F.date_format(F.timestamp_seconds(seconds), "yyyy-MM-dd HH:mm:ss"),
            "epoch_double": seconds.cast("double"),
            "chronons": seconds,
        }[kind]
        df = df.withColumn(col, column)
    return df


@pytest.mark.parametrize("kind", TIME_TYPES)
def test_every_time_column_type_gives_the_oracles_windows(user_session, kind):
    import spanning.spark

    frame = calls()
    df = typed(user_session, frame, kind)
    result = spanning.spark.aggregate(df, range="15m", slide="5m", ttp=TTP, aggregates=AGGS, key="cell")
    got = windows_of(result, ["cell"])
    assert_frames_match(got, expected_windows(frame, ["cell"]), ["cell"])
    assert result.counts["rejected"] == 2  # no start; ends before it starts


@pytest.mark.parametrize("keys", [["cell_id"], ["cell", "band"]], ids=["integer", "composite"])
def test_integer_and_composite_keys_with_nulls_give_the_oracles_windows(user_session, keys):
    import spanning.spark

    frame = calls().assign(cell_id=lambda f: f["cell"].map({"a": 1, "b": 2, "c": None, "d": 4}).astype("Int64"),
                           band=lambda f: f.index.map(lambda i: None if i % 9 == 0 else f"b{i % 2}"))  # fmt: skip
    df = typed(user_session, frame, "timestamp")
    assert [f.dataType.simpleString() for f in df.schema if f.name in keys] == (["bigint"] if len(keys) == 1 else
                                                                                ["string", "string"])  # fmt: skip
    result = spanning.spark.aggregate(df, range=RANGE, slide=SLIDE, ttp=TTP, aggregates=AGGS,
                                      key=keys if len(keys) > 1 else keys[0])  # fmt: skip
    got = windows_of(result, keys)
    expected = expected_windows(frame, keys)
    assert list(got.columns[: len(keys)]) == keys
    def text(value) -> str:  # keys as text: nulls sort beside values, and toPandas gives a nullable long as float
        return "None" if pd.isna(value) else str(int(value)) if isinstance(value, float | int) else str(value)

    for key in keys:
        got[key], expected[key] = got[key].map(text), expected[key].map(text)
    assert_frames_match(got, expected, keys)


def test_a_plain_parquet_read_takes_the_read_side_path_and_a_filtered_one_the_general_path(user_session, tmp_path):
    import spanning.spark

    frame = calls().dropna(subset=["start"])
    frame = frame[frame["end"] >= frame["start"]]
    stamps = {c: pd.to_datetime(frame[c], unit="s", utc=True).astype("datetime64[us, UTC]") for c in ("start", "end")}
    path = tmp_path / "calls.parquet"
    frame.assign(**stamps, bytes=frame["bytes"].astype("Int64")).to_parquet(path, index=False, row_group_size=60)
    plain = user_session.read.parquet(str(path))
    results = {"plain": spanning.spark.aggregate(plain, range=RANGE, slide=SLIDE, ttp=TTP, aggregates=AGGS,
                                                 key="cell", plan="vector"),
               "filtered": spanning.spark.aggregate(plain.where("cell IS NOT NULL"), range=RANGE, slide=SLIDE,
                                                    ttp=TTP, aggregates=AGGS, key="cell", plan="vector")}  # fmt: skip
    assert results["plain"].plans[0]["reads_input"] and not results["filtered"].plans[0]["reads_input"]
    for result in results.values():
        assert_frames_match(windows_of(result, ["cell"]), expected_windows(frame, ["cell"]), ["cell"])
        assert result.counts["read"] == len(frame)


def test_counts_after_a_write_with_every_row_rejected_on_the_read_side_path(user_session, tmp_path):
    """Adaptive execution drops the stage that observed the counts when the shuffle comes out empty: the counts
    are then counted in a pass of their own, not a bare assertion error from PySpark's Observation."""
    import spanning.spark

    path = tmp_path / "backwards.parquet"
    pd.DataFrame({"cell": ["a", "b", None], "start": [100, 200, 300], "end": [50, 150, 250]}).to_parquet(path)
    result = spanning.spark.aggregate(user_session.read.parquet(str(path)), range=RANGE, slide=SLIDE, ttp=TTP,
                                      aggregates=["count"], key="cell", plan="vector")  # fmt: skip
    assert result.plans[0]["reads_input"]
    result.windows.write.parquet(str(tmp_path / "windows"))
    assert user_session.read.parquet(str(tmp_path / "windows")).count() == 0
    assert result.counts == {"read": 3, "accepted": 0, "rejected": 3, "late": 0}


def stream_halves(spark, frame: pd.DataFrame, folder: Path) -> tuple[Path, Path, Any]:
    """The calls of ``frame`` with a start, their times as timestamps, in end order, written as two Parquet halves
    to ``folder / "all"``, and an empty ``folder / "landing"`` that a stream reads them from: both, and their
    schema."""
    rows = frame.dropna(subset=["start"])
    stamps = {c: pd.to_datetime(rows[c], unit="s", utc=True).astype("datetime64[us, UTC]") for c in ("start", "end")}
    rows = rows.assign(**stamps, bytes=rows["bytes"].astype("Int64")).sort_values("end", kind="stable")
    landing, everything = folder / "landing", folder / "all"
    landing.mkdir()
    everything.mkdir()
    half = len(rows) // 2
    for i, part in enumerate((rows.iloc[:half], rows.iloc[half:])):
        part.to_parquet(everything / f"part-{i}.parquet", index=False)
    return landing, everything, spark.read.parquet(str(everything)).schema


@pytest.mark.parametrize("reduce_on", ["driver", "executors"])
def test_a_stream_in_two_available_now_rounds_equals_one_batch_call_and_foreach_batch_gets_the_same_rows(
        user_session, tmp_path, reduce_on):  # fmt: skip
    """On either path (``reduce_on``; the executors' tasks on local[2] too): ``write_stream``'s files and
    ``foreach_batch``'s frames hold the batch call's windows (the oracle's), late and rejected rows, with the same
    columns and types, in the same batches; the batches' records say where each was reduced."""
    import json
    from urllib.parse import urlparse

    import spanning.spark

    spark = user_session
    landing, everything, schema = stream_halves(spark, calls(), tmp_path)
    query = {"range": "15m", "slide": "5m", "ttp": "30m", "aggregates": AGGS, "key": "cell"}

    stream = spanning.spark.aggregate(spark.readStream.schema(schema).parquet(str(landing)), **query)
    shutil.copy(everything / "part-0.parquet", landing)
    first = stream.write_stream(str(tmp_path / "out"), checkpoint=str(tmp_path / "chk"), trigger="available-now",
                                reduce_on=reduce_on)  # fmt: skip
    first.awaitTermination()
    assert len(read_output(tmp_path / "out" / "windows" / "batch=0")) > 0  # round 1 released windows already
    shutil.copy(everything / "part-1.parquet", landing)
    second = stream.write_stream(str(tmp_path / "out"), checkpoint=str(tmp_path / "chk"), trigger="available-now",
                                 drain=True, reduce_on=reduce_on, parallelism=3)  # fmt: skip
    second.awaitTermination()
    assert first.exception() is None and second.exception() is None
    assert {n: spark.conf.get(n) for n in USER_SETTINGS} == USER_SETTINGS

    batch = spanning.spark.aggregate(spark.read.parquet(str(everything)), series_start="first", **query)
    expected = windows_of(batch, ["cell"])
    streamed = pd.concat([read_output(p) for p in sorted((tmp_path / "out" / "windows").glob("batch=*"))])
    assert len(expected) > 100
    assert_frames_match(streamed, expected, ["cell"])
    late = pd.concat([pd.read_parquet(p) for p in (tmp_path / "out" / "late").glob("batch=*")])
    assert rows_by_id(late, "windows_missed") == rows_by_id(batch.late.toPandas(), "windows_missed")
    rejected = pd.concat([pd.read_parquet(p) for p in (tmp_path / "out" / "rejected").glob("batch=*")])
    assert rows_by_id(rejected, "reason") == rows_by_id(batch.rejected.toPandas(), "reason") == {
        "c003": "end is before start"}  # fmt: skip

    received, failed, types, files = {}, [], set(), set()  # received: batch -> kind -> rows

    def sink(windows, late, rejected, batch_id):
        given = {}
        for name, rows in (("windows", windows), ("late", late), ("rejected", rejected)):
            types.add((name, tuple(rows.dtypes)))
            files.update(Path(urlparse(f).path).parents[2] for f in rows.inputFiles())
            given[name] = seconds_of(rows) if name == "windows" else rows.toPandas()
        if not failed:  # the sink fails once, at its first batch: a restart runs that batch again
            failed.append((batch_id, given))
            raise RuntimeError("the sink failed")
        received[batch_id] = given

    again = spanning.spark.aggregate(spark.readStream.schema(schema).parquet(str(everything)), **query)
    start = {"checkpoint": str(tmp_path / "chk2"), "trigger": "available-now", "drain": True, "reduce_on": reduce_on}
    with pytest.raises(Exception, match="the sink failed"):  # Spark's StreamingQueryException, with the sink's error
        again.foreach_batch(sink, **start)
    assert failed and not received
    done = again.foreach_batch(sink, **start)
    done.awaitTermination()
    assert done.exception() is None
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession()._jsparkSession.equals(spark._jsparkSession)  # not the query's copy
    got = pd.concat([given["windows"] for given in received.values()])
    assert_frames_match(got, expected, ["cell"])
    assert rows_by_id(pd.concat([g["late"] for g in received.values()]), "windows_missed") == rows_by_id(
        late, "windows_missed")  # fmt: skip
    assert rows_by_id(pd.concat([g["rejected"] for g in received.values()]), "reason") == rows_by_id(rejected, "reason")
    # the same batches on both paths (all the rows in batch 0, the open windows drained in batch 1), the same types
    counts = {batch: tuple(len(given[kind]) for kind in ("windows", "late", "rejected"))
              for batch, given in sorted(received.items())}  # fmt: skip
    assert counts == BATCHES_OF_EVERYTHING, counts
    # the failed batch run again: fn called again with the same id and rows
    batch_id, first_run = failed[0]
    assert batch_id == 0 and all(sorted(map(str, first_run[kind].values.tolist())) == sorted(
        map(str, received[0][kind].values.tolist())) for kind in first_run)  # fmt: skip
    stamp = "timestamp"
    assert types == {("windows", (("cell", "string"), ("window_start", stamp), ("window_end", stamp), ("n", "bigint"),
                                  ("bytes", "bigint"), ("longest", "bigint"))),
                     ("late", tuple(CALL_TYPES) + (("windows_missed", "bigint"),)),
                     ("rejected", tuple(CALL_TYPES) + (("reason", "string"),))}, types  # fmt: skip
    records = [json.loads(p.read_text()) for chk in ("chk", "chk2")
               for p in (tmp_path / chk / "spanning" / "batches").glob("*.json")]  # fmt: skip
    assert len(records) == 5 and {r["reduced_on"] for r in records} == {reduce_on}
    assert {r.get("tasks") for r in records} == ({None} if reduce_on == "driver" else {2, 3})
    handed = tmp_path / "chk2" / "spanning" / "foreach_batch"
    # on the executors, fn's frames read the tasks' files in the checkpoint, removed once fn has returned
    assert files == (set() if reduce_on == "driver" else {handed})
    assert not list(handed.glob("*/*"))


def test_a_text_stream_without_kinds_from_and_a_spark_frame_given_to_the_pandas_entry_are_told_in_one_line(
        user_session, tmp_path, monkeypatch):  # fmt: skip
    import spanning
    import spanning.spark

    folder = tmp_path / "in"
    folder.mkdir()
    text_frame(calls()).to_csv(folder / "a.csv", index=False)
    stream = user_session.readStream.schema("call_id string, cell string, start string, end string, bytes string")
    result = spanning.spark.aggregate(stream.option("header", True).csv(str(folder)), range=RANGE, slide=SLIDE)
    wrong = [({"reduce_on": "cluster"}, "bad --reduce-on 'cluster': give auto or executors or driver"),
             ({"reduce_on": None}, "bad --reduce-on None"), ({"parallelism": 0}, "--parallelism must be at least 1"),
             ({"parallelism": "4"}, "parallelism= takes a number of tasks, not str")]  # fmt: skip
    for extra, message in wrong:  # told in one line, as the command tells --reduce-on and --parallelism
        for method, first in ((result.write_stream, str(tmp_path / "out")), (result.foreach_batch, print)):
            with pytest.raises(UsageError) as told:
                method(first, checkpoint=str(tmp_path / "chk"), **extra)
            assert str(told.value).startswith(message) and "\n" not in str(told.value), told.value
    assert not (tmp_path / "chk").exists() and not (tmp_path / "out").exists()
    from spark_jobs.sessions import session_kind

    with monkeypatch.context() as patched:  # a Connect session's batches run in the server's Python: not executors
        patched.setattr(session_kind, "is_connect", lambda session: True)
        with pytest.raises(UsageError, match="^reduce_on='executors' is not available on a Spark Connect session"):
            result.foreach_batch(print, checkpoint=str(tmp_path / "chk"), reduce_on="executors")
    with pytest.raises(UsageError, match="kinds_from="):
        result.write_stream(str(tmp_path / "out"), checkpoint=str(tmp_path / "chk"), trigger="available-now")
    with pytest.raises(UsageError, match="series_start='earliest' needs the whole input"):
        spanning.spark.aggregate(stream.csv(str(folder)), range=RANGE, slide=SLIDE, series_start="earliest")
    frame = user_session.range(3)
    with pytest.raises(TypeError, match=r"spanning\.spark\.aggregate\(df"):
        spanning.aggregate(frame, range=RANGE, slide=SLIDE)
    with pytest.raises(UsageError, match="bad duration"):
        spanning.spark.aggregate(frame, range="15 minutes", slide=SLIDE)
    assert {n: user_session.conf.get(n) for n in USER_SETTINGS} == USER_SETTINGS


def test_remote_csv_files_go_through_the_shared_reader_and_reject_what_the_local_engine_rejects(spark, tmp_path):
    """A ``file://`` URI is a remote path to ``spanning run`` (Spark lists and reads it): its records are parsed by
    the local engine's CSV reader in the tasks, so a record with an extra field is rejected with the same reason
    and line, not cut short as Spark's own CSV reader would."""
    folder = tmp_path / "in"
    folder.mkdir()
    lines = (Path(__file__).resolve().parent.parent / "data" / "sample_cdr.csv").read_text().splitlines()[:300]
    lines.append("999,1,cell-1,voice,2024-03-04 10:00:00,2024-03-04 10:01:00,60,100,EXTRA")  # one field too many
    lines.append('998,1,cell-1,voice,"2024-03-04 10:00:00",2024-03-04 10:02:00,"1\n2",100')  # a line break in a field
    (folder / "calls.csv").write_text("\n".join(lines) + "\n")
    outputs = {}
    for engine, source in (("local", str(folder / "calls.csv")), ("spark", (folder / "calls.csv").as_uri())):
        out = tmp_path / engine
        assert main(["run", source, "--range", "15m", "--slide", "5m", "--start", "start", "--end", "end", "--key",
                     "cell", "--agg", "count", "--agg", "sum:duration", "--engine", engine, "--master", "local[2]",
                     "--output", str(out)]) == 0  # fmt: skip
        outputs[engine] = {part: pd.read_parquet(out / part) for part in ("windows", "rejected", "late")}
    local, remote = outputs["local"], outputs["spark"]
    assert rows_by_id(remote["rejected"], "reason") == rows_by_id(local["rejected"], "reason")
    assert {998, 999} <= set(remote["rejected"]["call_id"])  # integer ids, as the CSV typing makes them
    assert_frames_match(read_output(tmp_path / "spark" / "windows"), read_output(tmp_path / "local" / "windows"),
                        ["cell"])  # fmt: skip
    assert sorted(remote["late"]["call_id"]) == sorted(local["late"]["call_id"])


def test_duration_and_a_key_expression_work_and_mistakes_are_told_in_one_line(user_session):
    from pyspark.sql import functions as F

    import spanning.spark

    frame = calls()
    df = typed(user_session, frame, "chronons").withColumn("length", F.col("end") - F.col("start")).drop("end")
    result = spanning.spark.aggregate(df, range=RANGE, slide=SLIDE, ttp=TTP, aggregates=AGGS, duration="length",
                                      key="upper(cell) AS cell_up")  # fmt: skip
    expected = expected_windows(frame, ["cell"]).rename(columns={"cell": "cell_up"})
    expected["cell_up"] = expected["cell_up"].str.upper()
    assert_frames_match(windows_of(result, ["cell_up"]), expected, ["cell_up"])
    assert result.counts["rejected"] == 2

    query = {"range": RANGE, "slide": SLIDE, "key": "cell"}
    mistakes = [
        ({"aggregates": {"cell": "count"}}, "is a key column's"),
        ({"aggregates": {"a": "count", "b": "count"}}, "the same output name"),
        ({"aggregates": {"window_start": "count"}}, "a window column's"),
        ({"duration": "length", "end": "end"}, "not both"),
        ({"key": F.col("cell")}, "key= takes a column name or a Spark SQL expression as text"),
        ({"spark": user_session.newSession()}, "another session"),
        ({"timezone": "Mars/Olympus"}, "unknown --timezone"),
    ]
    for extra, message in mistakes:
        with pytest.raises(UsageError, match=message):
            spanning.spark.aggregate(typed(user_session, frame, "chronons"), **{**query, **extra})


def test_aggregates_as_a_list_take_the_commands_names(user_session):
    import spanning.spark

    df = typed(user_session, calls(), "chronons")
    result = spanning.spark.aggregate(df, range=RANGE, slide=SLIDE, ttp=TTP, key="cell",
                                      aggregates=["count", "sum:bytes", "max:bytes"])  # fmt: skip
    assert result.windows.columns == ["cell", "window_start", "window_end", "count", "sum_bytes", "max_bytes"]
    expected = expected_windows(calls(), ["cell"]).rename(columns={"n": "count", "bytes": "sum_bytes",
                                                                   "longest": "max_bytes"})  # fmt: skip
    assert_frames_match(windows_of(result, ["cell"]), expected, ["cell"])


def test_remote_csv_files_of_two_layouts_fail_the_run_in_one_line(spark, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("id,start,end\n1,10,20\n")
    (folder / "b.csv").write_text("id,end,start\n2,30,25\n")  # the same names in another order
    code = main(["run", folder.as_uri(), "--input-format", "csv", "--range", "10", "--slide", "5", "--start",
                 "start", "--end", "end", "--engine", "spark", "--master", "local[2]", "--output",
                 str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code != 0 and not (tmp_path / "out").exists()
    assert "b.csv has the columns id, end, start but the first file has id, start, end" in err.splitlines()[0], err
    assert "Traceback" not in err


def test_several_window_specs_in_one_call_give_the_commands_tagged_windows_and_late_rows(user_session, tmp_path):
    """``windows=`` takes the command's repeated ``--window``: the windows and late rows of every spec in one
    result, tagged with the spec in a ``window`` column, equal to the command's over the same rows (whose windows
    the oracle tests hold for each spec). Mistakes are one line; a stream takes several specs too."""
    import spanning.spark

    frame = calls()
    df = typed(user_session, frame, "chronons")
    result = spanning.spark.aggregate(df, windows=["15m/5m", (3600, "10m")], ttp=TTP, key="cell",
                                      aggregates=["count", "sum:bytes", "max:bytes"])  # fmt: skip
    assert result.windows.columns[:4] == ["cell", "window", "window_start", "window_end"]
    source = tmp_path / "calls.parquet"
    frame.astype({"start": "Int64", "end": "Int64", "bytes": "Int64"}).to_parquet(source)
    out = tmp_path / "command"
    assert main(["run", str(source), "--window", "15m/5m", "--window", "1h/10m", "--ttp", str(TTP), "--start",
                 "start", "--end", "end", "--key", "cell", "--agg", "count", "--agg", "sum:bytes", "--agg",
                 "max:bytes", "--engine", "local", "--output", str(out)]) == 0  # fmt: skip
    got, want = seconds_of(result.windows), pd.read_parquet(out / "windows")
    assert sorted(got["window"].unique()) == sorted(want["window"].unique()) == ["3600/600", "900/300"]
    order = ["window", "cell", "window_start"]
    got = got.sort_values(order).reset_index(drop=True)[list(want.columns)]
    want = want.sort_values(order).reset_index(drop=True)
    assert got.astype(str).values.tolist() == want.astype(str).values.tolist()
    late, their_late = result.late.toPandas(), pd.read_parquet(out / "late")
    assert len(late) > 0
    assert sorted(zip(late["call_id"], late["window"], late["windows_missed"], strict=True)) == sorted(
        zip(their_late["call_id"], their_late["window"], their_late["windows_missed"], strict=True))

    mistakes = [
        ({"windows": ["15m/5m"], "range": RANGE}, "either windows= or range= and slide="),
        ({}, "give range= and slide=, or windows="),
        ({"windows": []}, "windows= is empty"),
        ({"windows": ["15m"]}, "bad windows= entry '15m'"),
        ({"windows": [(900, 300, 5)]}, "a pair \\(range, slide\\)"),
    ]
    for extra, message in mistakes:
        with pytest.raises(UsageError, match=message):
            spanning.spark.aggregate(df, key="cell", **extra)
    stream = user_session.readStream.format("rate").load().selectExpr("value AS start", "value + 5 AS end")
    # a stream takes several too (one query; its windows held to batch calls in tests/test_spark_connect.py)
    assert type(spanning.spark.aggregate(stream, windows=["15m/5m", "1h/5m"])).__name__ == "StreamResult"
