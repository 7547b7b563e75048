"""spanning on the DataFrames of a PySpark session: ``spanning.spark.aggregate(df, ...)``.

In a PySpark session ``spark`` (README's "Use it from PySpark" runs this, ``tests/test_readme.py``)::

    import spanning.spark

    result = spanning.spark.aggregate(spark.table("cdr"), range="15m", slide="5m", ttp="2h",
                                      start="start", end="end", key="cell", aggregates=["count", "sum:bytes"])
    result.windows.show()
    result.counts  # {'read': ..., 'accepted': ..., 'rejected': ..., 'late': ...}

The function is the Spark engine's (``spark_jobs.api.aggregate``, which says what every parameter means). It is
found by name through the engine's entry point, as the ``spanning`` command finds it: ``spanning`` itself imports
no Spark, and importing this module needs none either; the first call needs ``pip install 'spanning[spark]'``.
"""

from __future__ import annotations

from typing import Any

from spanning.app.plugins import load_engine

__all__ = ["aggregate"]


def aggregate(df: Any, **options: Any) -> Any:
    """Sliding-window aggregates of the events in the Spark DataFrame ``df``: the parameters of
    ``spanning.aggregate`` and the command's (``range``, ``slide``, ``ttp``, ``aggregates``, ``start``, ``end``,
    ``key``, ``offset``, ``series_start``, ``time_unit``, ``timezone``, ``empty_windows``, ``plan``, ``spark``, ...),
    all by keyword. A batch DataFrame gives lazy ``.windows``, ``.late`` and ``.rejected`` DataFrames, ``.counts``
    and ``.plans``; a streaming one ``.write_stream(path, checkpoint=...)`` and ``.foreach_batch(fn, checkpoint=...)``.
    See ``help(spark_jobs.api.aggregate)`` for each parameter."""
    return load_engine("spark").aggregate(df, **options)
