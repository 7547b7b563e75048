"""Multi-query sharing (issue 7's benchmark; Shein et al., §5; Shein and Chrysanthis).

One stream, N = 1, 10, 100 queries of mixed ranges and slides. For point events through a FIFO SWAG
(default FlatFIT) it runs three plans, each checked to give the same windows:

* no sharing: one Engine per query;
* max sharing: one MultiEngine (one slice sequence, one SWAG per aggregate, range queries);
* WeaveShare (Shein and Chrysanthis, §3.1.1): the optimizer's groups, one MultiEngine each;

and prints events/s measured and the plans' predicted cost (Ω, exact, from ``spanning.sharing``).
For spanning events it compares shared SE-Slicing slices against one Engine per query.

    python bench/bench_sharing.py                  # 20,000 events, N = 1 10 100
    python bench/bench_sharing.py --events 5000 --queries 1 10
"""

from __future__ import annotations

import argparse
import platform
import random
import time

import spanning
from spanning.engines.multi_window import MultiEngine
from spanning.sharing.weaveshare import max_sharing, no_sharing, plan_cost, weave_share

SLIDES = [2, 4, 5, 10, 20]
TECHNIQUE_OF = {"flatfit": "flatfit", "flatfat": "flatfat", "recalc": "panes"}


def queries(n: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        slide = rng.choice(SLIDES)
        query = (slide * rng.randint(1, 10) + rng.choice([0, 0, 1, 3]), slide)  # some with ω mod β ≠ 0
        if query not in out:
            out.append(query)
    return out


class _Single:
    """A plain Engine for a group of one query, with MultiEngine's (spec index, window) results."""

    def __init__(self, spec, aggregates, **kwargs):
        self.engine = spanning.Engine(spec, aggregates, **kwargs)

    def insert(self, start, end, row):
        return [(0, w) for w in self.engine.insert(start, end, row)]

    def flush(self):
        return [(0, w) for w in self.engine.flush()]


def run(groups: list[list[tuple[int, int]]], events, aggregates, ttp: int, repeat: int = 2, **kwargs):
    """Events/s (best of ``repeat``) of one MultiEngine per group (an Engine for one query), and the windows."""
    best, out = 0.0, {}
    for _ in range(repeat):
        engines = []
        for g in groups:
            specs = [spanning.WindowSpec(r, s, ttp) for r, s in g]
            eng = _Single(specs[0], aggregates, **kwargs) if len(g) == 1 else MultiEngine(specs, aggregates, **kwargs)
            engines.append((g, eng))
        out = {}
        began = time.perf_counter()
        for start, end, row in events:
            for group, eng in engines:
                for i, w in eng.insert(start, end, row):
                    out.setdefault(group[i], []).append((w.start, w.values))
        for group, eng in engines:
            for i, w in eng.flush():
                out.setdefault(group[i], []).append((w.start, w.values))
        best = max(best, len(events) / (time.perf_counter() - began))
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--swag", default="flatfit", choices=sorted(TECHNIQUE_OF))
    args = parser.parse_args()
    rng = random.Random(1)
    points = [(t, t, {"v": rng.randint(0, 10**6)}) for t in range(args.events)]
    spans = [(t - rng.randint(1, 30), t, {"v": rng.randint(0, 10**6)}) for t in range(30, args.events + 30)]
    print(f"{args.events:,} events, one per chronon; slides from {SLIDES}, ranges 1-10 slides (+0..3);"
          f" {platform.machine()}, Python {platform.python_version()}")  # fmt: skip
    technique = TECHNIQUE_OF[args.swag]
    run([[(10, 2)]], points[:2000], {"m": "max:v"}, 0, swag=args.swag)  # warm-up
    print(f"\npoint events, max through {args.swag} (Ω for {technique}, per chronon):")
    print("| N | no sharing | max sharing | WeaveShare (groups) | predicted Ω none / max / WeaveShare |")
    print("|---|---|---|---|---|")
    for n in args.queries:
        qs = queries(n, seed=n)
        plan = weave_share(qs, technique)
        plans = {"none": no_sharing(qs), "max": max_sharing(qs), "weave": [list(g) for g in plan.groups]}
        speed, results = {}, {}
        for name, groups in plans.items():
            speed[name], results[name] = run([list(g) for g in groups], points, {"m": "max:v"}, 0, swag=args.swag)
        assert results["none"] == results["max"] == results["weave"], "plans disagree"
        cost = {name: float(plan_cost(groups, technique)) for name, groups in plans.items()}
        print(f"| {n} | {speed['none']:,.0f}/s | {speed['max']:,.0f}/s | {speed['weave']:,.0f}/s ({len(plan.groups)}) |"
              f" {cost['none']:.2f} / {cost['max']:.2f} / {cost['weave']:.2f} |", flush=True)  # fmt: skip
    print("\nspanning events (1-30 chronons), count + sum + max, SE-Slicing:")
    print("| N | independent engines | shared slices | speed-up |")
    print("|---|---|---|---|")
    aggregates = {"n": "count", "s": "sum:v", "m": "max:v"}
    for n in args.queries:
        qs = queries(n, seed=n)
        alone, a = run([[q] for q in qs], spans, aggregates, 40)
        shared, b = run([qs], spans, aggregates, 40)
        assert a == b, "shared slices disagree with independent engines"
        print(f"| {n} | {alone:,.0f}/s | {shared:,.0f}/s | {shared / alone:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
