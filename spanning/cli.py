"""The ``spanning`` command: ``run`` (the windowed job), ``stream``, ``busy-hour``, ``generate-cdr``, ``tune-height``,
``bench``.

User mistakes end with one ``spanning: error:`` line and exit code 2; other failures (bugs) with exit
code 1. ``--verbose`` shows the stack trace and the warnings that are otherwise silenced. Optional
extras (pyspark, the bench extra) are imported only by the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from spanning.app.busy_hour import add_busy_hour_parser
from spanning.app.jobspec import UsageError
from spanning.app.run_command import add_run_parser
from spanning.app.stream_command import add_stream_parser
from spanning.app.tool_commands import add_bench_parser, add_generate_parser, add_tune_parser

# their warnings show only with --verbose
QUIET_COMMANDS = ("run", "stream", "busy-hour", "tune-height", "generate-cdr")
USER_ERRORS = ("UsageError", "SumOverflowError")  # exception names that mean a user mistake (exit 2)


class Parser(argparse.ArgumentParser):
    """argparse with one ``spanning: error:`` line for a bad command line (exit 2), not the usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"spanning: error: {message} (see: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from spanning import __version__

    parser = Parser(prog="spanning", description="Sliding-window aggregates over spanning events.")
    parser.add_argument("--version", action="version", version=f"spanning {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_parser(sub)
    add_stream_parser(sub)
    add_busy_hour_parser(sub)
    add_generate_parser(sub)
    add_tune_parser(sub)
    add_bench_parser(sub)
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


#: options that take a duration: a value such as ``-5m`` is theirs, not an option (argparse would say
#: "expected one argument"), so that ``parse_duration`` can say that durations are not negative
DURATION_OPTIONS = ("--range", "--slide", "--ttp", "--offset", "--window")


def _negative_durations_attached(argv: list[str]) -> list[str]:
    out: list[str] = []
    for token in argv:
        if out and out[-1] in DURATION_OPTIONS and re.match(r"-\s*\d", token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(_negative_durations_attached(sys.argv[1:] if argv is None else argv))
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


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` as Python's own exit would, less the interpreter's teardown.

    After the command's work, Python waits for its threads and runs the exit handlers (``atexit``: Spark stopped,
    the JVM's temp folder removed, logging flushed), then tears the interpreter down: every module's objects
    freed, py4j's proxies of JVM objects among them. That teardown took 0.29-0.33 s of every ``spanning stream``
    process over Spark, after its last line (2026-11-28, docs/STREAMING.md), time a user waits for nothing. So the
    first two steps run here as Python runs them (``threading._shutdown``, ``atexit._run_exitfuncs``), the
    standard streams are flushed, and the process ends (``os._exit``). Where CPython's two steps are missing
    (another Python), it exits the usual way."""
    shutdown, run_exit_handlers = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exit_handlers is None:
        sys.exit(code)
    shutdown()  # the threads that are not daemons, joined (and their pools told to stop) as at a normal exit
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (spanning ... | head): nothing more can reach it
            pass
    os._exit(code)


def console() -> NoReturn:
    """The ``spanning`` command (``[project.scripts]``): ``main``, then ``exit_now``."""
    exit_now(main())


if __name__ == "__main__":
    console()
