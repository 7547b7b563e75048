"""Distinct counts and quantiles on Spark: every plan that takes them == the oracle (hypothesis streams), one
answer with the local engine, and Spark's sketches byte for byte equal to the Python library's."""

from __future__ import annotations

import math

import datasketches
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from spanning.aggregates.distinct import java_inclusive_rank, order_free, percentile_of_sorted
from tests.budget import examples
from tests.test_plans import _oracle, _plan_output, _same, streams

DISTINCT_AGGS = ["count", "count_distinct:v", "count_distinct:f", "percentile:v:0.5", "percentile:f:0.95",
                 "approx_count_distinct:v", "approx_percentile:f:0.9", "approx_percentile:v:0.25"]  # fmt: skip


@pytest.mark.parametrize("plan", ["explode", "python", "vector", "parquet"])
@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=streams())
def test_plans_equal_the_oracle(spark, tmp_path_factory, plan, case):
    frame, window, ttp, series = case
    want_windows, want_late = _oracle(frame, window, ttp, series, DISTINCT_AGGS)
    got_windows, got_late = _plan_output(spark, tmp_path_factory.mktemp("plan"), frame, window, ttp, series,
                                         DISTINCT_AGGS, plan)  # fmt: skip
    _same(got_windows, want_windows)
    assert got_late == want_late


@pytest.mark.parametrize(("kind", "values"), [
    ("bigint", [1, 2, 3, 5, 8, 13, 2**40, -7]),
    ("int", [4, 9, -1]),
    ("string", ["33600004281", "cell-7", "é", ""]),
    ("bigint", list(range(3000))),  # HLL mode: the registers
    ("string", [f"2080{i * 7919:011d}" for i in range(20_000)]),  # HLL mode, text hashed as UTF-8
])  # fmt: skip
def test_spark_and_python_sketches_agree_byte_for_byte(spark, kind, values):
    """Same values in the same order: Spark's hll_sketch_agg == the library's HLL_8 (values hashed alike by
    type); kll_sketch_agg_double == kll_doubles_sketch while it holds every value (n ≤ K, no compaction)."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(v,) for v in values], f"v {kind}").coalesce(1)
    numeric = kind != "string"
    row = frame.agg(F.hll_sketch_agg("v", 12).alias("h"),
                    F.kll_sketch_agg_double(F.col("v").cast("double")).alias("k") if numeric else F.lit(None),
                    ).first()  # fmt: skip
    hll = datasketches.hll_sketch(12, datasketches.tgt_hll_type.HLL_8)
    for v in values:
        hll.update(v)
    assert bytes(row[0]) == hll.serialize_updatable()
    estimate = spark.createDataFrame([(order_free(bytes(row[0])),)], "s binary").select(F.hll_sketch_estimate("s"))
    assert estimate.first()[0] == round(datasketches.hll_sketch.deserialize(order_free(hll.serialize_updatable()))
                                        .get_estimate())  # fmt: skip
    if numeric and len(values) <= 200:  # past K, KLL compacts at random: test_sketch_estimates checks its bound
        kll = datasketches.kll_doubles_sketch(200)
        for v in values:
            kll.update(float(v))
        assert bytes(row[1]) == kll.serialize()


def test_percentile_and_quantile_rules_are_spark_s(spark):
    """percentile_of_sorted == Spark's percentile; the KLL item picked for q == kll_sketch_get_quantile_double."""
    from pyspark.sql import functions as F

    rows = [(g, float((g * 7919 + i * 104729) % 1000 - 300)) for g in range(1, 40) for i in range(g)]
    frame = spark.createDataFrame(rows, "g int, v double")
    qs = [0.0, 0.05, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0]
    spark_rows = frame.groupBy("g").agg(
        F.array_sort(F.collect_list("v")).alias("values"), F.kll_sketch_agg_double("v").alias("k"),
        *[F.percentile("v", q).alias(f"p{i}") for i, q in enumerate(qs)],
        *[F.kll_sketch_get_quantile_double(F.kll_sketch_agg_double("v"), F.lit(q)).alias(f"k{i}")
          for i, q in enumerate(qs)],
        ).collect()  # fmt: skip
    for r in spark_rows:
        kll = datasketches.kll_doubles_sketch.deserialize(bytes(r["k"]))
        for i, q in enumerate(qs):
            assert percentile_of_sorted(tuple(r["values"]), q) == pytest.approx(r[f"p{i}"], rel=1e-12)
            got = kll.get_quantile(java_inclusive_rank(q, kll.n))
            assert got == r[f"k{i}"]
            values = r["values"]
            assert got == values[max(math.ceil(round(q * len(values), 7)), 1) - 1]  # Spark's rule: item ⌈q·n⌉


