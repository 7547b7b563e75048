"""Parameter objects: what always travels together from the facades down to the engines.

* ``EventColumns``: where an input row keeps its event (start, end, key columns) and how to read it as
  one (point events ``[l, l + 1)``; count-based time, the arrival number within the key);
* ``Execution``: how the windows are computed (technique, height d, the SWAG of point events, and how
  several window specs share slices);
* ``ChunkColumns``: the columns of the sorted chunks fed to ``spanning.engines.streams`` (times, arrival
  number, the validity flag of each value column).

The series start (docs/SEMANTICS.md §8) is one more value beside them, called ``series_start`` everywhere.

>>> EventColumns.of(key="cell").keys
('cell',)
>>> Execution(technique="se-ml-slicing", height=3).with_height(2).height
2
>>> ChunkColumns(seq="_seq").valid("bytes")
'bytes__valid'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

__all__ = ["ChunkColumns", "EventColumns", "Execution", "valid_flag"]


@dataclass(frozen=True)
class EventColumns:
    """The columns of an event in an input frame, and how to read them (Suzanne et al., §2.1: ``[l, u)``)."""

    start: str = "start"
    end: str = "end"  # not read for point events
    keys: tuple[str, ...] = ()
    point_events: bool = False  # each row is the point [start, start + 1)
    count_based: bool = False  # a row's time is its arrival number within its key
    time_unit: str = "s"  # the chronon of timestamps and date-time text: s or ms
    timezone: str = "UTC"  # the zone of date-time text without one (and of zone-less timestamps)

    @classmethod
    def of(
        cls,
        start: str = "start",
        end: str = "end",
        key: str | Sequence[str] | None = None,
        point_events: bool = False,
        count_based: bool = False,
        time_unit: str = "s",
        timezone: str = "UTC",
    ) -> EventColumns:
        """From the facades' keywords: ``key`` is one column, several, or None."""
        keys = (key,) if isinstance(key, str) else tuple(key or ())
        return cls(start, end, keys, point_events, count_based, time_unit, timezone)


@dataclass(frozen=True)
class Execution:
    """How the windows are computed: the technique, its height d, the SWAG of point events, slice sharing."""

    technique: str = "se-slicing"
    height: int | str = 1  # or "auto" (``spanning.planning.height``)
    swag: str | None = None  # point events: the FIFO SWAG of the final aggregation
    sharing: str = "all"  # several window specs: all, none or weaveshare (Shein and Chrysanthis, §3.1.1)

    def with_height(self, height: int) -> Execution:
        """The same execution with a resolved height (``"auto"`` measured on the events)."""
        return replace(self, height=height)


def valid_flag(column: str) -> str:
    """Name of the boolean column that says whether value column ``column`` holds a value."""
    return f"{column}__valid"


@dataclass(frozen=True)
class ChunkColumns:
    """The columns of a chunk sorted by (key, end, seq): event times, arrival number, validity flags."""

    start: str = "start"
    end: str = "end"
    seq: str = "seq"  # arrival number, for tie-breaks and late rows
    valid: Callable[[str], str] = valid_flag  # value column -> its boolean column (absent: nulls from the values)
