"""The ``spanning`` command: ``run`` (the windowed job), ``generate-cdr`` (sample data).

User mistakes end with one ``error:`` line and exit code 2; ``--verbose`` shows the stack trace.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from spanning.jobspec import RunConfig, UsageError, parse_duration

EXAMPLE = """example:
  spanning run data/sample_cdr.csv --range 15m --slide 5m --ttp 2h --start start --end end \\
      --key cell --agg count --agg sum:bytes --agg max:duration --output out/
"""


def _run_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="sliding-window aggregates over spanning events in CDR files",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="files, folders or globs (CSV with header, Parquet, JSON lines)"
    )
    p.add_argument("--range", required=True, help="window range ω: 900, 90s, 15m, 2h, 1d")
    p.add_argument("--slide", required=True, help="window slide β")
    p.add_argument(
        "--ttp", default="0", help="time-to-postpone δ: release a window this long after its end (default 0)"
    )
    p.add_argument("--offset", default="0", help="window alignment offset (default 0: aligned to the epoch)")
    p.add_argument("--start", required=True, metavar="EXPR", help="event start: a column or Spark SQL expression")
    p.add_argument("--end", metavar="EXPR", help="event end: a column or Spark SQL expression")
    p.add_argument("--duration", metavar="EXPR", help="event duration in chronons (instead of --end)")
    p.add_argument("--key", action="append", default=[], metavar="EXPR", help="key column or expression (repeatable)")
    p.add_argument(
        "--agg",
        action="append",
        default=[],
        metavar="AGG",
        help="count, count:col, sum:col, mean, min, max, stddev, stddev_pop, argmin:col[:res], "
        "argmax:col[:res], mincount, maxcount (repeatable; default count)",
    )
    p.add_argument("--technique", default="se-slicing", help="technique (default se-slicing)")
    p.add_argument("--height", default="1", help="multi-level height d (se-ml-slicing)")
    p.add_argument("--point-events", action="store_true", help="each record is a point event at --start")
    p.add_argument("--output", default="spanning-output", help="output folder (default spanning-output)")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv"], help="output format")
    p.add_argument("--engine", default="spark", choices=["spark", "local"], help="spark (default) or local (pandas)")
    p.add_argument("--master", help="Spark master URL (default: what spark-submit sets, else local[*])")
    p.add_argument("--partitions", type=int, help="Spark partitions for the per-key stage (default: 2 per core)")
    p.add_argument("--time-unit", default="s", choices=["s", "ms"], help="chronon: second (default) or millisecond")
    p.add_argument("--empty-windows", default="skip", choices=["skip", "emit"], help="write windows with no event?")
    p.add_argument(
        "--series-start",
        default="earliest",
        help="per key, windows start after: earliest (start in the data, default), first "
        "(start of the first row in end order, as a stream would) or a time in chronons",
    )
    p.add_argument("--input-format", choices=["csv", "parquet", "json"], help="when the extension does not tell")
    p.add_argument("--timezone", default="UTC", help="time zone of date-time text without one (default UTC)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--verbose", action="store_true", help="show stack traces and Spark warnings")
    p.set_defaults(handler=_run)


def _height(text: str) -> int:
    if text == "auto":
        raise UsageError("--height auto needs technique se-ml-slicing, which is not available yet")
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"bad --height {text!r}: give an integer >= 1") from None


def config_from_args(args: argparse.Namespace) -> RunConfig:
    unit = args.time_unit
    return RunConfig(
        inputs=args.inputs,
        range=parse_duration(args.range, unit),
        slide=parse_duration(args.slide, unit),
        ttp=parse_duration(args.ttp, unit),
        offset=parse_duration(args.offset, unit),
        start=args.start,
        end=args.end,
        duration=args.duration,
        keys=args.key,
        aggregates=args.agg or ["count"],
        technique=args.technique,
        height=_height(args.height),
        point_events=args.point_events,
        output=args.output,
        format=args.format,
        engine=args.engine,
        master=args.master,
        time_unit=unit,
        empty_windows=args.empty_windows,
        overwrite=args.overwrite,
        input_format=args.input_format,
        series_start=args.series_start,
        timezone=args.timezone,
        partitions=args.partitions,
    )


def _run(args: argparse.Namespace) -> int:
    from spanning.outputs import human_summary
    from spanning.registry import TECHNIQUES

    cfg = config_from_args(args)
    if cfg.technique not in TECHNIQUES:
        raise UsageError(f"unknown technique {cfg.technique!r}: available are {', '.join(sorted(TECHNIQUES))}")
    if cfg.engine == "local":
        from spanning.local_run import run_local

        summary = run_local(cfg, args.verbose)
    else:
        try:
            from spark_jobs.run import run_spark
        except ImportError as err:
            raise UsageError(f"the Spark engine needs pyspark ({err}): pip install 'spanning[spark]'") from err
        summary = run_spark(cfg, args.verbose)
    print(human_summary(summary))
    return 0


def _generate_parser(sub) -> None:
    p = sub.add_parser("generate-cdr", help="write synthetic CDRs (skewed cells, diurnal arrivals, calls, data, SMS)")
    p.add_argument("output", help="CSV file to write")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cells", type=int, default=200)
    p.add_argument("--subscribers", type=int, default=5000)
    p.add_argument("--start", default="2024-03-04", help="first day (default 2024-03-04)")
    p.add_argument("--days", type=float, default=1.0)
    p.add_argument("--data-share", type=float, default=0.1, help="share of long data sessions")
    p.add_argument("--sms-share", type=float, default=0.15, help="share of SMS (zero-duration records)")
    p.add_argument("--bad-share", type=float, default=0.0, help="share of unusable rows (for rejected/)")
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    from spanning.cdr import generate_cdr

    if args.rows < 0 or not 0 <= args.data_share + args.sms_share <= 1 or not 0 <= args.bad_share <= 1:
        raise UsageError("--rows must be >= 0 and the shares between 0 and 1")
    frame = generate_cdr(
        args.rows, seed=args.seed, cells=args.cells, subscribers=args.subscribers, start=args.start,
        days=args.days, data_share=args.data_share, sms_share=args.sms_share, bad_share=args.bad_share,
    )  # fmt: skip
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.output, index=False)
    print(f"wrote {len(frame):,} CDRs to {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spanning", description="Sliding-window aggregates over spanning events.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _generate_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as err:
        print(f"spanning: error: {err}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return 2
    except Exception as err:  # a failure of the job itself: say what, show the trace only when asked
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"spanning: error: {type(err).__name__}: {first}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        else:
            print("spanning: run again with --verbose for the full trace", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
