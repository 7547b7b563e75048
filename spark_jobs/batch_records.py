"""The stream's batch records: what each micro-batch did, and the state versions it left, kept bounded.

``spanning stream`` writes one record per batch (``CHECKPOINT/spanning/batches/N.json``) after the batch's outputs:
its counts (rows read, rejected, late, windows), the largest end it saw, each bucket's stats and every bucket's
state ``Version`` (``spark_jobs.bucket_store``). A batch starts from the versions of the record before it
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

import bisect
import json
import os
from pathlib import Path
from typing import Any

from spark_jobs.bucket_store import Version

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
        self.ids = sorted(self.by_batch)

    def add(self, record: dict) -> None:
        """A batch's record, written whole (a batch run again replaces its own); then the oldest folded."""
        batch = record["batch"]
        save_json(self.folder / f"{batch:08d}.json", record)
        if batch not in self.by_batch:
            bisect.insort(self.ids, batch)
        self.by_batch[batch] = record
        if len(self.ids) > self.kept:
            self._fold(self.ids[: len(self.ids) - self.kept])

    def _fold(self, batches: list[int]) -> None:
        folded = dict(self.folded, buckets=dict(self.folded["buckets"]))
        for batch in batches:
            record = self.by_batch[batch]
            for name in COUNTED:
                folded[name] += record[name]
            folded["batches"] += 1
            folded["max_end"] = _larger(folded["max_end"], record.get("max_end"))
            folded["buckets"].update(record.get("buckets", {}))
            folded["versions"] = record.get("versions", folded.get("versions", {}))  # every bucket's, carried
            folded["through"] = batch
        save_json(self.totals_path, folded)  # first the total, then the files it holds
        self.folded = folded
        for batch in batches:
            (self.folder / f"{batch:08d}.json").unlink(missing_ok=True)
            del self.by_batch[batch]
        del self.ids[: len(batches)]

    def records(self) -> list[dict]:
        """The records kept whole, in batch order."""
        return [self.by_batch[b] for b in self.ids]

    def versions_before(self, batch_id: int) -> dict[int, Version]:
        """Each bucket's state version as the last batch before ``batch_id`` left it."""
        at = bisect.bisect_left(self.ids, batch_id)
        versions = self.by_batch[self.ids[at - 1]]["versions"] if at else self.folded.get("versions", {})
        return {int(b): Version(*v) for b, v in versions.items()}

    def max_end(self) -> int | None:
        """The largest end any batch saw."""
        largest = self.folded["max_end"]
        for record in self.by_batch.values():
            largest = _larger(largest, record.get("max_end"))
        return largest

    def totals(self) -> dict[str, Any]:
        """Every batch's counts added up, their number, and each bucket's stats as its last batch left them."""
        records = self.records()
        buckets = dict(self.folded["buckets"])
        for record in records:
            buckets.update(record.get("buckets", {}))
        return {**{name: self.folded[name] + sum(r[name] for r in records) for name in COUNTED},
                "batches": self.folded["batches"] + len(records), "buckets": buckets}  # fmt: skip


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def save_json(path: Path, content: dict) -> None:
    """``content`` as JSON at ``path``, whole: written under a hidden name, then renamed."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(content, indent=1))
    os.replace(temp, path)
