"""``spanning tune-height``: predicted (and optionally measured) cost of each SE-ML-Slicing height.

>>> from spanning.planning.height import synthetic_events
>>> starts, ends = synthetic_events(20_000, mu=5000, sigma=10)
>>> rows, best = height_table(WindowSpec(10_000, 200, ttp=10_000), starts, ends, max_height=12)
>>> 5 <= best <= 10, rows[0]["predicted_cost"] > 3 * rows[best - 1]["predicted_cost"]  # §6.2: d ≈ 7 at μ = 5000
(True, True)
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from spanning.engines.engine import Engine
from spanning.kernels.windows import WindowSpec
from spanning.planning.height import predict_costs

__all__ = ["MEASURED_MARGIN", "format_table", "height_table", "measure_throughput", "recommended"]


def measure_throughput(spec: WindowSpec, starts: np.ndarray, ends: np.ndarray, height: int, aggregates: dict) -> float:
    """Events per second of the per-event se-ml-slicing Engine on these events, in end order."""
    order = np.argsort(ends, kind="stable")
    pairs = list(zip(starts[order].tolist(), ends[order].tolist(), strict=True))
    row = {"value": 1}
    engine = Engine(spec, aggregates, technique="se-ml-slicing", height=height)
    insert = engine.insert
    began = time.perf_counter()
    for start, end in pairs:
        insert(start, end, row)
    engine.flush()
    return len(pairs) / max(time.perf_counter() - began, 1e-9)


def height_table(
    spec: WindowSpec,
    starts: np.ndarray,
    ends: np.ndarray,
    max_height: int = 20,
    measure: bool = False,
    aggregates: dict | None = None,
) -> tuple[list[dict], int]:
    """One row per height: predicted cost per event, speed relative to d = 1, measured events/s."""
    costs = predict_costs(spec, starts, ends, range(1, max_height + 1))
    rows = [{"height": d, "predicted_cost": cost, "predicted_speedup": costs[1] / cost} for d, cost in costs.items()]
    if measure:  # heights interleaved, ROUNDS times, the median kept: one timing each varies by 20-30% here
        aggregates = aggregates or {"n": "count", "s": "sum:value", "m": "max:value"}
        speeds = {d: [] for d in costs}
        for _ in range(ROUNDS):
            for d in costs:
                speeds[d].append(measure_throughput(spec, starts, ends, d, aggregates))
        for row in rows:
            row["measured_events_per_s"] = statistics.median(speeds[row["height"]])
    best = min(costs, key=lambda d: (costs[d], d))
    return rows, best


ROUNDS = 3  # --measure: timings per height

#: how much faster (measured) another height must be before --measure recommends it over the model's pick:
#: each height is timed once on the sample, and runs of the same height differ by about this much
MEASURED_MARGIN = 1.10


def recommended(rows: list[dict], best: int) -> int:
    """The model's pick, or with measurements the fastest measured height when it beats the pick by the margin."""
    if "measured_events_per_s" not in rows[0]:
        return best
    top = max(rows, key=lambda r: r["measured_events_per_s"])
    mine = next(r for r in rows if r["height"] == best)
    return top["height"] if top["measured_events_per_s"] > MEASURED_MARGIN * mine["measured_events_per_s"] else best


def format_table(rows: list[dict], best: int) -> str:
    measured = "measured_events_per_s" in rows[0]
    pick = recommended(rows, best)
    lines = ["height  predicted cost/event  predicted speed vs d=1" + ("  measured events/s" if measured else "")]
    for r in rows:
        line = f"{r['height']:>6}  {r['predicted_cost']:>20.2f}  {r['predicted_speedup']:>22.2f}x"
        if measured:
            line += f"  {r['measured_events_per_s']:>18,.0f}"
        lines.append(line + ("   <- recommended" if r["height"] == pick else ""))
    if not measured:
        lines.append(f"recommended height: {best}")
        return "\n".join(lines)
    top = max(rows, key=lambda r: r["measured_events_per_s"])
    model = next(r for r in rows if r["height"] == best)
    ratio = model["measured_events_per_s"] / top["measured_events_per_s"]
    if pick == best:
        lines.append(f"recommended height: {best} (the model's pick; measured, it reaches {ratio:.0%} of the fastest"
                     f" height, {top['height']}, within the {MEASURED_MARGIN - 1:.0%} that timings vary by)")
    else:
        lines.append(f"recommended height: {pick} (measured fastest; the model's pick, {best}, reached {ratio:.0%} of"
                     " it)")
        lines.append("why they differ: the model (Suzanne et al., Table 4) prices an insert's slice update and a"
                     " release's level step alike; in this Python engine " + (
                         "a level step costs less than an insert's update, so a taller stack of levels pays off sooner"
                         if pick > best else
                         "a level step costs more than an insert's update, so fewer levels pay off"))  # fmt: skip
    return "\n".join(lines)
