"""The one keyed driver: a stream grouped by key through a per-key engine, one key's state carried on.

Every engine computes one key's windows (Suzanne et al., Algorithm 1 runs per stream). ``KeyedDriver``
takes a stream whose events come grouped by key - sorted by (key, end) in the Spark job, or put in key
order (stably, so each key keeps its arrival order) by ``KeyedBatch.in_key_order`` - in batches. It hands
each batch to a per-key engine and keeps the state of the key still open at the batch's end (the carried
key state) until the next batch shows whether that key goes on. Memory stays bounded by one key's open
windows, whatever the key sizes. Two engines fit it:

* ``VectorisedKeys``: the vectorised batch form of SE-Slicing (``spanning.engines.chunks.reduce_chunk``),
  many keys of a batch reduced together; the carried state is an ``OpenKeys`` of one key;
* ``PerEventKeys``: one per-event ``Engine`` (any technique) or ``SharedPlan`` (several window specs)
  per key; the carried state is that engine.

``vectorised_path`` is the one decision between the two. ``spanning.engines.streams`` holds the DataFrame
faces (``SortedStreamAggregator``, ``SortedEngineStream``) that each Spark partition feeds its Arrow batches to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from spanning.aggregates import Aggregate, is_null
from spanning.engines.chunks import ChunkResult, KeyedEvents, OpenKeys, reduce_chunk, release_open
from spanning.engines.multi_window import MultiEngine
from spanning.engines.params import Execution
from spanning.kernels.windows import WindowSpec
from spanning.techniques.registry import has_batch_form

__all__ = [
    "KeyedBatch",
    "KeyedDriver",
    "PerEventKeys",
    "RunKeys",
    "SharedPlan",
    "VectorisedKeys",
    "same_key",
    "vectorised_path",
]


def vectorised_path(execution: Execution, aggregates: Sequence[Aggregate]) -> bool:
    """The vectorised batch path, or the per-event engine? The technique must declare a batch form
    (``batch_form``), and every aggregate an array face (``capabilities.vectorised``); point events
    through a SWAG run per event."""
    return (
        execution.swag is None
        and has_batch_form(execution.technique)
        and all(agg.capabilities.vectorised for agg in aggregates)
    )


def same_key(a: Any, b: Any) -> bool:
    """Same key (a value or a tuple of values); null keys (None, NaN, pd.NA) are one key, "" is not null."""
    if not isinstance(a, tuple) or not isinstance(b, tuple):
        a, b = (a,), (b,)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        x_null, y_null = is_null(x), is_null(y)
        if x_null or y_null:
            if not (x_null and y_null):
                return False
        elif not bool(x == y):
            return False
    return True


@dataclass(frozen=True)
class KeyedBatch:
    """A batch of a stream grouped by key: the keys of its runs, and its events in order.

    ``groups[i]`` is the run of event i (0 .. len(run_keys) - 1, non-decreasing); event bounds are
    ``[starts, ends)``; ``seqs`` are arrival numbers; ``series_start`` is per run (None: each key's series
    starts at its first event, docs/SEMANTICS.md §8); ``values`` is what the engine reads (``BatchColumns``
    for ``VectorisedKeys``, one row mapping per event for ``PerEventKeys``).
    """

    run_keys: list
    groups: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    seqs: np.ndarray
    series_start: np.ndarray | None
    values: Any

    @classmethod
    def in_key_order(
        cls, groups: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: Sequence, series_start: np.ndarray | None
    ) -> KeyedBatch:
        """Events in arrival order with key codes ``groups`` (0 .. n - 1), put in key order (stably: each
        key keeps its arrival order); ``seqs`` are the arrival numbers, ``series_start`` is per key code."""
        order = np.argsort(groups, kind="stable")
        codes = np.asarray(groups)[order]
        run_keys = np.unique(codes).tolist()
        runs = np.searchsorted(run_keys, codes)
        per_run = None if series_start is None else np.asarray(series_start)[run_keys]
        return cls(run_keys, runs, starts[order], ends[order], order, per_run, [rows[i] for i in order])


class KeyEngine(Protocol):
    """A per-key engine the driver runs: a batch (continuing ``carried``, the state of its first key when
    that key went on from the batch before) -> (its result, the state of its last key); and a key's end."""

    def run(self, batch: KeyedBatch, carried: Any | None, last_key_ends: bool = False) -> tuple[Any, Any]: ...

    def release(self, key: Any, state: Any) -> Any: ...


class KeyedDriver:
    """Drives a stream grouped by key through a per-key engine, carrying one key's state between batches.

    ``feed(batch)`` returns ``(released, result)``: what the key carried in released (the engine's
    ``release``; None when the batch goes on with that key or none was carried) and the engine's result
    for the batch. ``finish()`` releases the key still carried (None if none).
    """

    def __init__(self, engine: KeyEngine) -> None:
        self.engine = engine
        self.key: Any = None  # the key carried to the next batch
        self.state: Any = None  # its state (None: no key carried)

    def feed(self, batch: KeyedBatch, last_key_ends: bool = False) -> tuple[Any, Any]:
        """``last_key_ends``: the batch holds the last of its last key's rows (no state to carry on)."""
        if not batch.run_keys:
            return None, None
        carried, released = None, None
        if self.state is not None:
            if same_key(self.key, batch.run_keys[0]):
                carried = self.state
            else:
                released = self.finish()
        result, self.state = self.engine.run(batch, carried, last_key_ends)
        self.key = batch.run_keys[-1]
        return released, result

    def finish(self) -> Any:
        if self.state is None:
            return None
        released = self.engine.release(self.key, self.state)
        self.key = self.state = None
        return released


