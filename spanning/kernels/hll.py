"""HyperLogLog registers of many windows at once, as DataSketches' HLL_8 sketches hold them.

A window's HLL is a register per slot, the largest rank of its values' hashes there (Flajolet et al.): a max
over the window's members, so the registers of all the windows of a chunk are one scatter-max of each
(event, window) pair's (slot, rank) into a windows × 2^lgK array, with no sketch object per value. Each
value is hashed once (``coupons``: DataSketches' own hash, read from a one-value sketch, so it is the hash
of Spark's ``hll_sketch_agg`` and of the ``datasketches`` package by construction).

A window whose values hold fewer distinct coupons than the library's promotion count stays in a coupon mode
there (a list or set of coupons, estimated from their count): such windows are left to the library
(``hll_mode_windows`` returns only the windows with at least that many distinct slots, which the library holds
in HLL mode whatever the order of the values). Their sketches are written as HLL_8 bytes with the registers
the library would hold and the out-of-order flag set (``spanning.aggregates.distinct.order_free``), so every
reader estimates them from the registers (the composite estimator); the HIP accumulator, which depends on the
order of updates, is written as 0.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["coupons", "hll8_bytes", "hll_mode_windows", "promotion_count"]

KEY_BITS = 26  # a coupon: the hash's low 26 bits (the slot is their low lgK bits), the rank above them
BLOCK = 512  # windows whose registers are held at once (2 MB at lgK 12)
_HEADER = struct.Struct("<8Bdddii")  # HLL_8 updatable preamble: 8 bytes, HIP, kxq0, kxq1, numAtCurMin, auxCount
_INVERSE_POWERS = np.ldexp(1.0, -np.arange(64))


def promotion_count(lg_k: int) -> int:
    """How many distinct coupons put a DataSketches HLL sketch of ``lg_k`` in HLL mode (from its coupon list
    below lgK 8, else from its coupon set once that is 3/4 of 2^(lgK−3) full)."""
    return 8 if lg_k < 8 else 3 * 2 ** (lg_k - 5) + 1


def coupons(values: list, ds: Any) -> np.ndarray:
    """The coupon (slot and rank bits) of each value, as the library hashes it: the one coupon of a sketch
    updated with that value alone, read from its compact list (8 bytes of preamble, then the coupon)."""
    new, hll_8 = ds.hll_sketch, ds.tgt_hll_type.HLL_8
    listed = []
    for value in values:
        sketch = new(4, hll_8)
        sketch.update(value)
        listed.append(sketch.serialize_compact())
    return np.frombuffer(b"".join(listed), dtype="<u4").reshape(-1, 3)[:, 2].copy()


def hll_mode_windows(values: np.ndarray, event: np.ndarray, window: np.ndarray, n: int, lg_k: int,
                     ds: Any, hashable: Any = None) -> tuple[np.ndarray, list[bytes]]:  # fmt: skip
    """The windows (of 0..n-1) that the library holds in HLL mode, and their HLL_8 bytes.

    ``event`` and ``window`` are the (event, window) member pairs, ordered by window; ``values`` the events'
    values (non-null at the paired events). ``hashable`` converts a value before it is hashed (bools to ints).
    """
    threshold = promotion_count(lg_k)
    candidates = np.flatnonzero(np.bincount(window, minlength=n) >= threshold)
    if not len(candidates):
        return candidates, []
    row = np.full(n, -1, dtype=np.int64)
    row[candidates] = np.arange(len(candidates))
    take = row[window] >= 0
    event, rows = event[take], row[window[take]]
    needed = np.zeros(len(values), dtype=bool)
    needed[event] = True
    codes = np.full(len(values), -1, dtype=np.int64)
    codes[needed], uniques = pd.factorize(values[needed])
    listed = uniques.tolist() if hashable is None else [hashable(v) for v in uniques.tolist()]
    coupon = coupons(listed, ds)
    slot = (coupon & ((1 << lg_k) - 1)).astype(np.int64)[codes[event]]
    rank = (coupon >> KEY_BITS).astype(np.uint8)[codes[event]]
    width = 1 << lg_k
    kept, sketches = [], []
    bounds = np.searchsorted(rows, np.arange(0, len(candidates) + BLOCK, BLOCK))
    for block, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
        first_row = block * BLOCK
        registers = np.zeros((min(BLOCK, len(candidates) - first_row), width), dtype=np.uint8)
        np.maximum.at(registers.reshape(-1), (rows[lo:hi] - first_row) * width + slot[lo:hi], rank[lo:hi])
        promoted = np.flatnonzero(np.count_nonzero(registers, axis=1) >= threshold)
        kept.append(candidates[first_row + promoted])
        sketches += hll8_bytes(registers[promoted], lg_k)
    return np.concatenate(kept), sketches


def hll8_bytes(registers: np.ndarray, lg_k: int) -> list[bytes]:
    """Updatable HLL_8 sketches in HLL mode, one per row of ``registers``, flagged out of order.

    The preamble as the library writes it: 10 preamble ints, serial version 1, family 7, lgK, lgArr 0, the
    flags (16: out of order), curMin 0 (HLL_8 keeps none), mode byte 10 (HLL mode, HLL_8); then the HIP
    accumulator (0: not used out of order), kxq0 and kxq1 (Σ 2^−register below 32 and from 32 on, which the
    composite estimator reads), the zero registers' count and no auxiliary entries.
    """
    powers = _INVERSE_POWERS[registers]
    low = np.where(registers < 32, powers, 0.0).sum(axis=1).tolist()
    high = np.where(registers >= 32, powers, 0.0).sum(axis=1).tolist()
    zeros = (registers == 0).sum(axis=1).tolist()
    return [
        _HEADER.pack(10, 1, 7, lg_k, 0, 16, 0, 10, 0.0, kxq0, kxq1, at_min, 0) + row.tobytes()
        for kxq0, kxq1, at_min, row in zip(low, high, zeros, registers, strict=True)
    ]
