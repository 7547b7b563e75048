"""``spanning run``: its options, the ``RunConfig`` they make, and the engine that runs it (local or Spark).

The options are checked (``spanning.app.jobspec.RunConfig``) before anything is read or written; the Spark
engine is found by entry point (``spanning.app.plugins``), so that this module needs no pyspark. The options
that describe the query and its input (``add_query_options``) and the groups they make (``query_from_args``)
serve every command that runs a query; ``config_from_args`` is the one mapping from ``spanning run``'s options
to a ``RunConfig``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from spanning.aggregates import parse_aggregate
from spanning.aggregates.parser import aggregate_forms
from spanning.app.jobspec import (
    PLANS,
    EventFields,
    InputFiles,
    OutputOptions,
    RunConfig,
    SparkOptions,
    UsageError,
    WindowQuery,
    parse_duration,
    parse_window,
)
from spanning.engines.params import Execution
from spanning.techniques.registry import TECHNIQUES

SPARK_NEEDED = "the Spark engine needs pyspark ({}): pip install 'spanning[spark]'"


EXAMPLE = """example:
  spanning run data/sample_cdr.csv --range 15m --slide 5m --ttp 2h --start start --end end \\
      --key cell --agg count --agg sum:bytes --agg max:duration --output out/
"""


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="sliding-window aggregates over spanning events in CDR files",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="files, folders or globs (CSV with header, Parquet, JSON lines)"
    )
    add_query_options(p)
    p.add_argument("--sharing", default="all", choices=["all", "none", "weaveshare"],
                   help="with several --window on the per-event path: share one slice sequence (all), none, "
                   "or the groups of the WeaveShare optimizer (Shein and Chrysanthis)")  # fmt: skip
    p.add_argument("--technique", default="se-slicing", choices=list(TECHNIQUES),
                   help="se-slicing (default, vectorised), se-ml-slicing, or a baseline: tuple-buckets, "
                   "aggregate-buckets, sweeping (per-event paths)")  # fmt: skip
    p.add_argument("--height", default="1", help="multi-level height d of se-ml-slicing, or auto (Table 4 cost model)")
    p.add_argument("--point-events", action="store_true", help="each record is a point event at --start")
    p.add_argument(
        "--swag",
        metavar="NAME",
        help="with --point-events: the FIFO SWAG of the final aggregation "
        "(recalc, soe, two-stacks, two-stacks-lite, daba, daba-lite, flatfat, flatfit, slickdeque, sba, pba)",
    )
    p.add_argument("--output", default="spanning-output", help="output folder (default spanning-output)")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv"], help="output format (default parquet)")
    p.add_argument("--engine", default="spark", choices=["spark", "local"], help="spark (default) or local (pandas)")
    p.add_argument("--remote", metavar="URL",
                   help="Spark Connect: run the Spark engine as a client of the server at URL (sc://host:port;"
                   " local[N] starts one in this process); default $SPARK_REMOTE. This process and the server"
                   " must see the inputs and --output at the same paths")  # fmt: skip
    p.add_argument("--plan", default="auto", metavar="{" + ",".join(PLANS) + "}",
                   help="Spark: how the windows are computed: auto (default: by the aggregates and the windows "
                   "per event, told in summary.json); explode (each event into its windows, in the JVM); vector "
                   "(each task reduces its rows to window partials with the compiled kernel: counts, sums, means, "
                   "min, max, distinct counts, quantiles, occupancy, erlang); python (mapInPandas: every technique "
                   "and aggregate)")  # fmt: skip
    p.add_argument("--empty-windows", default="skip", choices=["skip", "emit"], help="write windows with no event?")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an output folder that spanning wrote, once the new output is complete")  # fmt: skip
    p.set_defaults(handler=_run)


def add_query_options(p: argparse.ArgumentParser) -> None:
    """The options that describe the query and its input, shared by the commands that run one.

    ``--range --slide --window --ttp --offset --agg --series-start --partitions`` and the event options
    (``add_event_options``); ``query_from_args`` reads them.
    """
    p.add_argument("--range", help="window range ω: 900, 90s, 15m, 2h, 1d")
    p.add_argument("--slide", help="window slide β")
    p.add_argument("--window", action="append", default=[], metavar="RANGE/SLIDE",
                   help="a window spec such as 15m/5m, instead of --range/--slide; repeat it for several "
                   "(one pass, rows tagged in a 'window' column)")  # fmt: skip
    p.add_argument(
        "--ttp", default="0", help="time-to-postpone δ: release a window this long after its end (default 0)"
    )
    p.add_argument("--offset", default="0", help="window alignment offset (default 0: aligned to the epoch)")
    add_event_options(p)
    p.add_argument(
        "--agg",
        action="append",
        default=[],
        metavar="AGG",
        help=f"{', '.join(aggregate_forms())} (repeatable; default count)",
    )
    p.add_argument("--partitions", type=int, help="Spark partitions for the per-key stage (default: 2 per core)")
    p.add_argument(
        "--series-start",
        default="earliest",
        help="per key, windows start after: earliest (start in the data, default), first "
        "(start of the first row in end order, as a stream would) or a time in chronons",
    )


def add_event_options(p: argparse.ArgumentParser, timezone_help: str = "") -> None:
    """The options that say where the events are and how to read them: ``--start --end --duration --key
    --time-unit --input-format --delimiter --timezone --master --verbose`` (``events_from_args`` reads them)."""
    p.add_argument("--start", required=True, metavar="EXPR", help="event start: a column or Spark SQL expression")
    p.add_argument("--end", metavar="EXPR", help="event end: a column or Spark SQL expression")
    p.add_argument("--duration", metavar="EXPR", help="event duration in chronons (instead of --end)")
    p.add_argument("--key", action="append", default=[], metavar="EXPR", help="key column or expression (repeatable)")
    p.add_argument("--master", help="Spark master URL (default: what spark-submit sets, else local[*])")
    p.add_argument("--time-unit", default="s", choices=["s", "ms"], help="chronon: second (default) or millisecond")
    p.add_argument("--input-format", choices=["csv", "parquet", "json"], help="when the extension does not tell")
    p.add_argument("--delimiter", default=",", help="CSV field separator (default ,)")
    p.add_argument("--timezone", default="UTC",
                   help=f"time zone of date-time text without one{timezone_help}: a region such as Europe/Paris,"
                   " UTC (default) or +01:00")  # fmt: skip
    p.add_argument("--verbose", action="store_true", help="show stack traces and Spark warnings")


def _height(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        height = int(text)
    except ValueError:
        height = 0
    if height < 1:
        raise UsageError(f"bad --height {text!r}: give an integer >= 1 or auto")
    return height


def _windows(args: argparse.Namespace, unit: str) -> list[tuple[int, int]]:
    if args.window and (args.range or args.slide):
        raise UsageError("give either --window (repeatable) or --range and --slide")
    if not args.window and not (args.range and args.slide):
        raise UsageError("give --range and --slide, or one or more --window RANGE/SLIDE")
    return [parse_window(text, unit, "--window") for text in args.window]


def query_from_args(args: argparse.Namespace) -> tuple[EventFields, WindowQuery]:
    """The events and the windows of the options of ``add_query_options``, checked.

    ``--point-events`` and ``--empty-windows`` are read where the command has them (else off and ``skip``).
    """
    unit = args.time_unit
    windows = _windows(args, unit)
    query = WindowQuery(
        range=parse_duration(args.range, unit) if args.range else windows[0][0],
        slide=parse_duration(args.slide, unit) if args.slide else windows[0][1],
        ttp=parse_duration(args.ttp, unit),
        aggregates=args.agg or ["count"],
        offset=parse_duration(args.offset, unit),
        windows=windows,
        series_start=args.series_start,
        empty_windows=getattr(args, "empty_windows", "skip"),
    )
    for range_, slide in windows or [(query.range, query.slide)]:
        if slide > range_:  # allowed (hopping windows with gaps), but rarely meant
            print(f"spanning: warning: the slide ({slide} {unit}) is longer than the range ({range_} {unit}): the"
                  f" windows leave gaps of {slide - range_} {unit}, and an event wholly inside a gap is in no window",
                  file=sys.stderr)  # fmt: skip
    return events_from_args(args), query


def events_from_args(args: argparse.Namespace) -> EventFields:
    """The events of the options of ``add_event_options`` (``--point-events`` where the command has it)."""
    return EventFields(
        start=args.start,
        end=args.end,
        duration=args.duration,
        keys=args.key,
        point_events=getattr(args, "point_events", False),
        time_unit=args.time_unit,
        timezone=args.timezone,
    )


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The ``RunConfig`` of ``spanning run``'s options: the one mapping from the command line to a job."""
    execution = Execution(args.technique, _height(args.height), args.swag, args.sharing)
    events, query = query_from_args(args)
    return RunConfig(
        inputs=InputFiles(args.inputs, format=args.input_format, delimiter=args.delimiter),
        events=events,
        query=query,
        execution=execution,
        output=OutputOptions(args.output, format=args.format, overwrite=args.overwrite),
        engine=args.engine,
        spark=SparkOptions(master=args.master, partitions=args.partitions, plan=args.plan, remote=_remote(args)),
    )


