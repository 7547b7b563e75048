"""Per-event throughput of SE-ML-Slicing by height d (issue 4's benchmark, Suzanne et al., §6.2-6.3).

One event per chronon arriving at its end, lengths ~ normal(μ, σ = 10), ω = 10000, β = 200 (ω = 50β),
count + sum + max through ``Engine``. Also prints the height ``tune-height`` predicts.

    python bench/bench_heights.py                       # μ = 500 and 5000, d in 1 2 4 7 10 15 20
    python bench/bench_heights.py --events 50000 --mu 5000
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import spanning
from spanning.planning.height import predict_costs, recommend_height

AGGREGATES = {"n": "count", "bytes": "sum:bytes", "longest": "max:duration"}


def stream(n: int, mu: float, sigma: float, seed: int = 3):
    rng = np.random.default_rng(seed)
    lengths = np.maximum(np.rint(rng.normal(mu, sigma, n)), 1).astype(np.int64)
    ends = np.arange(1, n + 1, dtype=np.int64) + int(mu) * 4
    rows = [{"bytes": int(b), "duration": int(d)} for b, d in zip(rng.integers(0, 10**6, n), lengths, strict=True)]
    return (ends - lengths).tolist(), ends.tolist(), rows, lengths


def throughput(spec, height, starts, ends, rows, repeat) -> tuple[float, list]:
    best, result = float("inf"), None
    for _ in range(repeat):
        eng = spanning.Engine(spec, AGGREGATES, technique="se-ml-slicing", height=height)
        insert, out = eng.insert, []
        began = time.perf_counter()
        for s, e, r in zip(starts, ends, rows, strict=True):
            out += insert(s, e, r)
        out += eng.flush()
        best = min(best, time.perf_counter() - began)
        result = out
    return len(starts) / best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--mu", type=float, nargs="+", default=[500, 5000])
    parser.add_argument("--heights", type=int, nargs="+", default=[1, 2, 4, 7, 10, 15, 20])
    parser.add_argument("--range", type=int, default=10_000)
    parser.add_argument("--slide", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"{args.events:,} events per run, ω={args.range} β={args.slide}, best of {args.repeat};"
          f" {platform.machine()}, Python {platform.python_version()}")  # fmt: skip
    for mu in args.mu:
        spec = spanning.WindowSpec(args.range, args.slide, ttp=int(mu * 2))
        starts, ends, rows, lengths = stream(args.events, mu, 10)
        chosen = recommend_height(spec, np.array(starts), np.array(ends))
        heights = sorted(set(args.heights) | {chosen})
        measured, reference = {}, None
        for d in heights:
            measured[d], out = throughput(spec, d, starts, ends, rows, args.repeat)
            reference = reference or out
            assert out == reference, f"height {d} disagrees with height {heights[0]}"
        predicted = predict_costs(spec, np.array(starts), np.array(ends), heights=heights)
        best = max(measured, key=measured.get)
        print(f"μ={mu:g}: " + "  ".join(f"d={d}: {measured[d]:,.0f}/s" for d in heights))
        print(
            f"   best d={best} is {measured[best] / measured[1]:.2f}x d=1; tune-height recommends d={chosen}"
            + (f", measured {measured[chosen] / measured[best]:.1%} of the best" if chosen in measured else "")
        )
        print("   predicted cost per event: " + "  ".join(f"d={d}: {predicted[d]:.2f}" for d in heights))


if __name__ == "__main__":
    main()
