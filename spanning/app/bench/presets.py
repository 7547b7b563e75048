"""The presets of ``spanning bench``: each returns measurement records and, per case, whether all runs agreed.

A record is a flat dict (preset, case parameters, technique, events/s, seconds median/min/max, CPU
seconds, peak RSS MB, release latency p50/p99/max µs). ``quick`` shrinks every preset so that all of
them finish in under a minute on two cores (14-36 s measured, Spark start included).
"""

from __future__ import annotations

import operator
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

import spanning
from spanning.app.bench.measure import repeated
from spanning.app.cdr import generate_cdr
from spanning.app.jobspec import UsageError
from spanning.app.plugins import load_engine
from spanning.planning.height import recommend_height, synthetic_events

AGGREGATES = {"n": "count", "s": "sum:v", "m": "max:v"}
BASELINES = ["aggregate-buckets", "tuple-buckets", "sweeping"]


@dataclass
class Setting:
    quick: bool = False
    repeat: int = 3
    progress: Callable[[str], None] = lambda message: None


def stream(n: int, mu: float, sigma: float = 10, seed: int = 0) -> list:
    """The paper's synthetic stream: one event per chronon, lengths ~ normal(μ, σ), with a value."""
    starts, ends = synthetic_events(n, mu, sigma, seed)
    values = np.random.default_rng(seed).integers(0, 10**6, n)
    return [(int(s), int(e), {"v": int(v)}) for s, e, v in zip(starts, ends, values, strict=True)]


def engine_run(spec: spanning.WindowSpec, technique: str, height: int, events: list) -> dict:
    """Feed the events to an Engine; the windows, and the latency of each release (µs per window)."""
    eng = spanning.Engine(spec, AGGREGATES, technique=technique, height=height)
    insert, clock = eng.insert, time.perf_counter_ns
    windows, latencies = [], []
    for start, end, row in events:
        t = clock()
        released = insert(start, end, row)
        if released:
            latencies.append((clock() - t) / 1e3 / len(released))
            windows += released
    windows += eng.flush()
    return {"windows": [(w.start, tuple(w.values.values())) for w in windows], "latencies_us": latencies}


def describe(case: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in case.items() if k != "preset")


def compare(case: dict, spec: spanning.WindowSpec, events: list, runs: list[tuple[str, int, str]], setting: Setting):
    """Run every (technique, height, variant) on the same events; records, and whether all gave the same windows."""
    records, reference, agreed = [], None, True
    for technique, height, variant in runs:
        setting.progress(f"{case['preset']} {describe(case)} {technique} {variant}")
        results, summary = repeated(lambda t=technique, h=height: engine_run(spec, t, h, events), setting.repeat)
        windows = results[0].result["windows"]
        reference = reference if reference is not None else windows
        agreed &= windows == reference
        records.append({**case, "technique": technique, "variant": variant, "height": height, "events": len(events),
                        "events_per_s": len(events) / summary["seconds_median"], **summary})  # fmt: skip
    return records, agreed


def technique_runs(spec, events, heights: list[int]) -> list[tuple[str, int, str]]:
    """se-slicing, se-ml-slicing at the recommended height ("auto") and at fixed heights, the baselines."""
    auto = recommend_height(spec, np.array([e[0] for e in events]), np.array([e[1] for e in events]))
    ml = [("se-ml-slicing", auto, "auto")] + [("se-ml-slicing", d, f"d={d}") for d in heights]
    return [("se-slicing", 1, ""), *ml, *[(b, 1, "") for b in BASELINES]]


