"""SBA, the sequential boundary aggregator (Zhang et al., KDD 2021, §4.1-4.4 and §5.1).

The paper's model (§4.2). The stream is cut into chunks of ``b`` slices (``b`` is the chunk size); the start
of a chunk is a boundary. Inside a chunk, ``sa`` holds the slice aggregations, ``csa`` accumulates them left
to right (``csa[i] = sa[0] ⊕ ... ⊕ sa[i]``; its last element is the chunk aggregation ``ca``) and ``lcs``
accumulates them right to left (``lcs[i] = sa[i] ⊕ ... ⊕ sa[b-1]``). For the count-based ``W[n, 1]`` a
window that starts inside chunk ``c_{i-1}`` and ends inside ``c_i`` is ``lcs_{i-1}[j] ⊕ csa_i[m]`` (Fig. 2),
and with ``k > 1`` fully covered chunks ``lcs ⊕ ca ⊕ ... ⊕ ca ⊕ csa`` (Fig. 3). ``lcs_{i-1}`` is computed in
one pass at the boundary ``b_i``; SBA does that pass in the main thread, PBA (``spanning.swag.pba``) in a
second one. The paper's pseudocode is only in its technical report; this follows the prose.

Mapping to the FIFO interface. A slice is one value (the paper's slide 1; slicing is orthogonal, §3.2). The
window has no fixed size, so the chunk size cannot be the paper's optimum ``b* = ⌊(n+2)/2⌋`` (Theorem 1); it
is a parameter ``block`` (default 64) and the window spans any number of chunks:

* the newest, open chunk keeps its ``sa`` list and only the current element of ``csa`` (as in §4.4);
* when it reaches ``block`` values (a boundary) its ``lcs`` is computed in place over ``sa`` (no extra space,
  §4.4) and ``ca`` is the last ``csa``, so the ``lcs`` pass is not needed to know ``ca``;
* the oldest closed chunk is read through ``lcs[front]``; ``evict`` only advances ``front``;
* the fully covered chunks in between (the paper's ``ca`` terms, ``k`` of them, unbounded here) are a FIFO of
  chunk aggregations, handled with the same two buffers one level up: chunks closed since the last level-2
  boundary accumulate into a running ``csa`` over their ``ca`` (``back_csa``); when the oldest chunk is used up
  and no earlier group is left, the level-2 boundary computes ``lcs`` over those ``ca`` (``mid_lcs``). Their
  product is cached in ``mid``, recomputed once per chunk event, so a query is ``lcs[front] ⊕ mid ⊕ csa``;
* exactness for any interleaving: if an ``evict`` finds no closed chunk (the whole window is in the open
  chunk), the open chunk is closed early, shorter than ``block``; only the oldest chunk can be short.

Costs in ⊗ (b = ``block``, n = window length), never using commutativity (every product is oldest-first):

* ``query``: at most 2 (``lcs[front] ⊕ mid ⊕ csa``), 0 when one part only;
* ``insert``: 1 (``csa``), plus at a boundary ``b - 1`` for ``lcs`` and at most 2 for ``back_csa`` and ``mid``:
  worst ``b + 2``, amortized at most 2 (``(b-1)/b`` each for ``csa`` and ``lcs``, ``2/b`` for level 2);
* ``evict``: 0, plus when the oldest chunk runs out at most 1 (``mid``) and, at a level-2 boundary, ``m - 1`` for
  the ``m ≤ n/b`` chunks whose ``ca`` are folded into ``mid_lcs``: amortized at most ``2/b``; an early close
  costs its length minus 1 (each value goes through one ``lcs`` pass in its life, early or not);
* space: the values of the open chunk, one ``lcs`` per closed chunk, and one more aggregation per closed
  chunk in the middle (its ``ca`` in ``back_ca`` or its entry in ``mid_lcs``).

So a slide (insert + evict + query) costs at most ``4 + 2/b`` ⊗ amortized, 3 of them on the hot path. In
Python the ⊗ is a function call and dominates; the remaining work is list appends and integer index moves,
with no per-value objects. The worst case per operation is the ``b - 1`` spike of the ``lcs`` pass at a
boundary (the latency that §5.1.2 reports for SBA and that PBA moves off the main thread) and the rarer
``n/b`` level-2 pass.

>>> swag = SBA(lambda a, b: a + b, "", block=2)
>>> for x in "abcde": swag.insert(x)
>>> swag.evict(); swag.query(), swag.len()
('bcde', 4)
>>> m = SBA(max, float("-inf"), block=5)  # Fig. 2's first chunk: slice maxima sa_0 = 5 6 0 1 3
>>> for x in (5, 6, 0, 1, 3): m.insert(x)
>>> m.lcs, m.query()
([6, 6, 3, 3, 3], 6)
"""

from __future__ import annotations

from typing import Any, Self

from spanning.swag.protocol import Combine, EmptyWindowError, SwagCapabilities