def _remote(args: argparse.Namespace) -> str | None:
    """The Spark Connect server of ``--remote``, else of ``SPARK_REMOTE`` (as PySpark's own tools take it) for the
    Spark engine; None for a classic session."""
    if args.remote is not None and args.engine == "local":
        raise UsageError("--remote runs the Spark engine on a Spark Connect server: leave out --engine local")
    if args.engine == "local":
        return None
    return args.remote or os.environ.get("SPARK_REMOTE") or None


def _run(args: argparse.Namespace) -> int:
    from spanning.app.outputs import check_output, human_summary
    from spanning.techniques.registry import TECHNIQUES

    cfg = config_from_args(args)
    check_output(cfg)  # a harmful --output fails at once, before Spark starts; the engines check again
    technique, swag = cfg.execution.technique, cfg.execution.swag
    if technique not in TECHNIQUES:
        raise UsageError(f"unknown technique {technique!r}: available are {', '.join(sorted(TECHNIQUES))}")
    if swag is not None:
        from spanning.techniques.point_windows import build_swag

        for agg in cfg.query.aggregates:  # unknown names and unfit aggregates fail here, before any work
            try:
                build_swag(swag, parse_aggregate(agg))
            except ValueError as err:
                raise UsageError(str(err)) from err
    print(human_summary(run_job(cfg, args.verbose)))
    return 0


def run_job(cfg: RunConfig, verbose: bool) -> dict:
    """Run ``cfg`` on its engine, ``--engine local`` or Spark, and return its summary (summary.json's)."""
    if cfg.engine == "local":
        from spanning.app.local_run import run_local

        return run_local(cfg, verbose)
    return spark_engine().run(cfg, verbose)


def spark_engine() -> Any:
    """The Spark engine (``spark_jobs``, found by entry point), or one clear line when it cannot be used."""
    from spanning.app.plugins import load_engine

    try:
        return load_engine("spark")
    except ImportError as err:
        raise UsageError(SPARK_NEEDED.format(err)) from err
