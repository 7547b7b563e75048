"""spanning: exact sliding-window aggregates over spanning events (Suzanne et al., SE-Slicing).

>>> import spanning
>>> eng = spanning.Engine(spanning.WindowSpec(15, 5, ttp=20), {"n": "count"})
>>> eng.insert(16, 34)
[]

The batch entry point is ``spanning.aggregate``; see its docstring.
"""

from __future__ import annotations

import importlib

# The public names, each from its module; imported on first use (PEP 562), so that a Spark worker that needs
# one kernel (``spanning.engines.window_ranges``, numpy only) does not import pandas and every engine with it.
_PUBLIC = {
    "spanning.aggregates": ["Aggregate", "SumOverflowError", "UserAggregate", "argmax", "argmin", "count",
                            "maxcount", "maximum", "mean", "mincount", "minimum", "parse_aggregate", "stddev",
                            "stddev_pop", "sum_of"],
    "spanning.engines.batch": ["aggregate", "aggregate_many"],
    "spanning.engines.engine": ["Engine", "LateEvent", "Window"],
    "spanning.engines.multi_window": ["MultiEngine"],
    "spanning.kernels.windows": ["PairsSlicer", "WindowSpec"],
    "spanning.techniques.registry": ["TECHNIQUES"],
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'spanning' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


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
__version__ = "0.2.0"
