"""The stream's state store: each bucket's ``OpenWindows`` as a snapshot and the changes of the batches since.

``spanning stream`` hashes keys into buckets, its key groups (``spark_jobs.stream.query``), and each batch is reduced
against every touched bucket's state (``spark_jobs.stream.buckets``), in the executors' tasks (``stream.tasks``) or on
the driver. A bucket's windows are files of the stream's checkpoint, one folder per bucket
(``CHECKPOINT/spanning/buckets/B/``), read by whichever process reduces the bucket next:

* ``snapshot-V``: the whole state after the bucket's V-th change (``OpenWindows.to_bytes``);
* ``delta-V``: the keys the V-th change changed, whole (``OpenWindows.changes_to_bytes``).

A batch writes the keys it changed, so what it writes follows its keys, not the state (``BucketStore.save``).
Once the deltas since the snapshot add up to more than the snapshot, the next change writes a snapshot instead,
so that a load reads at most about twice the state and writing stays within twice the changes.

**Exactly once.** Each batch's record keeps every bucket's ``Version`` (four numbers: which files make its state),
and a file is written under a temporary name, flushed to disk and renamed whole (``write_whole``). A batch that
fails, or runs again after a crash, is given the ``Version`` its first run was given and writes the same next
version again, replacing the files of the run that did not commit. Files older than the last snapshot but one
are removed when a snapshot is written: the committed version never needs them. (Until 2026-11-28 Spark's
``applyInPandasWithState`` held the ``Version`` and the buckets were reduced in the executors' Python workers.)

**The reducer keeps what it wrote.** The stream's reducer (``stream.buckets.BucketReducer``, one per running query
on the driver; in an executor's Python worker, the states that worker's tasks wrote for the running query,
``stream.tasks``) keeps the ``OpenWindows`` of each bucket's version V that it wrote (``held``), and its next batch
given version V of that bucket goes on from it without reading a file (``load`` says which: ``cached``). It is
taken out while a batch uses it, so a batch that fails leaves nothing half-changed behind. What is held goes with
the query's reducer (on the executors, with the query's token): a new query over the checkpoint
(a restart, a checkpoint made anew at the same path, or a copy of it run beside the original in one session)
reads the files. (Until 2026-11-28 the held states were the process's, keyed by an id kept in the checkpoint, so
two copies of one checkpoint run in one process could take each other's state.)
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from spanning.engines.open_windows import OpenWindows

__all__ = ["BucketStore", "Held", "Version", "STORE_FOLDER", "synced", "write_whole"]

STORE_FOLDER = "buckets"  # under CHECKPOINT/spanning/
Held = dict[int, tuple[int, OpenWindows]]  # a reducer's kept states: bucket -> (version, its state)


class Version(NamedTuple):
    """What a batch's record holds for a bucket: which files make its state."""

    version: int  # changes written so far
    snapshot: int  # the version of the last snapshot
    delta_bytes: int  # bytes of the deltas written since that snapshot
    snapshot_bytes: int  # bytes of that snapshot


NONE = Version(0, 0, 0, 0)  # a bucket that has written nothing


class BucketStore:
    """One bucket's files (``folder``/``bucket``); ``held``: the states its reducer keeps, by bucket."""

    def __init__(self, folder: str | Path, bucket: int, held: Held) -> None:
        self.folder, self.bucket, self.held = Path(folder) / str(bucket), bucket, held
        self.cached: bool | None = None  # after ``load``: whether the state was held (None: there was none yet)

    def load(self, empty: OpenWindows | Callable[[], OpenWindows], saved: Version) -> OpenWindows:
        """The bucket's state at ``saved``: the one its reducer wrote and kept, or ``empty`` (or what it makes, when it
        is a function: only when nothing is kept) filled from the files."""
        held = self.held.pop(self.bucket, None)
        self.cached = True if held is not None and held[0] == saved.version else (False if saved.version else None)
        if self.cached:
            return held[1]
        if callable(empty):
            empty = empty()
        if saved.version:
            empty.load_bytes(self._read("snapshot", saved.snapshot))
            for version in range(saved.snapshot + 1, saved.version + 1):
                empty.apply_changes(self._read("delta", version))
        return empty

    def save(self, state: OpenWindows, saved: Version) -> tuple[Version, int]:
        """The changes of ``state`` since ``saved`` as the next version: the new ``Version`` and the bytes written.
        Nothing changed: nothing is written."""
        if not state.n_changed:
            self.held[self.bucket] = (saved.version, state)
            return saved, 0
        version = saved.version + 1
        whole = state.n_changed * 2 > state.n_keys or not saved.version  # a delta would be most of a snapshot
        delta = None if whole else state.changes_to_bytes()
        if delta is None or saved.delta_bytes + len(delta) > saved.snapshot_bytes:
            data = state.to_bytes()  # a snapshot: the deltas since the last one would outweigh it
            self._write("snapshot", version, data)
            self._remove_before(saved.snapshot)
            new = Version(version, version, 0, len(data))
        else:
            data = delta
            self._write("delta", version, data)
            new = Version(version, saved.snapshot, saved.delta_bytes + len(data), saved.snapshot_bytes)
        self.held[self.bucket] = (version, state)
        return new, len(data)

    def _path(self, kind: str, version: int) -> Path:
        return self.folder / f"{kind}-{version}"

    def _read(self, kind: str, version: int) -> bytes:
        return self._path(kind, version).read_bytes()

    def _write(self, kind: str, version: int, data: bytes) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_whole(self._path(kind, version), lambda temp: temp.write_bytes(data))

    def _remove_before(self, version: int) -> None:
        """The files of versions before ``version`` (and temporaries a killed worker left of them)."""
        for path in self.folder.iterdir():
            try:
                written = int(path.name.lstrip(".").split(".")[0].split("-")[1])
            except (IndexError, ValueError):
                continue
            if written < version:
                path.unlink(missing_ok=True)


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """A checkpoint file whole or not at all, and on disk: ``write`` writes it under a hidden name beside ``path``
    (``.NAME.PID.tmp``: Spark's file sources skip hidden files, and ``BucketStore`` reads the version in such a
    name), whose bytes are flushed to disk before it is renamed, and the rename is flushed with its folder. So a
    batch's record, written once its state files and outputs are, never names a file that a power loss could leave
    empty or missing."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(temp)
    synced(temp)
    os.replace(temp, path)
    synced(path.parent)


def synced(path: Path) -> None:
    """A file's bytes, or a folder's names, flushed to disk (``fsync``). A file system that cannot flush a folder
    (some network mounts refuse it) leaves the folder as it is."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as error:
        if not path.is_dir() or error.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(descriptor)
