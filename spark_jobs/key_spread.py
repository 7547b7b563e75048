"""Keys spread over the ``vector`` plan's tasks by their weight, not by their hash alone.

The ``vector`` plan (``spark_jobs.plans``) sends each key's events whole to one task, so a task's time is the
sum of its keys' events. Spark's ``repartition(n, key)`` places a key by ``pmod(murmur3(key), n)``, blind to
its weight: with a few heavy keys (cells are Zipf-like; the largest of 200 held 21% of the calls measured in
docs/BENCHMARKS.md), one core worked while the other idled for a second. Here the driver weighs the keys on
the sample it already reads for the plan choice, assigns them to partitions by the longest-processing-time
rule (Graham, "Bounds on multiprocessing timing anomalies", 1969: heaviest first, each to the lightest
partition), and hands Spark, per key, a stand-in long that Spark's own hash sends to that partition. Keys
missing from the sample keep their own hash's partition, which the assignment counts in. The result is a
placement only: every key is still whole in one partition, whatever the weights were.

>>> spark_murmur3_long(1), spark_murmur3_long(-1)  # Spark: SELECT hash(1L), hash(-1L)
(-1712319331, -939490007)
>>> [hash_partition(stand_in_for(p, 4), 4) for p in range(4)]
[0, 1, 2, 3]
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

SEED = 42  # Spark's Murmur3Hash expression, which HashPartitioning uses
MAX_PLACED = 64  # the heaviest keys placed by weight (Spark scans a map per row); lighter ones keep their hash's
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix(h: int, k: int) -> int:  # MurmurHash3 x86_32's mixK1 then mixH1 (Appleby)
    k = _rotl32((k * 0xCC9E2D51) & _M32, 15) * 0x1B873593 & _M32
    return (_rotl32(h ^ k, 13) * 5 + 0xE6546B64) & _M32


def spark_murmur3_long(value: int) -> int:
    """Spark's ``hash(value)`` of a long (MurmurHash3 x86_32 of its low then high 4 bytes, seed 42), signed."""
    h = _mix(_mix(SEED, value & _M32), (value >> 32) & _M32) ^ 8
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & _M32
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def hash_partition(value: int, partitions: int) -> int:
    """The partition of a long under Spark's ``repartition(partitions, column)``: pmod(hash, partitions)."""
    return spark_murmur3_long(value) % partitions  # Python's % of a positive modulus is pmod


def stand_in_for(partition: int, partitions: int) -> int:
    """The smallest long ≥ 0 that Spark's hash sends to ``partition`` of ``partitions``."""
    value = 0
    while hash_partition(value, partitions) != partition:
        value += 1
    return value


def placement(weights: Mapping[int, float], partitions: int) -> dict[int, int]:
    """Key → partition for the ``MAX_PLACED`` heaviest keys of ``weights`` (a long per key → its weight), by the
    longest-processing-time rule, after the lighter keys' weights are counted where their hash puts them."""
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    placed, rest = ranked[:MAX_PLACED], ranked[MAX_PLACED:]
    load = [0.0] * partitions
    for key, weight in rest:
        load[hash_partition(key, partitions)] += weight
    heap = [(w, p) for p, w in enumerate(load)]
    heapq.heapify(heap)
    chosen = {}
    for key, weight in placed:
        lightest, p = heapq.heappop(heap)
        chosen[key] = p
        heapq.heappush(heap, (lightest + weight, p))
    return chosen


def spread_column(key: Column, weights: Mapping[int, float], partitions: int) -> Column:
    """The long to ``repartition(partitions, ...)`` by: a placed key's stand-in, else the key itself (a long)."""
    chosen = placement(weights, partitions)
    stand_ins = [stand_in_for(p, partitions) for p in range(partitions)]
    if not chosen:
        return key.cast("long")
    heaviest_first = sorted(chosen, key=lambda k: -weights[k])  # a row's map lookup stops at its key
    table = F.create_map(*[F.lit(x).cast("long") for k in heaviest_first for x in (k, stand_ins[chosen[k]])])
    return F.coalesce(F.try_element_at(table, key.cast("long")), key.cast("long"))
