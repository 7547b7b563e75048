"""``spark_jobs.batch.key_hash`` computes Spark's ``xxhash64`` of key values: checked against Spark itself."""

from __future__ import annotations

import random

from pyspark.sql import types as T

from spark_jobs.batch.key_hash import spark_xxhash64


def test_python_xxhash64_equals_spark_s_for_text_integers_nulls_and_several_columns(spark):
    rng = random.Random(7)
    alphabet = "ab-_ 0é漢\U0001f4de"
    texts = ["", "a", "cell-17"] + ["".join(rng.choice(alphabet) for _ in range(n)) for n in range(1, 90, 3)]
    longs = [0, 1, -1, 2**63 - 1, -(2**63), 4_000_000_000] + [rng.randrange(-(2**63), 2**63) for _ in range(20)]
    ints = [0, -1, 2**31 - 1, -(2**31)] + [rng.randrange(-(2**31), 2**31) for _ in range(20)]
    rows = [(t, rng.choice(longs), rng.choice(ints), rng.randrange(-128, 128), rng.randrange(-(2**15), 2**15))
            for t in texts for _ in range(2)]  # fmt: skip
    rows += [(None, 5, None, None, 3), (None, None, None, None, None), ("x", None, 7, None, None)]
    schema = T.StructType([T.StructField("s", T.StringType()), T.StructField("l", T.LongType()),
                           T.StructField("i", T.IntegerType()), T.StructField("b", T.ByteType()),
                           T.StructField("h", T.ShortType())])  # fmt: skip
    frame = spark.createDataFrame(rows, schema)
    kinds = ["string", "long", "int", "byte", "short"]
    combos = [[0], [1], [2], [3], [4], [0, 1], [1, 0], [0, 2, 3, 4]]
    exprs = [f"xxhash64({', '.join(schema.names[c] for c in combo)}) AS h{n}" for n, combo in enumerate(combos)]
    got = frame.selectExpr(*schema.names, *exprs).collect()
    assert len(got) == len(rows)
    for row in got:
        for n, combo in enumerate(combos):
            values = [row[schema.names[c]] for c in combo]
            assert spark_xxhash64(values, [kinds[c] for c in combo]) == row[f"h{n}"], (values, combo)
