"""The stream's batch records: what each micro-batch did, and the state versions it left, kept bounded.

``spanning stream`` writes one record per batch (``CHECKPOINT/spanning/batches/N.json``) after the batch's outputs:
its counts (rows read, rejected, late, windows), the largest end it saw, each bucket's stats and every bucket's
state ``Version`` (``spark_jobs.stream.bucket_store``). A batch starts from the versions of the record before it
(``versions_before``), so a batch that Spark runs again reads the state its first run read.

Spark runs again only batches after its last commit, so only the last records are ever needed whole. Records older
than the last ``KEPT`` are folded into one running total (``CHECKPOINT/spanning/batch-totals.json``) and their files
removed: the folder, the memory and the work of each batch stay the same however long a stream runs. (Until
2026-11-28 every record was kept and summed again at every batch: a stream of one trigger a minute added 1,440
records a day.) The total is written before the records it folds are removed, and it names the last batch it
holds, so a record file left behind by a crash in between is not counted twice.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> records = BatchRecords(folder, kept=2)
>>> for n in range(5):
...     records.add({"batch": n, "rows_read": 10, "rejected": 1, "late": 0, "windows": 3, "max_end": n,
...                  "buckets": {"0": {"keys": n}}, "versions": {"0": [n, 0, 0, 0]}})
>>> sorted(p.name for p in (folder / "batches").iterdir()), records.totals()["rows_read"], records.totals()["batches"]
(['00000003.json', '00000004.json'], 50, 5)
>>> records.versions_before(4), records.max_end(), BatchRecords(folder, kept=2).totals() == records.totals()
({0: Version(version=3, snapshot=0, delta_bytes=0, snapshot_bytes=0)}, 4, True)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spark_jobs.stream.bucket_store import Version, write_whole

__all__ = ["BatchRecords", "COUNTED", "KEPT", "save_json"]

KEPT = 100  # records kept whole: Spark's own spark.sql.streaming.minBatchesToRetain (it runs again at most the last)
COUNTED = ("rows_read", "rejected", "late", "windows")  # a record's counts that the stream's totals add up
TOTALS_FILE = "batch-totals.json"  # beside batches/: the records folded so far


class BatchRecords:
    """The records of ``folder``/batches (a stream checkpoint's ``spanning`` folder) and the total of those folded."""

    def __init__(self, folder: Path, kept: int = KEPT) -> None:
        self.folder, self.kept = folder / "batches", kept
        self.folder.mkdir(parents=True, exist_ok=True)
        self.totals_path = folder / TOTALS_FILE
        empty = {"through": -1, "batches": 0, **dict.fromkeys(COUNTED, 0), "max_end": None, "buckets": {}}
        self.folded = json.loads(self.totals_path.read_text()) if self.totals_path.exists() else empty
        self.by_batch: dict[int, dict] = {}
        for path in sorted(self.folder.glob("*.json")):
            record = json.loads(path.read_text())
            if record["batch"] <= self.folded["through"]:  # folded before a crash removed its file
                path.unlink(missing_ok=True)
            else:
                self.by_batch[record["batch"]] = record

    def add(self, record: dict) -> None:
        """A batch's record, written whole (a batch run again replaces its own); then the oldest folded."""
        save_json(self.folder / f"{record['batch']:08d}.json", record)
        self.by_batch[record["batch"]] = record
        oldest = self.records()[: max(len(self.by_batch) - self.kept, 0)]
        if oldest:
            folded = self._with(oldest)
            save_json(self.totals_path, folded)  # first the total, then the files it holds
            self.folded = folded
            for record in oldest:
                (self.folder / f"{record['batch']:08d}.json").unlink(missing_ok=True)
                del self.by_batch[record["batch"]]

    def _with(self, records: list[dict]) -> dict[str, Any]:
        """The folded total with ``records`` (in batch order) added: the counts and batches, the largest end, each
        bucket's stats and every bucket's versions as the last of them left them, and the last batch held."""
        total = dict(self.folded, buckets=dict(self.folded["buckets"]))
        for record in records:
            for name in COUNTED:
                total[name] += record[name]
            total["batches"] += 1
            total["max_end"] = _larger(total["max_end"], record.get("max_end"))
            total["buckets"].update(record.get("buckets", {}))
            total["versions"] = record.get("versions", total.get("versions", {}))  # every bucket's, carried
            total["through"] = record["batch"]
        return total

    def records(self) -> list[dict]:
        """The records kept whole, in batch order."""
        return [self.by_batch[b] for b in sorted(self.by_batch)]

    def versions_before(self, batch_id: int) -> dict[int, Version]:
        """Each bucket's state version as the last batch before ``batch_id`` left it."""
        before = self._with([r for r in self.records() if r["batch"] < batch_id])
        return {int(b): Version(*v) for b, v in before.get("versions", {}).items()}

    def max_end(self) -> int | None:
        """The largest end any batch saw."""
        return self.totals()["max_end"]

    def totals(self) -> dict[str, Any]:
        """Every batch's counts added up, their number, the largest end, and each bucket's stats as its last batch
        left them (``rows_read``, ``rejected``, ``late``, ``windows``, ``batches``, ``max_end``, ``buckets``)."""
        return self._with(self.records())


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def save_json(path: Path, content: dict) -> None:
    """``content`` as JSON at ``path``, whole: written under a hidden name, then renamed."""
    write_whole(path, lambda temp: temp.write_text(json.dumps(content, indent=1)))
