"""The open windows of many keys that go on: the state of a stream's keys, reduced batch by batch.

A stream never ends for a key, so unlike the keyed driver's sorted batches (one key carried) every key of
a batch may go on in the next. ``OpenWindows`` holds, per key, the carried key state of
``spanning.engines.chunks`` (series start, clock τ, oldest open window and the partials of its open
windows, an ``OpenKeys`` entry) and reduces each batch of many keys at once with ``reduce_chunk``
(``carry="all"``), the vectorised batch form of SE-Slicing (Suzanne et al., §3.2.2). The semantics are those of
``spanning run`` (docs/SEMANTICS.md): within a batch each key's events arrive in end order (arrival number
breaks ties), each key has its own clock, a window is released once its key's clock passes its end + TTP,
and an event that overlaps released windows is late, with the number it missed.

Two more ways to release windows, Scotty's ``processWatermark`` (Traub et al., §5) per key:

* ``advance(clock)``: every key's clock goes to at least ``clock`` (an idle flush: the stream's
  watermark passed them), releasing what that clock releases;
* ``flush()``: the end of the stream, every window that starts before its key's clock is released.

What a key holds is bounded by its open windows, about (ω + δ) / β of them, however long the stream runs.
The whole state round-trips through ``to_bytes`` / ``load_bytes``; what changed since the last call round-trips
through ``changes_to_bytes`` / ``apply_changes`` (the streaming job keeps, per hash bucket of keys, a snapshot
and the changes of the batches since: ``spark_jobs.stream.bucket_store``).

>>> import pandas as pd
>>> from spanning.engines.engine import build_aggregates
>>> from spanning.kernels.windows import WindowSpec
>>> names, aggs = build_aggregates({"n": "count"})
>>> state = OpenWindows(WindowSpec(10, 5), aggs, names, keys=["cell"])
>>> calls = pd.DataFrame({"cell": ["a", "a"], "start": [0, 3], "end": [4, 12], "seq": [0, 1]})
>>> windows, late = state.feed(calls)
>>> windows[["cell", "window_start", "window_end", "n"]].values.tolist()  # released at clock 12
[['a', -5, 5, 1], ['a', 0, 10, 1]]
>>> late.values.tolist()  # the second call overlaps both, which its arrival released: late for 2 windows
[[1, 2]]
>>> state.flush()[["window_start", "n"]].values.tolist()
[[5, 1], [10, 1]]
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from spanning.aggregates import Aggregate, is_null
from spanning.engines.chunks import KeyedEvents, OpenKeys, batch_columns, key_values, reduce_chunk, release_open
from spanning.engines.params import ChunkColumns
from spanning.kernels.windows import WindowSpec

__all__ = ["OpenWindows", "StateFormatError"]

STATE_FORMAT = 1  # bumped whenever what to_bytes writes changes


class StateFormatError(ValueError):
    """Saved state from another version of the engine or another query."""


def _key_tuple(values: tuple) -> tuple:
    """A key as a dictionary key: nulls (None, NaN, pd.NA, NaT) are one null (docs/SEMANTICS.md, keys)."""
    return tuple(None if is_null(v) else v for v in values)


class OpenWindows:
    """Per key: its series, clock and open windows; ``feed`` a batch, ``advance`` or ``flush`` the keys.

    Batches are DataFrames with the key columns, ``start``/``end`` (int chronons; ``end == start`` is a
    point event), ``seq`` (arrival number: ties in end order) and the value columns, each maybe with a
    boolean ``columns.valid(c)``; ``columns`` (``ChunkColumns``) renames start, end and seq.
    ``series_start`` is an explicit start time for every key (None: each key's series starts at its first
    arriving event). Results are frames of windows (key columns,
    ``window_start``, ``window_end``, one column per aggregate; with ``skip_empty``, the name of a count
    of events among them, only windows it counts events in) and of late events (``row``: position in the
    batch, ``windows_missed``).
    """

    def __init__(
        self,
        spec: WindowSpec,
        aggregates: Sequence[Aggregate],
        names: Sequence[str],
        keys: Sequence[str],
        series_start: int | None = None,
        columns: ChunkColumns | None = None,
        skip_empty: str | None = None,
    ) -> None:
        self.spec, self.aggregates, self.names = spec, list(aggregates), list(names)
        self.skip_empty = None if skip_empty is None else self.names.index(skip_empty)
        self.keys, self.series_start, self.columns = list(keys), series_start, columns or ChunkColumns()
        self.key_list: list[tuple] = []  # entry i <-> self.key_list[i]
        self.state = self._empty()
        self.changed = np.zeros(0, dtype=bool)  # entry i changed since the last changes_to_bytes / load

    def _empty(self) -> OpenKeys:
        none = np.zeros(0, dtype=np.int64)
        return OpenKeys(none, none, none, none, none, [agg.identity_partials(0) for agg in self.aggregates])

    @property
    def n_keys(self) -> int:
        return len(self.key_list)

    @property
    def held_windows(self) -> int:
        """Open windows held over all keys (what the state's size follows)."""
        return int(self.state.lengths.sum())

    def feed(self, batch: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Take a batch of events of any keys; the windows they release and the late events."""
        if len(batch) == 0:
            return self._no_windows(), self._late(np.zeros(0, np.int64), np.zeros(0, np.int64))
        batch = batch.reset_index(drop=True)
        if self.keys:
            codes = batch.groupby(self.keys, sort=False, dropna=False, observed=True).ngroup().to_numpy()
        else:
            codes = np.zeros(len(batch), dtype=np.int64)
        starts = batch[self.columns.start].to_numpy(dtype=np.int64)
        ends = batch[self.columns.end].to_numpy(dtype=np.int64)
        ends = np.where(ends == starts, starts + 1, ends)  # a point event is [l, l + 1)
        seqs = batch[self.columns.seq].to_numpy(dtype=np.int64)
        order = np.lexsort((seqs, ends, codes))  # per key in end order, arrival number breaking ties
        codes, starts, ends, seqs = codes[order], starts[order], ends[order], seqs[order]
        first_rows = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        n_groups = len(first_rows)
        groups = np.repeat(np.arange(n_groups), np.diff(np.r_[first_rows, len(codes)]))
        key_columns = [key_values(batch[k])[order[first_rows]] for k in self.keys]
        group_keys = [_key_tuple(t) for t in zip(*key_columns, strict=True)] if self.keys else [()]

        entries = self._positions(group_keys)
        known = entries >= 0
        carried = self.state.take(entries[known])
        carried = replace(carried, groups=np.flatnonzero(known))
        series = starts[first_rows] if self.series_start is None else np.full(n_groups, self.series_start)
        events = KeyedEvents(starts, ends, groups, n_groups, series.astype(np.int64))
        valid = {c: self.columns.valid(c) for c in self._columns() if self.columns.valid(c) in batch.columns}
        cols = batch_columns(batch.iloc[order], self.aggregates, seqs, valid)
        result = reduce_chunk(self.spec, self.aggregates, events, cols, carried, carry="all")

        untouched = self._put_behind(entries[known], group_keys, result.carried)
        self.changed = np.r_[self.changed[untouched], np.ones(n_groups, dtype=bool)]
        windows = self._windows(result.window_group, key_columns, result.window_start, result.window_end,
                                result.values)  # fmt: skip
        return windows, self._late(order[result.late_rows], result.windows_missed)

    def advance(self, clock: int) -> pd.DataFrame:
        """Every key's clock to at least ``clock``; the windows that releases."""
        if not self.n_keys:
            return self._no_windows()
        advanced = replace(self.state, clock=np.maximum(self.state.clock, clock))
        self.changed |= advanced.clock != self.state.clock
        result = release_open(self.spec, self.aggregates, advanced, carry="all")
        self.state = result.carried
        return self._key_windows(result)

    def flush(self) -> pd.DataFrame:
        """End of the stream: release every window that starts before its key's clock."""
        if not self.n_keys:
            return self._no_windows()
        result = release_open(self.spec, self.aggregates, self.state)
        s, o = self.spec.slide, self.spec.offset
        after = np.maximum(self.state.first_open, (self.state.clock - o - 1) // s + 1)  # nothing open remains
        self.state = replace(self.state, first_open=after, lengths=np.zeros(self.n_keys, dtype=np.int64),
                             partials=[agg.identity_partials(0) for agg in self.aggregates])  # fmt: skip
        self.changed[:] = True
        return self._key_windows(result)

    def _key_windows(self, result: Any) -> pd.DataFrame:
        """Windows whose ``window_group`` indexes the state's entries."""
        key_columns = [
            pd.Series([key[i] for key in self.key_list], dtype=object).to_numpy() for i in range(len(self.keys))
        ]
        return self._windows(result.window_group, key_columns, result.window_start, result.window_end, result.values)

    def _no_windows(self) -> pd.DataFrame:
        none = np.zeros(0, dtype=np.int64)
        return self._windows(none, [], none, none, [])

    def _columns(self) -> list[str]:
        return list(dict.fromkeys(c for a in self.aggregates for c in a.columns))

    def _windows(self, group: np.ndarray, key_columns: list, start: np.ndarray, end: np.ndarray,
                 values: list) -> pd.DataFrame:  # fmt: skip
        if self.skip_empty is not None and len(values) and len(group):  # before the frame: most windows are empty
            keep = np.flatnonzero(np.asarray(values[self.skip_empty]) > 0)
            group, start, end = group[keep], np.asarray(start)[keep], np.asarray(end)[keep]
            values = [v[keep] for v in values]
        data: dict[str, Any] = {k: (key_columns[i][group] if len(group) else []) for i, k in enumerate(self.keys)}
        data["window_start"] = np.asarray(start, dtype=np.int64)
        data["window_end"] = np.asarray(end, dtype=np.int64)
        if not len(values):
            values = [agg.lower_partials(agg.identity_partials(0)) for agg in self.aggregates]
        data.update(zip(self.names, values, strict=True))
        return pd.DataFrame(data)

    @staticmethod
    def _late(rows: np.ndarray, missed: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame({"row": np.asarray(rows, dtype=np.int64), "windows_missed": np.asarray(missed, np.int64)})

    @property
    def n_changed(self) -> int:
        """Keys changed since the last ``changes_to_bytes`` (or ``load_bytes``)."""
        return int(self.changed.sum())

    def to_bytes(self) -> bytes:
        """The whole state (keys, clocks, open windows' partials), for a state store; the changes are taken."""
        self._take_changes()
        return self._entries_bytes(self.key_list, self.state)

    def load_bytes(self, data: bytes) -> None:
        """Take back a state written by ``to_bytes`` for the same query."""
        self.key_list, self.state = self._entries(data)
        self.changed = np.zeros(self.n_keys, dtype=bool)

    def changes_to_bytes(self) -> bytes:
        """The keys changed since the last call (or ``to_bytes``, ``load_bytes``), whole: what ``apply_changes``
        brings a state as it was then to this one. The changed keys move behind the others, keeping their order,
        so that the state here is entry for entry what ``apply_changes`` rebuilds."""
        changed = self._take_changes()
        return self._entries_bytes([self.key_list[i] for i in changed.tolist()], self.state.take(changed))

    def apply_changes(self, data: bytes) -> None:
        """The keys of ``changes_to_bytes`` in place of this state's entries for them, behind the others."""
        key_list, changes = self._entries(data)
        replaced = self._positions(key_list)
        self._put_behind(replaced[replaced >= 0], key_list, changes)
        self.changed = np.zeros(self.n_keys, dtype=bool)

    def _positions(self, keys: list[tuple]) -> np.ndarray:
        """Each key's entry, or -1 for a key the state does not hold."""
        index = {key: i for i, key in enumerate(self.key_list)}
        return np.array([index.get(key, -1) for key in keys], dtype=np.int64)

    def _put_behind(self, replaced: np.ndarray, keys: list[tuple], entries: OpenKeys) -> np.ndarray:
        """``entries`` (of ``keys``) behind the others, in place of the entries at ``replaced``; the positions kept,
        in their order (what ``feed`` and ``apply_changes`` both do, so that they give one order)."""
        kept = np.setdiff1d(np.arange(self.n_keys), replaced)
        self.state = OpenKeys.concat([self.state.take(kept), entries])
        self.key_list = [self.key_list[i] for i in kept.tolist()] + list(keys)
        return kept

    def _take_changes(self) -> np.ndarray:
        """The changed entries' positions, once the entries are reordered unchanged first (a stable partition)."""
        order = np.r_[np.flatnonzero(~self.changed), np.flatnonzero(self.changed)]
        n_changed = self.n_changed
        if n_changed and n_changed < self.n_keys:
            self.state = self.state.take(order)
            self.key_list = [self.key_list[i] for i in order.tolist()]
        self.changed = np.zeros(self.n_keys, dtype=bool)
        return np.arange(self.n_keys - n_changed, self.n_keys)

    def _entries_bytes(self, key_list: list[tuple], state: OpenKeys) -> bytes:
        arrays = (state.k0, state.clock, state.first_open, state.lengths, state.partials)
        return pickle.dumps((STATE_FORMAT, self.names, key_list, arrays), protocol=pickle.HIGHEST_PROTOCOL)

    def _entries(self, data: bytes) -> tuple[list[tuple], OpenKeys]:
        version, names, key_list, arrays = pickle.loads(data)  # noqa: S301 - our own state store, our own bytes
        if version != STATE_FORMAT or list(names) != self.names:
            raise StateFormatError(f"saved state of format {version} for aggregates {names} cannot be read here")
        k0, clock, first_open, lengths, partials = arrays
        return list(key_list), OpenKeys(np.zeros(len(k0), dtype=np.int64), k0, clock, first_open, lengths, partials)
