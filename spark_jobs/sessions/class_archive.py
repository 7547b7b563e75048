"""A class archive for the Spark driver's JVM (Java's AppCDS): the classes a job loads, parsed once, mapped at start.

A Spark job of a few seconds spends most of them starting the JVM and loading, verifying and compiling
Spark's classes: about 18 s for the 20k-row sample job on 2 cores, against about 12 s with an archive of
the classes that a job loads (``docs/BENCHMARKS.md``). Java 13+ writes such an archive at exit
(``-XX:ArchiveClassesAtExit``) and maps it at start (``-XX:SharedArchiveFile``), which changes nothing but
the start's speed: classes missing from it load as usual.

``python -m spark_jobs.sessions.build_class_archive`` builds it once (``scripts/setup.sh`` does) by running small
jobs of each plan in a child process (``build`` here; the jobs and the command in ``build_class_archive``);
``spark_jobs.sessions.session.get_session`` then starts the driver with it when it launches the JVM itself (not
under ``spark-submit``, not when ``PYSPARK_SUBMIT_ARGS`` is set). An archive only fits the Java build and the Spark
jars it was made with, so its name is a hash of both and a new Java or pyspark needs a new build. It lives in
``SPANNING_CLASS_ARCHIVE`` (a folder; ``off`` turns archives off) or else ``$XDG_CACHE_HOME/spanning``
(``~/.cache/spanning``), and takes about 180 MB.

A half-written archive crashes the JVM that maps it, so the build writes a temporary file, waits for the JVM
that writes it to exit cleanly, and only then renames it into place.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SUFFIX = ".jsa"
BUILD_COMMAND = "spark_jobs.sessions.build_class_archive"  # the module that writes an archive in a child process
BUILD_TIMEOUT_S = 900
NONE = "no class archive: SPANNING_CLASS_ARCHIVE=off, or a JVM other than HotSpot (OpenJDK's)"
QUIET_CDS = "-Xlog:cds*=off"  # no line per class it cannot archive (signed jars), nor for an archive it cannot use


def archive_folder() -> Path | None:
    """Where archives live, or None when ``SPANNING_CLASS_ARCHIVE=off``."""
    setting = os.environ.get("SPANNING_CLASS_ARCHIVE", "")
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    if setting:
        return Path(setting).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache, "spanning")


def spark_home() -> Path:
    """The Spark installation whose jars the driver loads: ``SPARK_HOME``, else pip's pyspark."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"]).resolve()
    found = importlib.util.find_spec("pyspark")  # found, not imported: a quick check when the archive is there
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: install the spark extra (pip install 'spanning[spark]')")
    return Path(found.submodule_search_locations[0]).resolve()


def archive_path(java_version: str) -> Path | None:
    """The archive for this Java build (``java -version``'s text) and these Spark jars, or None when turned off
    or when the JVM is not HotSpot (whose -XX options these are)."""
    folder = archive_folder()
    if folder is None or not is_hotspot(java_version):
        return None
    home = spark_home()
    jars = sorted((p.name, p.stat().st_size) for p in (home / "jars").glob("*.jar"))
    key = hashlib.sha256(json.dumps([java_version, str(home), jars]).encode()).hexdigest()[:16]
    return folder / f"spark-classes-{key}{SUFFIX}"


def is_hotspot(java_version: str) -> bool:
    """Whether ``java -version``'s text is HotSpot's (OpenJDK's JVM), whose -XX options these are."""
    return "Server VM" in java_version or "HotSpot" in java_version


def driver_options(java_version: str) -> list[str]:
    """The JVM option that maps the archive, when one was built for this Java and Spark; else none."""
    path = archive_path(java_version)
    return [f"-XX:SharedArchiveFile={path}", QUIET_CDS] if path is not None and path.is_file() else []


def _prune(folder: Path, kept: Path) -> None:
    """Remove archives made for a Spark installation that is gone, or replaced by ``kept``, and stale partials."""
    for partial in folder.glob(f"spark-classes-*{SUFFIX}.*.partial"):  # of a build killed on its way
        if partial.stat().st_mtime < time.time() - 2 * BUILD_TIMEOUT_S:
            partial.unlink(missing_ok=True)
    for sidecar in folder.glob(f"spark-classes-*{SUFFIX}.json"):
        archive = sidecar.with_suffix("")
        try:
            home = json.loads(sidecar.read_text())["spark_home"]
        except (OSError, ValueError, KeyError):
            continue
        if archive != kept and (not Path(home).is_dir() or home == str(spark_home())):
            archive.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)


def build(java_version: str, rebuild: bool = False, quiet: bool = False) -> Path | None:
    """Build the archive for this Java and Spark (unless it exists); its path, or None when turned off."""
    path = archive_path(java_version)
    if path is None or (path.is_file() and not rebuild):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    env = {**os.environ, "SPANNING_CLASS_ARCHIVE": "off"}  # the child maps no archive while it writes one
    try:
        # the child's progress lines reach the terminal; with ``quiet`` its errors are kept for one line here
        child = subprocess.run([sys.executable, "-m", BUILD_COMMAND, "--write", str(partial)], env=env,
                               stderr=subprocess.PIPE if quiet else None, timeout=BUILD_TIMEOUT_S,
                               check=False)  # fmt: skip
        if child.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            detail = child.stderr.decode(errors="replace").strip().splitlines()[-1:] if quiet else []
            raise RuntimeError(f"the class archive was not written (exit {child.returncode}) {' '.join(detail)}")
        os.replace(partial, path)  # whole, or not there
    finally:
        partial.unlink(missing_ok=True)
    Path(f"{path}.json").write_text(json.dumps({"spark_home": str(spark_home()), "java": java_version}))
    _prune(path.parent, path)
    return path

