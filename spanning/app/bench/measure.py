"""Measuring one run: wall time, CPU time, peak memory (psutil, as in Suzanne et al., §6.1) and latency."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil


@dataclass
class Run:
    """One measured execution."""

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float  # the process's resident memory at its highest during the run
    rss_growth_mb: float  # that peak above the resident memory when the run began (what the run itself added)
    result: Any = None
    latencies_us: list[float] = field(default_factory=list)


def measure(action: Callable[[], Any]) -> Run:
    """Run ``action()`` once; sample the process's resident memory (RSS) every 5 ms for its peak, and the peak's
    growth over the level the run began at."""
    process = psutil.Process()
    base = process.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu, wall = time.process_time(), time.perf_counter()
    result = action()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done.set()
    sampler.join()
    peak[0] = max(peak[0], process.memory_info().rss)
    latencies = result.pop("latencies_us", []) if isinstance(result, dict) else []
    return Run(wall, cpu, peak[0] / 2**20, (peak[0] - base) / 2**20, result, latencies)


def repeated(action: Callable[[], Any], repeat: int) -> tuple[list[Run], dict]:
    """``repeat`` runs, and their median and spread (min-max of wall time) as a summary."""
    runs = [measure(action) for _ in range(repeat)]
    walls = [r.seconds for r in runs]
    latencies = sorted(x for r in runs for x in r.latencies_us)

    def pct(p: float) -> float:
        return latencies[min(int(p / 100 * len(latencies)), len(latencies) - 1)] if latencies else float("nan")

    return runs, {
        "seconds_median": statistics.median(walls),
        "seconds_min": min(walls),
        "seconds_max": max(walls),
        "cpu_seconds_median": statistics.median(r.cpu_seconds for r in runs),
        "peak_rss_mb_max": max(r.peak_rss_mb for r in runs),
        "rss_growth_mb_max": max(r.rss_growth_mb for r in runs),
        "latency_p50_us": pct(50),
        "latency_p99_us": pct(99),
        "latency_max_us": latencies[-1] if latencies else float("nan"),
    }
