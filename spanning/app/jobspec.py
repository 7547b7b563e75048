"""What a ``spanning run`` computes, independent of the engine (local pandas or Spark).

>>> parse_duration("15m"), parse_duration("2h", "ms"), parse_duration("900")
(900, 7200000, 900)
>>> output_name("sum:bytes"), output_name("count"), output_name("argmax:duration:caller")
('sum_bytes', 'count', 'argmax_duration_caller')
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from spanning.aggregates import parse_aggregate
from spanning.engines.params import Execution
from spanning.kernels.windows import WindowSpec

__all__ = ["RunConfig", "UsageError", "parse_duration", "output_name", "REASONS", "EVENTS_COLUMN"]

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
CHRONON_MS = {"s": 1000, "ms": 1}
EVENTS_COLUMN = "__events"  # hidden count used to skip empty windows
PLANS = ("auto", "explode", "range", "dyadic", "python")  # --plan: how the Spark job computes (spark_jobs.plans)
INPUT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json"}

# why an input row could not be used (the `reason` column of rejected/)
REASONS = {
    "start": "start is null or not a time",
    "end": "end is null or not a time",
    "duration": "duration is null or not a number",
    "fraction": "time is not a whole number of chronons",
    "order": "end is before start",
    "value": "non-numeric value in column {column}",
    "range": "integer out of the 64-bit range in column {column}",
    "infinite": "infinite value in column {column}",
    "json": "not a JSON object (malformed line)",
}
CORRUPT_RECORD = "_corrupt_record"  # where a JSON reader keeps a line it could not parse


class UsageError(ValueError):
    """A mistake in what the user asked for: reported as one line, without a stack trace."""


def parse_duration(text: str | int, time_unit: str = "s") -> int:
    """``900`` (chronons), ``90s``, ``15m``, ``2h``, ``1d`` or ``500ms`` as a number of chronons."""
    if time_unit not in CHRONON_MS:
        raise UsageError(f"bad time unit {time_unit!r}: use s or ms")
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)?\s*", str(text))
    if not match:
        raise UsageError(f"bad duration {text!r}: write a number of chronons or e.g. 90s, 15m, 2h, 1d")
    number, unit = int(match.group(1)), match.group(2)
    if unit is None:
        return number
    millis = number * UNITS[unit]
    if millis % CHRONON_MS[time_unit]:
        raise UsageError(f"duration {text!r} is not a whole number of {time_unit}")
    return millis // CHRONON_MS[time_unit]


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
    """Output column of an aggregate: ``count``, ``sum_bytes``, ``argmax_duration_caller``."""
    return spec.replace(":", "_")


@dataclass
class RunConfig:
    """Everything ``spanning run`` needs, validated; the same for both engines."""

    inputs: list[str]
    range: int
    slide: int
    ttp: int
    start: str
    end: str | None = None
    duration: str | None = None
    keys: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=lambda: ["count"])
    technique: str = "se-slicing"
    height: int | str = 1  # or "auto"
    point_events: bool = False
    swag: str | None = None  # with point_events: the FIFO SWAG of the final aggregation
    output: str = "spanning-output"
    format: str = "parquet"
    engine: str = "spark"
    master: str | None = None  # None: spark-submit's, else local[*]
    time_unit: str = "s"
    empty_windows: str = "skip"
    overwrite: bool = False
    input_format: str | None = None
    series_start: str | int = "earliest"  # per key: earliest start in the data, first row's start, or a time
    timezone: str = "UTC"
    offset: int = 0
    partitions: int | None = None  # Spark shuffle partitions (default: 2 per core)
    windows: list[tuple[int, int]] = field(default_factory=list)  # several (range, slide): rows tagged "window"
    sharing: str = "all"  # how several windows share slices on the per-event path: all, none, weaveshare
    delimiter: str = ","  # CSV field separator
    plan: str = "auto"  # Spark, one of PLANS: auto, explode, range, dyadic (JVM plans) or python (mapInPandas)

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
        if not self.inputs:
            raise UsageError("no input given")
        if self.swag is not None and not self.point_events:
            raise UsageError("--swag aggregates point events: give --point-events too")
        if self.point_events:
            if self.end or self.duration:
                raise UsageError("--point-events uses --start only: drop --end/--duration")
        elif (self.end is None) == (self.duration is None):
            raise UsageError("give exactly one of --end and --duration (or --point-events)")
        choices = {
            "format": ("parquet", "csv"),
            "engine": ("spark", "local"),
            "empty_windows": ("skip", "emit"),
            "time_unit": ("s", "ms"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise UsageError(f"bad --{name.replace('_', '-')} {getattr(self, name)!r}: use {' or '.join(allowed)}")
        if self.plan not in PLANS:
            raise UsageError(f"bad --plan {self.plan!r}: use {', '.join(PLANS[:-1])} or {PLANS[-1]}")
        if self.sharing not in ("all", "none", "weaveshare"):
            raise UsageError(f"bad --sharing {self.sharing!r}: use all, none or weaveshare")
        if self.input_format not in (None, "csv", "parquet", "json"):
            raise UsageError(f"bad --input-format {self.input_format!r}: use csv, parquet or json")
        if self.series_start not in ("earliest", "first"):
            try:
                self.series_start = int(self.series_start)
            except (TypeError, ValueError):
                raise UsageError(
                    f"bad --series-start {self.series_start!r}: use earliest, first or a time in chronons"
                ) from None
        from spanning.app.reader import check_timezone

        check_timezone(self.timezone)
        names = [output_name(a) for a in self.aggregates]
        if len(set(names)) != len(names):
            raise UsageError("an aggregate is given twice")

    @property
    def execution(self) -> Execution:
        """How the windows are computed (technique, height, SWAG, sharing), as the engines take it."""
        return Execution(self.technique, self.height, self.swag, self.sharing)

    @property
    def aggregate_columns(self) -> dict[str, str]:
        """Output column name -> aggregate spec, in the order given."""
        return {output_name(a): a for a in self.aggregates}

    @property
    def value_columns(self) -> list[str]:
        """Input columns the aggregates read."""
        return list(dict.fromkeys(c for a in self.aggregates for c in parse_aggregate(a).columns))

    @property
    def numeric_columns(self) -> list[str]:
        return list(dict.fromkeys(c for a in self.aggregates for c in parse_aggregate(a).numeric_columns))

    def parameters(self) -> dict:
        """The parameters as written to summary.json."""
        params = asdict(self)
        params.pop("spec", None)
        params.pop("specs", None)
        return params
