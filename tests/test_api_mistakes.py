"""A column mistake given to ``spanning.spark.aggregate`` is told in one line, with nothing of Spark's on the console.

PySpark logs an ERROR record, with about 100 lines of the JVM's stack, to its ``SQLQueryContextLogger`` each time
it makes the exception of a failed analysis, caught or not. So a plain name (``start="strat"``) is checked against
``df.columns`` before any analysis (no setting read, no engine shipped), and an expression that must be analysed
(``start="cast(strat as timestamp)"``) is analysed with that logger muted, and given back as the user left it.

The tests look at the console (``capfd``: the file descriptors, so the JVM's own output too) and at what reaches the
handlers of a user's logging configuration: a test of the exception alone would not see the log.
"""

from __future__ import annotations

import logging
import sys
import threading

import pytest

from spanning.app.jobspec import UsageError
from spark_jobs.sessions.errors import QUERY_CONTEXT_LOGGERS, query_context_log_muted

COLUMNS = "call_id, cell, start, end, bytes"
QUERY = {"range": 900, "slide": 300, "key": "cell", "aggregates": ["count"]}

#: misspelt plain names: refused from df.columns, before any Spark analysis
PLAIN = [
    ({"start": "strat"}, f"unknown column 'strat' in --start: the columns are {COLUMNS}"),
    ({"end": "ende"}, f"unknown column 'ende' in --end: the columns are {COLUMNS}"),
    ({"key": "cel"}, f"unknown column 'cel' in --key: the columns are {COLUMNS}"),
    ({"key": ["cell", "`call id`"]}, f"unknown column 'call id' in --key '`call id`': the columns are {COLUMNS}"),
    ({"aggregates": ["sum:byts"]}, f"unknown column 'byts' in --agg: the columns are {COLUMNS}"),
    ({"end": None, "duration": "lenght"}, f"unknown column 'lenght' in --duration: the columns are {COLUMNS}"),
]
#: expressions that Spark's analysis refuses: told in one line, PySpark's log of the failure muted
ANALYSED = [
    ({"start": "cast(strat as timestamp)"},
     f"unknown column 'strat' in --start 'cast(strat as timestamp)': the columns are {COLUMNS}"),
    ({"key": "upper(cel)"}, f"unknown column 'cel' in --key 'upper(cel)': the columns are {COLUMNS}"),
    ({"end": "no_such_function(end)"}, "cannot use --end 'no_such_function(end)': [UNRESOLVED_ROUTINE]"),
]  # fmt: skip


def calls(spark):
    return spark.createDataFrame([("c1", "a", 0, 100, 5), ("c2", "b", 50, 400, 7)],
                                 "call_id string, cell string, start long, end long, bytes long")  # fmt: skip


class Recorder(logging.Handler):
    """A handler of the user's, on the root logger and on PySpark's: every record that reaches it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def logging_state() -> dict:
    """Level, handlers, filters, propagate and disabled of the root logger and of every PySpark and Py4J logger
    that exists (none is made here: a plain Logger made in PySpark's place would print nothing)."""
    names = [n for n in list(logging.Logger.manager.loggerDict)
             if n.split(".")[0] in ("pyspark", "py4j") or n in QUERY_CONTEXT_LOGGERS]  # fmt: skip
    loggers = [logging.getLogger(), *[logging.getLogger(n) for n in sorted(names)]]
    return {logger.name: (type(logger).__name__, logger.level, list(logger.handlers), list(logger.filters),
                          logger.propagate, logger.disabled)
            for logger in loggers if isinstance(logger, logging.Logger)}  # fmt: skip


@pytest.fixture
def user_logging(capfd):
    """A user's logging configuration: a handler on the root logger, and PySpark's query-context loggers made as
    PySpark makes them, at INFO, propagating, with a console handler and a handler of the user's. Taken away after.

    The test run's session comes from ``spark_jobs.sessions.session.get_session``, which sets those loggers (plain ones)
    to CRITICAL for the command: they are set aside for the test, so that PySpark logs here as in a user's process."""
    from pyspark.logger import PySparkLogger

    registry = logging.Logger.manager.loggerDict
    commands = {name: registry.pop(name, None) for name in QUERY_CONTEXT_LOGGERS}
    # the console is file descriptor 2, which capfd reads in the test (sys.stderr of this setup is not the test's)
    recorder, console = Recorder(), logging.StreamHandler(sys.__stderr__)
    root = logging.getLogger()
    root.addHandler(recorder)
    for name in QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        for handler in logger.handlers:  # PySpark's own console handler
            handler.setStream(sys.__stderr__)
        logger.setLevel(logging.INFO)
        logger.propagate = True
        logger.addHandler(recorder)
        logger.addHandler(console)
    yield recorder
    root.removeHandler(recorder)
    for name, logger in commands.items():
        registry.pop(name, None)
        if logger is not None:
            registry[name] = logger


def assert_one_line_and_nothing_logged(err: pytest.ExceptionInfo, message: str, capfd, recorder: Recorder,
                                       before: dict) -> None:  # fmt: skip
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)
    out, console = capfd.readouterr()
    for text in (out, console):
        assert "ERROR" not in text and "at org.apache" not in text and "QueryContextLogger" not in text, text
    assert [(r.name, r.levelname, r.getMessage()[:80]) for r in recorder.records] == []
    assert logging_state() == before