class VectorisedKeys:
    """The vectorised batch form of SE-Slicing as the driver's per-key engine (``reduce_chunk``).

    ``run`` gives a ``ChunkResult`` (its ``window_group`` indexes the batch's runs), ``release`` the
    ``(window_start, window_end, values)`` of a carried key's last windows.
    """

    def __init__(self, spec: WindowSpec, aggregates: Sequence[Aggregate]) -> None:
        self.spec, self.aggregates = spec, list(aggregates)

    def run(self, batch: KeyedBatch, carried: OpenKeys | None,
            last_key_ends: bool = False) -> tuple[ChunkResult, OpenKeys | None]:  # fmt: skip
        series_start = batch.series_start
        if series_start is None:  # each key's series starts at its first event
            series_start = batch.starts[np.flatnonzero(np.r_[True, batch.groups[1:] != batch.groups[:-1]])]
        events = KeyedEvents(batch.starts, batch.ends, batch.groups, len(batch.run_keys), series_start)
        if carried is not None:  # the carried key goes on as the batch's first key
            carried = replace(carried, groups=np.zeros(1, dtype=np.int64))
        carry = "none" if last_key_ends else "last"
        result = reduce_chunk(self.spec, self.aggregates, events, batch.values, carried, carry=carry)
        return result, result.carried

    def release(self, key: Any, state: OpenKeys) -> tuple:
        released = release_open(self.spec, self.aggregates, state)
        return key, released.window_start, released.window_end, released.values


class PerEventKeys:
    """One per-event engine per key as the driver's per-key engine: ``new_engine(series_start)`` makes it.

    ``run`` gives ``(windows, late)``: ``(key, item)`` for each item an engine released (a ``Window``, or
    ``(spec index, Window)`` from a ``SharedPlan``), and the late entries of the batch's engines (their
    ``late`` lists, taken and cleared). ``release`` flushes a key's engine: ``[(key, item), ...]``.
    """

    def __init__(self, new_engine: Callable[[int | None], Any]) -> None:
        self.new_engine = new_engine

    def run(self, batch: KeyedBatch, carried: Any | None, last_key_ends: bool = False) -> tuple[tuple[list, list], Any]:
        starts, ends, seqs = batch.starts.tolist(), batch.ends.tolist(), batch.seqs.tolist()
        rows = batch.values
        bounds = [0, *(np.flatnonzero(batch.groups[1:] != batch.groups[:-1]) + 1).tolist(), len(starts)]
        windows: list = []
        late: list = []
        engine = carried
        for r, key in enumerate(batch.run_keys):
            if r > 0 or engine is None:
                if engine is not None:  # the previous key ends here
                    windows += self.release(batch.run_keys[r - 1], engine)
                    late += engine.late
                series = None if batch.series_start is None else int(batch.series_start[r])
                engine = self.new_engine(series)
            insert = engine.insert
            for i in range(bounds[r], bounds[r + 1]):
                released = insert(starts[i], ends[i], rows[i], seq=seqs[i])
                if released:  # most arrivals release nothing
                    windows += [(key, w) for w in released]
        late += engine.late
        engine.late.clear()  # the carried engine's late events are reported once
        return (windows, late), engine

    def release(self, key: Any, state: Any) -> list:
        return [(key, w) for w in state.flush()]


class SharedPlan:
    """One ``MultiEngine`` per group of a sharing plan, as one engine: items carry the spec's index."""

    def __init__(self, specs: Sequence[WindowSpec], plan: Sequence[Sequence[int]], aggregates: Any,
                 execution: Execution, series_start: int | None) -> None:  # fmt: skip
        self.plan = [list(members) for members in plan]
        self.engines = [
            MultiEngine(
                [specs[m] for m in members],
                aggregates,
                execution.technique,
                execution.height,
                series_start,
                swag=execution.swag,
            )  # fmt: skip
            for members in self.plan
        ]
        self.late: list = []  # (spec index, LateEvent)

    def insert(self, start: int, end: int, row: Any, seq: int) -> list:
        out = []
        for members, engine in zip(self.plan, self.engines, strict=True):
            released = engine.insert(start, end, row, seq=seq)
            if released:
                out += [(members[j], w) for j, w in released]
            if engine.late:
                self.late += [(members[j], event) for j, event in engine.late]
                engine.late.clear()
        return out

    def flush(self) -> list:
        return [(members[j], w) for members, e in zip(self.plan, self.engines, strict=True) for j, w in e.flush()]


class RunKeys(Sequence):
    """The key of each run of a batch, as a tuple over the key columns, built only when asked for."""

    def __init__(self, columns: list, n: int) -> None:
        self.columns, self.n = columns, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:  # type: ignore[override]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return tuple(c[i] for c in self.columns)
