"""The batch path over chunks: many keys per chunk, the state of keys that go on carried between chunks.

``reduce_chunk`` is the vectorised batch form of SE-Slicing (see ``spanning.engines.batch``) for a chunk of
events of several keys. Keys may continue their streams from earlier chunks (``carried``, an ``OpenKeys``:
per key its clock, series start and the partials of its open windows), and keys may go on in later chunks
(``carry``: their open windows come back as a new ``OpenKeys`` instead of being released).

The keyed driver (``spanning.engines.keyed``) feeds chunks sorted by (key, end) - Arrow batches of a Spark
partition - through it, carrying the last key only, so a key with tens of millions of events streams in
bounded memory while the many small keys of a chunk are reduced together with array operations. The
streaming job carries every key (``spanning.engines.open_windows``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from spanning.aggregates import INT64_MAX, INT64_MIN, Aggregate, BatchColumns
from spanning.aggregates.capabilities import Form
from spanning.aggregates.columns import EventSpans, no_columns
from spanning.engines.inputs import key_extremes_in_shares
from spanning.kernels import threads
from spanning.kernels.compiled import (
    SLOTS,
    chunk_runs,
    chunk_runs_into,
    covered_before,
    covered_windows,
    labelled_windows,
    marked_counts,
    marked_runs,
    renumbered_runs,
    window_labels,
)
from spanning.kernels.ranges import runs_within
from spanning.kernels.windows import WindowSpec

__all__ = [
    "OpenKeys",
    "KeyedEvents",
    "ChunkResult",
    "reduce_chunk",
    "batch_columns",
    "key_values",
    "release_open",
    "runs",
]


#: windows per event from which ``skip_empty`` reduces over the covered windows alone (``_covered_chunk``). Measured
#: on either side, not between (2026-11-29): at 9.2 windows per event (10k keys, 15m/1m) the covered path took 150-167
#: ms against 206-219 ms, at 1.8 (15m/5m) 56-57 ms against 56-63 ms, at 0.017 (50 keys) 30.5 ms against 21.9 ms;
#: 1 is a guess within the gap
COVERED_FROM = 1


@dataclass
class OpenKeys:
    """The carried key state of one or more keys, columnar: what their open windows need.

    Entry i goes on as group ``groups[i]`` of the chunk it is fed with. Its windows ``first_open`` ..
    ``first_open + lengths[i] - 1`` are held, their partials concatenated entry after entry.
    """

    groups: np.ndarray  # chunk group each entry continues
    k0: np.ndarray  # first window of each series
    clock: np.ndarray  # τ, the largest end seen (or the clock a watermark advanced it to)
    first_open: np.ndarray  # oldest window not released
    lengths: np.ndarray  # windows held from first_open on
    partials: list[tuple]  # per aggregate, partial arrays over the held windows, entry after entry

    def __len__(self) -> int:
        return len(self.k0)

    def take(self, entries: np.ndarray) -> OpenKeys:
        """The entries ``entries`` (positions), in that order."""
        entries = np.asarray(entries, dtype=np.int64)
        held = runs(_starts(self.lengths)[entries], self.lengths[entries])
        return OpenKeys(self.groups[entries], self.k0[entries], self.clock[entries], self.first_open[entries],
                        self.lengths[entries], [tuple(a[held] for a in p) for p in self.partials])  # fmt: skip

    @staticmethod
    def concat(parts: Sequence[OpenKeys]) -> OpenKeys:
        """The entries of ``parts``, one after the other."""
        def joined(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts])

        partials = [
            tuple(np.concatenate(arrays) for arrays in zip(*(p.partials[i] for p in parts), strict=True))
            for i in range(len(parts[0].partials))
        ]  # fmt: skip
        return OpenKeys(joined("groups"), joined("k0"), joined("clock"), joined("first_open"), joined("lengths"),
                        partials)  # fmt: skip


def runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every run i, run after run."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(np.asarray(starts, dtype=np.int64) - _starts(lengths), lengths) + np.arange(total)


def _starts(lengths: np.ndarray) -> np.ndarray:
    return np.cumsum(lengths) - lengths


@dataclass
class ChunkResult:
    """Released windows (``window_group`` indexes the chunk's keys), late events, and the key carried on."""

    window_group: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    values: list  # per aggregate, one lowered array aligned with the windows
    late_rows: np.ndarray  # positions in the chunk
    windows_missed: np.ndarray
    carried: OpenKeys | None


@dataclass(frozen=True)
class KeyedEvents:
    """A chunk's events in arrival order: bounds ``[starts, ends)`` and key codes ``groups`` (0 .. n_groups-1).

    ``series_start[g]`` is the time the series of key g starts after (its first event's start, or an
    explicit start; docs/SEMANTICS.md §8).
    """

    starts: np.ndarray
    ends: np.ndarray
    groups: np.ndarray
    n_groups: int
    series_start: np.ndarray


def reduce_chunk(
    spec: WindowSpec,
    aggregates: Sequence[Aggregate],
    events: KeyedEvents,
    cols: BatchColumns,
    carried: OpenKeys | None = None,
    carry: str = "none",
    skip_empty: bool = False,
) -> ChunkResult:
    """Windows of a chunk of ``events`` of several keys, in arrival order, with the columns ``cols``.

    ``carried`` continues the groups it names (their clocks, series and open windows go on); a group may
    have no event in the chunk when it is carried. ``carry`` keeps windows open instead of releasing them
    at the chunk's end: for no group (``"none"``: each key's stream ends with the chunk), the last group
    (``"last"``: a stream sorted by key), or every group (``"all"``: a stream whose keys go on, as in
    ``spanning stream``). What is kept comes back as ``result.carried``. ``skip_empty`` releases only the windows
    that some event of the chunk covers (``empty_windows="skip"``); with ``carry="none"``, nothing carried and no
    aggregate of the windows' bounds, the aggregates then work on those windows alone (``_covered_chunk``).
    """
    if skip_empty and carried is not None and len(carried):
        raise ValueError("skip_empty: a carried window may hold events of earlier chunks")
    s, o = spec.slide, spec.offset
    starts, ends, groups, n_groups = events.starts, events.ends, events.groups, events.n_groups
    start_clock = np.full(n_groups, np.iinfo(np.int64).min, dtype=np.int64)  # τ of each key before the chunk
    k0 = (events.series_start - o - spec.range) // s + 1  # first window ending after the series start
    range_from = k0.copy()  # first window each key emits (or holds) in this chunk
    if carried is not None and len(carried):
        g = carried.groups
        start_clock[g] = carried.clock
        k0[g] = carried.k0
        range_from[g] = carried.first_open
    bounds, share_clocks = _shares_and_clocks(ends, groups, start_clock)
    final_clock = share_clocks[-1]
    k_last = (final_clock - o - 1) // s  # last window starting before the clock
    n_windows = np.maximum(k_last - range_from + 1, 0)
    base = np.cumsum(n_windows) - n_windows  # where each key's windows begin in the chunk's arrays
    total = int(n_windows.sum())

    # each event's run of windows: overlapping, open when it arrives (not released by the clock, nor held
    # back by a flush: range_from), in the series (range_from >= k0); shifted to its key's cells. The runs are
    # counted per window as they are written (``_run_marks``) where the windows' counts are read
    shift = base - range_from
    per_window = any(agg.capabilities.per_window for agg in aggregates)
    # windows that outnumber the events leave most of them empty: reduced over the covered windows alone (see
    # COVERED_FROM); with fewer windows than events, finding the covered ones costs more than it saves
    covered_only = skip_empty and carry == "none" and not per_window and total > COVERED_FROM * len(starts)
    marks = None if covered_only else _run_marks(spec, aggregates, skip_empty, len(bounds) - 1, total, len(starts))
    rows, run_first, run_last, late_rows, missed = _runs_in_shares(
        starts, ends, groups, bounds, share_clocks, range_from, shift, (s, o, spec.range, spec.ttp), marks)
    if covered_only:
        return _covered_chunk(spec, aggregates, cols if len(rows) == len(starts) else cols.subset(rows),
                              (run_first, run_last, late_rows, missed), (n_windows, range_from, total))
    active_cols = cols
    if per_window:  # the time inside windows: the events' spans
        spans = EventSpans(starts, ends, np.broadcast_to(_spread(shift, groups), starts.shape), spec.range, s, o)
        active_cols = cols.with_spans(spans)
    if len(rows) < len(starts):
        active_cols = active_cols.subset(rows)
    if marks is not None:  # the windows' counts of runs, from the runs' marks: no pass over the runs to count them
        counts = np.empty(total, dtype=np.int64)
        marked_counts(marks, counts)
        active_cols.share_run_counts(run_first, run_last, total, counts)
    carrying = carried is not None and len(carried) and carried.partials and carried.lengths.sum()
    held = runs(base[carried.groups], carried.lengths) if carrying else None  # the carried windows
    emit = None  # the windows released (None: all of them, no mask of every window built)
    keep = None
    if carry != "none" and n_groups:
        g = np.arange(n_groups) if carry == "all" else np.array([n_groups - 1])
        first_open = np.maximum(np.maximum(k0[g], -((o + spec.range + spec.ttp - final_clock[g]) // s)), range_from[g])
        keep_from = base[g] + np.maximum(first_open - range_from[g], 0)
        keep_to = np.maximum(base[g] + n_windows[g], keep_from)
        keep = runs(keep_from, keep_to - keep_from)
        emit = np.ones(total, dtype=bool)
        emit[keep] = False
    # the windows whose partials are needed: merged with carried ones, or kept open; the others may be lowered
    # straight from the runs (``Aggregate.window_results``). None: no window (a batch's one chunk), no mask built
    needed = None
    if held is not None or keep is not None:
        needed = np.zeros(total, dtype=bool)
        for positions in (held, keep):
            if positions is not None:
                needed[positions] = True
    all_needed = total == 0 if needed is None else bool(needed.all())
    results = _direct_results(aggregates, active_cols, run_first, run_last, total, all_needed)
    within = None  # the runs cut to the needed windows, once for every aggregate that lowers the others
    if any(direct is not None for direct in results):
        run, first_in, last_in = runs_within(np.zeros(total, dtype=bool) if needed is None else needed, run_first,
                                             run_last)  # fmt: skip
        within = (active_cols.subset(run), first_in, last_in, total)
    # the aggregates side by side on this process's cores (one group's kernels in one thread): spanning.aggregate of
    # 1M events, count + sum + max, 21.8 ms against 27.9 ms one after the other, their kernels each cut into shares
    # (2026-11-29, bench/results/inprocess-hashed-keys-2026-11-29.md)
    partials = threads.side_by_side([
        functools.partial(agg.window_partials, active_cols, run_first, run_last, total) if direct is None
        else functools.partial(agg.window_partials, *within) for agg, direct in zip(aggregates, results, strict=True)
    ], len(run_first))  # fmt: skip

    if carrying:
        for i, (agg, older) in enumerate(zip(aggregates, carried.partials, strict=True)):
            merged = agg.merge(older, tuple(a[held] for a in partials[i]))
            partials[i] = tuple(_with_values(a, held, m) for a, m in zip(partials[i], merged, strict=True))

    kept = None
    if keep is not None:
        kept = OpenKeys(g, k0[g], final_clock[g], first_open, keep_to - keep_from,
                        [tuple(a[keep] for a in p) for p in partials])  # fmt: skip

    group_of_window, window_start, window_end = (np.empty(total, dtype=np.int64) for _ in range(3))
    window_labels(n_windows, range_from, s, o, spec.range, group_of_window, window_start, window_end)
    if skip_empty:  # the windows' counts, shared with count and sum where they counted the same runs
        covered = active_cols.run_counts(run_first, run_last, total) > 0
        emit = covered if emit is None else emit & covered
    released = None if emit is None or emit.all() else np.flatnonzero(emit)
    if needed is None:  # released windows merged with carried ones
        lowered = np.zeros(0, dtype=np.int64)
    else:
        lowered = np.flatnonzero(needed if emit is None else needed & emit)
    values = []
    for agg, p, direct in zip(aggregates, partials, results, strict=True):
        if direct is None:
            values.append(agg.lower_partials(p if released is None else tuple(a[released] for a in p)))
            continue
        if len(lowered):
            direct[lowered] = agg.lower_partials(tuple(a[lowered] for a in p))
        values.append(direct if released is None else direct[released])
    if released is not None:
        group_of_window, window_start, window_end = (a[released] for a in (group_of_window, window_start, window_end))
    return ChunkResult(group_of_window, window_start, window_end, values, late_rows, missed, kept)


def _direct_results(aggregates: Sequence[Aggregate], cols: BatchColumns, first: np.ndarray, last: np.ndarray,
                    total: int, none: bool = False) -> list:
    """Each aggregate's results straight from the runs (``Aggregate.window_results``), or None where it needs its
    partials (all None with ``none``)."""
    results = [None if none else agg.window_results(cols, first, last, total) for agg in aggregates]
    # an aggregate that shares its windows' partials with one that needs them (approx_percentile with the
    # column's kll_sketch) answers from those partials, so that its answers are the written sketch's
    shares = [getattr(agg, "shared_as", lambda: None)() for agg in aggregates]
    shared = {share for share, direct in zip(shares, results, strict=True) if direct is None} - {None}
    return [None if share in shared else direct for share, direct in zip(shares, results, strict=True)]


def _covered_chunk(spec: WindowSpec, aggregates: Sequence[Aggregate], cols: BatchColumns, event_runs: tuple,
                   windows: tuple) -> ChunkResult:
    """``reduce_chunk``'s result over the covered windows alone (``skip_empty``, nothing carried or kept): each run
    renumbered among them (its windows stay consecutive there) and the windows labelled and counted in one pass
    (``covered_windows``), then the aggregates reduced over those windows only, sharing the counts."""
    run_first, run_last, late_rows, missed = event_runs
    n_windows, range_from, total = windows
    marks = np.zeros(total + 1, dtype=np.int32 if max(total, len(run_first)) < 2**31 - 1 else np.int64)
    # no more covered windows than either the windows or the runs' windows: the arrays the result keeps, touched
    # only where written, are not sized by a series far longer than its events (1,000 keys at 60/1 s: 500M windows)
    most = min(total, int(run_last.sum() - run_first.sum()) + len(run_first))
    counts, group, start, end = (np.empty(most + 1, dtype=np.int64) for _ in range(4))
    first, last = np.empty_like(run_first), np.empty_like(run_last)
    labels = (n_windows, range_from, spec.slide, spec.offset, spec.range, marks)
    count = threads.shares(total)  # SHARED_FROM windows a share: the rows' threshold, not measured for windows
    if count < 2:
        covered = covered_windows(run_first, run_last, *labels, counts, group, start, end, first, last)
    else:
        covered = _covered_in_shares(run_first, run_last, labels, count, (counts, group, start, end), (first, last))
    cols.share_run_counts(first, last, covered, counts[:covered])
    results = _direct_results(aggregates, cols, first, last, covered)
    partials = iter(threads.side_by_side([functools.partial(agg.window_partials, cols, first, last, covered)
                                          for agg, direct in zip(aggregates, results, strict=True) if direct is None],
                                         len(first)))  # fmt: skip
    values = [agg.lower_partials(next(partials)) if direct is None else direct
              for agg, direct in zip(aggregates, results, strict=True)]  # fmt: skip
    return ChunkResult(group[:covered], start[:covered], end[:covered], values, late_rows, missed, None)


def _covered_in_shares(run_first: np.ndarray, run_last: np.ndarray, labels: tuple, count: int, outputs: tuple,
                       renumbered: tuple) -> int:
    """``covered_windows`` with its last two steps in ``count`` threads: the runs marked (``marked_runs``); where
    each share of whole keys of about equal windows starts, in the outputs and in its count of runs, from one pass
    over the windows before the last share (``covered_before``); each share's windows labelled side by side
    (``labelled_windows``), then the runs renumbered in shares of runs (``renumbered_runs``). 1M events, 10,000
    keys, warm calls in a loop (2026-11-30): 9.4 ms against 15.2 ms in one thread at 15m/5m (1.8M windows, 0.58M
    covered), 29.1 ms against 36 ms at 15m/1m."""
    n_windows, marks = labels[0], labels[5]
    ends = np.cumsum(n_windows)
    keys = np.searchsorted(ends, threads.bounds(int(ends[-1]), count)[1:-1], side="right")
    key_bounds = np.concatenate([[0], keys, [len(n_windows)]])
    window_bounds = np.concatenate([[0], ends])[key_bounds]
    marked_runs(run_first, run_last, marks)
    at, running, stop = covered_before(marks, window_bounds[:-1])
    # each share but the last read up to its last covered window: it writes nothing into the next one's outputs
    upto = np.append(stop[1:], window_bounds[-1])

    def labelled(k: int) -> int:
        return labelled_windows(window_bounds[k], upto[k], key_bounds[k], key_bounds[k + 1], *labels, running[k],
                                at[k], *outputs)  # fmt: skip

    covered = sum(threads.in_shares(labelled, count))
    runs_at = threads.bounds(len(run_first), count)

    def runs_share(k: int) -> None:
        lo, hi = runs_at[k], runs_at[k + 1]
        renumbered_runs(run_first[lo:hi], run_last[lo:hi], marks, renumbered[0][lo:hi], renumbered[1][lo:hi])

    threads.in_shares(runs_share, count)
    return covered


def _shares_and_clocks(ends: np.ndarray, groups: np.ndarray, start_clock: np.ndarray) -> tuple[np.ndarray, list]:
    """The chunk's rows cut into ``threads.shares`` (bounds), and each key's clock τ at each share's start and at
    the chunk's end: the largest end of its events before (Suzanne et al., §3.1). Each share's largest ends per key
    are found in threads, then joined share after share (a max of maxima: the one pass's clocks)."""
    cut, largest = key_extremes_in_shares(ends, groups, len(start_clock), True)
    clocks = [start_clock]
    for share_largest in largest:
        clocks.append(np.maximum(clocks[-1], share_largest))
    return cut, clocks


def _run_marks(spec: WindowSpec, aggregates: Sequence[Aggregate], skip_empty: bool, shares: int, total: int,
               rows: int) -> np.ndarray | None:
    """Zeros for the runs' difference arrays, one row of ``total + 1`` per share of the runs (``chunk_runs_into``
    marks them), where the windows' counts of runs are read: to skip the empty windows, or by an aggregate of the
    power sums (count, sum, mean: n is one of them) whose runs are cut into shares (one share: a Spark task's
    chunk, whose plan loads ``chunk_runs`` alone). None: not counted so.

    Only for runs of a few windows (ω at most ``SLOTS / 2`` slides): there the extremes take their slots
    (``compiled._slotted_extremes``) and the thread that counts and sums is the longer one, so counting while
    the runs are written pays (spanning.aggregate of 1M events, 50 keys, 15m/5m: 18.5-20.3 ms against 21.7-22.8);
    with longer runs the extremes' sparse table is the longer thread, and the marks only slow the runs (15m/1m:
    28.8-30.3 ms against 25.7-27.2, 2026-11-29)."""
    power_sums = any(agg.capabilities.form is Form.POWER_SUMS for agg in aggregates)
    short_runs = spec.range <= SLOTS // 2 * spec.slide
    if not short_runs or not (skip_empty or (power_sums and shares > 1)):
        return None
    # int32 where no window's count nor number passes it: half the bytes to mark and to read
    return np.zeros((shares, total + 1), dtype=np.int32 if max(total, rows) < 2**31 - 1 else np.int64)


def _runs_in_shares(starts, ends, groups, bounds, clocks, range_from, shift, window, marks=None) -> tuple:
    """``chunk_runs`` over the shares of ``bounds``, each from its keys' clocks at its start, the shares after the
    first in threads; their events' rows and runs in order, as one pass over the chunk gives them. Each share writes
    its runs in place (``chunk_runs_into``) at its own rows, so that nothing is joined unless some event is left out,
    and marks them in its row of ``marks`` (None: not marked)."""
    if len(bounds) <= 2 and marks is None:
        return chunk_runs(starts, ends, groups, clocks[0], range_from, shift, *window)
    n = len(starts)
    rows, run_first, run_last = (np.empty(n, dtype=np.int64) for _ in range(3))
    unmarked = np.zeros(0, dtype=np.int32)

    def share(k: int) -> tuple:
        lo, hi = bounds[k], bounds[k + 1]
        active, late_rows, missed = chunk_runs_into(starts[lo:hi], ends[lo:hi], groups[lo:hi], clocks[k], range_from,
                                                    shift, *window, rows, run_first, run_last, lo,
                                                    unmarked if marks is None else marks[k])  # fmt: skip
        return active, late_rows + lo, missed

    parts = threads.in_shares(share, len(bounds) - 1)
    written = [(bounds[k], bounds[k] + active) for k, (active, _, _) in enumerate(parts)]
    if any(to != bounds[k + 1] for k, (_, to) in enumerate(written)):  # some events reach no window: close the gaps
        rows, run_first, run_last = (np.concatenate([a[lo:to] for lo, to in written])
                                     for a in (rows, run_first, run_last))  # fmt: skip
    late_rows = np.concatenate([late for _, late, _ in parts])
    missed = np.concatenate([m for _, _, m in parts])
    return rows, run_first, run_last, late_rows, missed


def _with_values(array: np.ndarray, positions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A copy of ``array`` with ``values`` at ``positions``, in the dtype both fit (as a concatenation takes)."""
    out = array.astype(np.concatenate([array[:0], values[:0]]).dtype)  # always a copy
    out[positions] = values
    return out


def _spread(per_key: np.ndarray, groups: np.ndarray) -> np.ndarray | np.integer:
    """A per-key array at each event: ``per_key[groups]``, or a scalar for a single key (no 1M-element gather)."""
    return per_key[0] if len(per_key) == 1 else per_key[groups]


def release_open(spec: WindowSpec, aggregates: Sequence[Aggregate], open_keys: OpenKeys,
                 carry: str = "none") -> ChunkResult:  # fmt: skip
    """Carried keys with no new event: release their windows that start before their clocks (the end of
    their streams, ``flush``), or with ``carry="all"`` only what their clocks release, the rest kept open
    in ``result.carried`` (a watermark advanced their clocks).

    ``result.window_group`` indexes the entries of ``open_keys``.
    """
    n = len(open_keys)
    none = np.zeros(0, dtype=np.int64)
    events = KeyedEvents(none, none, none, n, np.zeros(n, dtype=np.int64))
    entries = replace(open_keys, groups=np.arange(n))
    return reduce_chunk(spec, aggregates, events, no_columns(), entries, carry)


def batch_columns(
    frame: pd.DataFrame,
    aggs: Sequence[Aggregate],
    seq: np.ndarray | int,
    valid_columns: Mapping[str, str] | None = None,
) -> BatchColumns:
    """The columns the aggregates read, as numpy arrays with null masks; ``seq``: the rows' arrival numbers, or their
    count when they are the row positions (``BatchColumns``).

    ``valid_columns`` maps a column to a boolean column of the frame that says which values are
    present (the Spark job sends nulls that way, values filled with 0, to keep integer dtypes).
    NaN is null (docs/SEMANTICS.md §10) even where such a column says present (Spark's NaN is not null).
    """
    columns = {}
    numeric = {c for a in aggs for c in a.numeric_columns}
    for name in dict.fromkeys(c for a in aggs for c in a.columns):
        series = frame[name]
        flagged = bool(valid_columns) and name in valid_columns
        if flagged:
            valid = frame[valid_columns[name]].to_numpy(dtype=bool)
        else:
            valid = ~series.isna().to_numpy()
        values = _numeric(series, valid) if name in numeric else series.to_numpy()
        if flagged and values.dtype.kind == "f":
            valid = valid & ~np.isnan(values)
        columns[name] = (values, valid)
    return BatchColumns(columns, seq)


def _numeric(series: pd.Series, valid: np.ndarray) -> np.ndarray:
    dtype = series.dtype
    extension = pd.api.types.is_extension_array_dtype(dtype)
    if dtype.kind == "u":  # unsigned values past 2^63 - 1 have no int64 form: refuse rather than wrap
        values = series.to_numpy(dtype=np.uint64, na_value=0) if extension else series.to_numpy()
        if len(values) and int(np.where(valid, values, 0).max()) > INT64_MAX:
            raise _out_of_range(series, int(values[valid].max()))
        return values.astype(np.int64)
    if dtype.kind in "ib":
        if extension:
            return series.to_numpy(dtype=np.int64, na_value=0)
        return series.to_numpy().astype(np.int64, copy=False)
    if dtype.kind == "f":
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna().to_numpy() & valid
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"column {series.name!r} must be numeric: row {i} holds {series.iloc[i]!r}")
    if converted.dtype.kind in "fu":  # Python ints past int64 would become floats (inexact) or wrap
        huge = [v for v in series[valid] if type(v) is int and not INT64_MIN <= v <= INT64_MAX]
        if huge:
            raise _out_of_range(series, huge[0])
    return _numeric(converted, valid)


def _out_of_range(series: pd.Series, value: int) -> ValueError:
    return ValueError(
        f"column {series.name!r} holds the integer {value}, outside the 64-bit range (±{INT64_MAX}):"
        " spanning never wraps integers; exclude or fix the value, or give the column as floating point"
    )


def key_values(series: pd.Series) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """A key column's values, exact: nullable (extension) columns keep their dtype (Int64 would become float)."""
    return series.array if pd.api.types.is_extension_array_dtype(series.dtype) else series.to_numpy()
