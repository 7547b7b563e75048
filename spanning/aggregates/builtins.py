"""The built-in aggregates: scalar faces and capabilities (Suzanne et al., §2.3, §3.1, Table 1).

Each class declares what it is in ``capabilities`` and inherits its array face from
``spanning.aggregates.arrays``. ``count``, ``sum``, ``mean``, ``stddev`` and ``mincount``/``maxcount`` are
cumulative (sum-like) and take the (φ, ϕ) pair (§3.2.2); ``min``, ``max``, ``argmin`` and ``argmax`` are
selective (max-like, §3.2.1), so an event may be combined into several slices.

SQL null semantics (docs/SEMANTICS.md §10): nulls (None, NaN, pandas NA) are ignored; ``count`` counts events,
``count:col`` non-null values; everything else is null over no values. Integer sums are exact and never wrap:
a window whose exact sum does not fit in int64 raises ``SumOverflowError`` on every path alike.

>>> agg = Extreme("duration", largest=True)
>>> agg.lower(agg.combine(agg.lift({"duration": 18}, 0), agg.lift({"duration": 63}, 1)))
63
>>> Mean("bytes").lower((30, 3))
10.0
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from spanning.aggregates.arrays import (
    ArgExtremeArrays,
    CountArrays,
    ExtremeArrays,
    ExtremeCountArrays,
    MeanArrays,
    StdDevArrays,
    SumArrays,
)
from spanning.aggregates.capabilities import Capabilities, Form, ResultKind, SqlFunction
from spanning.aggregates.columns import INT64_MAX, INT64_MIN, SumOverflowError, is_null, value_of
from spanning.aggregates.protocol import Aggregate

__all__ = ["ArgExtreme", "Count", "Extreme", "ExtremeCount", "Mean", "NullableValue", "StdDev", "Sum"]


def _number(value: Any) -> Any:
    """An exact power sum as the partial holds it: a fraction (from floats) back to a float."""
    return float(value) if isinstance(value, Fraction) else value


# ------------------------------------------------------------------------------------------------
# sum-like, cumulative (duplicate-sensitive)


class Count(CountArrays, Aggregate):
    """``count`` counts events; ``count:col`` counts the non-null values of ``col``."""

    capabilities = Capabilities(
        result=ResultKind.COUNT, invertible=True, vectorised=True, form=Form.POWER_SUMS, sql=SqlFunction.COUNT
    )

    def __init__(self, column: str | None = None) -> None:
        self.column = column
        self.columns = (column,) if column else ()
        self.name = f"count:{column}" if column else "count"

    def identity(self) -> int:
        return 0

    def lift(self, row, seq):
        if self.column is None:
            return 1
        return 0 if value_of(row, self.column) is None else 1

    combine = staticmethod(operator.add)
    inverse = staticmethod(operator.sub)

    def lower(self, partial):
        return partial

    def power_terms(self, lifted):
        return lifted, None

    def from_power_sums(self, n, total, squares):
        return n


class NullableValue(Aggregate):
    """An aggregate whose partial is a column value, or None before any non-null value (sum, min, max)."""

    def __init__(self, column: str, name: str) -> None:
        self.column = column
        self.columns = self.numeric_columns = (column,)
        self.result_column = column
        self.name = name

    def identity(self):
        return None

    def lift(self, row, seq):
        return value_of(row, self.column)

    def lower(self, partial):
        return partial


class Sum(SumArrays, NullableValue):
    """Sum of a column; exact for integers, never wrapped (``SumOverflowError`` past int64).

    Per event the partial is a Python int (exact); in batch an int64 array (``SumArrays``).
    """

    capabilities = Capabilities(result=ResultKind.INPUT, vectorised=True, form=Form.POWER_SUMS, sql=SqlFunction.SUM)

    def __init__(self, column: str) -> None:
        super().__init__(column, f"sum:{column}")

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return a + b

    def lower(self, partial):
        if type(partial) is int and not INT64_MIN <= partial <= INT64_MAX:
            raise SumOverflowError(self.column)
        return partial

    def power_terms(self, lifted):
        return (0, None) if lifted is None else (1, lifted)

    def from_power_sums(self, n, total, squares):
        return _number(total) if n else None


class Mean(MeanArrays, Aggregate):
    """Arithmetic mean: partial (sum, n), lowered to sum / n."""

    capabilities = Capabilities(
        result=ResultKind.FLOAT, invertible=True, vectorised=True, form=Form.POWER_SUMS, sql=SqlFunction.AVG
    )

    def __init__(self, column: str) -> None:
        self.column = column
        self.columns = self.numeric_columns = (column,)
        self.name = f"mean:{column}"

    def identity(self):
        return (0, 0)

    def lift(self, row, seq):
        value = value_of(row, self.column)
        return (0, 0) if value is None else (value, 1)

    def combine(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    @staticmethod
    def inverse(total, oldest):
        return (total[0] - oldest[0], total[1] - oldest[1])

    def lower(self, partial):
        total, n = partial
        return total / n if n else None

    def power_terms(self, lifted):
        return lifted[1], lifted[0]

    def from_power_sums(self, n, total, squares):
        return (_number(total), n)


class StdDev(StdDevArrays, Aggregate):
    """Standard deviation, sample (n - 1) or population (n); partial (n, mean, M2), Chan et al.'s merge."""

    capabilities = Capabilities(result=ResultKind.FLOAT, vectorised=True, form=Form.POWER_SUMS)

    def __init__(self, column: str, population: bool = False) -> None:
        self.column = column
        self.population = population
        self.columns = self.numeric_columns = (column,)
        self.name = f"{'stddev_pop' if population else 'stddev'}:{column}"

    def identity(self):
        return (0, 0.0, 0.0)

    def lift(self, row, seq):
        value = value_of(row, self.column)
        return (0, 0.0, 0.0) if value is None else (1, float(value), 0.0)

    def combine(self, a, b):
        na, ma, m2a = a
        nb, mb, m2b = b
        if not na:
            return b
        if not nb:
            return a
        n = na + nb
        delta = mb - ma
        return (n, ma + delta * nb / n, m2a + m2b + delta * delta * na * nb / n)

    def lower(self, partial):
        n, _, m2 = partial
        dof = n if self.population else n - 1
        return math.sqrt(max(m2, 0.0) / dof) if dof > 0 else None

    def power_terms(self, lifted):
        return lifted[0], lifted[1]

    def from_power_sums(self, n, total, squares):
        if not n:
            return self.identity()
        mean = Fraction(total) / n
        return (n, float(mean), float(squares - mean * total))  # (n, mean, M2), exact until here


