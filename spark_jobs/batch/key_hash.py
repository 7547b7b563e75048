"""Spark's ``xxhash64`` of key values, computed in Python: the key ids of the JVM plans without a join.

The plans group by a long per key (``spark_jobs.batch.plans.key_ids``). Spark computes it on every row as
``xxhash64(key columns)``, an expression, instead of joining each row to a table of dense ids; the windows
get their key back by a broadcast join of the few distinct keys on that long. That is exact only when the
distinct keys have distinct hashes, which the driver checks here, over the distinct keys it collected, with
the same function: XXH64 (Collet's reference algorithm) with Spark's seed 42, over the UTF-8 bytes of text,
the 4 bytes of byte, short and int values and the 8 bytes of long values, the columns chained (each one's
hash seeds the next), nulls skipped.

>>> spark_xxhash64(["a"])  # Spark: SELECT xxhash64('a')
-8582455328737087284
>>> spark_xxhash64([1], ["int"]), spark_xxhash64([1]), spark_xxhash64([None, 1], ["string", "int"])
(-6698625589789238999, -7001672635703045582, -6698625589789238999)
"""

from __future__ import annotations

from collections.abc import Sequence

SEED = 42  # Spark's XxHash64 expression
_P1, _P2, _P3, _P4, _P5 = (
    0x9E3779B185EBCA87,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0x85EBCA77C2B2AE63,
    0x27D4EB2F165667C5,
)
_MASK = (1 << 64) - 1
INT_TYPES = frozenset({"byte", "short", "int"})  # hashed as 4 bytes by Spark; "long" as 8


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK, 31) * _P1) & _MASK


def xxh64(data: bytes, seed: int) -> int:
    """XXH64 of ``data`` (the reference algorithm), as an unsigned 64-bit integer."""
    n, i, seed = len(data), 0, seed & _MASK
    if n >= 32:
        v = [(seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed, (seed - _P1) & _MASK]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j : i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _MASK
        for lane in v:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _MASK
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, int.from_bytes(data[i : i + 8], "little")), 27) * _P1 + _P4) & _MASK
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ (int.from_bytes(data[i : i + 4], "little") * _P1 & _MASK), 23) * _P2 + _P3) & _MASK
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * _P5 & _MASK), 11) * _P1) & _MASK
        i += 1
    h = ((h ^ (h >> 33)) * _P2) & _MASK
    h = ((h ^ (h >> 29)) * _P3) & _MASK
    return h ^ (h >> 32)


def spark_xxhash64(values: Sequence, types: Sequence[str] | None = None) -> int:
    """Spark's ``xxhash64(c1, c2, ...)`` of one row: ``values`` (str, int or None) with their Spark types
    (``string``, ``byte``, ``short``, ``int`` or ``long``; by default ``string`` for text, ``long`` for
    integers), as Spark's signed long."""
    h = SEED
    for value, kind in zip(values, types or ["string" if isinstance(v, str) else "long" for v in values], strict=True):
        if value is None:
            continue
        if kind == "string":
            data = value.encode("utf-8")
        else:
            data = (value & (0xFFFFFFFF if kind in INT_TYPES else _MASK)).to_bytes(4 if kind in INT_TYPES else 8,
                                                                                     "little")  # fmt: skip
        h = xxh64(data, h)
    return h - (1 << 64) if h >= 1 << 63 else h