def lcs_in_place(combine: Combine, sa: list) -> list:
    """Overwrite ``sa`` with its left cumulative aggregations ``lcs[i] = sa[i] ⊕ ... ⊕ sa[-1]``; ``len - 1`` ⊗."""
    acc = sa[-1]
    for i in range(len(sa) - 2, -1, -1):  # right to left
        acc = combine(sa[i], acc)
        sa[i] = acc
    return sa


class SBA:
    name = "sba"
    capabilities = SwagCapabilities()

    def __init__(self, combine: Combine, identity: Any, *, block: int = 64) -> None:
        if block < 1:
            raise ValueError("block must be >= 1")
        self.combine, self.identity, self.block = combine, identity, block
        self.sa: list = []  # open chunk's slice aggregations (values)
        self.csa = identity  # current element of the open chunk's csa
        self.lcs: list | None = None  # lcs of the oldest closed chunk (None: not resolved yet, or no chunk)
        self.lcs_slot: Any = None  # what _lcs_task returned for the oldest chunk
        self.front = 0  # index in lcs of the oldest value held
        self.lcs_len = 0  # length of the oldest chunk; front == lcs_len: no closed chunk
        self.mid_slots: list = []  # level-2 group after the oldest chunk, stack: top (end) is the oldest
        self.mid_lcs: list = []  # lcs over those chunks' ca, same stack order: top = ca_top ⊕ ... ⊕ ca_bottom
        self.back_slots: list = []  # chunks closed since the level-2 boundary, oldest first
        self.back_ca: list = []  # their ca
        self.back_csa = identity  # level-2 csa: ca ⊕ ... over back_ca
        self.mid = identity  # mid_lcs[-1] ⊕ back_csa: all chunks between the oldest and the open one
        self.has_mid = False

    # -- the lcs pass; PBA overrides these three to run it in a thread pool --------------------------------
    def _lcs_task(self, sa: list) -> Any:
        return lcs_in_place(self.combine, sa)

    def _peek(self, slot: Any) -> list | None:  # the lcs if available without waiting
        return slot

    def _wait(self, slot: Any) -> list:
        return slot

    # -- chunk bookkeeping ----------------------------------------------------------------------------------
    def _set_oldest(self, slot: Any, length: int) -> None:
        self.lcs_slot, self.lcs, self.front, self.lcs_len = slot, self._peek(slot), 0, length

    def _update_mid(self) -> None:
        if self.mid_lcs:
            self.mid = self.combine(self.mid_lcs[-1], self.back_csa) if self.back_ca else self.mid_lcs[-1]
            self.has_mid = True
        else:
            self.mid, self.has_mid = self.back_csa, bool(self.back_ca)

    def _close(self) -> None:  # boundary: the open chunk becomes a closed one
        sa, ca = self.sa, self.csa
        self.sa, self.csa = [], self.identity
        slot = self._lcs_task(sa)
        if self.front == self.lcs_len:  # no closed chunk: it is the oldest
            self._set_oldest(slot, len(sa))
            return
        self.back_csa = self.combine(self.back_csa, ca) if self.back_ca else ca
        self.back_slots.append(slot)
        self.back_ca.append(ca)
        self._update_mid()

    def _next_oldest(self) -> None:  # the oldest chunk is used up
        if not self.mid_slots:
            if not self.back_slots:
                self.lcs_slot, self.lcs, self.front, self.lcs_len = None, None, 0, 0
                return
            # level-2 boundary: lcs over the ca of the chunks closed since the last one
            self.mid_lcs = lcs_in_place(self.combine, self.back_ca)[::-1]
            self.mid_slots = self.back_slots[::-1]
            self.back_slots, self.back_ca, self.back_csa = [], [], self.identity
        self._set_oldest(self.mid_slots.pop(), self.block)
        self.mid_lcs.pop()
        self._update_mid()

    # -- the SWAG interface ---------------------------------------------------------------------------------
    def insert(self, x: Any) -> None:
        sa = self.sa
        self.csa = self.combine(self.csa, x) if sa else x
        sa.append(x)
        if len(sa) == self.block:
            self._close()

    def evict(self) -> None:
        if self.front == self.lcs_len:  # the whole window is in the open chunk: close it early
            if not self.sa:
                raise EmptyWindowError
            self._close()
        self.front += 1
        if self.front == self.lcs_len:
            self._next_oldest()

    def query(self) -> Any:
        if self.front == self.lcs_len:
            return self.csa if self.sa else self.identity
        lcs = self.lcs
        if lcs is None:
            lcs = self.lcs = self._wait(self.lcs_slot)
        result = lcs[self.front]
        if self.has_mid:
            result = self.combine(result, self.mid)
        if self.sa:
            result = self.combine(result, self.csa)
        return result

    def len(self) -> int:
        return self.lcs_len - self.front + self.block * (len(self.mid_slots) + len(self.back_slots)) + len(self.sa)

    __len__ = len

    def close(self) -> None:
        """Nothing to release (PBA shuts its pool down here)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
