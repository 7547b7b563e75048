"""Throughput of the two entry points on the paper's synthetic stream (issue 2's benchmark).

One event per chronon, arriving at its end (event i is [i - L_i, i)), lengths L ~ normal(μ, σ) rounded
and at least 1; ω = 900, β = 300, δ = 15000; aggregates count + sum + max.

    python bench/bench_core.py                 # 1,000,000 events, best of 3 runs each
    python bench/bench_core.py --events 200000 --repeat 1

Checks that Engine and aggregate agree before reporting events/s.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import pandas as pd

import spanning

AGGREGATES = {"n": "count", "bytes": "sum:bytes", "longest": "max:duration"}


def synthetic_stream(n: int, mu: float, sigma: float, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = np.maximum(np.rint(rng.normal(mu, sigma, n)), 1).astype(np.int64)
    end = np.arange(1, n + 1, dtype=np.int64)
    return pd.DataFrame(
        {"start": end - lengths, "end": end, "bytes": rng.integers(0, 1_000_000, n), "duration": lengths}
    )


def run_engine(frame: pd.DataFrame, spec: spanning.WindowSpec) -> list:
    eng = spanning.Engine(spec, AGGREGATES)
    out = []
    rows = frame[["bytes", "duration"]].to_dict("records")
    starts, ends = frame["start"].tolist(), frame["end"].tolist()
    t = time.perf_counter()
    insert = eng.insert
    for s, e, row in zip(starts, ends, rows, strict=True):
        out += insert(s, e, row)
    out += eng.flush()
    return out, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--mu", type=float, default=16)
    parser.add_argument("--sigma", type=float, default=10)
    parser.add_argument("--range", type=int, default=900)
    parser.add_argument("--slide", type=int, default=300)
    parser.add_argument("--ttp", type=int, default=15000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spec = spanning.WindowSpec(args.range, args.slide, ttp=args.ttp)
    frame = synthetic_stream(args.events, args.mu, args.sigma)
    print(
        f"{args.events:,} events, μ={args.mu} σ={args.sigma}, ω={args.range} β={args.slide} δ={args.ttp};"
        f" {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )

    batch_times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        result = spanning.aggregate(frame, args.range, args.slide, args.ttp, aggregates=AGGREGATES)
        batch_times.append(time.perf_counter() - t)
    engine_times = []
    for _ in range(args.repeat):
        windows, elapsed = run_engine(frame, spec)
        engine_times.append(elapsed)

    expected = [(w.start, w.end, *w.values.values()) for w in windows]
    got = list(result[["window_start", "window_end", *AGGREGATES]].itertuples(index=False, name=None))
    assert got == expected, "Engine and aggregate disagree"
    print(f"windows: {len(result):,} (Engine == aggregate)")
    for name, times in (("aggregate (batch path)", batch_times), ("Engine (per-event path)", engine_times)):
        best = min(times)
        print(
            f"{name:24s} best {best:.3f} s  ->  {args.events / best:,.0f} events/s"
            f"   (runs: {', '.join(f'{t:.3f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
