"""The ``spanning`` command: ``run`` (the windowed job), ``generate-cdr``, ``tune-height``, ``bench``.

User mistakes end with one ``spanning: error:`` line and exit code 2; other failures (bugs) with exit
code 1. ``--verbose`` shows the stack trace and the warnings that are otherwise silenced. Optional
extras (pyspark, the bench extra) are imported only by the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spanning.aggregates import parse_aggregate
from spanning.app.bench.names import BENCH_MODULES, PRESET_NAMES
from spanning.app.jobspec import RunConfig, UsageError, parse_duration

QUIET_COMMANDS = ("run", "tune-height", "generate-cdr")  # their warnings show only with --verbose
USER_ERRORS = ("UsageError", "SumOverflowError")  # exception names that mean a user mistake (exit 2)
SPARK_NEEDED = "the Spark engine needs pyspark ({}): pip install 'spanning[spark]'"


class Parser(argparse.ArgumentParser):
    """argparse with one ``spanning: error:`` line for a bad command line (exit 2), not the usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"spanning: error: {message} (see: {self.prog} --help)\n")


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
    p.add_argument("--range", help="window range ω: 900, 90s, 15m, 2h, 1d")
    p.add_argument("--slide", help="window slide β")
    p.add_argument("--window", action="append", default=[], metavar="RANGE/SLIDE",
                   help="a window spec such as 15m/5m, instead of --range/--slide; repeat it for several "
                   "(one pass, rows tagged in a 'window' column)")  # fmt: skip
    p.add_argument("--sharing", default="all", choices=["all", "none", "weaveshare"],
                   help="with several --window on the per-event path: share one slice sequence (all), none, "
                   "or the groups of the WeaveShare optimizer (Shein and Chrysanthis)")  # fmt: skip
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
    p.add_argument("--technique", default="se-slicing", help="se-slicing (default, vectorised) or se-ml-slicing")
    p.add_argument("--height", default="1", help="multi-level height d of se-ml-slicing, or auto (Table 4 cost model)")
    p.add_argument("--point-events", action="store_true", help="each record is a point event at --start")
    p.add_argument(
        "--swag",
        metavar="NAME",
        help="with --point-events: the FIFO SWAG of the final aggregation "
        "(recalc, soe, two-stacks, two-stacks-lite, daba, daba-lite, flatfat, flatfit, slickdeque, sba, pba)",
    )
    p.add_argument("--output", default="spanning-output", help="output folder (default spanning-output)")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv"], help="output format")
    p.add_argument("--engine", default="spark", choices=["spark", "local"], help="spark (default) or local (pandas)")
    p.add_argument("--master", help="Spark master URL (default: what spark-submit sets, else local[*])")
    p.add_argument("--plan", default="auto", choices=["auto", "explode", "range", "dyadic", "python"],
                   help="Spark: how built-in aggregates are computed: auto (default: by the aggregates and the "
                   "windows per event), explode, range or dyadic (in the JVM), python (mapInPandas)")  # fmt: skip
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
    p.add_argument("--delimiter", default=",", help="CSV field separator (default ,)")
    p.add_argument("--timezone", default="UTC",
                   help="time zone of date-time text without one: a region such as Europe/Paris, UTC (default) "
                   "or +01:00")  # fmt: skip
    p.add_argument("--overwrite", action="store_true",
                   help="replace an output folder that spanning wrote, once the new output is complete")  # fmt: skip
    p.add_argument("--verbose", action="store_true", help="show stack traces and Spark warnings")
    p.set_defaults(handler=_run)


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
    windows = []
    for text in args.window:
        parts = text.split("/")
        if len(parts) != 2:
            raise UsageError(f"bad --window {text!r}: write RANGE/SLIDE, e.g. 15m/5m")
        windows.append((parse_duration(parts[0], unit), parse_duration(parts[1], unit)))
    return windows


