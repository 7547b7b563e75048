"""A stream's micro-batch in the task that reads it: each event's run of windows against its key's state,
reduced to partials per (key, window), with what the driver decides on per key.

``spanning stream`` (``spark_jobs.stream_jvm``) hands every task of a micro-batch the state its keys had after
the previous batch (``KeyState``: per key the first window of its series, its clock and its oldest open
window), so the events never meet the state in a join. Within a batch each key's events are taken in end
order, as ``spanning run`` takes them, so an event's clock at arrival is ``max(state clock, u)`` and its run
of windows is the batch plans' (``spark_jobs.plans``), with the state's two lower bounds (Suzanne et al.,
§3.2.2, in batch form)::

    a = max(first window ending after l, first window open at the clock, k0, first_open)
    b = last window starting before u,   windows_missed = max(min(b + 1, a) - first window ending after l, 0)

The runs are reduced by ``spanning.engines.window_ranges.run_partials``, the kernel of ``spanning run``'s
``vector`` plan, so what leaves the task is one row per (key, window) it saw (``kind`` "w"), one per key with
its counts, largest ends and first event in end order ("k"), the late candidates ("l"): the events that
missed windows, and every event of a key the state does not know yet (its series start, hence its first
window, depends on the whole batch; the driver decides), and the rejected rows ("r"), those two as read. A
task may hold any part of a key's events: its partials merge with other tasks' and the state's as every
plan's do.

>>> import pyarrow as pa
>>> from spanning.kernels.windows import WindowSpec
>>> state = KeyState(pa.table({"cell": ["a"], "_s_k0": [0], "_s_clock": [20], "_s_first_open": [1]}))
>>> events = pa.table({"cell": ["a", "b", "b"], "_start": [3, 4, None], "_u": [12, 9, None], "_end": [12, 9, None],
...                    "_seq": [7, 8, 9], "reason": [None, None, "start is null or not a time"]})
>>> out = micro_batch_partials(events, state, ["cell"], WindowSpec(10, 5), [("_n", "sum", "one", None)])
>>> out.filter(pa.compute.equal(out["kind"], "w")).select(["cell", "_k", "_n"]).to_pylist()
[{'cell': 'a', '_k': 2, '_n': 1}, {'cell': 'b', '_k': 0, '_n': 1}, {'cell': 'b', '_k': 1, '_n': 1}]
>>> late = out.filter(pa.compute.equal(out["kind"], "l"))  # a's clock 20 had closed windows -1 to 1
>>> late.select(["cell", "_k", "windows_missed"]).to_pylist()  # b: new (window -1 closed by its own end)
[{'cell': 'a', '_k': 7, 'windows_missed': 3}, {'cell': 'b', '_k': 8, 'windows_missed': 1}]
>>> out.filter(pa.compute.equal(out["kind"], "r")).select(["_k", "reason"]).to_pylist()  # as it came
[{'_k': 9, 'reason': 'start is null or not a time'}]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spanning.engines.window_ranges import PartialSpec, key_codes, run_partials
from spanning.kernels.windows import WindowSpec

START, U, END, SEQ = "_start", "_u", "_end", "_seq"  # an event's columns (u = its end, a point's start + 1)
STATE_K0, STATE_CLOCK, STATE_FIRST_OPEN = "_s_k0", "_s_clock", "_s_first_open"  # KeyState's columns
KIND, K = "kind", "_k"
PER_KEY = ("_ev_n", "_ev_max_end", "_ev_max_u", "_ev_first_u", "_ev_first_seq", "_ev_first_start")
LATE = ("_first", "_a", "_b", "windows_missed")  # a late candidate's run, and the windows it missed
REASON = "reason"  # why a row is rejected (null: a usable row)
NEVER = np.iinfo(np.int64).min  # no clock, no bound: below every window number and time


@dataclass
class KeyState:
    """The keys' state after the previous batch, as an Arrow table: the key columns and ``STATE_K0``,
    ``STATE_CLOCK`` (already raised to an idle flush's clock) and ``STATE_FIRST_OPEN``."""

    table: object  # pyarrow.Table

    def lookup(self, events, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each event's row in the state, -1 for a key it does not hold, and its key's code (equal keys equal
        codes, nulls a key of their own; ``window_ranges.key_codes``, one pass for both)."""
        import pyarrow as pa

        held, n = self.table.num_rows, events.num_rows
        if not keys:
            return (np.zeros(n, np.int64) if held else np.full(n, -1, np.int64)), np.zeros(n, np.int64)
        both = [pa.concat_arrays([self.table.column(k).combine_chunks().cast(events.schema.field(k).type),
                                  events.column(k).combine_chunks()]) for k in keys]  # fmt: skip
        codes = key_codes(both)
        row_of_code = np.full(int(codes.max()) + 1 if len(codes) else 0, -1, np.int64)
        row_of_code[codes[:held]] = np.arange(held)
        return row_of_code[codes[held:]], codes[held:]

    def at(self, column: str, rows: np.ndarray) -> np.ndarray:
        """``column`` at each event's state row, ``NEVER`` where it has none."""
        values = self.table.column(column).to_numpy()
        return np.where(rows >= 0, values[np.maximum(rows, 0)] if len(values) else NEVER, NEVER)


def micro_batch_partials(events, state: KeyState, keys: Sequence[str], spec: WindowSpec,
                         columns: Sequence[PartialSpec], carried: Sequence[str] = (),
                         reason: str = REASON):  # fmt: skip
    """The task's rows (see the module docstring): ``events`` has the key columns, ``START``, ``U``, ``END``,
    ``SEQ``, ``reason`` (null for a usable row) and each partial's source column (null where the event has no
    value). Rejected rows ("r") and late candidates keep the ``carried`` columns (the row as read), and their
    arrival number as ``K``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rejected = events.filter(pc.is_valid(events.column(reason)))
    events = events.filter(pc.is_null(events.column(reason)))

    def longs(name: str) -> np.ndarray:
        return events.column(name).to_numpy().astype(np.int64, copy=False)

    start, u, end, seq = longs(START), longs(U), longs(END), longs(SEQ)
    rows, codes = state.lookup(events, keys)
    clock = np.maximum(state.at(STATE_CLOCK, rows), u)  # the clock when the event arrives
    first = spec.first_window_ending_after(start)
    a = np.maximum.reduce([first, spec.first_window_open_at(clock), state.at(STATE_K0, rows),
                           state.at(STATE_FIRST_OPEN, rows)])  # fmt: skip
    b = spec.last_window_starting_before(u)
    missed = np.maximum(np.minimum(b + 1, a) - first, 0)

    active = np.flatnonzero(a <= b)
    runs = events.take(pa.array(active)).append_column("_a", pa.array(a[active])).append_column(
        "_b", pa.array(b[active]))
    windows = run_partials(runs, keys, "_a", "_b", columns)
    parts = [windows.append_column(KIND, pa.array(["w"] * windows.num_rows, pa.string()))]

    # per key: its events, largest end and u, and its first event in end order (u, then arrival number)
    group = np.unique(codes, return_inverse=True)[1]
    groups = int(group.max()) + 1 if len(group) else 0
    in_order = np.lexsort((seq, u, group))
    firsts = in_order[np.flatnonzero(np.diff(group[in_order], prepend=-1) != 0)]  # the first row of each key

    def largest(values: np.ndarray) -> np.ndarray:
        out = np.full(groups, NEVER, np.int64)
        np.maximum.at(out, group, values)
        return out

    per_key = {name: pa.array(values) for name, values in zip(PER_KEY, (
        np.bincount(group, minlength=groups).astype(np.int64), largest(end), largest(u),
        u[firsts], seq[firsts], start[firsts]), strict=True)}  # fmt: skip
    key_columns = {k: events.column(k).take(pa.array(firsts)) for k in keys}
    parts.append(pa.table({KIND: pa.array(["k"] * groups, pa.string()), **key_columns, **per_key}))

    late = np.flatnonzero((missed > 0) | (rows < 0))
    taken = pa.array(late)
    parts.append(pa.table({KIND: pa.array(["l"] * len(late), pa.string()),
                           **{c: events.column(c).take(taken) for c in [*keys, *carried]},
                           K: seq_of(events).take(taken),
                           **{name: pa.array(values[late]) for name, values in zip(LATE, (first, a, b, missed),
                                                                                   strict=True)}}))  # fmt: skip
    parts.append(rejected.select([*keys, *carried, reason]).append_column(
        KIND, pa.array(["r"] * rejected.num_rows, pa.string())).append_column(K, seq_of(rejected)))  # fmt: skip
    return pa.concat_tables(parts, promote_options="permissive")


def seq_of(events):
    """The events' arrival numbers, as longs."""
    import pyarrow as pa

    return events.column(SEQ).combine_chunks().cast(pa.int64())
