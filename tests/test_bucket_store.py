"""The stream's bucket store (``spark_jobs.stream.bucket_store``): a state kept as a snapshot and the changed keys of
each batch since gives, batch after batch, what one state kept in memory gives; a batch writes the keys it changed, not
the bucket; a batch run again reads the version committed before it (the last batch record's), not its failed run's.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanning.engines.engine import build_aggregates
from spanning.engines.open_windows import OpenWindows
from spanning.kernels.windows import WindowSpec
from spark_jobs.stream.bucket_store import NONE, BucketStore, Version
from tests.budget import examples
from tests.streams import ALL_AGGREGATES, streams, to_frame, window_specs


def _state(spec, aggregates) -> OpenWindows:
    names, aggs = build_aggregates(aggregates)
    return OpenWindows(WindowSpec(*spec), aggs, names, keys=["key"])


def _same_state(a: OpenWindows, b: OpenWindows) -> bool:
    """Entry for entry the same keys, clocks and windows, and the same values in them (each aggregate's lowered
    partials: an empty max is null however its partial holds it)."""
    x, y = a.state, b.state
    arrays = [(getattr(x, name), getattr(y, name)) for name in ("k0", "clock", "first_open", "lengths")]
    arrays += [(agg.lower_partials(p), agg.lower_partials(q))
               for agg, p, q in zip(a.aggregates, x.partials, y.partials, strict=True)]  # fmt: skip
    try:
        for p, q in arrays:
            pd.testing.assert_series_equal(pd.Series(p), pd.Series(q))
    except AssertionError:
        return False
    return a.key_list == b.key_list


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns[:3]), kind="stable").reset_index(drop=True)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=window_specs(), events=streams(max_events=60, keys=6), cuts=st.lists(st.integers(0, 70), max_size=10),
       advances=st.lists(st.one_of(st.none(), st.integers(-20, 200)), min_size=12, max_size=12),
       forget=st.lists(st.booleans(), min_size=12, max_size=12))  # fmt: skip
def test_a_state_through_the_bucket_store_gives_what_one_state_in_memory_gives(spec, events, cuts, advances, forget):
    """Batch after batch (a watermark's ``advance`` before some), the stored state releases the same windows and
    late rows as a state never saved, whether the worker kept it or it is read back from the files."""
    bounds = sorted({0, len(events), *[c % (len(events) + 1) for c in cuts]})
    batches = [to_frame(events[a:b]).assign(seq=np.arange(a, b)) for a, b in zip(bounds, bounds[1:], strict=False)]
    memory = _state(spec, ALL_AGGREGATES)
    with tempfile.TemporaryDirectory() as folder:
        held: dict = {}
        store, version = BucketStore(folder, 0, held), NONE
        for i, batch in enumerate(batches):
            kept = held.get(0)
            if forget[i % len(forget)]:
                held.clear()  # a restarted query: the state comes from the files
            stored = store.load(_state(spec, ALL_AGGREGATES), version)
            assert kept is None or stored is kept[1] or _same_state(stored, kept[1]), "the files hold what was kept"
            clock = advances[i % len(advances)]
            if clock is not None:
                pd.testing.assert_frame_equal(_sorted(stored.advance(clock)), _sorted(memory.advance(clock)))
            got, expected = stored.feed(batch), memory.feed(batch)
            pd.testing.assert_frame_equal(_sorted(got[0]), _sorted(expected[0]))
            pd.testing.assert_frame_equal(got[1], expected[1])
            before, (version, written) = version, store.save(stored, version)
            assert (written > 0) == (version.version == before.version + 1) and (written > 0 or not len(batch))
        held.clear()
        stored = store.load(_state(spec, ALL_AGGREGATES), version)
        pd.testing.assert_frame_equal(_sorted(stored.flush()), _sorted(memory.flush()))


def _calls(keys: list[int], at: int, per_key: int = 3) -> pd.DataFrame:
    starts = np.repeat(np.arange(per_key) * 50 + at, len(keys))
    return pd.DataFrame({"key": pd.array(np.tile(keys, per_key), dtype="Int64"), "start": starts, "end": starts + 400,
                         "x": pd.array(np.ones(len(starts), dtype=np.int64), dtype="Int64"),
                         "seq": np.arange(len(starts)) + at})  # fmt: skip


def test_a_batch_writes_the_keys_it_changed_not_the_bucket(tmp_path):
    """One key of 400 changed: the batch writes about 1/400 of the state. The deltas add up until they outweigh
    the snapshot; then one snapshot, and the files the committed version no longer needs are gone. Read back from
    the files, the state is the one the worker kept, entry for entry."""
    spec, aggregates = (900, 60, 600, 0), {"n": "count", "sum_x": "sum:x"}
    held: dict = {}
    store, version = BucketStore(str(tmp_path), 3, held), NONE
    state = store.load(_state(spec, aggregates), version)
    state.feed(_calls(list(range(400)), at=0))
    version, written = store.save(state, version)
    assert version == Version(1, 1, 0, written) and written > 100_000, "the first batch: a snapshot of every key"
    whole = written
    sizes = []
    for batch in range(1, 1000):
        state = store.load(_state(spec, aggregates), version)
        state.feed(_calls([batch % 7], at=10 * batch))  # one key, its clock moving on
        version, written = store.save(state, version)
        sizes.append(written)
        if version.snapshot == version.version:
            break
    deltas = sizes[:-1]
    assert len(deltas) > 50 and max(deltas) * 200 < whole, f"one key's change wrote {max(deltas)} of {whole} bytes"
    assert sizes[-1] >= whole * 0.9, "once the deltas outweigh the snapshot, a snapshot"
    assert sum(deltas) <= whole * 1.1, "what the deltas wrote stays within the snapshot they follow"
    first_snapshot = version.version
    files = {p.name for p in (tmp_path / "3").iterdir()}
    assert files == {"snapshot-1", *[f"delta-{v}" for v in range(2, version.version)], f"snapshot-{version.version}"}
    kept = held.pop(3)[1]
    read = store.load(_state(spec, aggregates), version)
    assert read is not kept and _same_state(read, kept)
    state = store.load(_state(spec, aggregates), version)
    state.feed(_calls([1], at=30_000))
    version, _ = store.save(state, version)
    state = store.load(_state(spec, aggregates), version)
    state.feed(_calls([1], at=30_050))
    version, _ = store.save(state, version)  # the next snapshot: what came before the last one goes
    while version.snapshot != version.version:
        state = store.load(_state(spec, aggregates), version)
        state.feed(_calls([2], at=40_000 + 10 * version.version))
        version, _ = store.save(state, version)
    assert min(int(p.name.split("-")[1]) for p in (tmp_path / "3").iterdir()) == first_snapshot


def test_a_batch_run_again_reads_the_committed_version_and_writes_it_again(tmp_path):
    """A batch that failed after writing (no batch record names its version) runs again from the version before:
    the worker's kept state is of the failed run, so it is read from the files, and the run again writes the
    same bytes and releases the same windows."""
    spec, aggregates = (900, 60, 600, 0), {"n": "count"}
    held: dict = {}
    store = BucketStore(str(tmp_path), 0, held)
    state = store.load(_state(spec, aggregates), NONE)
    state.feed(_calls(list(range(50)), at=0))
    committed, _ = store.save(state, NONE)
    state = store.load(_state(spec, aggregates), committed)
    first_windows, _ = state.feed(_calls([4, 5], at=2000))
    failed, _ = store.save(state, committed)
    first_bytes = (tmp_path / "0" / f"delta-{failed.version}").read_bytes()
    assert held[0][0] == failed.version
    state = store.load(_state(spec, aggregates), committed)  # the last record's version, given again
    assert held.get(0) is None, "taken out while a batch uses it"
    again_windows, _ = state.feed(_calls([4, 5], at=2000))
    again, _ = store.save(state, committed)
    assert again == failed and (tmp_path / "0" / f"delta-{again.version}").read_bytes() == first_bytes
    pd.testing.assert_frame_equal(again_windows, first_windows)
    assert len(first_windows) > 0