@pytest.mark.parametrize(("extra", "message"), PLAIN)
def test_a_misspelt_plain_name_is_refused_from_the_columns_before_spark_is_asked_anything(
        spark, user_logging, capfd, monkeypatch, extra, message):  # fmt: skip
    import spanning.spark
    import spark_jobs.api

    df = calls(spark)
    stream = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("'c1' AS call_id", "'a' AS cell", "timestamp AS start", "timestamp AS end", "value AS bytes")
    )
    before = logging_state()
    capfd.readouterr()

    def asked(*args, **kwargs):
        raise AssertionError("Spark was asked before the plain names were checked")

    for name in ("get", "set", "unset"):  # the session's settings: not read, not set
        monkeypatch.setattr(type(spark.conf), name, asked)
    monkeypatch.setattr(type(df), "select", asked)  # no probe, no analysis
    monkeypatch.setattr(spark_jobs.api, "ship_engine", asked)
    monkeypatch.setattr(spark_jobs.api, "computed", asked)
    for frame in (df, stream):  # a stream's mistake is told by aggregate(), not when its query starts
        with pytest.raises(UsageError) as err:
            spanning.spark.aggregate(frame, **{**QUERY, **extra})
        assert_one_line_and_nothing_logged(err, message, capfd, user_logging, before)


@pytest.mark.parametrize(("extra", "message"), ANALYSED)
def test_an_expression_spark_refuses_is_told_in_one_line_with_nothing_from_pysparks_logger(
        spark, user_logging, capfd, extra, message):  # fmt: skip
    import spanning.spark

    df = calls(spark)
    before = logging_state()
    capfd.readouterr()
    with pytest.raises(UsageError) as err:
        spanning.spark.aggregate(df, **{**QUERY, **extra})
    assert_one_line_and_nothing_logged(err, message, capfd, user_logging, before)
    # what these checks would see: the user's own failed analysis, logged by PySpark to the console and handlers
    from pyspark.sql import functions as F

    with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):
        df.select(F.expr("cast(strat as timestamp)"))
    assert [(r.name, r.levelname) for r in user_logging.records] == [("SQLQueryContextLogger", "ERROR")]
    assert "at org.apache" in capfd.readouterr().err


def test_the_muted_block_drops_this_threads_records_only_and_restores_the_loggers_even_on_error():
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:  # made before the state is taken: the block makes a missing one, which stays
        PySparkLogger.getLogger(name)
    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    recorder, own_filter = Recorder(), logging.Filter()
    saved = (logger.level, logger.propagate, logger.disabled)
    logger.addHandler(recorder)
    logger.addFilter(own_filter)
    logger.setLevel(logging.INFO)
    logger.propagate = True
    try:
        before = logging_state()
        with pytest.raises(RuntimeError, match="inside"), query_context_log_muted():
            logger.error("from this thread")
            other = threading.Thread(target=logger.error, args=("from another thread",))
            other.start()
            other.join()
            logger.propagate = False  # as PySpark sets it when it logs
            raise RuntimeError("inside")
        assert logging_state() == before
        logger.error("after the block")
        assert [r.getMessage() for r in recorder.records] == ["from another thread", "after the block"]
    finally:
        logger.removeHandler(recorder)
        logger.removeFilter(own_filter)
        logger.setLevel(saved[0])
        logger.propagate, logger.disabled = saved[1:]
