"""spanning: exact sliding-window aggregates over spanning events (Suzanne et al., SE-Slicing).

>>> import spanning
>>> eng = spanning.Engine(spanning.WindowSpec(15, 5, ttp=20), {"n": "count"})
>>> eng.insert(16, 34)
[]

The batch entry point is ``spanning.aggregate``; see its docstring.
"""

from spanning.aggregates import (
    Aggregate,
    SumOverflowError,
    UserAggregate,
    argmax,
    argmin,
    count,
    maxcount,
    maximum,
    mean,
    mincount,
    minimum,
    parse_aggregate,
    stddev,
    stddev_pop,
    sum_of,
)
from spanning.engines.batch import aggregate, aggregate_many
from spanning.engines.engine import Engine, LateEvent, Window
from spanning.engines.multi_window import MultiEngine
from spanning.kernels.windows import PairsSlicer, WindowSpec
from spanning.techniques.registry import TECHNIQUES

__all__ = [
    "Aggregate",
    "Engine",
    "LateEvent",
    "PairsSlicer",
    "SumOverflowError",
    "TECHNIQUES",
    "UserAggregate",
    "Window",
    "WindowSpec",
    "aggregate",
    "aggregate_many",
    "MultiEngine",
    "argmax",
    "argmin",
    "count",
    "maxcount",
    "maximum",
    "mean",
    "mincount",
    "minimum",
    "parse_aggregate",
    "stddev",
    "stddev_pop",
    "sum_of",
]
__version__ = "0.1.0"