def test_local_engine_and_spark_plans_give_one_answer(spark, tmp_path):
    """The sample-like CDRs through explode, vector, the Python plan and --engine local: the same windows, with
    the written HLL sketches' estimates equal (their bytes hold the order the values came in)."""
    from spanning.app.jobspec import EventFields, InputFiles, OutputOptions, RunConfig, SparkOptions, WindowQuery
    from spanning.app.local_run import run_local
    from spark_jobs.command import run_spark

    calls = pd.DataFrame({
        "cell": [f"c{i % 3}" for i in range(900)],
        "start": [(i * 37) % 4000 for i in range(900)], "end": [(i * 37) % 4000 + (i * 13) % 700 for i in range(900)],
        "caller": [f"sub-{(i * 7919) % 400}" for i in range(900)],  # text: hashed as Spark hashes strings
        "duration": [None if i % 17 == 0 else (i * 13) % 700 for i in range(900)],
    })  # fmt: skip
    path = tmp_path / "calls.parquet"
    calls.astype({"duration": "Int64"}).to_parquet(path, index=False)
    aggs = ["count", "count_distinct:caller", "approx_count_distinct:caller", "percentile:duration:0.95",
            "approx_percentile:duration:0.95", "hll_sketch:caller"]  # fmt: skip
    outputs = {}
    for engine, plan in [("local", "auto"), ("spark", "explode"), ("spark", "python"), ("spark", "vector")]:
        cfg = RunConfig(InputFiles([str(path)]), EventFields("start", "end", keys=["cell"]),
                        WindowQuery(900, 300, 7200, aggs),
                        output=OutputOptions(str(tmp_path / f"out-{engine}-{plan}")), engine=engine,
                        spark=SparkOptions(plan=plan))  # fmt: skip
        (run_local if engine == "local" else run_spark)(cfg)
        frame = pd.read_parquet(tmp_path / f"out-{engine}-{plan}" / "windows").sort_values(["cell", "window_start"])
        sketches = frame.pop("hll_sketch_caller")
        frame["hll_estimate"] = [
            round(datasketches.hll_sketch.deserialize(order_free(bytes(s))).get_estimate()) for s in sketches
        ]
        outputs[(engine, plan)] = frame.reset_index(drop=True)
    reference = outputs[("local", "auto")]
    assert (reference["hll_estimate"] == reference["approx_count_distinct_caller"]).all()
    for frame in outputs.values():
        pd.testing.assert_frame_equal(frame, reference, check_dtype=False)


def test_the_sql_order_free_flag_equals_the_python_one(spark):
    """plans._order_free_hll (the JVM plans' estimate) flags an HLL-mode sketch as order_free does, and leaves
    a coupon-mode one alone; Spark's estimate of it is the registers' one, as the Python engines give."""
    from pyspark.sql import functions as F

    from spark_jobs.batch.plans import _order_free_hll

    frame = spark.createDataFrame([(g, v) for g in (0, 1) for v in range(5 if g == 0 else 5000)], "g int, v long")
    rows = frame.coalesce(1).groupBy("g").agg(F.hll_sketch_agg("v", 12).alias("s")).select(
        "g", "s", _order_free_hll(F.col("s")).alias("flagged"),
        F.hll_sketch_estimate(_order_free_hll(F.col("s"))).alias("estimate")).collect()  # fmt: skip
    for row in rows:
        assert bytes(row["flagged"]) == order_free(bytes(row["s"]))
        assert (bytes(row["flagged"]) == bytes(row["s"])) == (row["g"] == 0)  # coupon mode: untouched
        registers = datasketches.hll_sketch.deserialize(order_free(bytes(row["s"]))).get_estimate()
        assert row["estimate"] == math.floor(registers + 0.5)
