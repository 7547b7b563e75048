"""spanning.kernels.threads: into how many shares a kernel's rows are cut."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.kernels import threads
from tests.budget import examples


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


def test_spanning_threads_caps_the_shares_and_a_bad_value_says_so(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setenv("SPANNING_THREADS", "2")
    assert threads.available_cores() == 2
    assert threads.shares(100 * threads.SHARED_FROM) == 2
    monkeypatch.setenv("SPANNING_THREADS", "1")
    assert threads.shares(100 * threads.SHARED_FROM) == 1
    monkeypatch.setenv("SPANNING_THREADS", "many")
    with pytest.raises(ValueError, match="SPANNING_THREADS must be a whole number"):
        threads.available_cores()


INT64 = np.iinfo(np.int64)


@settings(max_examples=examples(200), deadline=None)
@given(
    runs=st.lists(st.tuples(st.integers(0, 40), st.one_of(st.integers(0, 3), st.integers(0, 40))), max_size=50),
    floats=st.booleans(),
    largest=st.booleans(),
    cores=st.integers(2, 4),
    data=st.data(),
)
def test_extremes_cut_into_shares_are_one_pass_s(runs, floats, largest, cores, data):
    # ranges._range_extreme in shares (each its band of windows, then the earlier share kept on a tie) against one
    # call of the kernel: short runs (the explode's loop) and long ones (the sparse table) in one chunk, values at the
    # sentinels, ±inf and both zeros; windows no run reaches keep the sentinel
    from spanning.kernels import compiled, ranges

    n_windows = 1 + max([a + b for a, b in runs], default=0)
    first = np.array([a for a, _ in runs], np.int64)
    last = np.array([a + b for a, b in runs], np.int64)
    if floats:
        pick = st.sampled_from([-np.inf, np.inf, -0.0, 0.0, 1.5, -2.25, 7.0])
        values, sentinel = np.array(data.draw(st.lists(pick, min_size=len(runs), max_size=len(runs))), np.float64), (
            -np.inf if largest else np.inf)
    else:
        pick = st.one_of(st.sampled_from([INT64.min, INT64.max, 0]), st.integers(-5, 5))
        values, sentinel = np.array(data.draw(st.lists(pick, min_size=len(runs), max_size=len(runs))), np.int64), (
            INT64.min if largest else INT64.max)
    expected = compiled.run_extremes(first, last, n_windows, values, values.dtype.type(sentinel), largest)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threads, "SHARED_FROM", 1)
        patch.setattr(threads, "available_cores", lambda: cores)
        got = ranges._range_extreme(first, last, n_windows, values, sentinel, largest)
    assert got.dtype == expected.dtype
    assert got.tolist() == expected.tolist()  # -0.0 == 0.0: the sparse table breaks ties its own way


def test_shares_keep_the_earlier_of_two_equal_extremes_as_one_pass_does(monkeypatch):
    from spanning.kernels import ranges

    monkeypatch.setattr(threads, "SHARED_FROM", 1)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    first = last = np.array([0, 0])
    got = ranges._range_extreme(first, last, 1, np.array([-0.0, 0.0]), -np.inf, True)
    assert np.signbit(got[0])  # the first event's -0.0, as the kernel's loop keeps it, not the later share's 0.0
    got = ranges._range_extreme(first, last, 1, np.array([0.0, -0.0]), np.inf, False)
    assert not np.signbit(got[0])


def test_shares_run_in_order_and_all_finish_before_a_failure_is_raised(monkeypatch):
    import threading
    import time

    monkeypatch.setattr(threads, "available_cores", lambda: 3)
    assert threads.bounds(10, 3).tolist() == [0, 3, 6, 10]
    assert threads.in_shares(lambda k: k * k, 4) == [0, 1, 4, 9]
    finished = []

    def work(k):
        if k == 0:
            raise RuntimeError("share 0 failed")
        time.sleep(0.05)
        finished.append((k, threading.current_thread().name.startswith("spanning-share")))
        return k

    with pytest.raises(RuntimeError, match="share 0 failed"):
        threads.in_shares(work, 3)
    assert sorted(finished) == [(1, True), (2, True)]  # the other shares ran on the pool, and were waited for


def test_tasks_side_by_side_keep_their_order_and_their_groups_and_run_each_on_one_core(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    seen = []

    def task(i):
        def run():
            seen.append((i, threading.current_thread().name, threads.shares(100 * threads.SHARED_FROM)))
            return i * 10
        return run

    rows = 100 * threads.SHARED_FROM
    assert threads.side_by_side([task(i) for i in range(3)], rows) == [0, 10, 20]
    thread_of = {i: name for i, name, _ in seen}
    # consecutive tasks in a group, the first group the larger: [0, 1] here, [2] beside them
    assert thread_of[0] == thread_of[1] == threading.current_thread().name != thread_of[2]
    assert {shares for _, _, shares in seen} == {1}  # a task's kernels are not cut again
    seen.clear()
    assert threads.side_by_side([task(i) for i in range(3)], threads.SHARED_FROM - 1) == [0, 10, 20]
    assert {name for _, name, _ in seen} == {threading.current_thread().name}  # too few rows: one thread
