"""The built-in aggregates by name: constructors and the ``"kind:column"`` string form.

>>> parse_aggregate("argmax:duration:caller").name
'argmax:duration:caller'
>>> parse_aggregate("mean")
Traceback (most recent call last):
...
ValueError: bad aggregate 'mean': write it as 'mean:column'

Every built-in declares what it has: an inverse exactly when invertible, an array face when vectorised.

>>> aggs = [make(*(("x",) if name != "count" else ())) for name, make in BUILTIN_AGGREGATES.items()]
>>> all(a.capabilities.invertible == (a.inverse is not None) for a in aggs)
True
>>> all(a.capabilities.vectorised == (type(a).window_partials is not Aggregate.window_partials) for a in aggs)
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from spanning.aggregates.builtins import ArgExtreme, Count, Extreme, ExtremeCount, Mean, StdDev, Sum
from spanning.aggregates.distinct import FORMS, parse_distinct
from spanning.aggregates.protocol import Aggregate
from spanning.aggregates.traffic import ARITY as TRAFFIC_ARITY
from spanning.aggregates.traffic import TRAFFIC, Occupancy

__all__ = [
    "BUILTIN_AGGREGATES",
    "argmax",
    "argmin",
    "count",
    "maxcount",
    "maximum",
    "mean",
    "mincount",
    "minimum",
    "parse_aggregate",
    "seconds_columns",
    "stddev",
    "stddev_pop",
    "sum_of",
]


def count(column: str | None = None) -> Aggregate:
    """``count`` (events) or ``count:col`` (non-null values)."""
    return Count(column)


def sum_of(column: str) -> Aggregate:
    return Sum(column)


def mean(column: str) -> Aggregate:
    return Mean(column)


def minimum(column: str) -> Aggregate:
    return Extreme(column, largest=False)


def maximum(column: str) -> Aggregate:
    return Extreme(column, largest=True)


def stddev(column: str) -> Aggregate:
    return StdDev(column, population=False)


def stddev_pop(column: str) -> Aggregate:
    return StdDev(column, population=True)


def argmin(column: str, result: str | None = None) -> Aggregate:
    return ArgExtreme(column, largest=False, result=result)


def argmax(column: str, result: str | None = None) -> Aggregate:
    return ArgExtreme(column, largest=True, result=result)


def mincount(column: str) -> Aggregate:
    return ExtremeCount(column, largest=False)


def maxcount(column: str) -> Aggregate:
    return ExtremeCount(column, largest=True)


BUILTIN_AGGREGATES: dict[str, Callable[..., Aggregate]] = {
    "count": count,
    "sum": sum_of,
    "mean": mean,
    "min": minimum,
    "max": maximum,
    "stddev": stddev,
    "stddev_pop": stddev_pop,
    "argmin": argmin,
    "argmax": argmax,
    "mincount": mincount,
    "maxcount": maxcount,
}
_ARITY = {"count": (0, 1), "argmin": (1, 2), "argmax": (1, 2)}


def aggregate_forms() -> list[str]:
    """Every aggregate as written on the command line: ``count``, ``sum:column``, ..., ``kll_sketch:column[:K]``."""
    forms = {0: "{}", 1: "{}:column", 2: "{}:column[:result]"}
    builtin = [forms[_ARITY.get(kind, (1, 1))[1]].format(kind) for kind in BUILTIN_AGGREGATES]
    builtin = ["count[:column]" if form == "count:column" else form for form in builtin]
    return builtin + list(FORMS.values()) + [f"{k}:column" if TRAFFIC_ARITY.get(k) else k for k in TRAFFIC]


def parse_aggregate(spec: str | Aggregate) -> Aggregate:
    """Build an aggregate from ``"kind"`` / ``"kind:column"`` / ``"argmax:column:result"``."""
    if isinstance(spec, Aggregate):
        return spec
    if not isinstance(spec, str):
        raise ValueError(f"an aggregate must be a string like 'sum:bytes' or an Aggregate, got {spec!r}")
    kind, *args = spec.strip().split(":")
    if kind in FORMS:  # distinct counts and quantiles, exact and sketched
        return parse_distinct(kind, args)
    if kind in TRAFFIC:  # the time inside each window
        wanted = TRAFFIC_ARITY.get(kind, 0)
        if len(args) != wanted or any(not a for a in args):
            form = f"{kind}:column" if wanted else kind
            raise ValueError(f"bad aggregate {spec!r}: write it as {form!r} (it reads the events' start and end)")
        return TRAFFIC[kind](*args)
    if kind not in BUILTIN_AGGREGATES:
        known = ", ".join(sorted([*BUILTIN_AGGREGATES, *FORMS, *TRAFFIC]))
        raise ValueError(f"unknown aggregate {spec!r}: the kinds are {known}")
    low, high = _ARITY.get(kind, (1, 1))
    if not low <= len(args) <= high or any(not a for a in args):
        forms = {0: kind, 1: f"{kind}:column", 2: f"{kind}:column:result"}
        allowed = " or ".join(repr(forms[n]) for n in range(low, high + 1))
        raise ValueError(f"bad aggregate {spec!r}: write it as {allowed}")
    return BUILTIN_AGGREGATES[kind](*args)


def seconds_columns(aggregates: Mapping[str, str | Aggregate], time_unit: str) -> list[str]:
    """The output columns every engine divides by ``reader.CHRONONS_PER_SECOND[time_unit]`` as it writes them: the
    ``occupancy`` ones, reported in seconds, when a chronon is not a second (``aggregates``: output name -> spec).

    >>> seconds_columns({"busy": "occupancy", "erl": "erlang", "n": "count"}, "ms")
    ['busy']
    >>> seconds_columns({"busy": "occupancy"}, "s")
    []
    """
    if time_unit == "s":  # a chronon is a second (the other units: reader.CHRONONS_PER_SECOND)
        return []
    return [name for name, spec in aggregates.items() if isinstance(parse_aggregate(spec), Occupancy)]
