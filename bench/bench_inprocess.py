"""``spanning.aggregate`` against DuckDB's explode + group-by in one process, interleaved (issues 46 and 66).

    python bench/bench_inprocess.py            # every shape below, 1M generated CDRs, 5 interleaved pairs per row
    python bench/bench_inprocess.py --keys int64 --cells 50 --order arrival --slides 300   # one shape, one slide

The SQL is that of ``spanning bench --preset peers`` (``spanning.app.bench.presets``): ω = 15 min, count + integer
sum + max, δ beyond every call. The calls are ``generate_cdr``'s (times, durations, bytes); the shapes vary the key:

* ``--keys``: ``text-read`` (text cells as read from a file: one object per distinct string), ``text-built`` (text
  cells of a frame built row by row: one object per row), ``int64`` (integer cell ids);
* ``--cells``: how many keys; ``--spread``: ``hot`` (one key holds 38% of the calls, the others share the rest by
  1/rank^1.1, as ``spark_jobs.peers.integer_cdr_frame``'s "hot"), ``zipf`` (1/rank^1.1, ``generate_cdr``'s) or
  ``uniform``;
* ``--ids``: the int64 ids, ``wide`` (random 62-bit numbers) or ``small`` (0 .. cells - 1);
* ``--order``: ``grouped`` (by cell, then end: the batch job's order, ``cdr_events``'s) or ``arrival`` (by end
  alone: the calls as they are written).

Ratio = DuckDB s / ours s per pair (ours first, then DuckDB), the median (min-max). Ours is asked for the windows
with a member (``empty_windows="skip"``), the rows the explode gives; the windows of both are compared before
timing, and the run fails if they differ.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import time

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

import spanning
from spanning.app.cdr import generate_cdr

AGGS = {"count": "count", "sum_v": "sum:v", "max_duration": "max:duration"}
KEYS = ("text-read", "text-built", "int64")
ORDERS = ("grouped", "arrival")
SPREADS = ("hot", "zipf", "uniform")


def calls_frame(rows: int, cells: int, spread: str, seed: int = 11) -> tuple[pd.DataFrame, np.ndarray]:
    """Generated calls in end order (epoch seconds) and the cell number of each (0 = the most frequent)."""
    calls = generate_cdr(rows, seed=seed, cells=2)  # the cells are drawn below
    rng = np.random.default_rng(seed + 1)
    if spread == "uniform":
        cell = rng.integers(0, cells, rows)
    else:
        weights = 1.0 / np.arange(1, cells + 1) ** 1.1
        if spread == "hot" and cells > 1:
            weights = np.concatenate([[0.38], 0.62 * weights[1:] / weights[1:].sum()])
        cell = rng.choice(cells, size=rows, p=weights / weights.sum())
    frame = pd.DataFrame({
        "start": pd.to_datetime(calls["start"]).astype("int64") // 10**9,
        "end": pd.to_datetime(calls["end"]).astype("int64") // 10**9,
        "v": calls["bytes"].astype("int64"),
        "duration": calls["duration"].astype("int64"),
    })  # fmt: skip
    return frame, cell


def keyed(frame: pd.DataFrame, cell: np.ndarray, keys: str, ids: str, order: str, seed: int = 11) -> pd.DataFrame:
    """The calls with their ``cell`` column of kind ``keys``, in ``order``."""
    cells = int(cell.max()) + 1
    if keys == "int64":
        if ids == "wide":
            numbers = np.unique(np.random.default_rng(seed + 2).integers(2**40, 2**62, 2 * cells))[:cells]
            numbers = np.random.default_rng(seed + 3).permutation(numbers)
        else:
            numbers = np.arange(cells, dtype=np.int64)
        column = numbers[cell]
    else:
        column = np.char.add("cell-", cell.astype(str)).astype(object)  # one object per row
    out = frame.assign(cell=column)
    if order == "grouped":
        out = out.sort_values(["cell", "end"], kind="stable")
    out = out.reset_index(drop=True)[["cell", "start", "end", "v", "duration"]]
    if keys == "text-read":
        out = pa.Table.from_pandas(out).to_pandas()  # one object per distinct string, as a file reader gives
    return out


def sql_of(slide: int) -> str:
    return f"""SELECT cell, k * {slide} AS window_start, count(*) AS "count", sum(v) AS sum_v,
                      max(duration) AS max_duration
               FROM (SELECT cell, v, duration,
                            unnest(generate_series(CAST(floor((start - 900) / {slide}) + 1 AS BIGINT),
                                   CAST(floor((greatest("end", start + 1) - 1) / {slide}) AS BIGINT))) AS k
                     FROM calls)
               GROUP BY cell, k"""  # a record with end = start is the point event [start, start + 1)


def compare(calls: pd.DataFrame, slide: int, longest: int, con, repeat: int, label: str) -> str:
    """One table row: ``repeat`` interleaved pairs, after checking that both give the same windows."""
    sql = sql_of(slide)

    def ours():
        return spanning.aggregate(calls, 900, slide, longest, aggregates=AGGS, key="cell", series_start="earliest",
                                  empty_windows="skip")  # the windows with a member, as the explode gives them

    mine_out = ours().sort_values(["cell", "window_start"]).reset_index(drop=True)
    theirs = con.execute(sql).df().sort_values(["cell", "window_start"]).reset_index(drop=True)
    if len(mine_out) != len(theirs) or mine_out["cell"].tolist() != theirs["cell"].tolist():
        raise SystemExit(f"spanning.aggregate and DuckDB differ in their windows ({label}, β = {slide})")
    for column in ("window_start", "count", "sum_v", "max_duration"):
        if mine_out[column].astype("int64").tolist() != theirs[column].astype("int64").tolist():
            raise SystemExit(f"spanning.aggregate and DuckDB differ in {column} ({label}, β = {slide})")
    mine, duck = [], []
    for _ in range(repeat):
        began = time.perf_counter()
        ours()
        mine.append(time.perf_counter() - began)
        began = time.perf_counter()
        con.execute(sql).df()
        duck.append(time.perf_counter() - began)
    ratios = sorted(d / m for m, d in zip(mine, duck, strict=True))
    return (f"| {label} | {slide // 60} min | {statistics.median(mine):.3f} ({min(mine):.3f}-{max(mine):.3f}) | "
            f"{statistics.median(duck):.3f} ({min(duck):.3f}-{max(duck):.3f}) | "
            f"**{statistics.median(ratios):.2f}×** ({ratios[0]:.2f}-{ratios[-1]:.2f}) |")  # fmt: skip


def listed(kind, choices=None):
    def parse(text: str) -> list:
        values = [kind(v) for v in text.split(",") if v]
        bad = [v for v in values if choices is not None and v not in choices]
        if bad or not values:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(choices or ['numbers'])}")
        return values

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved pairs per row")
    parser.add_argument("--keys", type=listed(str, KEYS), default=list(KEYS), help=f"of {', '.join(KEYS)}")
    parser.add_argument("--cells", type=listed(int), default=[50, 10_000], help="key counts, e.g. 50,10000")
    parser.add_argument("--spread", choices=SPREADS, default="hot")
    parser.add_argument("--ids", choices=("wide", "small"), default="wide", help="int64 ids (default: wide)")
    parser.add_argument("--order", type=listed(str, ORDERS), default=list(ORDERS), help=f"of {', '.join(ORDERS)}")
    parser.add_argument("--slides", type=listed(int), default=[300, 60], help="β in seconds, e.g. 300,60")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {args.rows:,} generated CDRs (seed 11), ω = 15 min, "
          f"count + sum:v + max:duration, spread {args.spread}, int64 ids {args.ids}; {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, DuckDB {duckdb.__version__}; {args.repeat} interleaved pairs a row")
    con = duckdb.connect()
    print("| keys | cells | order | β | ours s (min-max) | DuckDB s (min-max) | DuckDB/ours (min-max) |\n"
          "|---|---|---|---|---|---|---|")
    for cells in args.cells:
        frame, cell = calls_frame(args.rows, cells, args.spread)
        longest = int((frame["end"] - frame["start"]).max()) + 1
        top = np.bincount(cell).max() / len(cell)
        for keys, order in itertools.product(args.keys, args.order):
            calls = keyed(frame, cell, keys, args.ids, order)
            con.register("calls", calls)
            label = f"{keys} | {cells:,} (top {top:.0%}) | {order}" if top >= 0.01 else f"{keys} | {cells:,} | {order}"
            for slide in args.slides:
                print(compare(calls, slide, longest, con, args.repeat, label), flush=True)
            con.unregister("calls")


if __name__ == "__main__":
    main()