# ------------------------------------------------------------------------------------------------
# max-like, selective (duplicate-insensitive), and the count of the extreme

_MAX = Capabilities(result=ResultKind.INPUT, selective=True, vectorised=True, form=Form.ORDER, sql=SqlFunction.MAX)


class Extreme(ExtremeArrays, NullableValue):
    """``max`` or ``min`` of a column (selective: a slice keeps one value)."""

    capabilities = _MAX

    def __init__(self, column: str, largest: bool) -> None:
        super().__init__(column, f"{'max' if largest else 'min'}:{column}")
        self.largest = largest
        if not largest:
            self.capabilities = replace(_MAX, sql=SqlFunction.MIN)

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        if self.largest:
            return b if b > a else a
        return b if b < a else a

    def order_key(self, lifted):
        return lifted

    def from_best(self, lifted, ties):
        return lifted


class ArgExtreme(ArgExtremeArrays, Aggregate):
    """``argmax:col[:ret]``: the ``ret`` value of the event with the largest ``col`` (``argmin`` likewise).

    Ties go to the event that arrived first. Without ``ret`` the result is that event's arrival number
    (its row position for ``aggregate``, its insert count for ``Engine``). Partial: (value, seq, result).
    """

    capabilities = Capabilities(result=ResultKind.RESULT_COLUMN, selective=True, vectorised=True, form=Form.ORDER)

    def __init__(self, column: str, largest: bool, result: str | None = None) -> None:
        self.column = column
        self.largest = largest
        self.result = self.result_column = result
        self.numeric_columns = (column,)
        self.columns = (column, result) if result else (column,)
        kind = "argmax" if largest else "argmin"
        self.name = f"{kind}:{column}:{result}" if result else f"{kind}:{column}"
        if result is None:  # the arrival number
            self.capabilities = replace(ArgExtreme.capabilities, result=ResultKind.INTEGER)

    def identity(self):
        return None

    def lift(self, row, seq):
        value = value_of(row, self.column)
        if value is None:
            return None
        return (value, seq, row[self.result] if self.result else seq)

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        if a[0] == b[0]:
            return a if a[1] < b[1] else b
        if (b[0] > a[0]) == self.largest:
            return b
        return a

    def lower(self, partial):
        if partial is None:
            return None
        return None if is_null(partial[2]) else partial[2]

    def order_key(self, lifted):
        value, seq, _ = lifted  # ties go to the first arrival: (value, -seq) is largest for max
        return (value, -seq) if self.largest else (value, seq)

    def from_best(self, lifted, ties):
        return lifted


class ExtremeCount(ExtremeCountArrays, Aggregate):
    """``maxcount:col`` / ``mincount:col``: how many events reach the window's max (min) of ``col``.

    Cumulative (Table 1): partial (extreme, count), so it takes the (φ, ϕ) path.
    """

    capabilities = Capabilities(result=ResultKind.INTEGER, vectorised=True, form=Form.ORDER)

    def __init__(self, column: str, largest: bool) -> None:
        self.column = column
        self.largest = largest
        self.columns = self.numeric_columns = (column,)
        self.name = f"{'maxcount' if largest else 'mincount'}:{column}"

    def identity(self):
        return None

    def lift(self, row, seq):
        value = value_of(row, self.column)
        return None if value is None else (value, 1)

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        if a[0] == b[0]:
            return (a[0], a[1] + b[1])
        return b if (b[0] > a[0]) == self.largest else a

    def lower(self, partial):
        return None if partial is None else partial[1]

    def order_key(self, lifted):
        return lifted[0]

    def from_best(self, lifted, ties: Callable[[], int]):
        return (lifted[0], ties())
