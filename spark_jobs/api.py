"""spanning from PySpark code: ``spanning.spark.aggregate(df, ...)``, a DataFrame in and DataFrames out.

It takes any DataFrame of the caller's session (a table, a join, a filter, a file read, a stream) and gives what
``spanning run`` gives for the same rows, as lazy DataFrames (``BatchResult``), or, for a streaming DataFrame, a
query to start (``StreamResult``). ``spanning run`` and ``spanning stream`` are adapters over the same functions:
``computed`` (the batch job over a DataFrame) and ``stream.stateful_rows`` (the stream's query over one).

The caller's session stays theirs: it is never stopped, and no setting it shows changes. What the job needs
(ANSI off, so that an unusable value becomes a rejected row, not a failed query; the zone that reads date-time text
without one) is set only while the job's DataFrames are analysed, when Spark fixes both in their plans, and given
back before ``aggregate`` returns; a stream's own settings are those of its query (Spark copies the session's
settings when a query starts).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spanning.app.files import check_plain_names
from spanning.app.jobspec import (
    EventFields,
    InputFiles,
    OutputOptions,
    RunConfig,
    SparkOptions,
    UsageError,
    WindowQuery,
    output_name,
    parse_duration,
    parse_window,
)
from spanning.app.stream_command import StreamOptions, stream_output
from spanning.engines.params import Execution
from spark_jobs.batch.compute import Computed, computed
from spark_jobs.reading.prepare import REASON, KindCounts, quoted
from spark_jobs.sessions import session_kind
from spark_jobs.sessions.session import ANSI, ZONE, job_settings, ship_engine

__all__ = ["BatchResult", "StreamResult", "aggregate"]

DATAFRAME_INPUT = "<DataFrame>"  # the inputs of a RunConfig made for a DataFrame: no file is read by name
log = logging.getLogger("spanning")


def aggregate(
    df: DataFrame,
    *,
    range: int | str | None = None,  # noqa: A002 - the public name of ω, as in spanning.aggregate
    slide: int | str | None = None,
    ttp: int | str = 0,
    aggregates: Mapping[str, str] | Sequence[str] | None = None,
    start: str = "start",
    end: str | None = None,  # "end" unless duration= or point_events=True
    duration: str | None = None,
    key: str | Sequence[str] | None = None,
    offset: int | str = 0,
    series_start: int | str | None = None,
    time_unit: str = "s",
    timezone: str | None = None,
    empty_windows: str = "skip",
    plan: str = "auto",
    technique: str = "se-slicing",
    height: int | str = 1,
    point_events: bool = False,
    kinds_from: DataFrame | None = None,
    spark: SparkSession | None = None,
    windows: Sequence[str | tuple] | None = None,
) -> BatchResult | StreamResult:
    """Sliding-window aggregates of the events in ``df``, as ``spanning run`` computes them from files.

    The parameters mean what they mean to ``spanning.aggregate`` and the command's options:

    * ``range``, ``slide``, ``ttp``, ``offset``: chronons (``time_unit``), or the command's strings ``"15m"``;
    * ``windows`` instead of ``range`` and ``slide``: several window specs in one call, each ``"15m/5m"`` or a
      pair ``(range, slide)``, computed as the command's repeated ``--window`` computes them (a job per spec over
      the same prepared rows, unioned); the windows and late rows then carry a ``window`` column naming their spec
      as the command names it (range/slide in chronons: ``"900/300"``); on a stream too (one query, a reducer per
      spec over each batch);
    * ``aggregates``: the command's forms (``"count"``, ``"sum:bytes"``, ``"max:duration"``, ``"erlang"``, ...),
      as a list (output columns named as the command names them: ``sum_bytes``) or as a dict of output name ->
      form; ``None`` is ``["count"]``;
    * ``start`` and ``end`` (or ``duration``, or ``point_events=True``), ``key``: column names or Spark SQL
      expressions; ``key`` may be a list. Times may be timestamps, timestamp_ntz, date-time text (read in
      ``timezone``, by default the session's zone, as Spark's ``to_timestamp`` reads it), epoch numbers or
      integer chronons;
    * ``series_start``: ``"earliest"`` (the default for a batch DataFrame: each key's windows start at its earliest
      event), ``"first"`` (at its first arriving event: the default, and the only choice besides a fixed time,
      for a streaming DataFrame) or a time in chronons;
    * ``empty_windows``: ``"skip"`` or ``"emit"``; ``plan``, ``technique``, ``height``: as the command's options;
    * ``kinds_from`` (a streaming DataFrame with text time or value columns): a DataFrame of rows like the
      stream's, such as the files already there, whose values fix whether text holds numbers or date-times
      (``spanning stream`` counts the files in its folder at the start); not needed for typed columns;
    * ``spark``: the session, by default the DataFrame's. It is never stopped, and its settings are left as found.

    A batch DataFrame gives a ``BatchResult`` (``.windows``, ``.late``, ``.rejected``, ``.counts``, ``.plans``),
    a streaming one a ``StreamResult`` (``.write_stream(path, checkpoint=...)``, ``.foreach_batch(fn, ...)``).
    Bad parameters raise ``UsageError`` (a ``ValueError``) with the command's message.
    """
    if not isinstance(df, DataFrame):
        hint = ("call .to_spark() on a pandas-on-Spark frame" if type(df).__module__.startswith("pyspark.pandas")
                else "for pandas or Arrow use spanning.aggregate")  # fmt: skip
        raise UsageError(f"spanning.spark.aggregate takes a PySpark DataFrame (of a classic or a Spark Connect"
                         f" session), got {type(df).__module__}.{type(df).__name__}: {hint}")
    if spark is not None and not session_kind.same_session(spark, df.sparkSession):
        raise UsageError("spark= is another session than the DataFrame's: leave it out (the DataFrame's is used)")
    spark = df.sparkSession
    keys = [] if key is None else list(key) if isinstance(key, list | tuple) else [key]
    texts = [("start", start), ("end", end), ("duration", duration), *[("key", k) for k in keys]]
    wrong = [(name, value) for name, value in texts if value is not None and not isinstance(value, str)]
    if wrong:
        name, value = wrong[0]
        raise UsageError(f"{name}= takes a column name or a Spark SQL expression as text, not {type(value).__name__}"
                         " (add a computed column with df.withColumn and give its name)")  # fmt: skip
    if duration is not None and end is not None:
        raise UsageError("give end= or duration=, not both")
    if point_events and (end is not None or duration is not None):
        raise UsageError("point_events=True uses start= only: leave out end= and duration=")
    if end is None and duration is None and not point_events:
        end = "end"
    streaming = df.isStreaming
    if series_start is None:
        series_start = "first" if streaming else "earliest"
    if streaming and series_start == "earliest":
        raise UsageError("series_start='earliest' needs the whole input: a stream starts each key's series at its"
                         " first arriving event ('first', the default) or at a time you give")  # fmt: skip
    specs, names = _aggregate_specs(aggregates)
    events = EventFields(start, end, duration, keys, point_events, time_unit, timezone or "UTC")
    several = _window_specs(range, slide, windows, time_unit)
    query = WindowQuery(*(several[0] if several else (parse_duration(range, time_unit),
                                                      parse_duration(slide, time_unit))),
                        parse_duration(ttp, time_unit), specs, parse_duration(offset, time_unit), windows=several,
                        series_start=series_start, empty_windows=empty_windows)  # fmt: skip
    # a misspelt plain name fails here, from the DataFrame's columns alone: no analysis (whose failure PySpark logs
    # with the JVM's stack before the one line), no setting read, no engine shipped; an expression is analysed
    # later, with that log muted (``prepare._expression``)
    check_plain_names(events, query, df.columns, as_given=True)
    if timezone is None:  # the session's zone, whatever Spark accepts ("Z", "CET", "Etc/GMT+5"): Spark reads the times
        events.timezone = spark.conf.get(ZONE)
    cfg = RunConfig(InputFiles([DATAFRAME_INPUT]), events, query, Execution(technique, height),
                    spark=SparkOptions(plan=plan))  # fmt: skip
    if streaming:
        return StreamResult(spark, df, cfg, names, kinds_from)
    return BatchResult(computed(spark, df, cfg), names)


def _window_specs(range_: int | str | None, slide: int | str | None, windows: Sequence[str | tuple] | None,
                  time_unit: str) -> list[tuple[int, int]]:
    """The specs of ``windows=`` as (range, slide) chronons (none: ``range=`` and ``slide=`` give the one spec),
    checked as the command checks ``--window`` against ``--range``/``--slide``; as there, windows given so carry
    the ``window`` column, even one."""
    if windows is not None and (range_ is not None or slide is not None):
        raise UsageError("give either windows= or range= and slide=")
    if windows is None:
        if range_ is None or slide is None:
            raise UsageError("give range= and slide=, or windows=['15m/5m', '1h/5m', ...]")
        return []
    if isinstance(windows, str | tuple):  # one spec given alone
        windows = [windows]
    specs = [parse_window(spec, time_unit, "windows= entry") for spec in windows]
    if not specs:
        raise UsageError("windows= is empty: give one or more window specs such as '15m/5m'")
    return specs


def _aggregate_specs(aggregates: Mapping[str, str] | Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
    """The command's aggregate forms, and the output columns to rename (the command's name -> the caller's)."""
    if aggregates is None:
        return ["count"], {}
    if isinstance(aggregates, str):
        aggregates = [aggregates]
    specs = list(aggregates.values()) if isinstance(aggregates, Mapping) else list(aggregates)
    wrong = [spec for spec in specs if not isinstance(spec, str)]
    if wrong:
        raise UsageError(f"spanning.spark.aggregate takes the command's aggregate forms as text (such as 'count' or"
                         f" 'sum:bytes'), not {wrong[0]!r}: objects and user aggregates are spanning.aggregate's")
    if not isinstance(aggregates, Mapping):
        return specs, {}  # the command's names (WindowQuery refuses a form given twice)
    renames = {output_name(spec): name for name, spec in aggregates.items()}
    names = [name.lower() for name in renames.values()]
    taken = [name for name in renames.values() if name.lower() in ("window_start", "window_end", "window")]
    if taken:
        raise UsageError(f"the output name {taken[0]!r} is a window column's: give the aggregate another name")
    if len(set(names)) != len(names) or len(renames) != len(specs):
        raise UsageError("two aggregates have the same output name, or the same form twice: give each its own")
    return specs, renames


