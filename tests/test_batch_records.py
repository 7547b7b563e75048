"""The stream's batch records (``spark_jobs.stream.batch_records``): bounded however long a stream runs, and the totals,
the watermark's end and the state versions those of every record ever written (the last of a batch run again)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.stream.batch_records import COUNTED, TOTALS_FILE, BatchRecords
from spark_jobs.stream.bucket_store import Version
from tests.budget import examples


def _record(batch: int, draw: int) -> dict:
    """A batch's record as ``BatchWriter`` writes it; ``draw`` varies its numbers (a batch run again differs)."""
    return {"batch": batch, "rows_read": 10 + draw, "rejected": draw % 3, "late": draw % 5, "windows": 2 * draw,
            "max_end": None if draw % 4 == 0 else 1000 * batch + draw,
            "buckets": {str(draw % 3): {"keys": draw, "held_windows": batch, "state_bytes": 7}},
            "versions": {str(b): [batch + b, b, draw, 9] for b in range(3)}}  # fmt: skip


@settings(max_examples=examples(60), deadline=None)
@given(kept=st.integers(1, 6), steps=st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=40),
       reopen=st.integers(0, 40))  # fmt: skip
def test_records_folded_beyond_the_kept_ones_give_the_totals_of_every_record(kept, steps, reopen):
    with tempfile.TemporaryDirectory() as folder:
        records, latest, batch = BatchRecords(Path(folder), kept=kept), {}, -1
        for i, (again, draw) in enumerate(steps):
            if i == reopen:  # a restart: everything read back from the files
                records = BatchRecords(Path(folder), kept=kept)
            if not (again and batch >= 0 and batch in records.by_batch):  # Spark runs again only a kept batch
                batch += 1
            records.add(_record(batch, draw))
            latest[batch] = _record(batch, draw)
            assert len(list((Path(folder) / "batches").glob("*.json"))) <= kept
            totals = records.totals()
            assert {n: totals[n] for n in COUNTED} == {n: sum(r[n] for r in latest.values()) for n in COUNTED}
            assert totals["batches"] == len(latest)
            buckets: dict = {}
            for b in sorted(latest):
                buckets.update(latest[b]["buckets"])
            assert totals["buckets"] == buckets
            ends = [r["max_end"] for r in latest.values() if r["max_end"] is not None]
            assert records.max_end() == (max(ends) if ends else None)
            expected = {int(b): Version(*v) for b, v in latest[batch]["versions"].items()}
            assert records.versions_before(batch + 1) == expected  # the next batch starts from the last one's
            if batch in records.by_batch and batch - 1 in latest:  # this batch run again: from the one before
                before = {int(b): Version(*v) for b, v in latest[batch - 1]["versions"].items()}
                assert records.versions_before(batch) == before
        assert BatchRecords(Path(folder), kept=kept).totals() == records.totals()


def test_a_record_left_behind_by_a_crash_after_its_fold_is_not_counted_twice(tmp_path):
    """The total is written before the records it folds are removed: a record file still there, of a batch the total
    already holds, is removed when the records are read again, not added a second time."""
    records = BatchRecords(tmp_path, kept=2)
    for batch in range(3):
        records.add(_record(batch, draw=batch + 1))
    folded = json.loads((tmp_path / TOTALS_FILE).read_text())
    assert folded["through"] == 0 and folded["batches"] == 1 and not (tmp_path / "batches" / "00000000.json").exists()
    (tmp_path / "batches" / "00000000.json").write_text(json.dumps(_record(0, draw=1)))  # as if not yet removed
    again = BatchRecords(tmp_path, kept=2)
    assert again.totals() == records.totals() and again.totals()["batches"] == 3
    assert not (tmp_path / "batches" / "00000000.json").exists()
