"""``spanning tune-height``: predicted (and optionally measured) cost of each SE-ML-Slicing height.

>>> from spanning.planning.height import synthetic_events
>>> starts, ends = synthetic_events(20_000, mu=5000, sigma=10)
>>> rows, best = height_table(WindowSpec(10_000, 200, ttp=10_000), starts, ends, max_height=12)
>>> 5 <= best <= 10, rows[0]["predicted_cost"] > 3 * rows[best - 1]["predicted_cost"]  # §6.2: d ≈ 7 at μ = 5000
(True, True)
"""

from __future__ import annotations

import time

import numpy as np

from spanning.engines.engine import Engine
from spanning.kernels.windows import WindowSpec
from spanning.planning.height import predict_costs

__all__ = ["height_table", "measure_throughput", "format_table"]


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
    rows = []
    for d, cost in costs.items():
        row = {"height": d, "predicted_cost": cost, "predicted_speedup": costs[1] / cost}
        if measure:
            row["measured_events_per_s"] = measure_throughput(
                spec, starts, ends, d, aggregates or {"n": "count", "s": "sum:value", "m": "max:value"}
            )
        rows.append(row)
    best = min(costs, key=lambda d: (costs[d], d))
    return rows, best


def format_table(rows: list[dict], best: int) -> str:
    measured = "measured_events_per_s" in rows[0]
    lines = ["height  predicted cost/event  predicted speed vs d=1" + ("  measured events/s" if measured else "")]
    for r in rows:
        line = f"{r['height']:>6}  {r['predicted_cost']:>20.2f}  {r['predicted_speedup']:>22.2f}x"
        if measured:
            line += f"  {r['measured_events_per_s']:>18,.0f}"
        lines.append(line + ("   <- recommended" if r["height"] == best else ""))
    lines.append(f"recommended height: {best}")
    if measured:
        top = max(rows, key=lambda r: r["measured_events_per_s"])
        mine = next(r for r in rows if r["height"] == best)
        ratio = mine["measured_events_per_s"] / top["measured_events_per_s"]
        lines.append(f"best measured: {top['height']} (the recommended height reaches {ratio:.0%} of it)")
    return "\n".join(lines)
