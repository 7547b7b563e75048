"""``spanning stream``: the windows of CDR files as they land in a folder, on Spark Structured Streaming.

The options are ``spanning run``'s query options plus what a stream needs (``StreamOptions``); the job
itself is ``spark_jobs.stream.query``, found through the Spark engine's entry point, so this module needs no
pyspark. The semantics are ``spanning run``'s (docs/SEMANTICS.md); docs/STREAMING.md says what differs:
the series of a key starts at its first arriving event, and a late event is one that arrives after its
windows were released.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from spanning.app.jobspec import RunConfig, UsageError, parse_duration
from spanning.app.outputs import MARKER, final_path, read_marker

EXAMPLE = """example:
  spanning stream incoming/ --output out/ --checkpoint chk/ --range 15m --slide 5m --ttp 2h \\
      --start start --end end --key cell --agg count --agg sum:bytes --agg max:duration --trigger 30s

  Files must appear in INPUT_DIR whole: write each elsewhere and rename (move) it in.
  Restart with the same --checkpoint and --output to continue where the stream stopped.
"""

STREAM_HELP = {
    "series_start": "per key, windows start after: first (start of its first arriving event, default) or a time"
    " in chronons (earliest needs the whole input)",
    "partitions": "spread each micro-batch's rows over N Spark tasks before they are validated (default: none, the"
                  " tasks that read a batch validate it; Spark packs small files and splits large ones per core)",
}
REDUCE_ON = ("auto", "executors", "driver")  # --reduce-on: where each batch is reduced (docs/STREAMING.md)
PROCESSORS = ("auto", "python")  # one processor; the option stays for commands written before
REMOVED_PROCESSOR = "jvm"  # the JVM micro-batch processor, removed on 2026-11-26 (docs/STREAMING.md)
TRIGGER = re.compile(r"^available-now$|^(\d+(?:\.\d+)?)\s*(ms|s|m|h|milliseconds?|seconds?|minutes?|hours?)?$")


#: ``--buckets``'s default for a new checkpoint reduced on the driver (one made before keeps its own count,
#: ``recorded_buckets``): the driver reduces a batch's buckets on threads, one per core, and every bucket costs a batch
#: a fixed share of Python; two kept the driver's two cores busy at the least cost (100k rows a batch, 15m/1m, 10k
#: keys: 0.11-0.13 s a batch, against 0.12-0.15 s with 4 and 0.17-0.19 s with 16; 2026-11-28, docs/STREAMING.md).
#: It was 16 until then.
DEFAULT_BUCKETS = 2
#: ``--buckets``'s default for a new checkpoint reduced in the executors' tasks: the key groups, at most the tasks
#: that can reduce a batch at once, whatever the cores at a later restart. Each group costs each batch that touches
#: it a fixed share of a task's Python (state file, kernel calls, about 3-6 ms; 1M rows, 100k a batch, 15m/1m, 10k
#: keys on local[2]: 95k events/s with 8 groups, 99k with 16, 82k with 32, 71k with 128; 2026-11-29,
#: bench/results/stream-executors-2026-11-29.md): 32, a cluster of 32 task slots, not Flink's 128.
DEFAULT_KEY_GROUPS = 32
JOB_FILE = "job.json"  # in CHECKPOINT/spanning/: what the checkpoint was made for (spark_jobs.stream.query)


def new_checkpoint_buckets(reduce_on: str) -> int:
    """``--buckets``'s default for a new checkpoint reduced ``reduce_on`` ("auto", not yet resolved: the driver's)."""
    return DEFAULT_KEY_GROUPS if reduce_on == "executors" else DEFAULT_BUCKETS


def recorded_buckets(checkpoint: str) -> int | None:
    """The bucket count a checkpoint was made with (its ``JOB_FILE``), or None for a new or unreadable one."""
    try:
        return int(json.loads((Path(checkpoint) / "spanning" / JOB_FILE).read_text())["buckets"])
    except (OSError, ValueError, KeyError, TypeError):  # none yet; a broken one is refused when it is checked
        return None


@dataclass(frozen=True)
class StreamOptions:
    """What a stream needs beyond the query: its checkpoint, trigger, idle flush and state layout."""

    checkpoint: str
    trigger: str = "available-now"  # or a processing-time interval: 10s, 1m, 500ms
    max_files_per_trigger: int | None = None
    idle_flush: int | None = None  # chronons: release windows the stream's watermark passed by this much
    max_disorder: int = 0  # chronons: the stream's watermark is the largest end seen minus this
    buckets: int | None = None  # hash buckets of keys, fixed for a checkpoint: None is its count, or DEFAULT_BUCKETS
    final_flush: bool = False  # --drain: available-now releases every key's windows at its end, as spanning run does
    processor: str = "auto"  # auto or python: the one processor (the option does nothing; jvm was removed)
    # a batch reduced and written while the next is read (spark_jobs.stream.writer.BatchWriter); not with
    # --idle-flush, whose control file each batch's watermark decides for the next
    overlap: bool = True
    # where a batch is reduced: in the executors' tasks, by key group, or on the driver; auto: on the driver with a
    # local master (its executors are the driver's own JVM), on the executors otherwise (``resolved``)
    reduce_on: str = "auto"
    parallelism: int | None = None  # tasks of the executors' step; None: Spark's default parallelism
    default_buckets: bool = field(default=False, init=False)  # buckets neither given nor recorded: the default

    def __post_init__(self) -> None:
        if not TRIGGER.match(self.trigger):
            raise UsageError(f"bad --trigger {self.trigger!r}: give available-now or an interval such as 10s or 1m")
        if self.max_files_per_trigger is not None and self.max_files_per_trigger < 1:
            raise UsageError("--max-files-per-trigger must be at least 1")
        if self.buckets is None:  # the count the checkpoint was made with: a restart needs no --buckets
            recorded = recorded_buckets(self.checkpoint)
            object.__setattr__(self, "default_buckets", recorded is None)
            object.__setattr__(self, "buckets", recorded or new_checkpoint_buckets(self.reduce_on))
        if self.buckets < 1:
            raise UsageError("--buckets must be at least 1")
        if self.max_disorder < 0 or (self.idle_flush is not None and self.idle_flush < 0):
            raise UsageError("--max-disorder and --idle-flush must not be negative")
        if self.reduce_on not in REDUCE_ON:
            raise UsageError(f"bad --reduce-on {self.reduce_on!r}: give {' or '.join(REDUCE_ON)}")
        if self.parallelism is not None and self.parallelism < 1:
            raise UsageError("--parallelism must be at least 1")
        if self.processor == REMOVED_PROCESSOR:
            raise UsageError("--processor jvm was removed: spanning stream has one processor, which runs every"
                             " query; leave the option out (docs/STREAMING.md)")  # fmt: skip
        if self.processor not in PROCESSORS:
            raise UsageError(f"bad --processor {self.processor!r}: leave the option out (there is one processor)")

    def resolved(self, master: str) -> StreamOptions:
        """These options on a session of ``master``: ``auto`` made ``driver`` for a local master (``local``,
        ``local[N]``: the executors are the driver's JVM, and the driver's reduction measured faster there) and
        ``executors`` otherwise, and a new checkpoint's default bucket count the one of where it is reduced."""
        where = self.reduce_on
        if where == "auto":
            where = "driver" if master == "local" or master.startswith("local[") else "executors"
        buckets = new_checkpoint_buckets(where) if self.default_buckets else self.buckets
        return replace(self, reduce_on=where, buckets=buckets)

    @property
    def spark_trigger(self) -> dict:
        """The keyword of ``DataStreamWriter.trigger``."""
        if self.trigger == "available-now":
            return {"availableNow": True}
        number, unit = TRIGGER.match(self.trigger).groups()  # 30s, 30 s or Spark's 30 seconds
        words = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", None: "seconds"}
        return {"processingTime": f"{number} {words.get(unit, unit)}"}