def config_from_args(args: argparse.Namespace) -> RunConfig:
    unit = args.time_unit
    windows = _windows(args, unit)
    return RunConfig(
        inputs=args.inputs,
        windows=windows,
        range=parse_duration(args.range, unit) if args.range else windows[0][0],
        slide=parse_duration(args.slide, unit) if args.slide else windows[0][1],
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
        swag=args.swag,
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
        sharing=args.sharing,
        delimiter=args.delimiter,
        plan=args.plan,
    )


def _run(args: argparse.Namespace) -> int:
    from spanning.app.outputs import check_output, human_summary
    from spanning.techniques.registry import TECHNIQUES

    cfg = config_from_args(args)
    check_output(cfg)  # a harmful --output fails at once, before Spark starts; the engines check again
    if cfg.technique not in TECHNIQUES:
        raise UsageError(f"unknown technique {cfg.technique!r}: available are {', '.join(sorted(TECHNIQUES))}")
    if cfg.swag is not None:
        from spanning.techniques.point_windows import build_swag

        for agg in cfg.aggregates:  # unknown names and unfit aggregates fail here, before any work
            try:
                build_swag(cfg.swag, parse_aggregate(agg))
            except ValueError as err:
                raise UsageError(str(err)) from err
    if cfg.engine == "local":
        from spanning.app.local_run import run_local

        summary = run_local(cfg, args.verbose)
    else:
        summary = spark_engine().run(cfg, args.verbose)
    print(human_summary(summary))
    return 0


def spark_engine():
    """The Spark engine (``spark_jobs``, found by entry point), or one clear line when it cannot be used."""
    from spanning.app.plugins import load_engine

    try:
        return load_engine("spark")
    except ImportError as err:
        raise UsageError(SPARK_NEEDED.format(err)) from err


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
    p.add_argument("--overwrite", action="store_true", help="replace the file if it exists")
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    from spanning.app.cdr import generate_cdr

    if args.rows < 0 or not 0 <= args.data_share + args.sms_share <= 1 or not 0 <= args.bad_share <= 1:
        raise UsageError("--rows must be >= 0 and the shares between 0 and 1")
    if Path(args.output).exists() and not (args.overwrite and Path(args.output).is_file()):
        raise UsageError(f"{args.output} exists: give --overwrite to replace the file" if Path(args.output).is_file()
                         else f"{args.output} exists and is not a file")  # fmt: skip
    frame = generate_cdr(
        args.rows, seed=args.seed, cells=args.cells, subscribers=args.subscribers, start=args.start,
        days=args.days, data_share=args.data_share, sms_share=args.sms_share, bad_share=args.bad_share,
    )  # fmt: skip
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.output, index=False)
    print(f"wrote {len(frame):,} CDRs to {args.output}")
    return 0


def _tune_parser(sub) -> None:
    p = sub.add_parser(
        "tune-height",
        help="predict (and measure) the cost of each se-ml-slicing height d and recommend one",
        description="Table 4's cost model with the event sizes measured from your data (or synthetic "
        "events): insert cost falls with d, release cost grows with it.",
    )
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="CDR files (as for run); none: synthetic events")
    p.add_argument("--range", required=True)
    p.add_argument("--slide", required=True)
    p.add_argument("--ttp", default="0")
    p.add_argument("--start", metavar="EXPR", help="event start (with INPUT)")
    p.add_argument("--end", metavar="EXPR")
    p.add_argument("--duration", metavar="EXPR")
    p.add_argument("--engine", default="local", choices=["local", "spark"], help="how to read INPUT (default local)")
    p.add_argument("--master", help="Spark master URL for --engine spark")
    p.add_argument("--time-unit", default="s", choices=["s", "ms"])
    p.add_argument("--input-format", choices=["csv", "parquet", "json"])
    p.add_argument("--delimiter", default=",", help="CSV field separator (default ,)")
    p.add_argument("--timezone", default="UTC", help="time zone of date-time text without one (default UTC)")
    p.add_argument("--mu", type=float, help="synthetic: mean event length in chronons")
    p.add_argument("--sigma", type=float, default=10.0, help="synthetic: standard deviation (default 10)")
    p.add_argument("--events", type=int, default=100_000, help="synthetic: number of events, one per chronon")
    p.add_argument("--max-height", type=int, default=20)
    p.add_argument("--measure", action="store_true", help="also measure the per-event throughput of each height")
    p.add_argument("--sample", type=int, default=20_000, help="events measured with --measure (default 20000)")
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(handler=_tune)


