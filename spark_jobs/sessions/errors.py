"""The Python exception behind a failed Spark job, told in one line.

When a Python worker fails (say a ``SumOverflowError`` inside ``mapInPandas``), PySpark raises a
``PythonException`` (or a ``Py4JJavaError`` whose Java text embeds the worker's traceback). This module
reads that text only: it imports nothing from pyspark, so the command line can use it without Spark.

>>> text = '''An exception was thrown from the Python worker:
... Traceback (most recent call last):
...   File "worker.py", line 8, in f
...     raise SumOverflowError("sum:bytes overflows")
... spanning.aggregates.SumOverflowError: sum:bytes overflows
... '''
>>> worker_error(text).line
'SumOverflowError: sum:bytes overflows'

``query_context_log_muted`` keeps PySpark's own ERROR record of a failed analysis off the console while spanning
probes an expression whose failure it tells in one line itself.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"(?P<qualified>[A-Za-z_][\w.<>]*)(?::[ \t]?(?P<message>.*))?")


@dataclass(frozen=True)
class WorkerError:
    """The last exception of a worker traceback: ``name`` without its module, ``message`` its first line."""

    name: str
    qualified: str
    message: str

    @property
    def line(self) -> str:
        return f"{self.name}: {self.message}" if self.message else self.name


def worker_error(error: BaseException | str) -> WorkerError | None:
    """The exception that ended the last Python traceback in ``error``'s text, or None if it holds none."""
    try:
        text = error if isinstance(error, str) else str(error)
    except Exception:  # a Py4JJavaError whose JVM is gone cannot render itself
        return None
    at = text.rfind(TRACEBACK)
    if at < 0:
        return None
    for line in text[at + len(TRACEBACK) :].splitlines()[1:]:
        if not line.strip() or line[0] in " \t":  # frames, source lines and carets are indented
            continue
        match = _EXCEPTION_LINE.fullmatch(line.rstrip())
        if match is None:
            return None
        qualified = match["qualified"]
        return WorkerError(qualified.rsplit(".", 1)[-1], qualified, (match["message"] or "").strip())
    return None


#: The loggers that PySpark (4.0 and later) writes an ERROR record to, with the JVM's stack (about 100 lines), each
#: time it makes an exception of a failed analysis, caught or not (``PySparkException._log_exception``, classic and
#: Connect): the first for SQL text (``F.expr``), the second for DataFrame calls
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_muting = threading.RLock()  # one block at a time restores the loggers' state: no block gives back another's filter


@contextlib.contextmanager
def query_context_log_muted() -> Iterator[None]:
    """No record of PySpark's ``QUERY_CONTEXT_LOGGERS`` from this thread while the block runs: for a probe whose
    failure the caller reports in one line (an analysis that fails on the user's expression). Records of other
    threads pass as before.

    It adds a filter to the loggers for the block and leaves nothing behind: each logger's level, handlers,
    filters, ``propagate`` and ``disabled`` are as they were afterwards, on error too (PySpark sets ``propagate``
    to False each time it logs such a record). A logger that does not exist yet is made as PySpark makes it on its
    first such error (``PySparkLogger.getLogger``), and stays.
    """
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark before 4.0: it logs no such record
        yield
        return
    thread = threading.get_ident()

    def other_threads(record: logging.LogRecord) -> bool:  # no thread recorded (logging.logThreads off): muted
        return record.thread not in (thread, None)

    with _muting:
        loggers = [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]
        saved = [(logger, logger.level, list(logger.handlers), list(logger.filters), logger.propagate,
                  logger.disabled) for logger in loggers]  # fmt: skip
        try:
            for logger in loggers:
                logger.addFilter(other_threads)
            yield
        finally:
            for logger, level, handlers, filters, propagate, disabled in saved:
                if logger.level != level:
                    logger.setLevel(level)
                logger.handlers[:] = handlers
                logger.filters[:] = filters
                logger.propagate, logger.disabled = propagate, disabled