def stream_output(cfg: RunConfig, options: StreamOptions, create: bool = True) -> Path:
    """The output folder of a stream: new, or the one this checkpoint wrote (a restart). It carries a marker.

    With ``create=False`` it is only checked (before anything is read), not made."""
    final = final_path(cfg.output.folder)
    checkpoint = str(Path(options.checkpoint).expanduser().resolve())
    marker = {"tool": "spanning", "stream": True, "checkpoint": checkpoint}
    if final.exists():
        found = read_marker(final)
        if found is None and any(final.iterdir()):
            raise UsageError(f"--output {cfg.output.folder} holds files that spanning did not write: give a new folder")
        if found is not None and found.get("checkpoint") != checkpoint:
            raise UsageError(
                f"--output {cfg.output.folder} was written by the stream of checkpoint {found.get('checkpoint')}:"
                " restart with that --checkpoint, or give a new --output"
            )
    for path in map(Path, cfg.inputs.paths):
        resolved = path.expanduser().resolve()
        if final == resolved or resolved in final.parents or final in resolved.parents:
            raise UsageError(f"--output {cfg.output.folder} and the input folder {path} must not hold each other")
    if create:
        final.mkdir(parents=True, exist_ok=True)
        (final / MARKER).write_text(json.dumps(marker, indent=1))
    return final