def _tune_events(args: argparse.Namespace):
    from spanning.planning.height import synthetic_events

    if not args.inputs:
        if args.mu is None:
            raise UsageError("give INPUT files with --start/--end, or --mu for synthetic events")
        return synthetic_events(args.events, args.mu, args.sigma)
    if args.start is None or (args.end is None) == (args.duration is None):
        raise UsageError("with INPUT, give --start and one of --end / --duration")
    cfg = RunConfig(inputs=args.inputs, range=1, slide=1, ttp=0, start=args.start, end=args.end,
                    duration=args.duration, engine=args.engine, master=args.master, time_unit=args.time_unit,
                    input_format=args.input_format, delimiter=args.delimiter, timezone=args.timezone)  # fmt: skip
    if args.engine == "spark":
        return spark_engine().event_times(cfg, max(args.sample, 200_000), args.verbose)
    from spanning.app.local_run import event_times

    return event_times(cfg)


def _tune(args: argparse.Namespace) -> int:
    import numpy as np

    from spanning.app.tune import format_table, height_table
    from spanning.kernels.windows import WindowSpec

    unit = args.time_unit
    try:
        spec = WindowSpec(
            parse_duration(args.range, unit), parse_duration(args.slide, unit), parse_duration(args.ttp, unit)
        )
    except ValueError as err:
        raise UsageError(str(err)) from err
    if not 1 <= args.max_height <= 256:
        raise UsageError("--max-height must be between 1 and 256")
    starts, ends = _tune_events(args)
    if len(starts) == 0:
        raise UsageError("no usable events in the input")
    ends = np.maximum(ends, starts + 1)
    pick = np.linspace(0, len(starts) - 1, min(args.sample, len(starts))).astype(np.int64)
    rows, best = height_table(spec, starts, ends, args.max_height)
    if args.measure:
        measured, _ = height_table(spec, starts[pick], ends[pick], args.max_height, measure=True)
        for row, m in zip(rows, measured, strict=True):
            row["measured_events_per_s"] = m["measured_events_per_s"]
    lengths = ends - starts
    print(f"{len(starts):,} events, length mean {lengths.mean():.1f} (p50 {np.median(lengths):.0f}, "
          f"p99 {np.percentile(lengths, 99):.0f}); ω={spec.range} β={spec.slide} δ={spec.ttp}")  # fmt: skip
    print(format_table(rows, best))
    return 0


