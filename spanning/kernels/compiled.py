"""The compiled kernel: the loops of the batch form of SE-Slicing, compiled by numba, shared by every path.

In the batch path every event contributes to a contiguous run of windows ``first[e]..last[e]`` (Suzanne et al.,
§3.2, Algorithms 3-4: the slices an interval event is inserted into, here numbered as windows). The functions
here reduce such runs into one value per window, each in one pass with no temporary the size of events × windows:

* ``run_counts`` and ``run_sums_int``: a difference array, +x at ``first``, −x past ``last``, and one running
  sum (exact modulo 2^64, so exact whenever a window's sum fits in int64);
* ``run_sums_float``: each event added to each window of its run, events in order (the explode's order, so
  the sums are the explode's to the last bit);
* ``run_extremes``: max or min, by the explode's loop when runs are short, else a sparse table read backwards
  (two blocks per run, then each level hands its values to the two halves below it);
* ``run_occupancy``: the chronons each event spends inside each window of its run, summed per window, in
  O(1) per run (two linear pieces per run, summed by difference arrays);
* ``run_cells``: the cells of (key, window) that runs of several keys fall on, for the map side's partials;
* ``event_runs``: the reader contract's checks for plain columns and each event's run [a, b] under the TTP;
* ``key_extremes`` and ``chunk_runs``: the same runs for a chunk of several keys whose clocks run per key
  (``spanning.engines.chunks.reduce_chunk``: ``spanning.aggregate`` and the stream's feed); ``chunk_runs_into``
  writes them in place, share after share (and marks them in a difference array, which ``marked_counts`` sums
  into the windows' counts of runs), and ``window_labels`` gives the chunk's windows their keys and bounds;
  ``covered_windows`` does it for the windows some event covers, with their counts (``empty_windows="skip"``);
* ``run_sums_into`` and ``run_extremes_into``: ``run_sums_int`` (``run_counts``) and ``run_extremes`` into arrays
  that numpy allocated (huge pages: half the time on millions of windows);
* ``appearance_codes``: integer keys as codes in order of first appearance and each code's first row, by a table
  over a short span (up to ``table_span(rows)`` numbers) or a hash table over a wide one (``spanning.aggregate``'s
  and the Spark tasks' key codes, any integers: no sort); ``first_rows``: each code's first row;
* ``plain_integers`` and ``plain_records``: the reader's plain integers from Arrow text, or from CSV bytes straight
  (``spanning.app.csv_partials``: a byte range of plain records, typed without pyarrow's text columns);
* ``text_neighbours_differ``: neighbouring text keys of an object column compared by their bytes in memory
  (``text_layout``), for the key runs of ``spanning.aggregate``.

``spanning.kernels.ranges`` (the aggregates' array faces, ``spanning.aggregate``, the stream's feed) and
``spanning.engines.window_ranges`` (the Spark map side) call these; nothing else loops over events.

The compiled code is cached on disk beside this file (numba's ``cache=True``), so a process compiles each
function once per machine and later ones load it (about 0.5 s for all of them). Imported from a zip (the
engine shipped to bare executors), there is no file to cache beside: the module then runs a copy of its own
source written to ``$SPANNING_KERNEL_CACHE``, else ``$NUMBA_CACHE_DIR``, else the temp folder, in a folder named
by the source's hash, and caches there (``_copy_on_disk``), so an executor machine compiles once, not once per
worker and job. ``warm_up`` loads or compiles them all and says how long that took; ``warm_up_shipped`` does it
for that copy ahead of the executors of this machine.

>>> import numpy as np
>>> first, last = np.array([0, 1, 1]), np.array([2, 1, 3])
>>> run_counts(first, last, 4).tolist()
[1, 3, 2, 1]
>>> run_extremes(first, last, 4, np.array([5.0, 9.0, 1.0]), -np.inf, True).tolist()
[5.0, 9.0, 5.0, 1.0]
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path

import numpy as np

try:
    import numba
    import numba.extending
    from llvmlite import ir
except ImportError as missing:  # pragma: no cover - the package requires it; a bare executor may lack it
    raise ImportError(
        "spanning needs the package numba (its compiled kernel) wherever it runs, Spark executors included:"
        " pip install numba"
    ) from missing

__all__ = [
    "CACHED", "appearance_codes", "chunk_runs", "chunk_runs_into", "covered_before", "covered_windows",
    "event_ends_into", "event_runs", "first_rows", "key_extremes", "labelled_windows", "marked_counts", "marked_runs",
    "plain_integers", "plain_records", "renumbered_runs", "run_cells", "run_counts", "run_extremes",
    "run_extremes_into", "run_occupancy", "run_sums_float", "run_sums_int", "run_sums_into", "run_windows",
    "table_span", "text_layout", "text_neighbours_differ", "warm_up", "warm_up_shipped", "window_labels",
]  # fmt: skip

CACHED = os.path.isfile(__file__)  # a real file to cache beside; not inside a zip on an executor's path
_compile = numba.njit(cache=CACHED, nogil=True, error_model="numpy")
SHORT_RUN = 4  # run_occupancy adds runs of up to this many windows window by window (measured there)
# run_extremes_into's slots per window (_slotted_extremes): 8 values, a cache line; 1M runs of 3-4 windows took 2.0 ms
# at 8 slots, 2.2 ms at 16, 2.7 ms at 4 (2026-11-29)
SLOTS = 8
# where text_neighbours_differ reads a str (CPython's layout, checked by text_layout): its type, its length, its
# state byte, and the state's compact and ASCII bits
TYPE_AT, LENGTH_AT, STATE_AT, COMPACT_ASCII, COMPACT = 8, 16, 32, 0x60, 0x20
# objects whose first line text_neighbours_differ asks the memory for ahead of reading them: 1M row-built keys
# took 22-25 ms at 16, 43-61 ms at 32 and 64, 59-68 ms with none (2026-11-28, one process)
READ_AHEAD = 16


@_compile
def run_sums_int(first, last, n_windows, values):
    """Σ values over the runs covering each window, in int64: wraps, i.e. exact modulo 2^64."""
    diff = np.zeros(n_windows + 1, np.int64)
    for e in range(len(first)):
        diff[first[e]] += values[e]
        diff[last[e] + 1] -= values[e]
    out = np.empty(n_windows, np.int64)
    total = 0
    for w in range(n_windows):
        total += diff[w]
        out[w] = total
    return out


@_compile
def run_counts(first, last, n_windows):
    """Number of runs covering each window: ``run_sums_int`` of ones."""
    return run_sums_int(first, last, n_windows, np.ones(len(first), np.int64))


@_compile
def run_sums_float(first, last, n_windows, values):
    """Σ values over the runs covering each window, each window's values added in event order."""
    out = np.zeros(n_windows, np.float64)
    for e in range(len(first)):
        x = values[e]
        for w in range(first[e], last[e] + 1):
            out[w] += x
    return out


@numba.njit(inline="always", cache=CACHED, nogil=True, error_model="numpy")
def _better(x, held, largest):
    """``x`` where it beats ``held`` (larger for ``largest``, else smaller; ``held`` kept on a tie), else ``held``: a
    select stored always, as the extreme kernels take it (a branch there is mispredicted as often as taken)."""
    return x if ((x > held) if largest else (x < held)) else held


