"""HyperLogLog registers of many windows at once, as DataSketches' HLL_8 sketches hold them.

A window's HLL is a register per slot, the largest rank of its values' hashes there (Flajolet et al.): a max
over the window's members, so the registers of all the windows of a chunk are one scatter-max of each
(event, window) pair's (slot, rank) into a windows × 2^lgK array, with no sketch object per value. Each
value is hashed once: 64-bit integers in numpy (``long_coupons``: MurmurHash3_x64_128 with DataSketches'
seed, tested equal to the library's coupons), other values by the library itself (``coupons``: read from a
one-value sketch, so it is the hash of Spark's ``hll_sketch_agg`` and of the ``datasketches`` package by
construction).

A window whose values hold fewer distinct coupons than the library's promotion count stays in a coupon mode
there (a list or set of coupons, estimated from their count): such windows are left to the library
(``hll_mode_windows`` returns only the windows with at least that many distinct slots, which the library holds
in HLL mode whatever the order of the values). Their sketches are written as HLL_8 bytes with the registers
the library would hold and the out-of-order flag set (``spanning.aggregates.distinct.order_free``), so every
reader estimates them from the registers (the composite estimator); the HIP accumulator, which depends on the
order of updates, is written as 0.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any

import numpy as np
import pandas as pd

from spanning.kernels.ranges import explode, range_count, runs_within, union_runs

__all__ = ["coupon_estimates", "coupons", "hll8_bytes", "hll_mode_windows", "long_coupons", "promotion_count",
           "value_coupons", "window_estimates"]

KEY_BITS = 26  # a coupon: the hash's low 26 bits (the slot is their low lgK bits), the rank above them
BLOCK = 512  # windows whose registers are held at once (2 MB at lgK 12)
UNSORTED_BYTES = 64 << 20  # registers of windows that may be held at once without sorting their pairs
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


_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)  # MurmurHash3_x64_128's constants
_SEED = np.uint64(9001)  # DataSketches' default update seed
_POWERS_OF_TWO = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))


def _fmix64(k: np.ndarray) -> np.ndarray:
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


def long_coupons(values: np.ndarray) -> np.ndarray:
    """The coupons of 64-bit integers, in numpy: MurmurHash3_x64_128 of the value's 8 little-endian bytes with
    seed 9001 (Appleby's hash, as DataSketches hashes a long), the low 26 bits of its first half for the slot
    bits, and 1 + the leading zeros of its second half (at most 63) for the rank: what ``coupons`` reads from
    the library, for each value at array speed."""
    k1 = values.astype(np.int64).view(np.uint64).copy()
    k1 *= _C1  # the tail of an 8-byte key: k1 mixed into h1 (both halves start at the seed)
    k1 = (k1 << np.uint64(31)) | (k1 >> np.uint64(33))
    k1 *= _C2
    h1 = _SEED ^ k1
    h2 = np.full(len(values), _SEED, dtype=np.uint64)
    h1 ^= np.uint64(8)  # the key's length in bytes
    h2 ^= np.uint64(8)
    h1 += h2
    h2 += h1
    h1, h2 = _fmix64(h1), _fmix64(h2)
    h1 += h2
    h2 += h1
    leading_zeros = 64 - np.searchsorted(_POWERS_OF_TWO, h2, side="right")
    rank = np.minimum(leading_zeros, 62) + 1
    return ((rank.astype(np.uint32) << np.uint32(KEY_BITS)) | (h1 & np.uint64((1 << KEY_BITS) - 1)).astype(np.uint32))


def value_coupons(values: np.ndarray, ds: Any, hashable: Any = None) -> np.ndarray:
    """The coupon of each value: 64-bit integers in numpy (``long_coupons``), other values by the library,
    each distinct value once (``hashable`` converts it first)."""
    if values.dtype.kind == "i" and hashable is None:
        return long_coupons(values)
    codes, uniques = pd.factorize(values)
    listed = uniques.tolist() if hashable is None else [hashable(v) for v in uniques.tolist()]
    return coupons(listed, ds)[codes]


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
    coupon = np.zeros(len(values), dtype=np.uint32)
    coupon[needed] = value_coupons(values[needed], ds, hashable)
    slot = (coupon[event] & ((1 << lg_k) - 1)).astype(np.int64)
    rank = (coupon[event] >> KEY_BITS).astype(np.uint8)
    kept, sketches = [], []
    for first_row, registers in _register_blocks(rows, slot, rank, len(candidates), lg_k, presorted=True):
        promoted = np.flatnonzero(np.count_nonzero(registers, axis=1) >= threshold)
        kept.append(candidates[first_row + promoted])
        sketches += hll8_bytes(registers[promoted], lg_k)
    return np.concatenate(kept), sketches


def _register_blocks(rows: np.ndarray, slot: np.ndarray, rank: np.ndarray, n_rows: int, lg_k: int,
                     presorted: bool = False) -> Any:  # fmt: skip
    """The registers of rows 0..n_rows-1, a block of rows at a time: ``(first row, registers)``, each pair's
    rank scattered into its row's slot with one max. All rows at once while they fit in ``UNSORTED_BYTES``
    (the pairs in any order), else ``BLOCK`` rows at a time over the pairs sorted by row."""
    width = 1 << lg_k
    if not presorted and n_rows * width <= UNSORTED_BYTES:
        registers = np.zeros((n_rows, width), dtype=np.uint8)
        np.maximum.at(registers.reshape(-1), rows * width + slot, rank)
        yield 0, registers
        return
    if not presorted:
        order = np.argsort(rows)
        rows, slot, rank = rows[order], slot[order], rank[order]
    bounds = np.searchsorted(rows, np.arange(0, n_rows + BLOCK, BLOCK))
    for block, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
        first_row = block * BLOCK
        registers = np.zeros((min(BLOCK, n_rows - first_row), width), dtype=np.uint8)
        np.maximum.at(registers.reshape(-1), (rows[lo:hi] - first_row) * width + slot[lo:hi], rank[lo:hi])
        yield first_row, registers


@functools.cache
def coupon_estimates(lg_k: int, ds: Any) -> np.ndarray:
    """The library's estimate of a sketch in a coupon mode, rounded as Spark's ``hll_sketch_estimate``, for
    each count of distinct coupons below the promotion count: a coupon list or set is estimated from its
    count alone (whatever the values and their order), so one sketch fed values of new coupons, read after
    each, gives them all."""
    needed = promotion_count(lg_k) - 1
    values, seen, start = [], set(), 0
    while len(values) < needed:  # values whose coupons are all distinct
        batch = list(range(start, start + 2 * needed))
        for value, coupon in zip(batch, coupons(batch, ds).tolist(), strict=True):
            if coupon not in seen and len(values) < needed:
                seen.add(coupon)
                values.append(value)
        start += 2 * needed
    sketch, table = ds.hll_sketch(lg_k, ds.tgt_hll_type.HLL_8), [0]
    for value in values:
        sketch.update(value)
        table.append(math.floor(sketch.get_estimate() + 0.5))  # Java's Math.round
    return np.array(table, dtype=np.int64)


def window_estimates(coupon: np.ndarray, first: np.ndarray, last: np.ndarray, n: int, lg_k: int,
                     ds: Any) -> np.ndarray:  # fmt: skip
    """Each window's HLL estimate, rounded as Spark's ``hll_sketch_estimate``, of the coupons of the events
    whose runs ``first..last`` cover it: what the library's sketch of the window's values answers, from the
    registers alone (out of order) in HLL mode, with no sketch object for a window in a coupon mode.

    A window's distinct coupons are counted with each coupon's runs merged (``union_runs``); below the
    promotion count the estimate is the library's for that count (``coupon_estimates``); from it on, the
    window's registers come from one scatter-max of the merged runs' (window, slot, rank) and the library
    estimates their HLL_8 bytes.
    """
    run_first, run_last, run_coupon = union_runs(coupon, first, last)
    count = range_count(run_first, run_last, n)
    threshold = promotion_count(lg_k)
    estimates = coupon_estimates(lg_k, ds)[np.minimum(count, threshold - 1)]
    promoted = np.flatnonzero(count >= threshold)
    if not len(promoted):
        return estimates
    row = np.full(n, -1, dtype=np.int64)
    row[promoted] = np.arange(len(promoted))
    run, piece_first, piece_last = runs_within(row >= 0, run_first, run_last)  # the runs within promoted windows
    piece, window = explode(piece_first, piece_last)
    run, rows = run[piece], row[window]
    slot = (run_coupon[run] & ((1 << lg_k) - 1)).astype(np.int64)
    rank = (run_coupon[run] >> KEY_BITS).astype(np.uint8)
    deserialize = ds.hll_sketch.deserialize
    for first_row, registers in _register_blocks(rows, slot, rank, len(promoted), lg_k):
        found = [deserialize(b).get_estimate() for b in hll8_bytes(registers, lg_k)]
        estimates[promoted[first_row:first_row + len(found)]] = np.floor(np.array(found) + 0.5)
    return estimates


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
