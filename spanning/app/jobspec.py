"""What a ``spanning run`` computes, independent of the engine (local pandas or Spark).

``RunConfig`` groups what travels together: ``InputFiles`` (paths, format, delimiter), ``EventFields`` (start,
end or duration, keys, point events, time unit, time zone), ``WindowQuery`` (range, slide, TTP, aggregates,
offset, several windows, series start, empty windows), ``Execution`` (``spanning.engines.params``: technique,
height, SWAG, sharing), ``OutputOptions``, the engine and ``SparkOptions``. Each group checks its own options;
``parameters`` flattens them for summary.json (``PARAMETERS``: flat name -> group and field).

>>> cfg = RunConfig(InputFiles(["calls.csv"]), EventFields("start", "end"), WindowQuery(900, 300, 7200))
>>> cfg.query.spec.range, cfg.execution.technique, list(cfg.parameters())[:5]
(900, 'se-slicing', ['inputs', 'range', 'slide', 'ttp', 'start'])
>>> parse_duration("15m"), parse_duration("2h", "ms"), parse_duration("900")
(900, 7200000, 900)
>>> output_name("sum:bytes"), output_name("count"), output_name("argmax:duration:caller")
('sum_bytes', 'count', 'argmax_duration_caller')
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

from spanning.aggregates import ResultKind, parse_aggregate
from spanning.engines.params import Execution
from spanning.engines.reader import CHRONON_MS, REASONS, UsageError
from spanning.kernels.windows import WindowSpec

__all__ = [
    "RunConfig",
    "InputFiles",
    "EventFields",
    "WindowQuery",
    "OutputOptions",
    "SparkOptions",
    "UsageError",
    "parse_duration",
    "output_name",
    "REASONS",
    "EVENTS_COLUMN",
]

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
EVENTS_COLUMN = "__events"  # hidden count used to skip empty windows
# --plan: how the Spark job computes (spark_jobs.batch.plans)
PLANS = ("auto", "explode", "vector", "python")
RETIRED_PLANS = ("range", "dyadic")  # retired 2026-11-27: vector's compiled kernel does their range updates
INPUT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json"}

CORRUPT_RECORD = "_corrupt_record"  # where a JSON reader keeps a line it could not parse


def parse_duration(text: str | int, time_unit: str = "s") -> int:
    """``900`` (chronons), ``90s``, ``15m``, ``2h``, ``1d`` or ``500ms`` as a number of chronons."""
    if time_unit not in CHRONON_MS:
        raise UsageError(f"bad time unit {time_unit!r}: use s or ms")
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)?\s*", str(text))
    if not match and re.fullmatch(r"\s*-\s*\d+\s*(ms|s|m|h|d)?\s*", str(text)):
        raise UsageError(f"duration {text!r} is negative: a range, slide, ttp or offset is a length of time, 0 or more")
    if not match:
        raise UsageError(f"bad duration {text!r}: write a number of chronons or e.g. 90s, 15m, 2h, 1d")
    number, unit = int(match.group(1)), match.group(2)
    if unit is None:
        return number
    millis = number * UNITS[unit]
    if millis % CHRONON_MS[time_unit]:
        raise UsageError(f"duration {text!r} is not a whole number of {time_unit}")
    return millis // CHRONON_MS[time_unit]


def parse_window(spec: str | tuple | list, time_unit: str = "s", what: str = "window") -> tuple[int, int]:
    """One window spec, ``"15m/5m"`` (RANGE/SLIDE, as ``--window`` takes it) or a pair ``(range, slide)`` of
    durations, as (range, slide) in chronons; ``what`` names it in an error (``--window``).

    >>> parse_window("15m/5m"), parse_window((900, "5m"))
    ((900, 300), (900, 300))
    """
    if isinstance(spec, str):
        parts = spec.split("/")
        if len(parts) != 2:
            raise UsageError(f"bad {what} {spec!r}: write RANGE/SLIDE, e.g. 15m/5m")
    elif isinstance(spec, tuple | list) and len(spec) == 2:
        parts = list(spec)
    else:
        raise UsageError(f"bad {what} {spec!r}: write RANGE/SLIDE, e.g. '15m/5m', or a pair (range, slide)")
    return parse_duration(parts[0], time_unit), parse_duration(parts[1], time_unit)


def key_column(i: int) -> str:
    """Internal name of the i-th key in an engine's events (its output name may be an input column's)."""
    return f"__key_{i}"


def value_column(i: int) -> str:
    """Internal name of the i-th aggregated column (input names may hold dots, spaces or a key's name)."""
    return f"__v_{i}"


def with_columns(spec: str, names: dict[str, str]) -> str:
    """An aggregate spec with its columns renamed: ``with_columns("argmax:a:b", {"a": "x", "b": "y"})``.

    >>> with_columns("argmax:duration:cell", {"duration": "__v_0", "cell": "__v_1"})
    'argmax:__v_0:__v_1'
    """
    kind, *columns = spec.strip().split(":")
    return ":".join([kind, *(names.get(c, c) for c in columns)])


def user_errors(error: Exception, columns: dict[str, str]) -> Exception:
    """An engine error about an internal column name, told with the user's column (``columns``: internal -> input)."""
    from spanning.aggregates import SumOverflowError

    if isinstance(error, SumOverflowError) and error.column in columns:
        return SumOverflowError(columns[error.column])
    return error


def output_name(spec: str) -> str:
    """Output column of an aggregate: ``count``, ``sum_bytes``, ``argmax_duration_caller``,
    ``percentile_duration_0_95`` (a quantile's dot becomes ``_``; column names are kept as they are)."""
    return "_".join(part.replace(".", "_") if re.fullmatch(r"\d*\.\d+", part) else part for part in spec.split(":"))


def _one_of(option: str, value: object, allowed: tuple) -> None:
    if value not in allowed:
        raise UsageError(f"bad --{option} {value!r}: use {' or '.join(allowed)}")


@dataclass
class InputFiles:
    """The input files and how to read them (``spanning.app.files.input_files``)."""

    paths: list[str]  # files, folders or globs
    format: str | None = None  # csv, parquet or json when the extension does not tell (--input-format)
    delimiter: str = ","  # CSV field separator

    def __post_init__(self) -> None:
        if not self.paths:
            raise UsageError("no input given")
        if self.format not in (None, "csv", "parquet", "json"):
            raise UsageError(f"bad --input-format {self.format!r}: use csv, parquet or json")


@dataclass
class EventFields:
    """Where an input row keeps its event, and how its times read (the reader contract, ``spanning.engines.reader``)."""

    start: str  # a column (local and Spark) or a Spark SQL expression
    end: str | None = None
    duration: str | None = None  # instead of end: a length in chronons
    keys: list[str] = field(default_factory=list)
    point_events: bool = False  # each row is the point [start, start + 1)
    time_unit: str = "s"  # the chronon: s or ms
    timezone: str = "UTC"  # of date-time text without a zone

    def __post_init__(self) -> None:
        if self.point_events:
            if self.end or self.duration:
                raise UsageError("--point-events uses --start only: drop --end/--duration")
        elif (self.end is None) == (self.duration is None):
            raise UsageError("give exactly one of --end and --duration (or --point-events)")
        _one_of("time-unit", self.time_unit, ("s", "ms"))
        from spanning.engines.reader import check_timezone

        check_timezone(self.timezone)


@dataclass
class WindowQuery:
    """The windows and what they aggregate: durations in chronons, aggregate specs such as ``sum:bytes``."""

    range: int
    slide: int
    ttp: int
    aggregates: list[str] = field(default_factory=lambda: ["count"])
    offset: int = 0
    windows: list[tuple[int, int]] = field(default_factory=list)  # several (range, slide): rows tagged "window"
    series_start: str | int = "earliest"  # per key: earliest start in the data, first row's start, or a time
    empty_windows: str = "skip"  # or emit

    def __post_init__(self) -> None:
        try:
            if self.windows:  # several specs: the first also serves where one is needed (height auto)
                self.range, self.slide = self.windows[0]
            self.specs = [WindowSpec(r, s, self.ttp, self.offset) for r, s in self.windows]
            self.spec = WindowSpec(self.range, self.slide, self.ttp, self.offset)
            for agg in self.aggregates:
                parse_aggregate(agg)
        except ValueError as err:
            raise UsageError(str(err)) from err
        _one_of("empty-windows", self.empty_windows, ("skip", "emit"))
        if self.series_start not in ("earliest", "first"):
            try:
                self.series_start = int(self.series_start)
            except (TypeError, ValueError):
                raise UsageError(
                    f"bad --series-start {self.series_start!r}: use earliest, first or a time in chronons"
                ) from None
        names = [output_name(a) for a in self.aggregates]
        if len(set(names)) != len(names):
            raise UsageError("an aggregate is given twice")

    def one_window(self, spec: WindowSpec) -> WindowQuery:
        """The same query over the one window spec ``spec`` (of ``specs``)."""
        return replace(self, windows=[], range=spec.range, slide=spec.slide)

    @property
    def aggregate_columns(self) -> dict[str, str]:
        """Output column name -> aggregate spec, in the order given."""
        return {output_name(a): a for a in self.aggregates}

    @property
    def per_window_aggregates(self) -> list[str]:
        """The aggregates of the time inside each window (``capabilities.per_window``: occupancy, erlang,
        prorated_sum, peak_concurrent), which need the window's bounds."""
        return [a for a in self.aggregates if parse_aggregate(a).capabilities.per_window]

    @property
    def value_columns(self) -> list[str]:
        """Input columns the aggregates read."""
        return list(dict.fromkeys(c for a in self.aggregates for c in parse_aggregate(a).columns))

    @property
    def numeric_columns(self) -> list[str]:
        return list(dict.fromkeys(c for a in self.aggregates for c in parse_aggregate(a).numeric_columns))


@dataclass
class OutputOptions:
    """Where and how the outputs are written (``spanning.app.outputs``)."""

    folder: str = "spanning-output"
    format: str = "parquet"  # or csv
    overwrite: bool = False  # replace a folder that spanning wrote, once the new output is complete

    def __post_init__(self) -> None:
        _one_of("format", self.format, ("parquet", "csv"))


@dataclass
class SparkOptions:
    """What only the Spark engine reads."""

    master: str | None = None  # None: spark-submit's, else local[*]
    partitions: int | None = None  # shuffle partitions (default: 2 per core)
    plan: str = "auto"  # one of PLANS: auto, explode (in the JVM), vector (the compiled kernel) or python
    remote: str | None = None  # a Spark Connect server (sc://host:port, or local[N]): the job as its client

    def __post_init__(self) -> None:
        if self.plan in RETIRED_PLANS:
            raise UsageError(f"--plan {self.plan} was retired: --plan vector does its range updates in the compiled"
                             " kernel, faster (or leave --plan auto)")  # fmt: skip
        if self.plan not in PLANS:
            raise UsageError(f"bad --plan {self.plan!r}: use {', '.join(PLANS[:-1])} or {PLANS[-1]}")
        if self.remote is not None and not self.remote.startswith(("sc://", "local")):
            raise UsageError(f"bad Spark Connect URL {self.remote!r}: give sc://host:port (or local[N] for a server"
                             " started in this process)")  # fmt: skip
        if self.remote is not None and self.master is not None:
            raise UsageError("give --master or a Spark Connect server (--remote, SPARK_REMOTE), not both: a Connect"
                             " server runs on the master it was started with")  # fmt: skip


# summary.json's "parameters": one flat name per option, in the order they have always been written
PARAMETERS = {
    "inputs": ("inputs", "paths"),
    "range": ("query", "range"),
    "slide": ("query", "slide"),
    "ttp": ("query", "ttp"),
    "start": ("events", "start"),
    "end": ("events", "end"),
    "duration": ("events", "duration"),
    "keys": ("events", "keys"),
    "aggregates": ("query", "aggregates"),
    "technique": ("execution", "technique"),
    "height": ("execution", "height"),
    "point_events": ("events", "point_events"),
    "swag": ("execution", "swag"),
    "output": ("output", "folder"),
    "format": ("output", "format"),
    "engine": (None, "engine"),
    "master": ("spark", "master"),
    "time_unit": ("events", "time_unit"),
    "empty_windows": ("query", "empty_windows"),
    "overwrite": ("output", "overwrite"),
    "input_format": ("inputs", "format"),
    "series_start": ("query", "series_start"),
    "timezone": ("events", "timezone"),
    "offset": ("query", "offset"),
    "partitions": ("spark", "partitions"),
    "windows": ("query", "windows"),
    "sharing": ("execution", "sharing"),
    "delimiter": ("inputs", "delimiter"),
    "plan": ("spark", "plan"),
    "remote": ("spark", "remote"),
}


@dataclass
class RunConfig:
    """Everything ``spanning run`` needs, validated; the same for both engines.

    Each group checks its own options when it is made; ``RunConfig`` checks what involves two of them.
    """

    inputs: InputFiles
    events: EventFields
    query: WindowQuery
    execution: Execution = field(default_factory=Execution)  # technique, height, SWAG, sharing
    output: OutputOptions = field(default_factory=OutputOptions)
    engine: str = "spark"  # or local
    spark: SparkOptions = field(default_factory=SparkOptions)

    def __post_init__(self) -> None:
        if self.execution.swag is not None and not self.events.point_events:
            raise UsageError("--swag aggregates point events: give --point-events too")
        _one_of("engine", self.engine, ("spark", "local"))
        if self.execution.sharing not in ("all", "none", "weaveshare"):
            raise UsageError(f"bad --sharing {self.execution.sharing!r}: use all, none or weaveshare")
        if self.execution.technique == "sweeping":  # a clear line here, not the engine's over internal names
            unswept = [a for a in self.query.aggregates if parse_aggregate(a).capabilities.form is None]
            if unswept:
                raise UsageError(f"--technique sweeping cannot compute {unswept[0]} (plane sweeping needs values"
                                 " that can leave a running form): use se-slicing, se-ml-slicing, tuple-buckets or"
                                 " aggregate-buckets")  # fmt: skip
        per_window = self.query.per_window_aggregates
        if per_window and (self.execution.technique != "se-slicing" or self.execution.swag is not None):
            how = f"--technique {self.execution.technique}" + (" with --swag" if self.execution.swag else "")
            raise UsageError(f"{how} cannot compute --agg {per_window[0]}: the time inside each window needs the"
                             " window's bounds, which only se-slicing's batch path has; drop --technique/--swag")
        if self.output.format == "csv":
            binary = [a for a in self.query.aggregates if parse_aggregate(a).capabilities.result is ResultKind.BINARY]
            if binary:
                raise UsageError(f"--agg {binary[0]} writes a sketch (bytes), which CSV cannot hold: use --format"
                                 " parquet")  # fmt: skip

    @classmethod
    def from_parameters(cls, parameters: dict) -> RunConfig:
        """The job of flat parameters as ``parameters`` gives them (summary.json); those left out take their defaults.

        >>> cfg = RunConfig.from_parameters({"inputs": ["calls.csv"], "start": "s", "end": "e", "range": 900,
        ...                                  "slide": 300, "ttp": 0, "plan": "vector"})
        >>> cfg.query.spec.range, cfg.spark.plan, RunConfig.from_parameters(cfg.parameters()) == cfg
        (900, 'vector', True)
        """
        unknown = sorted(set(parameters) - set(PARAMETERS))
        if unknown:
            raise TypeError(f"unknown parameters: {', '.join(unknown)}")
        groups: dict[str | None, dict] = {}
        for flat, value in parameters.items():
            group, name = PARAMETERS[flat]
            groups.setdefault(group, {})[name] = value
        kinds = {"inputs": InputFiles, "events": EventFields, "query": WindowQuery, "execution": Execution,
                 "output": OutputOptions, "spark": SparkOptions}  # fmt: skip
        top = groups.pop(None, {})
        return cls(**{group: kinds[group](**values) for group, values in groups.items()}, **top)

    def parameters(self) -> dict:
        """The parameters as written to summary.json: one flat dict, whatever the groups."""
        groups = {name: asdict(getattr(self, name)) for name in ("inputs", "events", "query", "execution", "output",
                                                                  "spark")}  # fmt: skip
        return {flat: groups[group][name] if group else getattr(self, name)
                for flat, (group, name) in PARAMETERS.items()}  # fmt: skip
