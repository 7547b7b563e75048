"""PBA, the parallel boundary aggregator (Zhang et al., KDD 2021, §4.1-4.3).

PBA is SBA (``spanning.swag.sba``, which documents the chunk model and its FIFO mapping) with the ``lcs`` pass
of each closed chunk moved off the main thread, as in §4.2: "the main thread is used to compute csa and the
final aggregation, and the other for processing the task of computing lcs launched at each boundary". This is
sound because a window never uses ``csa`` and ``lcs`` of the same chunk (§4.1): the main thread hands the
chunk's ``sa`` list to the pool at the boundary and never touches it again, keeps accumulating the next chunk's
``csa``, and knows the closed chunk's ``ca`` already (the last ``csa``), so the fully covered chunks in the
middle need no ``lcs``. It waits for a chunk's ``lcs`` only when that chunk becomes the oldest one and a query
reads ``lcs[front]``; with ``block`` well below the window length the task has long finished (the paper's
optimal chunk size, Theorem 1, is the choice that makes the wait zero for a fixed ``W[n, 1]``). The level-2
pass over chunk aggregations (at most ``n/block`` ⊗, rare) stays in the main thread, as in SBA.

Every ⊗ is the same as in SBA, in the same order, so the results are exactly SBA's; only where the ``lcs``
passes run differs. Exceptions raised by ``combine`` inside a task surface at the query that needs its ``lcs``.

Why a thread pool. One worker, as in the paper (two threads: main + ``lcs``), and tasks run in boundary order,
which is the order they are needed in. A process pool would have to pickle ``combine`` (lambdas cannot be)
and ship ``block`` values and the ``lcs`` back per chunk, which costs more than the ``block - 1`` ⊗ it saves
for cheap monoids. With CPython's GIL a Python-level ``combine`` does not run in parallel, so the thread brings
no CPU speed-up (the pool's hand-off adds overhead per chunk); it matches the paper's structure, removes the
``lcs`` spike from the insert path, and pays off for ⊗ that release the GIL (NumPy on large arrays) or on a
free-threaded build. ``close()`` (or ``with PBA(...) as swag:``) shuts the pool down; after it, chunks are
closed synchronously, as in SBA.

>>> with PBA(lambda a, b: a + b, "", block=2) as swag:
...     for x in "abcde": swag.insert(x)
...     swag.evict(); swag.query(), swag.len()
('bcde', 4)
"""

from __future__ import annotations

from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from spanning.swag.protocol import Combine, SwagCapabilities
from spanning.swag.sba import SBA, lcs_in_place

THREAD_PREFIX = "pba-lcs"


class PBA(SBA):
    name = "pba"
    capabilities = SwagCapabilities()

    def __init__(self, combine: Combine, identity: Any, *, block: int = 64, executor: Executor | None = None) -> None:
        """``executor``: a pool to share (not shut down by ``close``); by default PBA owns a one-thread pool."""
        super().__init__(combine, identity, block=block)
        self.own_pool = executor is None
        self.pool: Executor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_PREFIX) if executor is None else executor
        )

    def _lcs_task(self, sa: list) -> Any:
        if self.pool is None:  # closed: compute in place, as SBA
            return lcs_in_place(self.combine, sa)
        return self.pool.submit(lcs_in_place, self.combine, sa)

    def _peek(self, slot: Any) -> list | None:
        if isinstance(slot, Future):
            return slot.result() if slot.done() else None
        return slot

    def _wait(self, slot: Any) -> list:
        return slot.result() if isinstance(slot, Future) else slot

    def close(self) -> None:
        """Shut the pool down (if PBA owns it) after its pending ``lcs`` tasks; idempotent."""
        pool, self.pool = self.pool, None
        if pool is not None and self.own_pool:
            pool.shutdown(wait=True)

    def __del__(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None and getattr(self, "own_pool", False):
            pool.shutdown(wait=False)
