"""The Spark engine as the ``spanning`` command loads it: the ``spark`` entry point of ``spanning.engines``.

``spanning`` sits below ``spark_jobs`` and never imports it; ``spanning.app.plugins`` loads this module
by name (see ``pyproject.toml``). Loading it imports pyspark, so without pyspark the ImportError tells
the command to install the ``spark`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spanning.app.jobspec import RunConfig
from spark_jobs import peers
from spark_jobs.api import BatchResult, StreamResult, aggregate
from spark_jobs.command import run_spark, run_stream
from spark_jobs.reading.prepare import END, START, events, load
from spark_jobs.sessions.session import get_session

__all__ = ["BatchResult", "StreamResult", "aggregate", "event_times", "peers", "run"]


def run(cfg: RunConfig, verbose: bool = False) -> dict:
    """``spanning run --engine spark``: the job's summary (``spark_jobs.command.run_spark``)."""
    return run_spark(cfg, verbose)


def event_times(cfg: RunConfig, limit: int, verbose: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends (chronons) of at most ``limit`` events of ``cfg``'s inputs, for ``spanning tune-height``."""
    spark = get_session(cfg.spark.master, cfg.events.timezone, verbose=verbose)
    sample = events(load(spark, cfg), "first")
    frame = sample.select(START, END).limit(limit).toPandas()
    return frame[START].to_numpy(np.int64), frame[END].to_numpy(np.int64)


def stream(cfg: RunConfig, options: Any, verbose: bool = False) -> dict:
    """``spanning stream``: runs until its trigger ends it or Ctrl-C (``spark_jobs.command.run_stream``)."""
    return run_stream(cfg, options, verbose)
