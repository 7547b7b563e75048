"""Throughput and latency of every FIFO SWAG (issue 6's benchmark; Shein et al., Tangwongsan et al., Zhang et al.).

For each algorithm, aggregation (sum, max) and window size n: fill the window with n values, then run
``--rounds`` slides (evict + insert + query), timing each slide. Reports slides/s and the p50 / p99 /
max latency of one slide in µs. Recalc is O(n) per query and is skipped above ``--recalc-max``.

    python bench/bench_swag.py                          # n = 2^4, 2^6, ..., 2^16; 20,000 slides each
    python bench/bench_swag.py --sizes 4 8 12 --rounds 5000
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from spanning.app.bench.presets import swag_slides
from spanning.swag import ALGORITHMS


def measure(name: str, op: str, n: int, rounds: int) -> tuple[float, np.ndarray] | None:
    began = time.perf_counter()
    out = swag_slides(name, op, n, rounds)
    if out is None:
        return None
    return rounds / (time.perf_counter() - began), out[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 6, 8, 10, 12, 14, 16], help="log2 of n")
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--recalc-max", type=int, default=10, help="largest log2 n for recalc")
    parser.add_argument("--ops", nargs="+", default=["sum", "max"])
    args = parser.parse_args()
    print(f"{args.rounds:,} slides per cell; {platform.machine()}, Python {platform.python_version()}")
    for op in args.ops:
        print(f"\n### {op}: slides/s (p50 / p99 / max latency in µs)\n")
        sizes = [2**k for k in args.sizes]
        print("| algorithm | " + " | ".join(f"n=2^{k}" for k in args.sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for name in sorted(ALGORITHMS):
            cells = []
            for k, n in zip(args.sizes, sizes, strict=True):
                if name == "recalc" and k > args.recalc_max:
                    cells.append("skipped (O(n))")
                    continue
                result = measure(name, op, n, args.rounds)
                if result is None:
                    cells.append("n/a")
                    continue
                speed, lat = result
                p50, p99, worst = (np.percentile(lat, 50) / 1e3, np.percentile(lat, 99) / 1e3, lat.max() / 1e3)
                cells.append(f"{speed / 1e3:,.0f}k ({p50:.1f} / {p99:.1f} / {worst:,.0f})")
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
