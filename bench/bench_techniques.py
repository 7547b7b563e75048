"""Throughput of every technique on the paper's synthetic stream (issue 5's benchmark, Suzanne et al., Figure 10).

One event per chronon arriving at its end, lengths ~ normal(μ, σ = 10); ω ∈ {1000, 5000}, β = ω/5,
δ = μ + 50 (longer than the events); count + sum + max through the per-event ``Engine``. Checks that
every technique released the same windows.

    python bench/bench_techniques.py                  # 100,000 events per run, μ = 16 and 500
    python bench/bench_techniques.py --events 20000 --repeat 1
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import spanning
import spanning.planning.height
from spanning.planning.height import synthetic_events

AGGREGATES = {"n": "count", "bytes": "sum:bytes", "longest": "max:duration"}
TECHNIQUES = ["se-slicing", "se-ml-slicing", "aggregate-buckets", "tuple-buckets", "sweeping"]


def run(spec, technique, height, starts, ends, rows) -> tuple[float, list]:
    eng = spanning.Engine(spec, AGGREGATES, technique=technique, height=height)
    insert, out = eng.insert, []
    began = time.perf_counter()
    for s, e, r in zip(starts, ends, rows, strict=True):
        out += insert(s, e, r)
    out += eng.flush()
    return time.perf_counter() - began, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--mu", type=float, nargs="+", default=[16, 500])
    parser.add_argument("--ranges", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(
        f"{args.events:,} events per run, best of {args.repeat};"
        f" {platform.machine()}, Python {platform.python_version()}"
    )
    print(f"{'μ':>5} {'ω':>5} {'β':>5}  " + "  ".join(f"{t:>18}" for t in TECHNIQUES) + "   (events/s)")
    for mu in args.mu:
        starts, ends = synthetic_events(args.events, mu, 10, seed=5)
        rng = np.random.default_rng(5)
        rows = [{"bytes": int(b), "duration": int(e - s)}
                for b, s, e in zip(rng.integers(0, 10**6, len(starts)), starts, ends, strict=True)]  # fmt: skip
        starts, ends = starts.tolist(), ends.tolist()
        for omega in args.ranges:
            spec = spanning.WindowSpec(omega, omega // 5, ttp=int(mu) + 50)
            speeds, reference = [], None
            for technique in TECHNIQUES:
                height = 1
                if technique == "se-ml-slicing":
                    height = spanning.planning.height.recommend_height(spec, np.array(starts), np.array(ends))
                best = float("inf")
                for _ in range(args.repeat):
                    elapsed, out = run(spec, technique, height, starts, ends, rows)
                    best = min(best, elapsed)
                reference = reference or out
                assert out == reference, f"{technique} disagrees with {TECHNIQUES[0]}"
                speeds.append((technique, height, args.events / best))
            cells = "  ".join(f"{v:>14,.0f}" + (f" d={h:<2}" if t == "se-ml-slicing" else "    ") for t, h, v in speeds)
            print(f"{mu:>5g} {omega:>5} {omega // 5:>5}  {cells}")


if __name__ == "__main__":
    main()
