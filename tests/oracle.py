"""Brute-force oracle: evaluates the definitions of docs/SEMANTICS.md directly, window by window, event by event.

It shares no code with the package. Each key is its own stream; for every window of the series it
collects the events that overlap it (ℓ(e) < u(w) and u(e) > ℓ(w)) and arrived while it was open
(clock at arrival ≤ u(w) + δ), then evaluates each aggregate from its SQL definition.
"""

from __future__ import annotations

import math
import statistics


def is_null(v):
    return v is None or (isinstance(v, float) and math.isnan(v))


def evaluate(kind: str, args: list[str], members: list[tuple[int, dict]], window=None, spans=None):
    """One aggregate over the window's members, given as (arrival number, row); ``window`` is its [start, end)
    and ``spans`` each member's [start, end) by arrival number (for the time inside the window)."""
    if kind in ("occupancy", "erlang", "peak_concurrent"):  # chronon by chronon: the members active at t
        ws, we = window
        active = [sum(1 for seq, _ in members if spans[seq][0] <= t < spans[seq][1]) for t in range(ws, we)]
        if kind == "peak_concurrent":
            return max(active, default=0)
        return sum(active) if kind == "occupancy" else sum(active) / (we - ws)
    if kind == "prorated_sum":  # each member's value times the share of its chronons inside the window
        ws, we = window
        shares = [row[args[0]] * sum(1 for t in range(ws, we) if spans[seq][0] <= t < spans[seq][1])
                  / (spans[seq][1] - spans[seq][0]) for seq, row in members if not is_null(row[args[0]])]  # fmt: skip
        return math.fsum(shares) if shares else None
    if kind == "count":
        if not args:
            return len(members)
        return sum(1 for _, row in members if not is_null(row[args[0]]))
    if kind in ("count_distinct", "approx_count_distinct") and all(is_null(row[args[0]]) for _, row in members):
        return 0  # a count: 0, not null, over no value
    col = args[0]
    present = [(seq, row) for seq, row in members if not is_null(row[col])]
    values = [row[col] for _, row in present]
    if not values:
        return None
    if kind in ("count_distinct", "approx_count_distinct"):  # an HLL of this few values is exact (coupon mode)
        return len(set(values))
    if kind == "approx_percentile":  # a KLL of at most K values is exact: the item of weight ⌈q·n⌉ (Spark's)
        ordered, q = sorted(values), float(args[1])
        return float(ordered[max(math.ceil(round(q * len(ordered), 7)), 1) - 1])
    if kind == "percentile":  # Spark's percentile: position q·(n - 1), linear between its neighbours
        ordered, q = sorted(values), float(args[1])
        position = q * (len(ordered) - 1)
        below, above = int(position // 1), -int(-position // 1)
        if below == above:
            return float(ordered[below])
        return (above - position) * ordered[below] + (position - below) * ordered[above]
    if kind == "sum":
        return sum(values)
    if kind == "mean":
        return sum(values) / len(values)
    if kind == "min":
        return min(values)
    if kind == "max":
        return max(values)
    if kind == "stddev":
        return statistics.stdev(values) if len(values) > 1 else None
    if kind == "stddev_pop":
        return statistics.pstdev(values)
    if kind in ("argmax", "argmin"):
        best = max(values) if kind == "argmax" else min(values)
        seq, row = min((seq, row) for seq, row in present if row[col] == best)  # first arrival wins
        result = row[args[1]] if len(args) > 1 else seq
        return None if is_null(result) else result
    if kind in ("maxcount", "mincount"):
        best = max(values) if kind == "maxcount" else min(values)
        return sum(1 for v in values if v == best)
    raise ValueError(kind)


def oracle(events, range_, slide, ttp, offset, aggregates, series_start=None):
    """``events``: list of (key, start, end, row) in arrival order; the arrival number is the index.

    Returns ({key: [(window_start, window_end, {name: value})]}, {arrival number: windows_missed}).
    """

    def bounds(k):
        return k * slide + offset, k * slide + offset + range_

    streams: dict = {}
    for seq, (key, lo, up, row) in enumerate(events):
        streams.setdefault(key, []).append((seq, lo, up if up > lo else lo + 1, row))
    windows, late = {}, {}
    for key, stream in streams.items():
        first_start = stream[0][1] if series_start is None else series_start
        k0 = (first_start - offset - range_) // slide - 2
        while bounds(k0)[1] <= first_start:  # first window whose end is after the series start
            k0 += 1
        clocks, clock = [], None
        for _, _, up, _ in stream:
            clock = up if clock is None else max(clock, up)
            clocks.append(clock)
        result = []
        k = k0
        while bounds(k)[0] < clock:  # every window that starts before the final clock
            ws, we = bounds(k)
            members = [
                (seq, row)
                for (seq, lo, up, row), arrived_at in zip(stream, clocks, strict=True)
                if lo < we and up > ws and arrived_at <= we + ttp
            ]
            spans = {seq: (lo, up) for seq, lo, up, _ in stream}
            values = {
                name: evaluate(spec.split(":")[0], spec.split(":")[1:], members, (ws, we), spans)
                for name, spec in aggregates.items()
            }
            result.append((ws, we, values))
            k += 1
        windows[key] = result
        for (seq, lo, up, _), arrived_at in zip(stream, clocks, strict=True):
            k = (lo - offset - range_) // slide - 2
            missed = 0
            while bounds(k)[0] < up:
                ws, we = bounds(k)
                if lo < we and up > ws and (k < k0 or we + ttp < arrived_at):
                    missed += 1
                k += 1
            if missed:
                late[seq] = missed
    return windows, late
