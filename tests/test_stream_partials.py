"""A micro-batch's rows in one task (``spanning.engines.stream_partials``) against a per-event loop over the
definitions: each event's clock at arrival is max(its key's state clock, u), its run of windows starts at the
first window that overlaps it, is open at that clock, and is in its key's series and not released."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from spanning.engines.stream_partials import KeyState, micro_batch_partials
from spanning.kernels.windows import WindowSpec
from tests.budget import examples

NEVER = np.iinfo(np.int64).min
KEYS = ["a", "b", None]  # a null key is a key of its own


def by_definition(events: list[tuple], state: dict, spec: WindowSpec) -> tuple[dict, dict]:
    """Per (key, window) the events counted, and per late event its windows missed, one event at a time."""
    counts, missed = {}, {}
    for key, start, u, seq in events:
        k0, clock, first_open = state.get(key, (NEVER, NEVER, NEVER))
        first = spec.first_window_ending_after(start)
        a = max(first, spec.first_window_open_at(max(clock, u)), k0, first_open)
        b = spec.last_window_starting_before(u)
        for k in range(a, b + 1):
            counts[(key, k)] = counts.get((key, k), 0) + 1
        if min(b + 1, a) - first > 0 or key not in state:  # late, or a new key's (the driver decides)
            missed[seq] = max(min(b + 1, a) - first, 0)
    return counts, missed


events_strategy = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 60), st.integers(0, 30)), max_size=40)
state_strategy = st.dictionaries(st.sampled_from(KEYS), st.tuples(st.integers(-3, 6), st.integers(0, 90),
                                                                  st.integers(-3, 12)), max_size=3)  # fmt: skip


@settings(max_examples=examples(200), deadline=None)
@given(events_strategy, state_strategy, st.sampled_from([(10, 5, 0), (10, 3, 4), (7, 7, 20)]))
def test_task_rows_equal_the_definition(rows, state, window):
    spec = WindowSpec(*window)
    events = [(key, start, start + max(length, 1), seq) for seq, (key, start, length) in enumerate(rows)]
    table = pa.table({"cell": pa.array([e[0] for e in events], pa.string()),
                      "_start": pa.array([e[1] for e in events], pa.int64()),
                      "_u": pa.array([e[2] for e in events], pa.int64()),
                      "_end": pa.array([e[2] for e in events], pa.int64()),
                      "_seq": pa.array([e[3] for e in events], pa.int64()),
                      "reason": pa.array([None] * len(events), pa.string())})  # fmt: skip
    held = KeyState(pa.table({"cell": pa.array(list(state), pa.string()),
                              "_s_k0": pa.array([v[0] for v in state.values()], pa.int64()),
                              "_s_clock": pa.array([v[1] for v in state.values()], pa.int64()),
                              "_s_first_open": pa.array([v[2] for v in state.values()], pa.int64())}))  # fmt: skip
    out = micro_batch_partials(table, held, ["cell"], spec, [("_n", "sum", "one", None)])
    counts, missed = by_definition(events, state, spec)
    windows = out.filter(pc.equal(out["kind"], "w")).to_pylist()
    assert {(w["cell"], w["_k"]): w["_n"] for w in windows} == counts
    late = out.filter(pc.equal(out["kind"], "l")).to_pylist()
    assert {r["_k"]: r["windows_missed"] for r in late} == missed
    per_key = out.filter(pc.equal(out["kind"], "k")).to_pylist()
    keys = {e[0] for e in events}
    assert {r["cell"]: r["_ev_n"] for r in per_key} == {k: sum(e[0] == k for e in events) for k in keys}
    for r in per_key:  # the key's first event in end order (u, then arrival number)
        first = min((e for e in events if e[0] == r["cell"]), key=lambda e: (e[2], e[3]))
        assert (r["_ev_first_start"], r["_ev_first_seq"]) == (first[1], first[3])


def test_without_key_columns_the_one_state_row_is_every_event_s():
    spec = WindowSpec(10, 5)
    table = pa.table({"_start": [3, 40], "_u": [12, 41], "_end": [12, 41], "_seq": [1, 2],
                      "reason": pa.array([None, "end is before start"], pa.string())})  # fmt: skip
    held = KeyState(pa.table({"_s_k0": [0], "_s_clock": [30], "_s_first_open": [5]}))
    out = micro_batch_partials(table, held, [], spec, [("_n", "sum", "one", None)])
    assert out.filter(pc.equal(out["kind"], "w")).num_rows == 0  # its windows -1 to 2 were released at clock 30
    late = out.filter(pc.equal(out["kind"], "l")).to_pylist()
    assert [(r["_k"], r["windows_missed"]) for r in late] == [(1, 4)]  # windows -1 to 2
    rejected = out.filter(pc.equal(out["kind"], "r")).to_pylist()
    assert [(r["_k"], r["reason"]) for r in rejected] == [(2, "end is before start")]