@_compile
def run_extremes(first, last, n_windows, values, sentinel, largest):
    """The max (``largest``) or min of ``values`` over the runs covering each window, ``sentinel`` where none does
    (``run_extremes_into`` an array of ``sentinel``)."""
    out = np.full(n_windows, sentinel, values.dtype)
    run_extremes_into(first, last, values, largest, out)
    return out


@_compile
def run_occupancy(first, last, n_windows, starts, ends, first_start, slide, range_):
    """Σ over the runs covering window j of the chronons the event ``[starts, ends)`` spends inside it
    (``min(u, S + ω) − max(l, S)``, S the window's start, ``first_start[e]`` the start of window ``first[e]``).

    O(events + windows), however long the runs: along a run, ``min(u, S + ω)`` is ``S + ω`` up to the last window
    ending by u and ``u`` after it, and ``max(l, S)`` is ``l`` up to the last window starting by l and ``S`` after
    it. So each window's total is ``C + K·S``, with C and K summed over the runs by difference arrays (exact
    modulo 2^64, as ``run_sums_int``). S at a position that starts no run is its left neighbour's plus β: such
    a position is inside a run, next to the run's previous window. Runs of up to ``SHORT_RUN`` windows are added
    window by window. On 1M events (2026-11-27), against adding every run window by window: the same 11-12 ms at
    3.4 windows per event, 18-19 ms against 40-42 ms at 17, and 14-18 ms against 100-131 ms at 62.
    """
    constant = np.zeros(n_windows + 1, np.int64)
    coefficient = np.zeros(n_windows + 1, np.int64)
    window_start = np.zeros(n_windows, np.int64)
    starts_a_run = np.zeros(n_windows, np.bool_)
    direct = np.zeros(n_windows, np.int64)
    for e in range(len(first)):
        a, b = first[e], last[e]
        if b < a:
            continue
        s0 = first_start[e]
        window_start[a], starts_a_run[a] = s0, True
        length = b - a + 1
        if length <= SHORT_RUN:  # a few windows: each added to directly costs less than the divisions below
            for w in range(a, b + 1):
                direct[w] += min(ends[e], s0 + range_) - max(starts[e], s0)
                s0 += slide
            continue
        ends_by_u = min(max((ends[e] - range_ - s0) // slide + 1, 0), length)  # windows with S + ω ≤ u
        starts_by_l = min(max((starts[e] - s0) // slide + 1, 0), length)  # windows with S ≤ l
        constant[a] += range_  # S + ω on a .. a + ends_by_u − 1, then u
        constant[a + ends_by_u] += ends[e] - range_
        coefficient[a] += 1
        coefficient[a + ends_by_u] -= 1
        constant[b + 1] -= ends[e]
        constant[a] -= starts[e]  # − l on a .. a + starts_by_l − 1, then − S
        constant[a + starts_by_l] += starts[e]
        coefficient[a + starts_by_l] -= 1
        coefficient[b + 1] += 1
    out = np.empty(n_windows, np.int64)
    c = k = 0
    for w in range(n_windows):
        if not starts_a_run[w] and w:
            window_start[w] = window_start[w - 1] + slide
        c += constant[w]
        k += coefficient[w]
        out[w] = direct[w] + c + k * window_start[w]
    return out


@_compile
def run_windows(first, last):
    """Every (event, window) pair, run after run: the explode, as two arrays of Σ (last − first + 1)."""
    total = 0
    for e in range(len(first)):
        total += max(last[e] - first[e] + 1, 0)
    event = np.empty(total, np.int64)
    window = np.empty(total, np.int64)
    i = 0
    for e in range(len(first)):
        for w in range(first[e], last[e] + 1):
            event[i] = e
            window[i] = w
            i += 1
    return event, window


@_compile
def run_cells(codes, first, last, n_keys, dense_limit):
    """The cells (key, window) that the runs of several keys fall on, numbered so that each run is consecutive.

    Returns ``(cell_first, cell_code, cell_window, covered_only)``: the cell of each run's first window, and the
    key code and window number of each cell. Dense (``covered_only`` False) when the keys' spans hold at most
    ``dense_limit`` cells: every window from a key's first run to its last is a cell, so some may be empty.
    Else the runs are ordered by (key, first) and only the windows that some run covers are cells: a key's
    covered windows are stretches, each stretch a block of cells.
    """
    n = len(first)
    low = np.full(n_keys, np.iinfo(np.int64).max, np.int64)
    high = np.full(n_keys, np.iinfo(np.int64).min, np.int64)
    for e in range(n):
        c = codes[e]
        low[c] = min(low[c], first[e])
        high[c] = max(high[c], last[e])
    spans = np.zeros(n_keys, np.int64)
    total = 0
    for c in range(n_keys):
        if high[c] >= low[c]:
            spans[c] = high[c] - low[c] + 1
            total = min(total + spans[c], dense_limit + 1)  # past the limit is enough to know (and never wraps)
    cell_first = np.empty(n, np.int64)
    if total <= dense_limit:
        base = np.empty(n_keys, np.int64)
        cell_code = np.empty(total, np.int64)
        cell_window = np.empty(total, np.int64)
        at = 0
        for c in range(n_keys):
            base[c] = at
            for w in range(spans[c]):
                cell_code[at + w] = c
                cell_window[at + w] = low[c] + w
            at += spans[c]
        for e in range(n):
            cell_first[e] = base[codes[e]] + first[e] - low[codes[e]]
        return cell_first, cell_code, cell_window, False
    by_key = np.zeros(n_keys + 1, np.int64)  # a counting sort by key, then each key's runs by first
    for e in range(n):
        by_key[codes[e] + 1] += 1
    for c in range(n_keys):
        by_key[c + 1] += by_key[c]
    ordered = np.empty(n, np.int64)
    filled = by_key[:-1].copy()
    for e in range(n):
        ordered[filled[codes[e]]] = e
        filled[codes[e]] += 1
    for c in range(n_keys):
        runs = ordered[by_key[c] : by_key[c + 1]]
        for i in range(1, len(runs)):
            if first[runs[i]] < first[runs[i - 1]]:  # not in order already (end order often is): sort
                runs[:] = runs[np.argsort(first[runs])]
                break
    starts = np.empty(n, np.int64)  # the stretches: first window and cell of each
    stretch_cell = np.empty(n, np.int64)
    stretch_code = np.empty(n, np.int64)
    stretches, cells, reach = 0, 0, np.int64(0)
    for i in range(n):
        e = ordered[i]
        c = codes[e]
        if i == 0 or c != codes[ordered[i - 1]] or first[e] > reach + 1:  # a new stretch
            if stretches:
                cells += reach - starts[stretches - 1] + 1
            starts[stretches], stretch_cell[stretches], stretch_code[stretches] = first[e], cells, c
            stretches += 1
            reach = last[e]
        reach = max(reach, last[e])
        cell_first[e] = stretch_cell[stretches - 1] + first[e] - starts[stretches - 1]
    if stretches:
        cells += reach - starts[stretches - 1] + 1
    cell_code = np.empty(cells, np.int64)
    cell_window = np.empty(cells, np.int64)
    for s in range(stretches):
        end = stretch_cell[s + 1] if s + 1 < stretches else cells
        for i in range(stretch_cell[s], end):
            cell_code[i] = stretch_code[s]
            cell_window[i] = starts[s] + i - stretch_cell[s]
    return cell_first, cell_code, cell_window, True


EXACT_IN_FLOAT = 2**52  # integers of smaller magnitude convert to float64 exactly


@numba.njit(inline="always", cache=CACHED, nogil=True, error_model="numpy")
def _floor_div(a, d, inverse):
    """``a // d`` for a divisor ``d`` ≥ 1 and its ``inverse`` (1.0 / d), without the integer division: the quotient
    estimated by a multiplication in float64, then corrected by the remainder (off by at most 2 below 2^52; beyond,
    the division itself). The runs' kernels divide each event's times by the slide two or three times: 1M events
    in 5.4 ms against 6.6 ms with ``//`` (``chunk_runs_into``, one thread, 2026-11-29)."""
    if -EXACT_IN_FLOAT < a < EXACT_IN_FLOAT:
        q = np.int64(np.float64(a) * inverse)  # rounded toward zero
        r = a - q * d
        while r < 0:
            q -= 1
            r += d
        while r >= d:
            q += 1
            r -= d
        return q
    return a // d


@_compile
def event_runs(start, end, accepted, slide, offset, range_, ttp, series, has_series):
    """Each event's run of windows [a, b] when it arrives at its own end (``spark_jobs.batch.plans.window_runs``), for
    events in end order within their key, and whether it is late: ``(a, b, late)``. ``accepted`` has the rows
    that pass the reader contract; end < start fails it here. A row with end = start is the point [l, l + 1).

    a = max(first window ending after l, first window w with its end + δ ≥ u, the series' first window);
    b = last window starting before u; late when min(b + 1, a) > the first window ending after l.
    """
    n = len(start)
    a = np.empty(n, np.int64)
    b = np.empty(n, np.int64)
    late = np.zeros(n, np.bool_)
    series_first = (series - offset - range_) // slide + 1
    inverse = 1.0 / slide
    for i in range(n):
        if end[i] < start[i]:
            accepted[i] = False
        u = max(end[i], start[i] + 1)
        overlap_first = _floor_div(start[i] - offset - range_, slide, inverse) + 1
        first = max(overlap_first, -_floor_div(offset + range_ + ttp - u, slide, inverse))
        if has_series:
            first = max(first, series_first)
        last = _floor_div(u - offset - 1, slide, inverse)
        a[i], b[i] = first, last
        late[i] = accepted[i] and min(last + 1, first) > overlap_first
    return a, b, late


@_compile
def key_extremes(values, groups, out, largest):
    """``out[g]`` becomes the max (``largest``) or min of itself and the ``values`` of key g, in place."""
    if largest:  # ends in arrival order rise: a branch would be mispredicted at about half the rows (3.8 -> 0.9 ms)
        for i in range(len(values)):
            g, x = groups[i], values[i]
            out[g] = x if x > out[g] else out[g]
    else:  # a key's least start is met early: the branch is predicted (0.55 ms a 1M rows, a select 0.87)
        for i in range(len(values)):
            g = groups[i]
            if values[i] < out[g]:
                out[g] = values[i]


@_compile
def chunk_runs(starts, ends, groups, clocks, range_from, shift, slide, offset, range_, ttp):
    """Each event's run of windows in a chunk of several keys, as ``event_runs`` for one clock per key.

    Events arrive in order; ``clocks[g]`` is key g's clock before the chunk (τ, carried), and each arrival
    advances its key's clock to its end (Suzanne et al., §3.1: the largest end seen). An event overlaps
    windows ``(l − o − ω) // β + 1 .. (u − o − 1) // β``; it reaches those not yet released at its arrival
    (ending at or after τ − δ) and not before ``range_from[g]``. Returns ``(rows, run_first, run_last,
    late_rows, missed)``: the events that reach some window with their runs shifted by ``shift[g]`` (their
    cells in the chunk's arrays), and the late events with the number of windows each missed.
    """
    n = len(starts)
    rows = np.empty(n, np.int64)
    run_first = np.empty(n, np.int64)
    run_last = np.empty(n, np.int64)
    active, late_rows, missed = chunk_runs_into(starts, ends, groups, clocks, range_from, shift, slide, offset,
                                                range_, ttp, rows, run_first, run_last, 0,
                                                np.zeros(0, np.int32))  # fmt: skip
    return rows[:active], run_first[:active], run_last[:active], late_rows, missed


@_compile
def first_rows(codes, n_keys):
    """The first row of each key code (``len(codes)`` for a code with no row)."""
    rows = np.full(n_keys, len(codes), np.int64)
    for i in range(len(codes) - 1, -1, -1):
        rows[codes[i]] = i
    return rows


def table_span(rows: int) -> int:
    """The widest span of integer keys that ``appearance_codes`` codes by a table rather than a hash table, for
    ``rows`` values: four slots a row (1,024 more for a few rows), so the table takes at most about four times the
    codes' own memory."""
    return 4 * rows + 1024


@_compile
def appearance_codes(values, null, most):
    """Codes 0 .. k − 1 of integer ``values`` in the order of their first appearance, equal values equal codes, the
    rows where ``null`` is set (an empty ``null``: none) one key more, and the row where each code first appears. In
    one pass, no sort: a table over the values' span when they span at most ``most`` numbers, else a hash table
    (``_hashed_rows``). 1M wide keys (CPU time, 2026-11-29), against ``pd.factorize`` and its ``first_rows``: 50
    values 5 ms against 6-8 ms, 10,000 values 5 ms against 25 ms, 700,000 values 70 ms against 55 ms."""
    n = len(values)
    nulls = len(null) > 0
    low = high = 0
    found = False
    for i in range(n):
        if nulls and null[i]:
            continue
        v = values[i]
        if not found:
            low = high = v
            found = True
        elif v < low:
            low = v
        elif v > high:
            high = v
        if not 0 <= high - low < most:  # too wide for a table already (or past int64): the rest need not be read
            break
    span = high - low
    codes = np.empty(n, np.int64)
    rows = np.empty(n, np.int64)
    # the code of the nulls, then the codes given so far (k): the table's pass and the hash's share them
    state = np.array([-1, 0], np.int64)
    if 0 <= span < most:  # else too wide for a table, or past int64 (it wrapped)
        code = np.full(span + 1, -1, np.int64)
        for i in range(n):
            if nulls and null[i]:
                codes[i] = _null_code(state, rows, i)
                continue
            c = code[values[i] - low]
            if c < 0:
                c = code[values[i] - low] = state[1]
                rows[c] = i
                state[1] += 1
            codes[i] = c
        return codes, rows[: state[1]].copy()
    bits, done = 10, 0
    while done < n:  # the slots fill to half, then twice as many take the values placed so far, and the rows go on
        slot_code = np.full(1 << bits, -1, np.int64)
        slot_value = np.zeros(1 << bits, np.int64)
        for known in range(state[1]):
            if known != state[0]:
                slot = _hashed_slot(slot_code, slot_value, bits, values[rows[known]])
                slot_code[slot], slot_value[slot] = known, values[rows[known]]
        done = _hashed_rows(values, null, done, slot_code, slot_value, bits, codes, rows, state)
        # four times the slots while twice the rows would not fill them: 1M rows of 700,000 values in 70 ms against
        # 84 ms doubling (CPU time, one run each beside other work, 2026-11-29)
        bits += 2 if (2 << bits) < 2 * n else 1
    return codes, rows[: state[1]].copy()


@numba.njit(inline="always", cache=CACHED, nogil=True, error_model="numpy")
def _null_code(state, rows, i):
    """The code of the nulls (``state[0]``), given at row ``i`` if they had none (``appearance_codes``)."""
    if state[0] < 0:
        state[0] = state[1]
        rows[state[1]] = i
        state[1] += 1
    return state[0]


_GOLDEN = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 (2^64/φ) as a signed 64-bit number


@numba.njit(inline="always", cache=CACHED, nogil=True, error_model="numpy")
def _hashed_slot(slot_code, slot_value, bits, value):
    """The slot of ``value`` in a hash table of 2^``bits`` slots (Fibonacci hashing: the top bits of value · 2^64/φ;
    linear probing): the slot that holds it, or else the first free slot (code -1) from its hash."""
    mask = len(slot_code) - 1
    slot = ((value * _GOLDEN) >> (64 - bits)) & mask  # the wrapped int64 product's top bits, as unsigned
    while slot_code[slot] >= 0 and slot_value[slot] != value:
        slot = (slot + 1) & mask
    return slot


@numba.njit(cache=CACHED, nogil=True, error_model="numpy")
def _hashed_rows(values, null, row, slot_code, slot_value, bits, codes, rows, state):
    """``appearance_codes``' hashed pass from ``row`` on, until the rows end or the slots are half full: returns the
    row it stopped at. Its own function, so that the loop holds its arrays (growing them inside it cost 20 ns a row
    in reference counts); the codes given so far and the nulls' code are locals while it runs, and the room is
    checked only where a value is new (1M rows of 50 keys: 1.7-2.1 ms against 2.6 ms reading ``state`` at every row,
    one thread, 2026-11-29)."""
    nulls = len(null) > 0
    n = len(values)
    room = len(slot_code) // 2
    null_code, k = state[0], state[1]
    while row < n:
        if nulls and null[row]:
            if null_code < 0:
                null_code = k
                rows[k] = row
                k += 1
            codes[row] = null_code
            row += 1
            continue
        slot = _hashed_slot(slot_code, slot_value, bits, values[row])
        c = slot_code[slot]
        if c < 0:  # a new value: placed if the slots keep room, else the pass stops before this row
            if k + 1 - (null_code >= 0) > room:
                state[0], state[1] = null_code, k
                return row
            slot_code[slot], slot_value[slot] = k, values[row]
            c = k
            rows[k] = row
            k += 1
        codes[row] = c
        row += 1
    state[0], state[1] = null_code, k
    return row


@numba.extending.intrinsic
def _word_at(typingctx, address):
    """The int64 stored at ``address`` (the caller holds what lives there)."""

    def load(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))

    return numba.types.int64(numba.types.int64), load


@numba.extending.intrinsic
def _byte_at(typingctx, address):
    """The byte stored at ``address``, as an int64."""

    def load(context, builder, signature, args):
        byte = builder.load(builder.inttoptr(args[0], ir.IntType(8).as_pointer()))
        return builder.zext(byte, ir.IntType(64))

    return numba.types.int64(numba.types.int64), load


@numba.extending.intrinsic
def _read_ahead(typingctx, address):
    """Ask the memory for the line at ``address`` without waiting for it (LLVM's prefetch, for reading)."""

    def prefetch(context, builder, signature, args):
        pointer, flag = ir.IntType(8).as_pointer(), ir.IntType(32)
        function = builder.module.declare_intrinsic(
            "llvm.prefetch", [pointer], ir.FunctionType(ir.VoidType(), [pointer, flag, flag, flag])
        )
        read, keep, data = ir.Constant(flag, 0), ir.Constant(flag, 3), ir.Constant(flag, 1)  # for reading, kept, data
        builder.call(function, [builder.inttoptr(args[0], pointer), read, keep, data])
        return context.get_dummy_value()

    return numba.types.none(numba.types.int64), prefetch


@_compile
def text_neighbours_differ(addresses, text_type, data_at):
    """For each pair of neighbouring objects of an object column (their ``addresses``): 0 the same key, 1 two
    different texts, 2 undecided, left to Python's ``!=`` (not both compact ASCII ``str``: None, NaN, other text).

    Two objects at one address are one key. Two compact ASCII strings (CPython's layout, ``text_layout``: the
    type, the length, the state's compact and ASCII bits, the bytes from ``data_at``) are equal exactly when their
    lengths and bytes are. The caller keeps the objects alive while this runs; a null pointer (numpy reads it as
    None) is left undecided.
    """
    n = len(addresses)
    out = np.zeros(max(n - 1, 0), np.int8)
    for i in range(min(READ_AHEAD, n)):
        _read_ahead(addresses[i] + TYPE_AT)
    for i in range(n - 1):
        if i + READ_AHEAD < n:
            _read_ahead(addresses[i + READ_AHEAD] + TYPE_AT)
        a, b = addresses[i], addresses[i + 1]
        if a == b:
            continue
        if a == 0 or b == 0 or _word_at(a + TYPE_AT) != text_type or _word_at(b + TYPE_AT) != text_type:
            out[i] = 2
            continue
        if (_byte_at(a + STATE_AT) & COMPACT_ASCII != COMPACT_ASCII
                or _byte_at(b + STATE_AT) & COMPACT_ASCII != COMPACT_ASCII):  # fmt: skip
            out[i] = 2
            continue
        length = _word_at(a + LENGTH_AT)
        if length != _word_at(b + LENGTH_AT):
            out[i] = 1
            continue
        j = 0
        while j + 8 <= length:  # word by word, then the last bytes: never past the string's closing NUL
            if _word_at(a + data_at + j) != _word_at(b + data_at + j):
                out[i] = 1
                break
            j += 8
        if out[i] == 0:
            while j < length:
                if _byte_at(a + data_at + j) != _byte_at(b + data_at + j):
                    out[i] = 1
                    break
                j += 1
    return out


# ------------------------------------------------------------------------------------------------------------------
# kernels added for issue 66 (the in-process batch path): a chunk's runs written in place, the windows' labels


@_compile
def chunk_runs_into(starts, ends, groups, clocks, range_from, shift, slide, offset, range_, ttp, rows, run_first,
                    run_last, at, marks):  # fmt: skip
    """``chunk_runs``, its active events written to ``rows``, ``run_first`` and ``run_last`` from position ``at`` on
    (``rows`` as ``at`` + the event's position), so that the shares of a chunk fill one set of arrays (no joining
    copy when no event is left out). Returns ``(active, late_rows, missed)``: how many were written, and the late
    events (positions in ``starts``) with the windows each missed.

    ``marks`` (empty: not asked for) gets the runs' difference array as they are written, +1 at each run's first
    window, −1 past its last: the windows' counts of runs without a pass of their own over the runs
    (``marked_counts``, ``covered_windows``). 1M events of 16,633 windows: the runs in 3.0 ms a share with it
    and without, against 1.9 ms for a pass that counts them after (2026-11-29).
    """
    n = len(starts)
    clock = clocks.copy()
    late_rows = np.empty(n, np.int64)
    missed = np.empty(n, np.int64)
    active = late = 0
    inverse = 1.0 / slide
    counting = len(marks) > 0
    for i in range(n):
        g = groups[i]
        tau = max(clock[g], ends[i])  # stored always: a branch here is mispredicted at half the arrivals (10 -> 6 ms)
        clock[g] = tau
        overlap_first = _floor_div(starts[i] - offset - range_, slide, inverse) + 1
        overlap_last = _floor_div(ends[i] - offset - 1, slide, inverse)
        first = max(overlap_first, -_floor_div(offset + range_ + ttp - tau, slide, inverse), range_from[g])
        lost = min(overlap_last + 1, first) - overlap_first
        if lost > 0:
            late_rows[late], missed[late] = i, lost
            late += 1
        if first <= overlap_last:
            j = at + active
            a, b = first + shift[g], overlap_last + shift[g]
            rows[j], run_first[j], run_last[j] = at + i, a, b
            active += 1
            if counting:
                marks[a] += 1
                marks[b + 1] -= 1
    return active, late_rows[:late], missed[:late]


@_compile
def marked_counts(marks, out):
    """Each window's count of runs from the difference arrays ``marks`` (one row per share, ``chunk_runs_into``'s),
    written to ``out`` (window w: Σ over the rows of ``marks[:, :w + 1]``)."""
    running = 0
    for w in range(len(out)):
        for k in range(len(marks)):
            running += marks[k, w]
        out[w] = running


@_compile
def window_labels(n_windows, range_from, slide, offset, range_, group, start, end):
    """Each window's key and bounds, key after key, written to ``group``, ``start`` and ``end`` (Σ ``n_windows``
    long): key g's ``n_windows[g]`` windows from window ``range_from[g]`` on (``np.repeat`` of the keys and the
    windows' numbers in one pass). The caller allocates them with numpy, whose large arrays take huge pages: 9M
    windows took 48 ms against 101 ms written to arrays of numba's (2026-11-29)."""
    at = 0
    for g in range(len(n_windows)):
        s = range_from[g] * slide + offset
        for _ in range(n_windows[g]):
            group[at], start[at], end[at] = g, s, s + range_
            s += slide
            at += 1


@_compile
def covered_windows(first, last, n_windows, range_from, slide, offset, range_, marks, counts, group, start, end,
                    first_out, last_out):
    """The windows that some run covers (``empty_windows="skip"``), in one difference array and one pass: returns
    how many there are, and writes for each, in order, its count of runs to ``counts`` and its key and bounds to
    ``group``, ``start`` and ``end`` (``window_labels``; each holds a slot more than the covered windows, as every
    window is written and only a covered one moves on: no branch). ``marks``, zeros of ``Σ n_windows + 1``, ends
    as each window's number among the covered ones (-1: not covered); ``first_out`` and ``last_out`` get each run
    renumbered so: a run's windows are all covered, so they stay consecutive among them.

    Its three steps are kernels of their own, so that threads may share the last two
    (``spanning.engines.chunks._covered_in_shares``): ``marked_runs``, ``labelled_windows``, ``renumbered_runs``."""
    marked_runs(first, last, marks)
    covered = labelled_windows(0, len(marks) - 1, 0, len(n_windows), n_windows, range_from, slide, offset, range_,
                               marks, 0, 0, counts, group, start, end)  # fmt: skip
    renumbered_runs(first, last, marks, first_out, last_out)
    return covered


@_compile
def marked_runs(first, last, marks):
    """``covered_windows``' difference array: +1 at each run's first window, −1 past its last."""
    for e in range(len(first)):
        marks[first[e]] += 1
        marks[last[e] + 1] -= 1


@_compile
def covered_before(marks, bounds):
    """For each window ``bounds[k]``: how many windows before it are covered, the count of runs that cover the window
    before it (what a share of ``labelled_windows`` from there starts with), and the window past the last covered
    one before it (0 for none): one pass over ``marks`` up to the last bound."""
    n = len(bounds)
    covered, running, stop = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    count = held = past = 0
    w = 0
    for k in range(n):
        while w < bounds[k]:
            held += marks[w]
            if held > 0:
                count += 1
                past = w + 1
            w += 1
        covered[k], running[k], stop[k] = count, held, past
    return covered, running, stop


@_compile
def labelled_windows(lo, hi, key_lo, key_hi, n_windows, range_from, slide, offset, range_, marks, running, at, counts,
                     group, start, end):  # fmt: skip
    """``covered_windows``' pass over the windows [``lo``, ``hi``) of the keys [``key_lo``, ``key_hi``) (``hi``: up to
    where they are read; past it, none is covered), from ``running`` runs covering the window before ``lo``: each
    covered window's count and labels written from position ``at`` on, and its number put in ``marks``. Returns how
    many it labelled."""
    covered = at
    w = lo
    for g in range(key_lo, key_hi):
        s = range_from[g] * slide + offset
        for _ in range(min(n_windows[g], hi - w)):
            running += marks[w]
            on = running > 0
            counts[covered], group[covered], start[covered], end[covered] = running, g, s, s + range_
            marks[w] = covered if on else -1  # a select: an empty window follows a covered one at random
            covered += on
            s += slide
            w += 1
    return covered - at


@_compile
def renumbered_runs(first, last, marks, first_out, last_out):
    """Each run's first and last window by their numbers among the covered ones (``labelled_windows``' ``marks``)."""
    for e in range(len(first)):
        first_out[e] = marks[first[e]]
        last_out[e] = marks[last[e]]


@_compile
def run_sums_into(first, last, values, out):
    """``run_sums_int`` into ``out``, zeros of ``n_windows + 1`` allocated by the caller (numpy's huge pages, see
    ``window_labels``): the difference array, then its running sum in place; ``values`` of length 0 count the runs
    (``run_counts``). Window w's sum is ``out[w]``; ``out[n_windows]`` is left over. Returns the least and the
    largest of ``values`` (0, 0 for none), read in the same pass: whether a window's sum might leave int64
    (``spanning.kernels.ranges.range_sum_int``) without two more passes over the values (0.6 ms of 1M)."""
    low = high = 0
    if len(values):
        low = high = values[0]
        for e in range(len(first)):
            x = values[e]
            out[first[e]] += x
            out[last[e] + 1] -= x
            low = min(low, x)
            high = max(high, x)
    else:
        for e in range(len(first)):
            out[first[e]] += 1
            out[last[e] + 1] -= 1
    total = 0
    for w in range(len(out) - 1):
        total += out[w]
        out[w] = total
    return low, high


@_compile
def run_extremes_into(first, last, values, largest, out):
    """``run_extremes`` into ``out``, the sentinel in every window (allocated by the caller: numpy's huge pages, see
    ``window_labels``). Short runs: the explode's loop. Long ones (Σ lengths past ``2 n + windows · levels``): a
    sparse table read backwards, O(events + windows · log length); or, where the runs are short (at most
    ``SLOTS / 2`` windows on average: at most 1.5 blocks of ``SLOTS`` a run) and the windows few
    (``_slotted_extremes``), a slot per first window and length. The runs' lengths are read once for all three."""
    n, n_windows = len(first), len(out)
    longest, total = 0, 0
    for e in range(n):
        length = last[e] - first[e] + 1
        total += length
        longest = max(longest, length)
    levels = 1
    while (1 << levels) <= longest:
        levels += 1
    if total <= 2 * n + n_windows * levels:
        if largest:  # two loops, not a test of ``largest`` per window: 20-30% faster; selects, not branches
            for e in range(n):
                x = values[e]
                for w in range(first[e], last[e] + 1):
                    out[w] = x if x > out[w] else out[w]
        else:
            for e in range(n):
                x = values[e]
                for w in range(first[e], last[e] + 1):
                    out[w] = x if x < out[w] else out[w]
        return
    if 2 * total <= SLOTS * n and n_windows * SLOTS <= n:  # the slots' pass over the windows a fraction of the runs'
        _slotted_extremes(first, last, values, largest, out)
        return
    table = np.empty((levels, n_windows), values.dtype)
    table[:] = out[0]  # the sentinel
    level_of = np.zeros(longest + 1, np.int64)  # ⌊log2 L⌋ of each length, read not counted per event
    for length in range(2, longest + 1):
        level_of[length] = level_of[length >> 1] + 1
    for e in range(n):  # a run of length L is two blocks of 2^j, j = ⌊log2 L⌋, overlapping
        j = level_of[last[e] - first[e] + 1]
        x = values[e]
        for w in (first[e], last[e] + 1 - (1 << j)):
            table[j, w] = _better(x, table[j, w], largest)
    for j in range(levels - 1, 0, -1):  # a block of 2^j hands its value to its two halves
        half = 1 << (j - 1)
        for w in range(n_windows):
            x = table[j, w]
            table[j - 1, w] = _better(x, table[j - 1, w], largest)
            if w + half < n_windows:
                table[j - 1, w + half] = _better(x, table[j - 1, w + half], largest)
    out[:] = table[0]


@numba.njit(cache=CACHED, nogil=True, error_model="numpy")
def _slotted_extremes(first, last, values, largest, out):
    """``run_extremes_into`` by a slot per (first window, length) for runs of up to ``SLOTS`` windows: one store per
    such run, where the sparse table takes two and a level's lookup (1M runs of 3-4 windows over 16,633 windows,
    2026-11-29: 2.0 ms against 3.3-3.9 ms). A longer run is cut into blocks of ``SLOTS`` windows, the last one
    ending at its last window (overlapping the one before: a max takes a value twice alike). Then window by window,
    each length's slot hands its value to the next shorter one of its own first window and of the next: slot
    (a, L) stands for the windows a .. a + L − 1, which are those of (a, L − 1) and (a + 1, L − 1) (the push-down of
    a sparse table, Bender and Farach-Colton's, by one length at a time)."""
    n_windows = len(out)
    slot = np.full((n_windows + 1) * SLOTS, out[0], values.dtype)  # a row more: the last window's hand-over
    for e in range(len(first)):
        a, b = first[e], last[e]
        x = values[e]
        if b - a < SLOTS:
            i = a * SLOTS + b - a
            slot[i] = _better(x, slot[i], largest)
            continue
        while a + SLOTS <= b:
            i = a * SLOTS + SLOTS - 1
            slot[i] = _better(x, slot[i], largest)
            a += SLOTS
        i = (b + 1 - SLOTS) * SLOTS + SLOTS - 1
        slot[i] = _better(x, slot[i], largest)
    for a in range(n_windows):
        at = a * SLOTS
        for length in range(SLOTS - 1, 0, -1):
            x = slot[at + length]
            slot[at + length - 1] = _better(x, slot[at + length - 1], largest)
            slot[at + SLOTS + length - 1] = _better(x, slot[at + SLOTS + length - 1], largest)
        out[a] = _better(slot[at], out[a], largest)


@_compile
def event_ends_into(starts, ends, out):
    """``spanning.kernels.windows.event_ends`` into ``out``: ``max(end, start + 1)`` per event, one pass."""
    for i in range(len(ends)):
        out[i] = max(ends[i], starts[i] + 1)


_INT64_DIGITS = np.frombuffer(b"9223372036854775808", np.uint8)  # |INT64_MIN|: the 19-digit plain integers' bound


@numba.njit(inline="always", cache=CACHED, nogil=True, error_model="numpy")
def _plain_integer(data, a, b):
    """The bytes ``data[a:b]`` as a plain integer within 64 bits (the reader's ``plain_integer`` pattern
    ``-?(0|[1-9][0-9]{0,18})`` and range): (whether they are one, its value or 0)."""
    negative = a < b and data[a] == 45  # "-"
    if negative:
        a += 1
    length = b - a
    if length == 0 or length > 19 or (data[a] == 48 and length > 1):  # empty, too long, a leading zero
        return False, np.int64(0)
    total = np.uint64(0)
    bad = False
    for j in range(a, b):  # no branch per digit: a byte that is no digit wraps above 9
        d = np.uint64(data[j]) - np.uint64(48)
        bad |= d > np.uint64(9)
        total = total * np.uint64(10) + d
    if bad:
        return False, np.int64(0)
    if length == 19:  # 64 bits end at 9223372036854775808 (a negative value's): compared digit by digit
        k = 0
        while k < 19 and data[a + k] == _INT64_DIGITS[k]:
            k += 1
        if (k < 19 and data[a + k] > _INT64_DIGITS[k]) or (k == 19 and not negative):
            return False, np.int64(0)
    return True, -np.int64(total) if negative else np.int64(total)  # wraps to INT64_MIN for its own digits


@_compile
def plain_integers(offsets, data, valid):
    """Each value of an Arrow string array (its ``offsets`` into the bytes ``data``; ``valid``: not null) read as a
    plain integer within 64 bits, the reader's ``plain_integer`` pattern ``-?(0|[1-9][0-9]{0,18})`` and range: the
    values (0 where not plain) and which are, in one pass over the bytes (15 ns a 10-digit value, 2026-11-29)."""
    n = len(offsets) - 1
    values = np.zeros(n, np.int64)
    plain = np.zeros(n, np.bool_)
    for i in range(n):
        if valid[i]:
            plain[i], values[i] = _plain_integer(data, np.int64(offsets[i]), np.int64(offsets[i + 1]))
    return values, plain


@_compile
def plain_records(data, delimiter, slots, wanted):
    """CSV records of plain integers read straight from their bytes ``data`` (whole lines, no quote character), when
    the pyarrow text reader would give the same records: each line of ``len(slots)`` fields split at ``delimiter``,
    ending in a line feed or a carriage return and a line feed (a Windows export), empty lines skipped (as pyarrow
    skips them), every field whose ``slots[f] >= 0`` a plain integer (``plain_integers``' pattern), no byte past
    ASCII (pyarrow checks UTF-8) and no carriage return but before a line feed.

    Returns (whether they are, the ``wanted`` columns' values ``[slot, record]``, each record's first byte, per
    field the records where it is present (not empty: pyarrow's null) and where a plain integer). Where they are
    not, the caller reads the bytes with pyarrow, which names each malformed record."""
    width, n = len(slots), len(data)
    lines = 1
    for i in range(n):
        lines += data[i] == 10
    values = np.empty((wanted, lines), np.int64)
    line_starts = np.empty(lines, np.int64)
    present = np.zeros(width, np.int64)
    plain = np.zeros(width, np.int64)
    row, i = 0, 0
    while i < n:
        if data[i] == 10:  # an empty line
            i += 1
            continue
        if data[i] == 13 and i + 1 < n and data[i + 1] == 10:  # an empty line of a Windows export
            i += 2
            continue
        line_starts[row] = i
        field = 0
        while True:  # a field: its digits summed as they are passed (a byte that is no digit wraps above 9)
            a = i
            total = np.uint64(0)
            bad = False
            while i < n:
                c = data[i]
                if c == delimiter or c == 10 or (c == 13 and i + 1 < n and data[i + 1] == 10):
                    break
                d = np.uint64(c) - np.uint64(48)
                bad |= d > np.uint64(9)
                total = total * np.uint64(10) + d
                i += 1
            if field == width:  # more fields than the header
                return False, values[:, :0], line_starts[:0], present, plain
            if bad:  # no digits alone: a sign, or text (which must be ASCII, with no carriage return)
                for j in range(a, i):
                    if data[j] > 127 or data[j] == 13:
                        return False, values[:, :0], line_starts[:0], present, plain
                is_plain, value = _plain_integer(data, a, i) if data[a] == 45 else (False, np.int64(0))
            else:
                length = i - a
                is_plain = 0 < length < 19 and (data[a] != 48 or length == 1)  # no leading zero
                value = np.int64(total)
                if length == 19:
                    is_plain, value = _plain_integer(data, a, i)
            present[field] += i > a
            plain[field] += is_plain
            slot = slots[field]
            if slot >= 0:
                if not is_plain:
                    return False, values[:, :0], line_starts[:0], present, plain
                values[slot, row] = value
            field += 1
            if i < n and data[i] == delimiter:
                i += 1
                continue
            break
        if field != width:
            return False, values[:, :0], line_starts[:0], present, plain
        row += 1
        i += 2 if i < n and data[i] == 13 else 1  # past the line feed (and the carriage return before it)
    return True, values[:, :row], line_starts[:row], present, plain

# ------------------------------------------------------------------------------------------------------------------


@functools.cache
def text_layout() -> tuple[int, int] | None:
    """``text_neighbours_differ``'s ``(text_type, data_at)`` where this interpreter lays out strings as that kernel
    reads them, else None (then Python compares every pair the addresses do not settle).

    The layout read: a 64-bit little-endian CPython whose object header puts the type at byte ``TYPE_AT``, a
    string's length at ``LENGTH_AT`` and its state at ``STATE_AT`` (``COMPACT_ASCII`` set for compact ASCII, only
    ``COMPACT`` of the two for other compact text), and a compact ASCII string's bytes right after its header. That
    is CPython 3.11-3.13's; any version is taken whose two probe strings read so, and none other (a free-threaded or
    trace-refs build moves the type, and fails the probe).
    """
    if sys.implementation.name != "cpython" or sys.byteorder != "little" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    data_at = sys.getsizeof("") - 1  # the header of a compact ASCII string, and its closing NUL
    ascii_text, other_text = "".join(["spanning", "-probe"]), "".join(["spanning", "-\u00e9"])  # new objects
    for text, state in ((ascii_text, COMPACT_ASCII), (other_text, COMPACT)):
        address = id(text)
        if (ctypes.c_int64.from_address(address + TYPE_AT).value != id(str)
                or ctypes.c_int64.from_address(address + LENGTH_AT).value != len(text)
                or ctypes.c_uint8.from_address(address + STATE_AT).value & COMPACT_ASCII != state):  # fmt: skip
            return None
    if ctypes.string_at(id(ascii_text) + data_at, len(ascii_text)) != ascii_text.encode():
        return None
    return id(str), data_at


def _text_buffers() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An Arrow string array's offsets and bytes as ``plain_integers`` reads them (``numpy.frombuffer`` of its
    buffers: writeable int32 and uint8 arrays)."""
    return np.array([0, 1], np.int32), np.array([55], np.uint8), np.ones(1, np.bool_)


def _warm_up_calls(every: bool) -> dict[str, list]:
    """Each kernel's calls, by name, for the types the paths call it with (see ``warm_up``)."""
    ints, floats, flags = np.zeros(1, np.int64), np.zeros(1, np.float64), np.ones(1, np.bool_)
    held, held_floats = ints.copy(), floats.copy()  # read-only, as Arrow's columns come
    held.flags.writeable = held_floats.flags.writeable = False
    ints_of, floats_of = ((ints, held), (floats, held_floats)) if every else ((ints,), (floats,))
    codes_of = (ints, np.zeros(1, np.int32)) if every else (ints,)  # int32: the stream's key codes
    marks_of = (np.int32, np.int64) if every else (np.int32,)  # int64: the runs' marks of 2^31 rows or more
    return {
        "run_counts": [lambda: run_counts(ints, ints, 1)],
        "run_sums_int": [lambda v=v: run_sums_int(ints, ints, 1, v) for v in ints_of],
        "run_sums_float": [lambda v=v: run_sums_float(ints, ints, 1, v) for v in floats_of],
        "run_extremes": [lambda: run_extremes(ints, ints, 1, ints, np.int64(0), True),
                         lambda: run_extremes(ints, ints, 1, floats, np.float64(0), True)],
        "run_occupancy": [lambda t=t: run_occupancy(ints, ints, 1, t, t, ints, 1, 1) for t in ints_of],
        "run_cells": [lambda t=t: run_cells(ints, t, t, 1, 1) for t in ints_of],
        "event_runs": [lambda t=t: event_runs(t, t, flags.copy(), 1, 0, 1, 0, 0, False) for t in ints_of],
        "appearance_codes": [lambda t=t: appearance_codes(t, flags[:0].copy(), 1) for t in ints_of],
        "run_windows": [lambda: run_windows(ints, ints)],
        "key_extremes": [lambda c=c: key_extremes(ints, c, ints.copy(), True) for c in codes_of],
        "chunk_runs": [lambda c=c: chunk_runs(ints, ints, c, ints, ints, ints, 1, 0, 1, 0) for c in codes_of],
        "chunk_runs_into": [lambda c=c, m=m: chunk_runs_into(ints, ints, c, ints, ints, ints, 1, 0, 1, 0, ints.copy(),
                                                             ints.copy(), ints.copy(), 0, np.zeros(2, m))
                            for c in codes_of for m in marks_of],
        "marked_counts": [lambda m=m: marked_counts(np.zeros((2, 2), m), ints.copy()) for m in marks_of],
        "window_labels": [lambda: window_labels(ints, ints, 1, 0, 1, ints.copy(), ints.copy(), ints.copy())],
        "covered_windows": [lambda: covered_windows(ints, ints, ints, ints, 1, 0, 1, np.zeros(2, np.int32),
                                                    *(np.zeros(2, np.int64) for _ in range(4)), ints.copy(),
                                                    ints.copy())],
        "covered_before": [lambda: covered_before(np.zeros(2, np.int32), ints)],
        "marked_runs": [lambda: marked_runs(ints, ints, np.zeros(2, np.int32))],
        "labelled_windows": [lambda: labelled_windows(0, 1, 0, 1, ints, ints, 1, 0, 1, np.zeros(2, np.int32), 0, 0,
                                                      *(np.zeros(2, np.int64) for _ in range(4)))],
        "renumbered_runs": [lambda: renumbered_runs(ints, ints, np.zeros(2, np.int32), ints.copy(), ints.copy())],
        "event_ends_into": [lambda t=t: event_ends_into(t, t, ints.copy()) for t in ints_of],
        "run_sums_into": [lambda v=v: run_sums_into(ints, ints, v, np.zeros(2, np.int64))
                          for v in (*ints_of, ints[:0])],
        "run_extremes_into": [lambda: run_extremes_into(ints, ints, ints, True, ints.copy()),
                              lambda: run_extremes_into(ints, ints, floats, True, floats.copy())],
        "first_rows": [lambda: first_rows(ints, 1)],
        "plain_integers": [lambda: plain_integers(*_text_buffers())],
        "plain_records": [lambda: plain_records(np.frombuffer(b"7\n", np.uint8), 44, ints, 1)],
        "text_neighbours_differ": [lambda: text_neighbours_differ(ints, 0, 0)],
    }  # fmt: skip


# seconds each kernel's warm-up calls (every=True) took to compile with an empty cache, one process on 2 cores
# (the mean of two runs, 2026-11-28; 23-24 s in all); they only balance the shares of workers compiling together
COMPILE_SECONDS = {"run_cells": 6.8, "run_extremes": 0.6, "run_occupancy": 1.9, "run_counts": 1.3,
                   "chunk_runs": 1.2, "event_runs": 1.0, "run_sums_float": 0.9, "run_sums_int": 0.3,
                   "key_extremes": 0.3, "run_windows": 0.3, "first_rows": 0.2,
                   "text_neighbours_differ": 0.7, "appearance_codes": 1.6,
                   "chunk_runs_into": 1.2, "window_labels": 0.3, "covered_windows": 0.5, "run_sums_into": 0.6,
                   "run_extremes_into": 2.6, "event_ends_into": 0.3, "plain_integers": 0.5,
                   "plain_records": 1.3, "marked_counts": 0.3, "covered_before": 0.4, "marked_runs": 0.2,
                   "labelled_windows": 0.2, "renumbered_runs": 0.2}  # fmt: skip
# covered_before, marked_runs, labelled_windows, renumbered_runs: 0.39, 0.17, 0.24, 0.17 s, each the first compile
# of its process, uncached (2026-11-30); plain_records: one compile, uncached, 2026-11-29 (1.25 s);
# covered_windows: 0.47-0.49 s, two compiles uncached, each the first of its process (2026-11-29); run_extremes,
# run_extremes_into and appearance_codes measured again after the hashed keys and the one pass over the runs'
# lengths (2026-11-29)


def warm_up_shares(parts: int) -> list[list[str]]:
    """The kernels split into ``parts`` shares of about equal compile time (the longest first, each to the share
    with the least so far). A kernel stays whole: numba keeps all its compiled types in one index file, which
    two processes compiling it at once would overwrite in turn."""
    shares: list[list[str]] = [[] for _ in range(parts)]
    load = [0.0] * parts
    for name in sorted(_warm_up_calls(False), key=lambda n: -COMPILE_SECONDS.get(n, 1.0)):
        least = load.index(min(load))
        shares[least].append(name)
        load[least] += COMPILE_SECONDS.get(name, 1.0)
    return shares


def warm_up(every: bool = False, part: int = 0, parts: int = 1, names: tuple[str, ...] | None = None) -> float:
    """Load (or compile, where there is no cache) every kernel for the types the paths call it with, and return
    the seconds it took: a Python worker does it while the driver plans, not in its first task.

    ``every``: also for the read-only arrays that Arrow columns give without a copy (the vector plan's and the
    stream's) and the stream's int32 key codes, which numba compiles apart. A worker leaves those to the task that
    first needs them (then cached): compiled in every warm-up, they cost a cold start about 7 s more (a 20-row
    stream: 62 s against 69 s, measured on 2 cores on 2026-11-27). ``scripts/setup.sh`` compiles them all.

    ``part`` of ``parts``: only that share of the kernels (``warm_up_shares``), for workers that share one cache
    (one machine): each compiles its share at the same time, and later calls load the others' from the cache.
    ``names``: only those kernels (of the share), for a plan that calls a few.
    """
    import time

    began = time.perf_counter()
    calls = _warm_up_calls(every)
    for name in warm_up_shares(parts)[part]:
        if names is not None and name not in names:
            continue
        for call in calls[name]:
            call()
    return time.perf_counter() - began


def warm_up_shipped() -> float:
    """``warm_up(every=True)`` of the copy that executors importing the shipped zip run (``_copy_on_disk``), ahead of
    them: for executors on this machine with the same ``$SPANNING_KERNEL_CACHE`` (``scripts/setup.sh``, for the
    cluster test)."""
    return _copy_on_disk().warm_up(every=True)


def _copy_on_disk():
    """This module run from a copy of its source on disk, for numba to cache beside (see the module docstring)."""
    import hashlib
    import importlib.util
    import pkgutil
    import sys
    import tempfile

    source = pkgutil.get_data(__package__, "compiled.py")  # read through the zip's loader
    digest = hashlib.sha256(source).hexdigest()[:16]
    where = os.environ.get("SPANNING_KERNEL_CACHE") or os.environ.get("NUMBA_CACHE_DIR") or tempfile.gettempdir()
    folder = Path(where).expanduser() / f"spanning-kernel-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "compiled.py"
    if not path.exists():  # workers may write it at once: each its own file, renamed into place
        partial = folder / f"compiled.{os.getpid()}.tmp"
        partial.write_bytes(source)
        os.replace(partial, path)
    spec = importlib.util.spec_from_file_location(f"spanning_kernel_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # by name, as numba finds a cached function's module again
    spec.loader.exec_module(module)
    return module


if not CACHED:
    _copy = _copy_on_disk()
    globals().update({name: getattr(_copy, name) for name in __all__ if name not in ("CACHED", "warm_up_shipped")})