class BatchResult:
    """The job over a batch DataFrame: lazy DataFrames with the columns ``spanning run`` writes.

    * ``windows``: the key columns, ``window_start``, ``window_end`` (timestamps where the times were, else
      chronons), then one column per aggregate;
    * ``late``: the events that arrived after some of their windows were released, as read, with
      ``windows_missed``;
    * ``rejected``: the rows that are no events, as read, with ``reason``;
    * ``counts``: rows read = accepted + rejected, and late; ``plans``: the plan chosen and why.
    """

    def __init__(self, job: Computed, renames: dict[str, str]) -> None:
        self._job = job
        windows = job.windows
        if renames:  # the caller's names for the aggregates, all at once (a name may be another's command name)
            others = {c.lower() for c in windows.columns if c not in renames}
            clash = [name for name in renames.values() if name.lower() in others]
            if clash:
                raise UsageError(f"the output name {clash[0]!r} is a key column's: give the aggregate another name")
            windows = windows.select(*[quoted(c).alias(renames.get(c, c)) for c in windows.columns])
        self.windows = windows
        self._counts: dict[str, int] | None = None
        if job.persisted:  # the job's cache goes with the result (or sooner, with unpersist())
            weakref.finalize(self, _unpersist, job.persisted)

    @property
    def late(self) -> DataFrame:
        """The late events. When the windows' pass has run and counted none, a frame with no rows and no pass."""
        return self._none_if_counted("late", self._job.late)

    @property
    def rejected(self) -> DataFrame:
        """The rejected rows. When the windows' pass has run and counted none, a frame with no rows and no pass."""
        return self._none_if_counted("rejected", self._job.rejected)

    def _none_if_counted(self, name: str, frame: DataFrame) -> DataFrame:
        observed = self._observed()
        return frame.limit(0) if observed is not None and observed.get(name) == 0 else frame  # Spark reads nothing

    @property
    def plans(self) -> list[dict]:
        """The plan of each window spec (``plan``), why it was chosen (``reason``), the windows per event measured."""
        return [dict(vars(choice)) for choice in self._job.choices]

    @property
    def plan(self) -> str:
        return self._job.choices[0].plan

    @property
    def counts(self) -> dict[str, int]:
        """``read``, ``accepted``, ``rejected`` and ``late``. Counted while the first action over ``windows``
        ran; before one has run (or if the first was over ``late`` or ``rejected``), counted now, in a pass of
        its own."""
        if self._counts is None:
            observed = self._observed() or self._counted()
            if "late" not in observed:
                observed["late"] = self.late.count()
            self._counts = {"read": observed["read"], "accepted": observed["read"] - observed["rejected"],
                            "rejected": observed["rejected"], "late": observed["late"]}  # fmt: skip
        return dict(self._counts)

    def _observed(self) -> dict | None:
        """The counts the windows' pass observed, if that pass has run (no wait)."""
        if not self._job.counted_by_windows:
            return None
        observation = self._job.counts
        if not session_kind.observation_done(observation):
            return None
        try:
            return dict(observation.get)
        except Exception:  # noqa: BLE001 - the pass ran, but adaptive execution dropped the stage that observed
            return None  # (a shuffle that came out empty, ``run.observed_metrics_kept``): count in a pass of our own

    def _counted(self) -> dict:
        """Rows read and rejected, in one pass over the prepared rows (every row passes there, with its reason)."""
        row = self._job.rows.agg(F.count(F.lit(1)).alias("read"), F.count(REASON).alias("rejected")).first()
        return {"read": row["read"], "rejected": row["rejected"]}

    def unpersist(self) -> None:
        """Drop what the job cached for its passes (the Python plan's rows, whose arrival numbers its late rows are
        joined back by); done anyway when the result is garbage-collected."""
        _unpersist(self._job.persisted)

    def __repr__(self) -> str:
        return f"BatchResult(plan={self.plan!r}, windows={self.windows.columns})"


