"""The stream's stateful step in the executors' tasks: each task reduces its key groups' rows of a micro-batch against
their state in the checkpoint, writes its own windows, late and rejected files, and returns one stats row per group.

``BatchWriter`` (``stream.writer``) runs one Spark action per batch::

    batch.repartition(P, _bucket).mapInArrow(GroupTask(...), STATS)

Each key group (a ``_bucket``, fixed per checkpoint) goes to one of the P tasks, whatever P is: a restart on more or
fewer cores reads the same groups' files. A task is given what the driver planned, all of it small: the reducer's
configuration (``stream.buckets``), the output folder, the batch id and each group's state ``Version`` before the
batch (from the batch records). It reduces its rows with the driver's own code (``BucketReducer``: load the group's
state, control rows' ``advance``, the rows in end order, ``flush``, save the next version), writes
``kind/_tmp-batch=N/part-PPPPP.parquet`` (``stream.outputs``) and yields the stats: the driver receives a row per
touched group and per task, never the batch's rows.

**Exactly once.** A task that Spark runs again (or a batch run again after a crash) is given the same versions,
reads the same state files and writes the same next versions and the same part files again: its rows are sorted by
group and row hash first, so their order does not depend on the shuffle's. The driver renames the temporary folders
and writes the batch's record only after the action succeeds.

**Held states.** Each Python worker keeps the states it wrote (``_HELD``, by the writer's ``token``: one per running
query, so two queries over copies of a checkpoint never share them), and a later task given the same version of a
group goes on from it without reading a file. Which worker runs which task is Spark's choice, so the stats say
whether each group's state was held (``cached``) or read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_jobs.stream import buckets as reducing
from spark_jobs.stream.bucket_store import Held, Version
from spark_jobs.stream.outputs import OutputShape, write_part

__all__ = ["GroupTask", "STATS", "spark_hash_int", "task_of_group", "warm_up"]

#: one row per key group the task touched (``group`` ≥ 0: its new version, stats and whether its state was held),
#: and one per task (``group`` -1: its accepted rows, written windows, late and rejected rows, and seconds)
STATS_FIELDS = {"group": "int", **dict.fromkeys(["version", "snapshot", "delta_bytes", "snapshot_bytes", "accepted",
                 "max_end", "keys", "held_windows", "state_bytes", "state_written"], "long"), "cached": "boolean",
                 **dict.fromkeys(["windows", "late", "rejected"], "long"), "seconds": "double"}  # fmt: skip
STATS = ", ".join(f"{name} {kind}" for name, kind in STATS_FIELDS.items())  # mapInArrow's schema
TOKENS_KEPT = 2  # the queries whose states a worker keeps: the running one, and one more (a query started after it)
_HELD: dict[str, Held] = {}  # in this Python worker: a query's token -> the states its tasks wrote, by group


def task_of_group(groups: Any, tasks: int) -> Any:
    """A column whose hash partitioning over ``tasks`` (Spark's ``repartition(tasks, column)``) sends key group g
    (``groups``, a column of group numbers) to task g mod ``tasks``: every task gets its share of the groups, where
    hashing the group numbers themselves would leave some tasks two and others none (with 2 groups on 2 tasks, both
    groups hash to task 1)."""
    from pyspark.sql import functions as F

    stand_ins = [_hashing_to(task, tasks) for task in range(tasks)]
    return F.element_at(F.array(*[F.lit(x) for x in stand_ins]), F.pmod(groups, F.lit(tasks)) + 1)


def _hashing_to(task: int, tasks: int) -> int:
    """The least integer whose Spark hash (``F.hash`` of an int: Murmur3 x86 32-bit, seed 42) lands in ``task``."""
    x = 0
    while spark_hash_int(x) % tasks != task:
        x += 1
    return x


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash`` of a 32-bit integer (``Murmur3_x86_32.hashInt``), as a signed 32-bit number.

    >>> [spark_hash_int(v) for v in (0, 1, 2)]
    [933211791, -559580957, 1765031574]
    """
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def held_for(token: str) -> Held:
    """The states this worker holds for the query ``token``; those of the oldest other queries are let go."""
    held = _HELD.pop(token, None)
    _HELD[token] = {} if held is None else held  # the most recent last
    for old in list(_HELD)[:-TOKENS_KEPT]:
        del _HELD[old]
    return _HELD[token]


@dataclass
class GroupTask:
    """``mapInArrow``'s function: a task's key groups of batch ``batch_id`` reduced against ``versions`` (group ->
    the four numbers of its ``Version``), its outputs written under ``output``, its stats yielded (``STATS``)."""

    reducer: Any  # a BucketReducer or SpecReducers (stream.buckets)
    shape: OutputShape
    output: str
    batch_id: int
    versions: dict[int, tuple]
    token: str  # the running query's: which held states this task may use
    fail_once: tuple[str, int] | None = None  # stream.buckets.FAIL_ONCE as the driver had it (recovery tests)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        batches = list(batches)
        if not batches or not sum(b.num_rows for b in batches):
            return
        began = time.perf_counter()
        rows = pa.Table.from_batches(batches)
        # the same order whatever order the shuffle gave the rows in: a task run again writes the same bytes
        rows = rows.take(pc.sort_indices(rows.column("_seq")))  # the reducer keeps this order within a group
        held = held_for(self.token)
        for reducer in getattr(self.reducer, "reducers", [self.reducer]):
            reducer.held = held
        reducing.FAIL_ONCE = self.fail_once
        reduced = self.reducer(rows, {g: Version(*v) for g, v in self.versions.items()}, workers=1)
        tables = self.shape.tables(reduced)
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0  # outside Spark (a test): one part
        for kind, table in tables.items():
            if table.num_rows:
                write_part(Path(self.output), kind, self.batch_id, f"part-{partition:05d}.parquet", table)
        stats = [{"group": group, **dict(zip(Version._fields, s["version"], strict=True)),
                  **{k: s[k] for k in ("accepted", "max_end", "keys", "held_windows", "state_bytes", "state_written",
                                       "cached")}}
                 for group, s in reduced.buckets.items()]  # fmt: skip
        stats.append({"group": -1, "accepted": reduced.accepted, "windows": tables["windows"].num_rows,
                      "late": tables["late"].num_rows, "rejected": tables["rejected"].num_rows,
                      "seconds": round(time.perf_counter() - began, 3)})  # fmt: skip
        yield pa.RecordBatch.from_pylist(stats, schema=_stats_schema())


def _stats_schema() -> Any:
    import pyarrow as pa

    types = {"int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(), "double": pa.float64()}
    return pa.schema([(name, types[kind]) for name, kind in STATS_FIELDS.items()])


def warm_up(part: int = 0, parts: int = 1) -> float:
    """The compiled kernel loaded (or compiled) in an executor's Python worker before its first batch
    (``spark_jobs.sessions.session.warm_python_workers``), for the read-only Arrow columns the stream feeds it."""
    from spanning.kernels import compiled

    return compiled.warm_up(every=True, part=part, parts=parts)
