"""``spanning.aggregate`` against DuckDB's explode + group-by in one process, interleaved (issue 46's target).

    python bench/bench_inprocess.py            # 1M generated CDRs, 50 text cells, 5 interleaved pairs per row

The frames and the SQL are those of ``spanning bench --preset peers`` (``spanning.app.bench.presets``): ω = 15 min,
count + integer sum + max, δ beyond every call; a frame as read from a file (one object per distinct string) and
one built row by row. Ratio = DuckDB s / batch s per pair, the median (min-max). The windows of both are compared
before timing; the run fails if they differ.
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckdb
import pyarrow as pa

import spanning
from spanning.app.bench.presets import cdr_events

AGGS = {"count": "count", "sum_v": "sum:v", "max_duration": "max:duration"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    built = cdr_events(args.rows, seed=11)
    as_read = pa.Table.from_pandas(built).to_pandas()
    longest = int((built["end"] - built["start"]).max()) + 1
    con = duckdb.connect()
    print("| frame | β | batch s (min-max) | DuckDB s (min-max) | DuckDB/batch (min-max) |\n|---|---|---|---|---|")
    for slide in (300, 60):
        for name, calls in (("as read from a file", as_read), ("built row by row", built)):
            con.register("calls", calls[["cell", "start", "end", "v", "duration"]])
            sql = f"""SELECT cell, k * {slide} AS window_start, count(*) AS "count", sum(v) AS sum_v,
                             max(duration) AS max_duration
                      FROM (SELECT cell, v, duration,
                                   unnest(generate_series(CAST(floor((start - 900) / {slide}) + 1 AS BIGINT),
                                          CAST(floor((greatest("end", start + 1) - 1) / {slide}) AS BIGINT))) AS k
                            FROM calls)
                      GROUP BY cell, k"""  # a record with end = start is the point event [start, start + 1)

            def batch(calls=calls, slide=slide):
                return spanning.aggregate(calls, 900, slide, longest, aggregates=AGGS, key="cell",
                                          series_start="earliest")  # fmt: skip

            ours = batch()
            ours = ours[ours["count"] > 0].sort_values(["cell", "window_start"]).reset_index(drop=True)
            theirs = con.execute(sql).df().sort_values(["cell", "window_start"]).reset_index(drop=True)
            for column in ("count", "sum_v", "max_duration"):
                if ours[column].astype("int64").tolist() != theirs[column].astype("int64").tolist():
                    raise SystemExit(f"spanning.aggregate and DuckDB differ in {column} ({name}, β = {slide})")
            mine, duck = [], []
            for _ in range(args.repeat):
                began = time.perf_counter()
                batch()
                mine.append(time.perf_counter() - began)
                began = time.perf_counter()
                con.execute(sql).df()
                duck.append(time.perf_counter() - began)
            ratios = sorted(d / m for m, d in zip(mine, duck, strict=True))
            print(f"| {name} | {slide // 60} min | {statistics.median(mine):.3f} ({min(mine):.3f}-{max(mine):.3f}) | "
                  f"{statistics.median(duck):.3f} ({min(duck):.3f}-{max(duck):.3f}) | "
                  f"**{statistics.median(ratios):.2f}×** ({ratios[0]:.2f}-{ratios[-1]:.2f}) |")


if __name__ == "__main__":
    main()
