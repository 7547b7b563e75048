"""spanning.kernels.threads: into how many shares a kernel's rows are cut."""

from __future__ import annotations

import sys
import types

import pytest

from spanning.kernels import threads


def test_rows_are_shared_per_core_from_the_bound_on_and_never_inside_a_spark_task(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 4)
    assert threads.shares(threads.SHARED_FROM - 1) == 1
    assert threads.shares(2 * threads.SHARED_FROM) == 2
    assert threads.shares(100 * threads.SHARED_FROM) == 4
    assert threads.shares(100 * threads.SHARED_FROM, cores=2) == 2
    # a Spark task has its one core: pyspark imported, and a TaskContext that says a task runs
    fake = types.SimpleNamespace(TaskContext=types.SimpleNamespace(get=lambda: object()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "pyspark", fake)
        assert threads.shares(100 * threads.SHARED_FROM) == 1
        fake.TaskContext.get = lambda: None  # the driver, or a process that imported pyspark without a task
        assert threads.shares(100 * threads.SHARED_FROM) == 4