def _bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure the techniques side by side (Suzanne et al., §6), SWAGs and peers")
    p.add_argument("presets", nargs="*", metavar="PRESET", help=f"any of {', '.join(PRESET_NAMES)} (default: all)")
    p.add_argument("--quick", action="store_true", help="small runs: all presets in under two minutes")
    p.add_argument("--repeat", type=int, help="runs per measurement (default 3, 1 with --quick)")
    p.add_argument("--output", default="bench-results", help="folder for CSV/JSON/Markdown/PNG (default bench-results)")
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    import os
    import platform
    import time

    names = args.presets or list(PRESET_NAMES)
    unknown = [n for n in names if n not in PRESET_NAMES]
    if unknown:
        raise UsageError(f"unknown preset {unknown[0]!r}: the presets are {', '.join(PRESET_NAMES)}")
    repeat = args.repeat or (1 if args.quick else 3)
    if repeat < 1:
        raise UsageError("--repeat must be at least 1")
    missing = [name for name in BENCH_MODULES if not _importable(name)]
    if missing:
        raise UsageError(
            f"spanning bench needs the bench extra: pip install 'spanning[bench]' ({', '.join(missing)} missing)"
        )
    from spanning.app.bench.presets import PRESETS, Setting
    from spanning.app.bench.report import write

    began = time.perf_counter()

    def progress(message: str) -> None:
        print(f"\r[{time.perf_counter() - began:6.1f}s] {message[:90]:<90}", end="", file=sys.stderr, flush=True)

    setting = Setting(quick=args.quick, repeat=repeat, progress=progress)
    records, agreement = [], {}
    for name in names:
        rec, agreed = PRESETS[name](setting)
        records += rec
        agreement[name] = agreed
    print(file=sys.stderr)
    meta = {"mode": "quick" if args.quick else "full", "repeat": repeat, "presets": names,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "seconds": round(time.perf_counter() - began, 1)}  # fmt: skip
    write(records, agreement, Path(args.output), meta)
    disagreements = [f"{p}: {case}" for p, cases in agreement.items() for case, ok in cases.items() if not ok]
    print(f"{len(records)} measurements in {meta['seconds']} s; results in {args.output}/summary.md")
    if disagreements:
        print("spanning: error: results differ: " + "; ".join(disagreements), file=sys.stderr)
        return 1
    print("every compared run gave the same windows")
    return 0


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="spanning", description="Sliding-window aggregates over spanning events.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _generate_parser(sub)
    _tune_parser(sub)
    _bench_parser(sub)
    return parser


@contextmanager
def quiet_warnings(enabled: bool) -> Iterator[None]:
    """Silence Python warnings (pandas, numpy, PySpark), here and in the Spark Python workers started meanwhile."""
    if not enabled:
        yield
        return
    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = "ignore"  # inherited by the JVM a run starts, and so by its Python workers
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if before is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = before


def _first_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0].strip() if lines else ""


def describe_failure(err: BaseException) -> tuple[str, int]:
    """The one line that tells what went wrong, and the exit code: 2 for a user mistake, 1 for a bug."""
    import spanning.aggregates

    if isinstance(err, UsageError):
        return str(err), 2
    overflow = getattr(spanning.aggregates, "SumOverflowError", None)
    if isinstance(overflow, type) and isinstance(err, overflow):
        return f"{type(err).__name__}: {_first_line(err)}", 2
    from spanning.app.plugins import worker_error_readers

    for worker_error in worker_error_readers():  # the engines' own: Spark's reads its Python workers' tracebacks
        found = worker_error(err)  # a failure inside a worker: its own exception, not the engine's wrapper
        if found is not None:
            return found.line, 2 if found.name in USER_ERRORS else 1
    if isinstance(err, OSError):
        # a file that cannot be read or written, a full disk: the environment, not a bug
        where = f": {err.filename}" if err.filename else ""
        return (f"{err.strerror}{where}" if err.strerror else f"{type(err).__name__}: {_first_line(err)}"), 2
    unreadable = type(err).__module__.startswith("pandas") and type(err).__name__ in ("ParserError", "EmptyDataError")
    if unreadable or isinstance(err, UnicodeDecodeError):  # an input that is not the CSV it claims to be
        return f"cannot read the input: {type(err).__name__}: {_first_line(err)}", 2
    return f"{type(err).__name__}: {_first_line(err)}" if _first_line(err) else type(err).__name__, 1


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a bad command line (already reported in one line)
        return 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 2
    verbose = bool(getattr(args, "verbose", False))
    with quiet_warnings(args.command in QUIET_COMMANDS and not verbose):
        try:
            return args.handler(args)
        except KeyboardInterrupt:
            print("spanning: interrupted", file=sys.stderr)
            return 130
        except Exception as err:
            line, code = describe_failure(err)
            print(f"spanning: error: {line}", file=sys.stderr)
            if verbose:
                traceback.print_exc()
            elif code == 1:
                print("spanning: run again with --verbose for the full trace", file=sys.stderr)
            return code


if __name__ == "__main__":
    sys.exit(main())
