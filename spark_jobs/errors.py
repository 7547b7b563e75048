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
"""

from __future__ import annotations

import re
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
