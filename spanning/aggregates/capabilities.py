"""What an aggregate is, declared as data: ``Aggregate.capabilities`` (Suzanne et al., §2.3, §3.1, Table 1).

Code that needs a property of an aggregate asks its capabilities and never checks its class or name:

* ``invertible``: ``agg.inverse(total, oldest)`` takes the oldest part out of a combined partial, as the
  subtract-on-evict SWAGs need (``soe``; SlickDeque's invertible form, Shein et al., §3.2, Algorithm 1);
* ``selective``: duplicate-insensitive, ``combine(a, a) == a`` (Table 1 "selective", max-like), so an event
  may be combined into several slices; the others are cumulative and take the (φ, ϕ) pair (§3.2.2);
* ``vectorised``: the aggregate has an array face (``window_partials``, ``merge``, ``lower_partials``), so the
  batch path runs it without the per-event engine;
* ``result``: the kind of its result column (``ResultKind``), from which the Spark, Arrow and pandas types follow;
* ``form``: how it follows from its values when values also leave, as in plane sweeping (``Form``;
  Suzanne et al., §5.3.3);
* ``sql``: the SQL aggregate function it equals, if any (``SqlFunction``), for plans run by a SQL engine;
* ``per_window``: its value depends on the window's bounds, not only on which events are members (occupancy,
  erlang), so it has no per-event partial: only the batch path computes it.

>>> from spanning.aggregates import parse_aggregate
>>> caps = parse_aggregate("max:duration").capabilities
>>> caps.selective, caps.invertible, caps.vectorised, caps.result.value, caps.sql.value
(True, False, True, 'input', 'max')
>>> parse_aggregate("count").capabilities.result.nullable
False
>>> parse_aggregate("argmax:duration").capabilities.result is ResultKind.INTEGER  # the arrival number
True
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Capabilities", "Form", "ResultKind", "SqlFunction"]


class ResultKind(Enum):
    """The kind of an aggregate's result column (docs/SEMANTICS.md §10, §11)."""

    COUNT = "count"  # a count of events or values: int64, never null (count, count:col)
    INTEGER = "integer"  # int64, null over no values (mincount, maxcount; argmin/argmax's arrival number)
    FLOAT = "float"  # float64, null over no values (mean, stddev)
    INPUT = "input"  # the type of the aggregated column, ``result_column`` (sum, min, max)
    RESULT_COLUMN = "result-column"  # the type of the named result column, ``result_column`` (argmin:x:y)
    BINARY = "binary"  # bytes: a serialized sketch (hll_sketch, kll_sketch)
    ANY = "any"  # whatever ``lower`` returns (user-defined aggregates)

    @property
    def nullable(self) -> bool:
        """Whether a window may have no result (SQL null): all kinds but counts."""
        return self is not ResultKind.COUNT


class Form(Enum):
    """How an aggregate follows from the values of a set that values join and leave (plane sweeping)."""

    POWER_SUMS = "power-sums"  # from n, Σx and Σx²: ``power_terms``, ``from_power_sums`` (count, sum, mean, stddev)
    ORDER = "order"  # from an order's best value: ``largest``, ``order_key``, ``from_best`` (max, argmax, maxcount)


class SqlFunction(Enum):
    """The SQL aggregate function over the window's non-null values that equals an aggregate."""

    COUNT = "count"  # count(*) without a column, count(column) with one
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"
    COUNT_DISTINCT = "count_distinct"  # count(DISTINCT column)
    PERCENTILE = "percentile"  # percentile(column, q)
    HLL = "hll_sketch_agg"  # hll_sketch_agg(column, lgK), its estimate or the sketch
    KLL = "kll_sketch_agg_double"  # kll_sketch_agg_double(column, K), a quantile or the sketch


@dataclass(frozen=True)
class Capabilities:
    """What an aggregate is (see the module docstring); a class declares it, a constructor may refine it."""

    result: ResultKind = ResultKind.ANY
    invertible: bool = False
    selective: bool = False
    vectorised: bool = False
    form: Form | None = None
    sql: SqlFunction | None = None
    per_window: bool = False

    @property
    def cumulative(self) -> bool:
        """Duplicate-sensitive (Table 1 "cumulative", sum-like): the opposite of ``selective``."""
        return not self.selective
