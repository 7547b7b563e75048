"""Distinct subscribers and quantiles: whole ``spanning run`` processes against the PySpark script a user writes.

Data: generated CDRs over 60 hours in 200 integer cells, one of which holds 38% of the calls (calls of about a
minute, 1% sessions of 0.5-4 h: ``spark_jobs.peers.integer_cdr_frame``), with a ``subscriber`` column drawn
Zipf (1/rank^1.1) over 1M IMSI-like numbers and the durations as doubles.

Per cell and window, each side a whole process that reads the Parquet file and writes Parquet (``time`` as a
user sees it), interleaved (ours, peer, peer, ours, ...), the driver's class archive off on both sides
(``--archive on``: on for both); δ is longer than any call:

* exact: ``count`` + ``count_distinct:subscriber`` against the explode into windows with
  ``size(collect_set(subscriber))`` and with ``count(DISTINCT subscriber)``; the ratio is taken against the
  faster of the two in each round;
* sketched: ``count`` + ``approx_count_distinct:subscriber`` + ``approx_percentile:duration:0.95`` against the
  explode with ``hll_sketch_agg`` + ``kll_sketch_agg_double`` (the same DataSketches sketches).

The answers are checked: the exact ones row for row against both peers; the estimates of both sides against
the exact distinct counts of the exact round (HLL within 3 relative standard errors at lgK 12), and their p95s
against the exact ranks of the durations of 200 sampled windows (KLL's normalized rank bound at K 200). A check
fails the run: fewer than 99% of the distinct counts within 3 RSE, or a p95 off by more than twice the bound.

    python bench/bench_distinct.py                     # 3,000,000 rows, 2 rounds, 15m/1m (16 windows per call)
    python bench/bench_distinct.py --rows 300000 --repeat 1 --shapes 900/300
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from bench_spark_job import HERE, process_env, ratio_spread, spread, timed_command

RSE = 1.04 / math.sqrt(2**12)  # HLL's relative standard error at lgK 12 (Spark's and our default)
KLL_BOUND = 0.013294757464848584  # kll_doubles_sketch(200).normalized_rank_error(False): one rank, 99% confidence
KINDS = {  # ours, then the peer forms of bench/sql_explode_job.py
    "exact": (["count", "count_distinct:subscriber"], ["collect_set", "count_distinct"]),
    "sketched": (["count", "approx_count_distinct:subscriber", "approx_percentile:duration:0.95"], ["sketch"]),
}
KIND_COLUMNS = {  # our output columns of each kind, and their names on the peers' side
    "exact": {"count": "count", "count_distinct_subscriber": "subs"},
    "sketched": {"count": "count", "approx_count_distinct_subscriber": "subs",
                 "approx_percentile_duration_0_95": "p95"},
}  # fmt: skip


def subscriber_cdr_file(rows: int, subscribers: int = 1_000_000) -> Path:
    """The CDRs with a Zipf subscriber column, cached in the temp folder."""
    path = Path(tempfile.gettempdir()) / f"spanning-bench-subscribers-zipf-{rows}.parquet"
    if not path.exists():
        from spark_jobs.peers import integer_cdr_frame

        frame, rng, length = integer_cdr_frame(rows, seed=24, keys="hot", hours=60)
        cumulative = np.cumsum(1.0 / np.arange(1, subscribers + 1) ** 1.1)
        rank = np.searchsorted(cumulative / cumulative[-1], rng.random(rows))  # each call's subscriber's rank
        frame.insert(1, "subscriber", 208_010_000_000_000 + rng.permutation(subscribers)[rank])
        frame["duration"] = length.astype(np.float64)
        frame.sort_values("end", kind="stable").to_parquet(path, index=False, row_group_size=1_000_000)
    return path


def _seconds(times: pd.Series) -> np.ndarray:
    """Epoch seconds of timestamps (the script writes INT96, read without a zone)."""
    return ((pd.to_datetime(times, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)).to_numpy()


def _windows(folder: Path, columns: dict[str, str]) -> pd.DataFrame:
    """A side's windows as cell, window_start (epoch seconds) and ``columns`` renamed, sorted."""
    frame = pd.read_parquet(folder, columns=["cell", "window_start", *columns]).rename(columns=columns)
    frame["window_start"] = _seconds(frame["window_start"])
    return frame.sort_values(["cell", "window_start"]).reset_index(drop=True)


def _rank_errors(path: Path, windows: pd.DataFrame, range_: int, answers: list[str]) -> dict[str, float]:
    """The largest normalized rank error of each ``answers`` column over ``windows``, from the calls' durations."""
    calls = pd.read_parquet(path, columns=["cell", "start", "end", "duration"])
    start = _seconds(calls["start"])
    end = np.maximum(_seconds(calls["end"]), start + 1)
    cell, duration = calls["cell"].to_numpy(), calls["duration"].to_numpy()
    worst = dict.fromkeys(answers, 0.0)
    for row in windows.itertuples():
        members = np.sort(duration[(cell == row.cell) & (start < row.window_start + range_)
                                   & (end > row.window_start)])  # fmt: skip
        for name in answers:
            value = getattr(row, name)
            below = np.searchsorted(members, value, "left") / len(members)
            up_to = np.searchsorted(members, value, "right") / len(members)
            worst[name] = max(worst[name], below - 0.95, 0.95 - up_to)
    return worst