def event_size(setting: Setting) -> tuple[list, dict]:
    """Figures 10-11: throughput against the mean event size μ, heights included."""
    n = 3000 if setting.quick else 40_000
    mus = [16, 500] if setting.quick else [16, 100, 500, 1000, 2000, 5000]
    windows = [(1000, 200)] if setting.quick else [(1000, 200), (5000, 1000)]
    records, agreement = [], {}
    for omega, beta in windows:
        for mu in mus:
            spec = spanning.WindowSpec(omega, beta, ttp=15000)  # δ of Figures 10-11
            events = stream(n, mu)
            case = {"preset": "event-size", "range": omega, "slide": beta, "mu": mu}
            heights = [] if setting.quick else [2, 4, 7]
            rec, ok = compare(case, spec, events, technique_runs(spec, events, heights), setting)
            records += rec
            agreement[f"ω={omega} β={beta} μ={mu}"] = ok
    return records, agreement


def range_sweep(setting: Setting) -> tuple[list, dict]:
    """Figures 12-13: throughput against the range ω, with β a fraction of ω (overlap ω/β), μ = 500."""
    n = 3000 if setting.quick else 40_000
    omegas = [1000] if setting.quick else [500, 1000, 2000, 5000, 10000]
    fractions = [5] if setting.quick else [2, 5, 50]
    events = stream(n, 500)
    records, agreement = [], {}
    for k in fractions:
        for omega in omegas:
            spec = spanning.WindowSpec(omega, omega // k, ttp=15000)
            case = {"preset": "range", "range": omega, "slide": omega // k, "fraction": f"1/{k}"}
            rec, ok = compare(case, spec, events, technique_runs(spec, events, []), setting)
            records += rec
            agreement[f"ω={omega} β=ω/{k}"] = ok
    return records, agreement


def cdr_events(rows: int, seed: int = 3) -> pd.DataFrame:
    """Generated CDRs as epoch-second events in the job's arrival order (by cell, end)."""
    calls = generate_cdr(rows, seed=seed, cells=50, days=1)
    calls["start"] = pd.to_datetime(calls["start"]).astype("int64") // 10**9
    calls["end"] = pd.to_datetime(calls["end"]).astype("int64") // 10**9
    calls["v"] = calls.pop("bytes").astype("int64")
    return calls.sort_values(["cell", "end", "call_id"], kind="stable").reset_index(drop=True)


def cdr(setting: Setting) -> tuple[list, dict]:
    """Figure 14: a real-data-like run: generated CDRs per cell, ω/β = 5, δ = 2 h, over the range."""
    calls = cdr_events(4000 if setting.quick else 100_000)
    records, agreement = [], {}
    for omega in [900] if setting.quick else [300, 900, 3600]:
        rec, ok = cdr_range(calls, spanning.WindowSpec(omega, omega // 5, ttp=7200), setting)
        records += rec
        agreement[f"{len(calls)} CDRs ω={omega}"] = ok
    return records, agreement


def cdr_range(calls: pd.DataFrame, spec: spanning.WindowSpec, setting: Setting) -> tuple[list, bool]:
    per_cell = [
        (cell, list(zip(g["start"].tolist(), g["end"].tolist(), ({"v": v} for v in g["v"].tolist()), strict=True)))
        for cell, g in calls.groupby("cell", sort=False)
    ]
    records, reference, agreed = [], None, True
    keys = pd.factorize(calls["cell"])[0]
    auto = recommend_height(spec, calls["start"].to_numpy(), calls["end"].to_numpy(), groups=keys)
    for technique, height, variant in [("se-slicing", 1, ""), ("se-ml-slicing", auto, "auto"),
                                       *[(b, 1, "") for b in BASELINES]]:  # fmt: skip
        setting.progress(f"cdr ω={spec.range} {technique} {variant}")

        def run(t=technique, h=height):
            out, lat = [], []
            for cell, events in per_cell:
                r = engine_run(spec, t, h, events)
                out.append((cell, r["windows"]))
                lat += r["latencies_us"]
            return {"windows": out, "latencies_us": lat}

        results, summary = repeated(run, setting.repeat)
        reference = reference if reference is not None else results[0].result["windows"]
        agreed &= results[0].result["windows"] == reference
        speed = len(calls) / summary["seconds_median"]
        records.append({"preset": "cdr", "rows": len(calls), "range": spec.range, "slide": spec.slide,
                        "technique": technique, "variant": variant, "height": height, "events": len(calls),
                        "events_per_s": speed, **summary})  # fmt: skip
    return records, agreed


def best_map(setting: Setting) -> tuple[list, dict]:
    """Figure 15: the fastest technique over event size and window parameters (ω = 2000, β = ω/k)."""
    n = 2000 if setting.quick else 20_000
    mus = [16, 500] if setting.quick else [16, 100, 500, 2000]
    ks = [2, 10] if setting.quick else [2, 5, 10, 25]
    records, agreement = [], {}
    for mu in mus:
        events = stream(n, mu)
        for k in ks:
            spec = spanning.WindowSpec(2000, 2000 // k, ttp=int(mu) + 50)
            case = {"preset": "best-map", "mu": mu, "range": 2000, "slide": 2000 // k}
            rec, ok = compare(case, spec, events, technique_runs(spec, events, []), spanning_setting(setting))
            records += rec
            agreement[f"μ={mu} ω/β={k}"] = ok
    return records, agreement


def spanning_setting(setting: Setting) -> Setting:
    return Setting(setting.quick, max(1, setting.repeat - 1), setting.progress)


SWAG_OPS = {"sum": (operator.add, 0, operator.sub), "max": (max, float("-inf"), None)}


def swag_slides(name: str, op: str, n: int, slides: int, seed: int = 7):
    """Fill a SWAG with n values, then time ``slides`` evict+insert+query steps; (latencies ns, answers)."""
    from spanning.swag import ALGORITHMS, NEEDS_INVERSE

    combine, identity, inverse = SWAG_OPS[op]
    cls = ALGORITHMS[name]
    if name in NEEDS_INVERSE or (name == "slickdeque" and inverse is not None):
        if inverse is None:
            return None
        swag = cls(combine, identity, inverse=inverse)
    else:
        swag = cls(combine, identity)
    rng = random.Random(seed)
    values = [rng.randint(0, 1_000_000) for _ in range(n + slides)]
    for v in values[:n]:
        swag.insert(v)
    evict, insert, query, clock = swag.evict, swag.insert, swag.query, time.perf_counter_ns
    latencies, answers = np.empty(slides, dtype=np.int64), [None] * slides
    for i in range(slides):
        t = clock()
        evict()
        insert(values[n + i])
        answers[i] = query()
        latencies[i] = clock() - t
    getattr(swag, "close", lambda: None)()
    return latencies, answers


def swag(setting: Setting) -> tuple[list, dict]:
    """Throughput and latency of every SWAG over window sizes, sum and max.

    The SWAGs are those of Shein et al., Tangwongsan et al. and Zhang et al. (docs/REFERENCES.md).
    """
    from spanning.swag import ALGORITHMS

    exponents = [4, 8] if setting.quick else [4, 6, 8, 10, 12, 14, 16]
    slides = 2000 if setting.quick else 20_000
    records, agreement = [], {}
    for op in SWAG_OPS:
        for k in exponents:
            reference, agreed = None, True
            for name in sorted(ALGORITHMS):
                if name == "recalc" and k > 10:
                    continue
                setting.progress(f"swag {op} n=2^{k} {name}")
                began = time.perf_counter()
                out = swag_slides(name, op, 2**k, slides)
                if out is None:
                    continue
                elapsed = time.perf_counter() - began
                latencies, answers = out
                reference = reference if reference is not None else answers
                agreed &= answers == reference
                records.append({"preset": "swag", "op": op, "window": 2**k, "technique": name, "events": slides,
                                "events_per_s": slides / elapsed, "latency_p50_us": np.percentile(latencies, 50) / 1e3,
                                "latency_p99_us": np.percentile(latencies, 99) / 1e3,
                                "latency_max_us": latencies.max() / 1e3})  # fmt: skip
            agreement[f"{op} n=2^{k}"] = agreed
    return records, agreement


def peers(setting: Setting) -> tuple[list, dict]:
    """The batch path against DuckDB, and the Spark job against Spark SQL, on the same generated CDRs."""
    import pyarrow as pa

    rows = 20_000 if setting.quick else 1_000_000
    built = cdr_events(rows, seed=11)  # strings made row by row: one Python object per row
    as_read = pa.Table.from_pandas(built).to_pandas()  # as pandas reads a file: one object per distinct string
    longest = int((built["end"] - built["start"]).max()) + 1  # δ beyond every call: the queries must agree
    records, agreement = [], {}
    for slide in (60, 300):
        for frame_name, calls in (("", built), (" (frame as read from a file)", as_read)):
            setting.progress(f"peers batch vs DuckDB β={slide}{frame_name}")
            timed, agreed = _batch_vs_duckdb(calls, slide, longest, setting, frame_name)
            records += timed
            agreement[f"batch == DuckDB β={slide}{frame_name}"] = agreed
    try:
        spark_peers = load_engine("spark").peers  # spark_jobs.peers, through the engine's entry point
    except (ImportError, UsageError):  # pyspark is an extra
        setting.progress("peers: pyspark not installed, Spark comparison skipped")
        return records, agreement
    shapes = spark_peers.SHAPES[1:2] if setting.quick else spark_peers.SHAPES
    agg_sets = {"count+sum+max": spark_peers.AGG_SETS["count+sum+max"]} if setting.quick else None
    spark_records, spark_agreement = spark_peers.spark_vs_sql(rows, setting.repeat, setting.progress,
                                                              shapes=shapes, agg_sets=agg_sets)  # fmt: skip
    return records + spark_records, {**agreement, **spark_agreement}


def _batch_vs_duckdb(calls: pd.DataFrame, slide: int, longest: int, setting: Setting, label: str) -> tuple[list, bool]:
    """``spanning.aggregate`` and DuckDB's explode + group-by on one frame, ω = 15 min: records, agreement."""
    import duckdb

    rows = len(calls)
    aggs = {"count": "count", "sum_v": "sum:v", "max_duration": "max:duration"}

    def batch():
        out = spanning.aggregate(calls, 900, slide, longest, aggregates=aggs, key="cell", series_start="earliest")
        out.attrs.clear()
        out = out[out["count"] > 0][["cell", "window_start", "count", "sum_v", "max_duration"]]
        return {"windows": out.astype({"sum_v": "int64", "max_duration": "int64"})}

    con = duckdb.connect()
    con.register("calls", calls[["cell", "start", "end", "v", "duration"]])
    sql = f"""
        SELECT cell, k * {slide} AS window_start, count(*) AS "count", sum(v) AS sum_v,
               max(duration) AS max_duration
        FROM (SELECT cell, v, duration,
                     unnest(generate_series(CAST(floor((start - 900) / {slide}) + 1 AS BIGINT),
                                            CAST(floor((greatest("end", start + 1) - 1) / {slide}) AS BIGINT))) AS k
              FROM calls)
        GROUP BY cell, k
    """  # a record with end = start is the point event [start, start + 1)

    def duck():
        return {"windows": con.execute(sql).df()}

    records, windows = [], {}
    for name, action in (("engine batch path", batch), ("DuckDB explode+group-by", duck)):
        results, summary = repeated(action, setting.repeat)
        records.append({"preset": "peers", "slide": slide, "rows": rows, "technique": name + label, "events": rows,
                        "events_per_s": rows / summary["seconds_median"], **summary})  # fmt: skip
        windows[name] = results[0].result["windows"]
    order = ["cell", "window_start"]
    mine = windows["engine batch path"].sort_values(order).reset_index(drop=True)
    theirs = windows["DuckDB explode+group-by"].sort_values(order).reset_index(drop=True).astype(mine.dtypes.to_dict())
    return records, bool(mine.equals(theirs))


PRESETS: dict[str, Callable[[Setting], tuple[list, dict]]] = {
    "event-size": event_size,
    "range": range_sweep,
    "cdr": cdr,
    "best-map": best_map,
    "swag": swag,
    "peers": peers,
}