class StreamResult:
    """The job over a streaming DataFrame, to be started: ``write_stream`` (files, exactly once, as ``spanning
    stream`` writes them) or ``foreach_batch`` (any other sink). The checkpoint holds Spark's offsets and the
    stream's open windows: a restart with it goes on where the stream stopped."""

    def __init__(self, spark: SparkSession, df: DataFrame, cfg: RunConfig, renames: dict[str, str],
                 kinds_from: DataFrame | None) -> None:  # fmt: skip
        self._spark, self._df, self._cfg, self._renames, self._kinds_from = spark, df, cfg, renames, kinds_from

    def write_stream(self, path: str, *, checkpoint: str, trigger: str | None = None, format: str = "parquet",  # noqa: A002
                     drain: bool = False, idle_flush: int | str | None = None, max_disorder: int | str = 0,
                     buckets: int | None = None, partitions: int | None = None, reduce_on: str = "auto",
                     parallelism: int | None = None) -> Any:  # fmt: skip
        """Start the query that writes ``windows/``, ``late/`` and ``rejected/`` (``batch=N`` folders of Parquet)
        and ``summary.json`` under ``path``, each batch exactly once; returns the ``StreamingQuery``.

        ``trigger``: None (Spark's default: the next batch as soon as the last is done), ``"available-now"`` (what
        is there, then stop) or an interval (``"30 seconds"``, ``"30s"``). ``drain`` (available-now only): wait for
        the input to be read, then release every key's open windows, as a batch job does at the end of its input,
        in a second round whose query is returned. ``idle_flush``, ``max_disorder``, ``buckets``: as ``spanning
        stream``'s options; ``partitions``: spread each batch's rows over that many tasks before they are validated
        (default: none, the tasks that read them validate them).

        ``reduce_on`` and ``parallelism``: ``spanning stream``'s ``--reduce-on`` and ``--parallelism``.
        ``"executors"``: each micro-batch reduced in the executors' tasks, by key group, each task writing its own
        part of the outputs (the driver receives a stats row per group, not the rows); ``parallelism`` of them
        (default: Spark's default parallelism; it may change at any restart). ``"driver"``: the batch's rows taken
        to the driver and reduced there. ``"auto"`` (the default): the driver with a local master (``local``,
        ``local[N]``), the executors otherwise. On the executors, the checkpoint and ``path`` must be folders that
        the driver and every executor see at the same path (a shared mount on a cluster). A Spark Connect session
        reduces in the server's Python (``auto`` is ``"driver"`` there) and refuses ``"executors"``.
        """
        if format != "parquet":
            raise UsageError(f"write_stream writes Parquet (format={format!r}): for another sink use foreach_batch")
        options = self._options(checkpoint, trigger, drain, idle_flush, max_disorder, buckets, reduce_on, parallelism)
        cfg = replace(self._cfg, output=OutputOptions(str(path)))
        stream_output(cfg, options, create=False)  # a harmful path fails before the stream is built
        return self._start(options, partitions, lambda job: self._writer(job, stream_output(cfg, options)),
                           lambda job: {"output": str(stream_output(cfg, options)), "renames": self._renames})

    def foreach_batch(self, fn: Callable[[DataFrame, DataFrame, DataFrame, int], None], *, checkpoint: str,
                      trigger: str | None = None, drain: bool = False, idle_flush: int | str | None = None,
                      max_disorder: int | str = 0, buckets: int | None = None, partitions: int | None = None,
                      reduce_on: str = "auto", parallelism: int | None = None) -> Any:  # fmt: skip
        """Start the query that calls ``fn(windows, late, rejected, batch_id)`` for each micro-batch, with the
        three outputs of ``write_stream`` as DataFrames; returns the ``StreamingQuery``. A batch run again after a
        failure calls ``fn`` again with the same rows and id (make the sink's write idempotent by ``batch_id``,
        as ``write_stream`` does). The other parameters are ``write_stream``'s.

        Where the batch is reduced (``reduce_on``, ``parallelism``: as ``write_stream``'s):

        * on the driver, the batch's rows come to the driver as Arrow, and ``fn``'s DataFrames are made from the
          reduced tables there;
        * on the executors, the tasks write the batch's windows, late and rejected rows as Parquet into the
          checkpoint (``spanning/foreach_batch/<kind>/batch=N``), and ``fn``'s DataFrames read those files: the
          driver never holds the rows. The checkpoint must be a folder that the driver and every executor see at
          the same path (a shared mount on a cluster), as for ``write_stream`` there. The files are removed once
          ``fn`` has returned: use the DataFrames within ``fn`` (write them, or collect what you keep). The columns,
          their order and types are those of the driver's path.

        On a Spark Connect session ``fn`` runs in the server's Python, as Spark's own ``foreachBatch`` does there:
        it must be picklable (cloudpickle: a function of your script or notebook, holding no session, lock or open
        file), and its DataFrames are the batch's session's (``windows.sparkSession``)."""
        options = self._options(checkpoint, trigger, drain, idle_flush, max_disorder, buckets, reduce_on, parallelism)
        renames = self._renames

        def sink(tables: dict, batch_id: int) -> None:
            # in the caller's session: createDataFrame makes its session the active one, and the batch's is the
            # query's copy (a later SparkSession.getActiveSession() would find that, with the query's settings)
            frames = [self._spark.createDataFrame(tables[kind]) for kind in ("windows", "late", "rejected")]
            fn(*frames, batch_id)

        def make_writer(job: Any) -> Any:
            if job.options.reduce_on != "executors":
                return self._batch_writer(job, None, sink)
            return self._handing_writer(job, fn)

        return self._start(options, partitions, make_writer, lambda job: {"fn": fn, "renames": renames})

    def _options(self, checkpoint: str, trigger: str | None, drain: bool, idle_flush: Any, max_disorder: Any,
                 buckets: int | None, reduce_on: str = "auto", parallelism: int | None = None) -> StreamOptions:
        """The stream's options, checked as ``spanning stream`` checks its own (``StreamOptions``)."""
        unit = self._cfg.events.time_unit
        if parallelism is not None and (isinstance(parallelism, bool) or not isinstance(parallelism, int)):
            raise UsageError(f"parallelism= takes a number of tasks, not {type(parallelism).__name__}")
        if "://" in str(checkpoint) and not str(checkpoint).startswith("file:"):
            raise UsageError(f"checkpoint={checkpoint!r}: give a folder of the driver's file system (the stream keeps"
                             " its control files and column kinds there with Spark's offsets and state)")  # fmt: skip
        checkpoint = str(checkpoint).removeprefix("file://")
        trigger = "0 seconds" if trigger is None else str(trigger).strip()
        if drain and trigger != "available-now":
            raise UsageError("drain=True ends an available-now stream: give trigger='available-now'")
        return StreamOptions(str(checkpoint), trigger, None,
                             None if idle_flush is None else parse_duration(idle_flush, unit),
                             parse_duration(max_disorder, unit), buckets, drain, reduce_on=reduce_on,
                             parallelism=parallelism)  # fmt: skip

    def _batch_writer(self, job: Any, output: Path | None, sink: Callable | None = None) -> Any:
        """Each batch's writer: into ``output`` (reduced and written by the executors' tasks), or handed to ``sink`` as
        Arrow tables (reduced on the driver); either way the windows' columns as the caller named them."""
        from spark_jobs.stream.writer import BatchWriter  # a batch DataFrame loads no module of the stream

        return BatchWriter(job, output, lambda line: log.info("%s", line), sink,
                           renames=self._renames,
                           executors=job.options.reduce_on == "executors", parallelism=job.options.parallelism)

    def _handing_writer(self, job: Any, fn: Callable[[DataFrame, DataFrame, DataFrame, int], None]) -> Any:
        """``foreach_batch``'s writer on the executors: the tasks write each batch's outputs into the checkpoint
        (``HANDED_FOLDER``), and ``fn`` is given DataFrames that read them, in the caller's session."""
        from spark_jobs.stream.outputs import KINDS
        from spark_jobs.stream.writer import HANDED_FOLDER, BatchWriter

        spark = self._spark

        def hand(folder: Path, batch_id: int) -> None:
            fn(*[spark.read.parquet(str(folder / kind / f"batch={batch_id}")) for kind in KINDS], batch_id)

        return BatchWriter(job, Path(job.options.checkpoint) / "spanning" / HANDED_FOLDER,
                           lambda line: log.info("%s", line), renames=self._renames, executors=True,
                           parallelism=job.options.parallelism, handed=hand)  # fmt: skip

    def _writer(self, job: Any, output: Path) -> Any:
        """``spanning stream``'s writer into ``output``."""
        return self._batch_writer(job, output)

    def _start(self, options: StreamOptions, partitions: int | None, make_writer: Callable[[Any], Any],
               on_server: Callable[[Any], dict]) -> Any:  # fmt: skip
        """Build the stream's query over the DataFrame and start it, under the job's settings. On a classic session
        ``make_writer(job)`` gives the ``BatchWriter`` that each batch runs in this process; on a Connect session
        the batches run in the server's Python, which builds it from the parameters ``on_server(job)`` gives
        (``stream.remote``)."""
        # a batch DataFrame loads no module of the stream (17 ms of spark_jobs.api's import)
        from spark_jobs.stream.buckets import warm_up_in_background
        from spark_jobs.stream.query import check_checkpoint, job_record, saved_kinds, start_query, stateful_rows
        from spark_jobs.stream.writer import batch_function

        spark, cfg = self._spark, self._cfg
        connect = session_kind.is_connect(spark)
        if connect and options.reduce_on == "executors":
            raise UsageError("reduce_on='executors' is not available on a Spark Connect session: its micro-batches"
                             " are reduced in the server's Python (leave reduce_on out, or give 'driver')")
        ship_engine(spark)
        # on Connect, the server's Python reduces each batch (stream.remote); elsewhere, auto: where the master's
        # executors are
        options = options.resolved("local" if connect else session_kind.master(spark))
        state = Path(options.checkpoint) / "spanning"
        kinds = KindCounts(self._kinds_rows, saved_kinds(options))
        settings = {ZONE: cfg.events.timezone, ANSI: "false"}  # no shuffle to set: partitions= is the spread's own
        if not connect:  # on Connect the batches are reduced in the server's Python, not here
            warm_up_in_background()  # the driver's kernel, which reduces each batch, while the query is planned
        with job_settings(spark, settings):
            job = stateful_rows(spark, self._df, cfg, options, kinds, spread=partitions)
            check_checkpoint(state, job_record(cfg, options, self._df.schema, "dataframe"))  # the query built: good
            if connect:
                each_batch = _server_function(job, on_server(job))
            else:
                each_batch = batch_function(job, make_writer(job))
            query = start_query(job, each_batch)
        if not options.final_flush:
            return query
        try:
            query.awaitTermination()  # raises the query's failure
        except KeyboardInterrupt:
            query.stop()
            raise
        with job_settings(spark, settings):
            return start_query(job, each_batch, flush=True)

    def _kinds_rows(self) -> DataFrame:
        """The rows that fix the kinds of the stream's text columns (``kinds_from``)."""
        if self._kinds_from is None:
            raise UsageError("the stream has text time or value columns, whose kind (numbers or date-times) spanning"
                             " reads from the values: give kinds_from= (a DataFrame of rows like the stream's, such"
                             " as spark.read of the files already there), or cast the columns in the stream")
        if self._kinds_from.isStreaming:
            raise UsageError("kinds_from must be a batch DataFrame (spark.read...), not a stream")
        return self._kinds_from


def _unpersist(frames: tuple) -> None:
    for frame in frames:
        try:
            frame.unpersist()
        except Exception:  # noqa: BLE001 - the session is gone: so is its cache
            pass



def _server_function(job: Any, parameters: dict) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function of a stream on a Connect session, which runs in the server's Python
    (``stream.remote``); a ``foreach_batch`` function that cannot be pickled is told in one line."""
    import pickle

    from spark_jobs.sessions.session import engine_zip
    from spark_jobs.stream.remote import StreamOnServer, server_function

    stream = StreamOnServer(job.without_frames(), job.cfg.events.timezone, **parameters)
    try:
        return server_function(stream, engine_zip())
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        if parameters.get("fn") is None:
            raise
        raise UsageError(f"foreach_batch's function cannot be pickled ({err}): on a Spark Connect session it runs"
                         " in the server's Python, as Spark's foreachBatch does there; define it in your script or"
                         " notebook, holding no session, lock or open file (use windows.sparkSession)") from None