def _check(kind: str, out: Path, forms: list[str], path: Path, range_: int) -> str:
    """The answers of ``kind``'s first round: identical (exact), or within their bounds (sketched)."""
    ours = _windows(out / "ours" / "windows", KIND_COLUMNS[kind])
    if kind == "exact":
        for form in forms:
            theirs = _windows(out / form, {"count": "count", "subs": "subs"})
            try:
                pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
            except AssertionError as err:
                raise SystemExit(f"spanning run and the {form} script differ: {err}") from None
        shutil.copytree(out / "ours" / "windows", out / "exact", dirs_exist_ok=True)
        return f"{len(ours):,} windows, identical on all sides"
    names = pq.read_schema(next((out / "exact").glob("*.parquet"))).names  # spanning's run or the peer's script
    exact = _windows(out / "exact", {"count_distinct_subscriber" if "subs" not in names else "subs": "subs"})
    theirs = _windows(out / forms[0], {"count": "count", "subs": "subs", "p95": "p95"})
    report = [f"{len(ours):,} windows"]
    for side, frame in (("ours", ours), ("peer", theirs)):
        if not (frame[["cell", "window_start"]].to_numpy() == exact[["cell", "window_start"]].to_numpy()).all():
            raise SystemExit(f"{side}: other windows than the exact run's")
        error = (frame["subs"] - exact["subs"]).abs() / exact["subs"]
        within = (error <= 3 * RSE).mean()
        if within < 0.99:  # 3 standard errors hold 99.7% of the estimates of a sketch that works as stated
            raise SystemExit(f"{side}: distinct counts within 3 RSE in {within:.1%} of the windows only (< 99%)")
        report.append(f"{side}: distinct within 3 RSE in {within:.1%} (max {error.max():.2%})")
    sample = ours.assign(peer_p95=theirs["p95"]).sample(min(200, len(ours)), random_state=0)
    worst = _rank_errors(path, sample, range_, ["p95", "peer_p95"])
    for side, column in (("ours", "p95"), ("peer", "peer_p95")):
        if worst[column] > 2 * KLL_BOUND:  # the bound holds at 99% per window: twice it over 200 is a failure
            raise SystemExit(f"{side}: a p95 off by {worst[column]:.2%} of the ranks, over twice KLL's bound")
    same = (ours["p95"] == theirs["p95"]).mean()
    report.append(f"p95 rank error max {worst['p95']:.2%} ours, {worst['peer_p95']:.2%} peer (bound "
                  f"{KLL_BOUND:.2%}, {len(sample)} windows); p95 equal in {same:.0%}")  # fmt: skip
    return "; ".join(report)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shapes", default="900/60", help="ω/β pairs in seconds")
    parser.add_argument("--archive", choices=["on", "off"], default="off", help="the class archive on both sides")
    parser.add_argument("--kinds", default="exact,sketched", help="which (sketched answers are checked against"
                        " the exact run's; sketched alone takes them from one untimed collect_set script)")  # fmt: skip
    args = parser.parse_args()
    path = subscriber_cdr_file(args.rows)
    env = process_env(args.archive == "on")
    out = Path(tempfile.mkdtemp(prefix="spanning-bench-distinct-"))
    subscribers = pd.read_parquet(path, columns=["subscriber"])["subscriber"].nunique()
    print(f"{args.rows:,} CDRs, {subscribers:,} distinct subscribers (Zipf over 1M), 200 cells (one with 38%); "
          f"whole processes, {args.repeat} interleaved rounds, class archive {args.archive} on both sides; "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; ratio = fastest peer s / ours s")  # fmt: skip
    print("| ω/β | aggregates | ours s (min-max) | peers s (min-max) | fastest peer / ours, rounds (min-max) "
          "| answers |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        range_, slide = (int(x) for x in shape.split("/"))
        for kind in args.kinds.split(","):
            aggs, forms = KINDS[kind]
            ours = [sys.executable, "-m", "spanning.cli", "run", str(path), "--range", str(range_), "--slide",
                    str(slide), "--ttp", "7d", "--start", "start", "--end", "end", "--key", "cell",
                    *[x for a in aggs for x in ("--agg", a)], "--output", str(out / "ours"), "--overwrite"]  # fmt: skip
            peers = {form: [sys.executable, str(HERE / "sql_explode_job.py"), str(path), str(out / form), "--range",
                            str(range_), "--slide", str(slide), "--distinct", form] for form in forms}  # fmt: skip
            if kind == "sketched" and not (out / "exact").exists():  # no exact round: the peer's exact counts
                exact = [*peers.get("sketch", [])[:-2], "--distinct", "collect_set"]
                exact[exact.index(str(out / "sketch"))] = str(out / "exact")
                timed_command(exact, env)  # untimed reference, from the plain PySpark script, not from spanning
            times: dict[str, list[float]] = {"ours": [], **{form: [] for form in forms}}
            answers = ""
            for round_ in range(args.repeat):
                labels = ["ours", *forms] if round_ % 2 == 0 else [*forms, "ours"]  # A, B, B, A, ...
                for label in labels:
                    times[label].append(timed_command(ours if label == "ours" else peers[label], env))
                if round_ == 0:
                    answers = _check(kind, out, forms, path, range_)
            fastest = [min(times[f][i] for f in forms) for i in range(args.repeat)]
            peer_cells = "; ".join(f"{form} {spread(times[form])}" for form in forms)
            print(f"| {range_ // 60}m/{slide // 60}m | {kind}: {' + '.join(aggs)} | {spread(times['ours'])} "
                  f"| {peer_cells} | {ratio_spread(times['ours'], fastest)} "
                  f"| {answers} |", flush=True)  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
