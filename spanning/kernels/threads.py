"""A kernel's work shared among this process's cores, by threads (the compiled kernels release the GIL).

Where a call runs alone (``spanning.aggregate`` in a user's process, the stream's driver between triggers), a core
would otherwise idle while one thread reads 1M rows. A Spark task has its one core (``spark.task.cpus``): there,
and for fewer than ``SHARED_FROM`` rows, the work is not shared. ``$SPANNING_THREADS`` caps the threads a call
uses (1: none), for processes that share a machine's cores otherwise (a multiprocessing pool, say).

A share runs compiled kernels only: it must not hand work to ``other_cores`` itself (it could wait on a thread
that waits on it).

>>> shares(10)
1
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

__all__ = ["SHARED_FROM", "bounds", "in_shares", "one_core", "other_cores", "shares", "side_by_side"]

Result = TypeVar("Result")

# rows from which a kernel's work is shared: below it the threads' hand-over (about 0.1 ms) is a larger part
SHARED_FROM = 200_000


def shares(rows: int, cores: int | None = None) -> int:
    """Into how many shares ``rows`` rows of work are cut: one per core (``cores``, default this process's, at most
    ``$SPANNING_THREADS``), from ``SHARED_FROM`` rows per share on; 1 inside a Spark task."""
    if _in_spark_task() or getattr(_one_core, "on", False):
        return 1
    return max(1, min(cores or available_cores(), rows // SHARED_FROM))


_one_core = threading.local()


@contextlib.contextmanager
def one_core():
    """Within it, this thread's kernels do not share their work (``shares`` is 1): for a thread that is itself one
    of several a caller runs side by side, as a Spark task is one of an executor's."""
    before = getattr(_one_core, "on", False)
    _one_core.on = True
    try:
        yield
    finally:
        _one_core.on = before


def bounds(rows: int, count: int) -> np.ndarray:
    """``rows`` cut into ``count`` consecutive shares of about equal size: share k is ``bounds[k]`` to
    ``bounds[k + 1] - 1``."""
    return np.linspace(0, rows, count + 1).astype(np.int64)


def in_shares(work: Callable[[int], Result], count: int) -> list[Result]:
    """``work(k)`` for each share k of ``count``, in order: the first in this thread, the others on ``other_cores``;
    all of them done before this returns, also when one fails or the caller is interrupted (a share may read memory
    that the caller frees once it returns)."""
    if count < 2:
        return [work(0)]
    others = [other_cores().submit(work, k) for k in range(1, count)]
    try:
        return [work(0), *(other.result() for other in others)]
    finally:
        concurrent.futures.wait(others)


def side_by_side(tasks: Sequence[Callable[[], Result]], rows: int) -> list[Result]:
    """Each of ``tasks`` run, their results in order: cut into ``shares(rows)`` groups of consecutive tasks run side
    by side (``in_shares``), each task's kernels in one share (``one_core``); all in this thread where ``rows`` rows
    of work are not shared. Consecutive tasks stay together, so that those that share a memo (the aggregates that
    count the same runs) compute it once."""
    count = min(shares(rows), len(tasks))
    if count < 2:
        return [task() for task in tasks]
    # the first groups the larger: count, sum | max was the quickest of four groupings of spanning.aggregate's three
    # (2026-11-29, bench/results/inprocess-hashed-keys-2026-11-29.md)
    cut = [-(-k * len(tasks) // count) for k in range(count + 1)]

    def group(k: int) -> list[Result]:
        with one_core():
            return [task() for task in tasks[cut[k] : cut[k + 1]]]

    return [result for part in in_shares(group, count) for result in part]


def available_cores() -> int:
    """The cores this process may run on, at most ``$SPANNING_THREADS`` when that is set."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cap = os.environ.get("SPANNING_THREADS", "").strip()
    if cap:
        try:
            cores = min(cores, max(1, int(cap)))
        except ValueError:
            raise ValueError(f"SPANNING_THREADS must be a whole number of threads, got {cap!r}") from None
    return cores


def other_cores() -> concurrent.futures.ThreadPoolExecutor:
    """The threads that take the shares after the first, one per other core, of this process (a forked child
    starts threads of its own)."""
    return _pool(os.getpid())


@functools.cache
def _pool(pid: int) -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max(available_cores() - 1, 1), thread_name_prefix="spanning-share")


def _in_spark_task() -> bool:
    task_context = getattr(sys.modules.get("pyspark"), "TaskContext", None)  # pyspark not imported: no Spark task
    return task_context is not None and task_context.get() is not None
