"""The ``vector`` plan's keys placed on tasks by weight (``spark_jobs.key_spread``): Spark's own hash and
partitioning reproduced on the driver, the stand-ins landing where they are sent, and the placement's balance."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import functions as F

from spark_jobs.key_spread import MAX_PLACED, hash_partition, placement, spark_murmur3_long, spread_column

LONGS = [0, 1, -1, 42, 2**31 - 1, -(2**31), 2**32, 2**40 + 7, 2**63 - 1, -(2**63), 123456789012345]


def test_the_hash_and_the_partition_of_a_long_are_sparks(spark):
    values = LONGS + [random.Random(7).randrange(-(2**63), 2**63) for _ in range(200)]
    frame = spark.createDataFrame([(v,) for v in values], "v long")
    for row in frame.select("v", F.hash("v").alias("h")).collect():
        assert spark_murmur3_long(row.v) == row.h, row.v
    for partitions in (1, 3, 4, 7):
        placed = frame.repartition(partitions, "v").select("v", F.spark_partition_id().alias("p")).collect()
        assert {(r.v, r.p) for r in placed} == {(v, hash_partition(v, partitions)) for v in values}


def test_each_weighed_key_lands_on_the_partition_chosen_for_it_and_the_others_where_their_hash_sends_them(spark):
    weights = {7: 500.0, 3: 400.0, 11: 300.0, 5: 10.0, 2: 1.0}
    keys = [*weights, 1000, 1001, None]  # two keys and a null the sample did not see
    frame = spark.createDataFrame([(k,) for k in keys for _ in range(3)], "cell int")
    partitions = 3
    spread = frame.repartition(partitions, spread_column(F.col("cell"), weights, partitions))
    got = {(r.cell, r.p) for r in spread.select("cell", F.spark_partition_id().alias("p")).collect()}
    chosen = placement(weights, partitions)
    assert len({k for k, _ in got}) == len(got)  # every key whole in one partition
    expected = {(k, chosen[k]) for k in weights} | {(k, hash_partition(k, partitions)) for k in (1000, 1001)}
    assert expected <= got
    # the three heavy keys each alone, the light ones with the lightest
    assert len({chosen[7], chosen[3], chosen[11]}) == 3


@given(st.dictionaries(st.integers(-(2**40), 2**40), st.floats(0.0, 1e6), min_size=1, max_size=MAX_PLACED + 40),
       st.integers(1, 9))  # fmt: skip
def test_placement_is_within_the_greedy_bound(weights, partitions):
    chosen = placement(weights, partitions)
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    assert set(chosen) == {k for k, _ in ranked[:MAX_PLACED]}
    assert all(0 <= p < partitions for p in chosen.values())
    load = [0.0] * partitions
    for key, weight in weights.items():
        load[chosen[key] if key in chosen else hash_partition(key, partitions)] += weight
    # list scheduling: a key goes where the load is least, so no partition exceeds the lighter keys' own
    # hashed load or the mean load plus the heaviest placed key (Graham's bound)
    hashed = [0.0] * partitions
    for key, weight in ranked[MAX_PLACED:]:
        hashed[hash_partition(key, partitions)] += weight
    heaviest = max(w for _, w in ranked[:MAX_PLACED])
    bound = max(max(hashed), sum(weights.values()) / partitions + heaviest)
    assert max(load) <= bound * (1 + 1e-9) + 1e-6


def test_a_zipf_of_200_cells_spreads_evenly_over_four_partitions():
    weights = {cell: 1_000_000 / (cell + 1) for cell in range(200)}  # the largest holds about 17%
    chosen = placement(weights, 4)
    load = [0.0] * 4
    for cell, p in chosen.items():
        load[p] += weights[cell]
    for cell in set(weights) - set(chosen):
        load[hash_partition(cell, 4)] += weights[cell]
    assert max(load) / (sum(load) / 4) < 1.05
