"""The other subcommands of ``spanning``: ``generate-cdr``, ``tune-height`` (Suzanne et al., Table 4's cost
model, ``spanning.planning.height``) and ``bench`` (Suzanne et al., §6; the SWAG and peer sweeps of
``docs/BENCHMARKS.md``). Optional extras are imported only by the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from spanning.app.bench.names import BENCH_MODULES, PRESET_NAMES
from spanning.app.jobspec import (
    EventFields,
    InputFiles,
    RunConfig,
    SparkOptions,
    UsageError,
    WindowQuery,
    parse_duration,
)
from spanning.app.progress import Progress
from spanning.app.run_command import spark_engine


def add_generate_parser(sub: argparse._SubParsersAction) -> None:
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
    from spanning.app.cdr import CallMix, generate_cdr

    if args.rows < 0 or not 0 <= args.data_share + args.sms_share <= 1 or not 0 <= args.bad_share <= 1:
        raise UsageError("--rows must be >= 0 and the shares between 0 and 1")
    if Path(args.output).exists() and not (args.overwrite and Path(args.output).is_file()):
        raise UsageError(f"{args.output} exists: give --overwrite to replace the file" if Path(args.output).is_file()
                         else f"{args.output} exists and is not a file")  # fmt: skip
    mix = CallMix(data_share=args.data_share, sms_share=args.sms_share, bad_share=args.bad_share)
    progress = Progress(quiet_off_terminal=True)  # about 15 s for 1M rows, most of it writing the text
    progress(f"generating {args.rows:,} CDRs")
    frame = generate_cdr(args.rows, seed=args.seed, cells=args.cells, subscribers=args.subscribers, start=args.start,
                         days=args.days, mix=mix)  # fmt: skip
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    progress(f"writing {args.output}")
    frame.to_csv(args.output, index=False)
    progress.done()
    print(f"wrote {len(frame):,} CDRs to {args.output}")
    return 0


def add_tune_parser(sub: argparse._SubParsersAction) -> None:
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
    cfg = RunConfig(
        inputs=InputFiles(args.inputs, format=args.input_format, delimiter=args.delimiter),
        events=EventFields(
            args.start, end=args.end, duration=args.duration, time_unit=args.time_unit, timezone=args.timezone
        ),
        query=WindowQuery(range=1, slide=1, ttp=0),
        engine=args.engine,
        spark=SparkOptions(master=args.master),
    )
    if args.engine == "spark":
        return spark_engine().event_times(cfg, max(args.sample, 200_000), args.verbose)
    from spanning.app.local_run import event_times

    return event_times(cfg)


def _tune(args: argparse.Namespace) -> int:
    import numpy as np

    from spanning.app.tune import format_table, height_table
    from spanning.kernels.windows import WindowSpec, event_ends

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
    ends = event_ends(starts, ends)
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


def add_bench_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure the techniques side by side (Suzanne et al., §6), SWAGs and peers")
    p.add_argument("presets", nargs="*", metavar="PRESET", help=f"any of {', '.join(PRESET_NAMES)} (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="small runs: every preset in under a minute (14-36 s measured on 2 cores)")  # fmt: skip
    p.add_argument("--repeat", type=int, help="runs per measurement (default 3, 1 with --quick)")
    p.add_argument("--output", default="bench-results", help="folder for CSV/JSON/Markdown/PNG (default bench-results)")
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
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
    progress = Progress()  # one line rewritten on a terminal, plain lines in a log or a pipe
    setting = Setting(quick=args.quick, repeat=repeat, progress=progress)
    records, agreement = [], {}
    for name in names:
        rec, agreed = PRESETS[name](setting)
        records += rec
        agreement[name] = agreed
    progress.done()
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
