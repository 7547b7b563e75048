"""Aggregate functions in lift / combine / lower form (Suzanne et al., §2.3, §3.1, Table 1).

Each aggregate has two faces that give the same results, and declares what it is:

* the scalar face (``identity``, ``lift``, ``combine``, ``lower``) used by the per-event path, where a
  partial is a small Python value (``protocol``, ``builtins``);
* the array face (``window_partials``, ``merge``, ``lower_partials``) used by the batch path, where a
  partial is a tuple of numpy arrays with one entry per window (``arrays``, over ``spanning.kernels.ranges``);
* ``capabilities``: invertible, selective (duplicate-insensitive: max-like, Table 1; the others go
  through the (φ, ϕ) pair, §3.2), vectorised, and the kind of result (``capabilities``).

The modules: ``capabilities`` (what an aggregate is), ``columns`` (SQL nulls, exact integers, the batch
columns), ``protocol`` (``Aggregate``, ``UserAggregate``), ``builtins`` (the built-in aggregates),
``arrays`` (their array faces), ``distinct`` (distinct counts and quantiles, exact and as DataSketches
sketches) and ``parser`` (constructors and the ``"kind:column"`` form).
Every name is re-exported here: import from ``spanning.aggregates``.

SQL null semantics: nulls (None, NaN, pandas NA) are ignored; ``count`` counts events, ``count:col``
non-null values; everything else is null over no values.

Integer sums are exact and never wrap: they stay int64, and a window whose exact sum does
not fit in int64 raises ``SumOverflowError`` on every path (per-event, batch, chunked) alike.

>>> agg = parse_aggregate("max:duration")
>>> agg.lower(agg.combine(agg.lift({"duration": 18}, 0), agg.lift({"duration": 63}, 1)))
63
>>> parse_aggregate("mean:bytes").lower((30, 3))
10.0
"""

from spanning.aggregates.builtins import ArgExtreme, Count, Extreme, ExtremeCount, Mean, NullableValue, StdDev, Sum
from spanning.aggregates.capabilities import Capabilities, Form, ResultKind, SqlFunction
from spanning.aggregates.columns import (
    INT64_MAX,
    INT64_MIN,
    BatchColumns,
    SumOverflowError,
    is_null,
    nullable,
    nullable_column,
)
from spanning.aggregates.distinct import (
    ApproxCountDistinct,
    ApproxPercentile,
    CountDistinct,
    HllSketch,
    KllSketch,
    Percentile,
)
from spanning.aggregates.parser import (
    BUILTIN_AGGREGATES,
    argmax,
    argmin,
    count,
    maxcount,
    maximum,
    mean,
    mincount,
    minimum,
    parse_aggregate,
    seconds_columns,
    stddev,
    stddev_pop,
    sum_of,
)
from spanning.aggregates.protocol import Aggregate, UserAggregate
from spanning.aggregates.traffic import Erlang, Occupancy

__all__ = [
    "Aggregate",
    "ApproxCountDistinct",
    "ApproxPercentile",
    "CountDistinct",
    "Erlang",
    "HllSketch",
    "KllSketch",
    "Percentile",
    "ArgExtreme",
    "BatchColumns",
    "BUILTIN_AGGREGATES",
    "Capabilities",
    "Count",
    "Extreme",
    "ExtremeCount",
    "Form",
    "INT64_MAX",
    "INT64_MIN",
    "Mean",
    "NullableValue",
    "Occupancy",
    "ResultKind",
    "SqlFunction",
    "StdDev",
    "Sum",
    "SumOverflowError",
    "UserAggregate",
    "argmax",
    "argmin",
    "count",
    "is_null",
    "maxcount",
    "maximum",
    "mean",
    "mincount",
    "minimum",
    "nullable",
    "nullable_column",
    "parse_aggregate",
    "stddev",
    "stddev_pop",
    "sum_of",
    "seconds_columns",
]
