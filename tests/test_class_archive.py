"""The Spark driver's class archive (``spark_jobs.sessions.class_archive``): named after its Java and Spark, used only
when whole, never left half-written by a failed build, pruned when its Spark is gone."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from spark_jobs.sessions import class_archive  # noqa: E402

HOTSPOT = '/usr/bin/java openjdk version "17.0.15"\nOpenJDK 64-Bit Server VM (build 17.0.15+6, mixed mode, sharing)'
OPENJ9 = '/usr/bin/java openjdk version "17.0.9"\nEclipse OpenJ9 VM (build openj9-0.41.0, JRE 17 Linux amd64)'


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SPANNING_CLASS_ARCHIVE", str(tmp_path))
    return tmp_path


def test_the_archive_is_named_after_its_java_and_spark_and_used_only_once_built(folder):
    path = class_archive.archive_path(HOTSPOT)
    assert path.parent == folder and path.name.startswith("spark-classes-") and path.suffix == ".jsa"
    assert class_archive.archive_path(HOTSPOT) == path
    assert class_archive.archive_path(HOTSPOT.replace("17.0.15", "17.0.16")) != path  # a Java update: a new one
    assert class_archive.driver_options(HOTSPOT) == []  # not built: the JVM starts as usual
    path.write_bytes(b"x")
    assert class_archive.driver_options(HOTSPOT) == [f"-XX:SharedArchiveFile={path}", class_archive.QUIET_CDS]
    assert class_archive.driver_options(OPENJ9) == []  # HotSpot's options only on HotSpot


def test_off_turns_archives_off_and_the_default_folder_is_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("SPANNING_CLASS_ARCHIVE", "off")
    assert class_archive.archive_path(HOTSPOT) is None and class_archive.driver_options(HOTSPOT) == []
    assert class_archive.build(HOTSPOT) is None
    monkeypatch.delenv("SPANNING_CLASS_ARCHIVE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert class_archive.archive_path(HOTSPOT).parent == tmp_path / "spanning"


def test_a_failed_build_leaves_no_archive_and_no_partial_file(folder, monkeypatch):
    def child_that_writes_half_and_fails(args, **kwargs):
        Path(args[-1]).write_bytes(b"half an archive")
        return subprocess.CompletedProcess(args, 1, b"", b"RuntimeError: warm-up job 2 failed\n")

    monkeypatch.setattr(class_archive.subprocess, "run", child_that_writes_half_and_fails)
    with pytest.raises(RuntimeError, match=r"not written \(exit 1\) RuntimeError: warm-up job 2 failed"):
        class_archive.build(HOTSPOT, quiet=True)
    assert list(folder.iterdir()) == []


def test_a_build_renames_the_whole_file_into_place_and_prunes_stale_archives(folder, monkeypatch):
    gone = folder / "spark-classes-0000000000000000.jsa"  # made for a Spark installation since removed
    gone.write_bytes(b"old")
    Path(f"{gone}.json").write_text(json.dumps({"spark_home": str(folder / "no-such-venv"), "java": HOTSPOT}))
    stale = folder / "spark-classes-1111111111111111.jsa.99.partial"  # of a build killed long ago
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 3 * class_archive.BUILD_TIMEOUT_S,) * 2)
    seen = {}

    def child(args, **kwargs):
        seen["env"] = kwargs["env"]
        Path(args[-1]).write_bytes(b"whole archive")
        return subprocess.CompletedProcess(args, 0, b"", b"")

    monkeypatch.setattr(class_archive.subprocess, "run", child)
    path = class_archive.build(HOTSPOT, quiet=True)
    assert seen["env"]["SPANNING_CLASS_ARCHIVE"] == "off"  # the child writing one maps none
    assert path.read_bytes() == b"whole archive"
    assert sorted(p.name for p in folder.iterdir()) == sorted([path.name, f"{path.name}.json"])
    assert json.loads(Path(f"{path}.json").read_text())["spark_home"] == str(class_archive.spark_home())
    monkeypatch.setattr(class_archive.subprocess, "run", None)  # built: a second build starts nothing
    assert class_archive.build(HOTSPOT) == path