def add_stream_parser(sub: argparse._SubParsersAction) -> None:
    from spanning.app.run_command import add_query_options

    p = sub.add_parser(
        "stream",
        help="the same windows over CDR files as they arrive (Spark Structured Streaming), with late output",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input_dir", metavar="INPUT_DIR", help="folder the CDR files land in (CSV, Parquet, JSON lines)")
    p.add_argument("--output", required=True, help="output folder: windows/, late/, rejected/, summary.json")
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="checkpoint folder: Spark's offsets and state, and the query it was made for")  # fmt: skip
    add_query_options(p)
    for action in p._actions:  # where a stream differs from spanning run (argparse has no public way to say it)
        action.help = STREAM_HELP.get(action.dest, action.help)
    p.add_argument("--trigger", default="available-now",
                   help="available-now (default: process the files there, keep the open windows in the checkpoint"
                   " for the next run, stop) or an interval such as 30s or 1m (run until Ctrl-C)")  # fmt: skip
    p.add_argument("--max-files-per-trigger", type=int, metavar="N", help="files per micro-batch (default: all new)")
    p.add_argument("--idle-flush", metavar="DURATION",
                   help="release a quiet key's windows once the stream's watermark passed their end by this much"
                   " (default: never)")  # fmt: skip
    p.add_argument("--max-disorder", default="0", metavar="DURATION",
                   help="the stream's watermark lags its largest end by this much (default 0)")  # fmt: skip
    p.add_argument("--buckets", type=int, default=None, metavar="GROUPS",
                   help=f"key groups: keys are hashed into this many groups, each with its own state files, reduced"
                        f" by one task of the executors (or one thread of the driver); fixed for a checkpoint, at most"
                        f" the tasks that can work at once (default: the checkpoint's count; for a new one"
                        f" {DEFAULT_KEY_GROUPS} on the executors, {DEFAULT_BUCKETS} on the driver)")  # fmt: skip
    p.add_argument("--parallelism", type=int, default=None, metavar="N",
                   help="tasks that reduce each micro-batch's key groups (default: Spark's default parallelism, the"
                        " executors' cores); may change at any restart")  # fmt: skip
    p.add_argument("--reduce-on", choices=REDUCE_ON, default="auto",
                   help="where each micro-batch is reduced against the open windows: executors (by key group in the"
                        " executors' tasks, the driver receiving a stats row per group), driver (the batch's rows"
                        " taken to the driver), or auto (default: driver with a local master, where it is faster,"
                        " executors otherwise)")  # fmt: skip
    p.add_argument("--drain", action="store_true",
                   help="available-now: release every key's open windows at the end, as spanning run does at the end"
                   " of its input (the input is complete: a later event of those windows would be late)")  # fmt: skip
    p.add_argument("--no-overlap", dest="overlap", action="store_false",
                   help="--reduce-on driver: write each micro-batch before the next is read: its outputs about 0.2 s"
                   " sooner, 10-20%% fewer events/s sustained (by default a batch is reduced and written while the"
                   " next is read; not with --idle-flush, nor on the executors)")  # fmt: skip
    p.add_argument("--processor", default="auto",
                   help="does nothing: kept for commands written when there were two processors (auto and python"
                   " are the one processor; jvm was removed, see docs/STREAMING.md)")  # fmt: skip
    p.set_defaults(handler=_stream, series_start="first")


def options_from_args(args: argparse.Namespace) -> StreamOptions:
    unit = args.time_unit
    return StreamOptions(
        checkpoint=args.checkpoint,
        trigger=args.trigger.strip(),
        max_files_per_trigger=args.max_files_per_trigger,
        idle_flush=None if args.idle_flush is None else parse_duration(args.idle_flush, unit),
        max_disorder=parse_duration(args.max_disorder, unit),
        buckets=args.buckets,
        final_flush=args.drain,
        processor=args.processor,
        overlap=args.overlap,
        reduce_on=args.reduce_on,
        parallelism=args.parallelism,
    )


def stream_config(args: argparse.Namespace) -> RunConfig:
    """The query of a stream as a ``RunConfig`` (the reader contract and the windows are ``spanning run``'s)."""
    from spanning.app.jobspec import InputFiles, OutputOptions, SparkOptions
    from spanning.app.run_command import query_from_args

    events, query = query_from_args(args)
    if query.series_start == "earliest":
        raise UsageError(
            "--series-start earliest needs the whole input: a stream starts each key's series at its first"
            " arriving event (first, the default) or at a time you give"
        )
    return RunConfig(
        inputs=InputFiles([args.input_dir], args.input_format, args.delimiter),
        events=events,
        query=query,
        output=OutputOptions(args.output),
        spark=SparkOptions(args.master, args.partitions),
    )


def _stream(args: argparse.Namespace) -> int:
    from spanning.app.run_command import spark_engine

    cfg = stream_config(args)
    options = options_from_args(args)
    summary = spark_engine().stream(cfg, options, args.verbose)
    print(
        f"{summary['batches']} batches: {summary['rows_read']} rows read, {summary['accepted']} accepted,"
        f" {summary['rejected']} rejected, {summary['late']} late, {summary['windows_written']} windows written"
        f" to {summary['output']}; {summary['held_windows']} windows held open in the checkpoint"
        + (" (stopped; restart with the same --checkpoint to go on)" if summary.get("stopped") else "")
    )
    return 0
