"""Session-wide fixtures: one Spark session for the whole test run (local[2]), started only by tests that need
it, and a bare Python for the executors of a cluster test, created only by tests that need it.

The suite runs on two pytest-xdist workers (``scripts/test.sh``: ``-n 2 --dist loadgroup``). Every test that
asks for the ``spark`` fixture is put in one group, so one worker holds the one Spark session and runs all of
them, while the other worker runs the pure-Python tests and the ones that start their own processes (a
cluster, ``spark-submit``, a killed stream); a test that starts an in-process session without the fixture
fails (``_no_session_of_its_own``)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.budget import examples

# property tests that name no number draw the default 100, scaled like the others (tests/budget.py)
settings.register_profile("spanning", max_examples=examples(100))
settings.load_profile("spanning")

# all that an executor of a cluster needs installed (pip name: import name)
BARE_PACKAGES = {"numpy": "numpy", "pandas": "pandas", "pyarrow": "pyarrow", "numba": "numba"}
#: what pyspark[connect] adds (distribution -> import name): a Connect server's foreachBatch process imports them
CONNECT_PACKAGES = {"grpcio": "grpc", "grpcio-status": "grpc_status", "googleapis-common-protos": "google.api",
                    "zstandard": "zstandard"}  # fmt: skip
# where scripts/setup.sh compiles the kernel copy that executors importing the shipped engine run (the cluster test
# gives its bare executors this folder as SPANNING_KERNEL_CACHE, so they load it rather than compile it)
KERNEL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spanning" / "kernel"
# what must not leak into the bare Python, whatever the machine's configuration
_OWN_ENVIRONMENT = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


#: the modules without the session that take a minute or so each (a cluster, pip installs, killed streams, every engine
#: against the others: 38-62 s each on 2026-11-29): handed out first, so that none of them is the last unit of the run
#: and keeps one worker busy while the other idles
LONG_FIRST = ("tests/test_cluster.py", "tests/test_install.py", "tests/test_stream.py",
              "tests/test_engine_agreement.py", "tests/test_first_hour.py")  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the group marks into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Spark tests marked as one group (see the docstring), and the order xdist hands the units out in
    (``scripts/test.sh`` turns its own reordering off): the group first, then ``LONG_FIRST``'s modules, then the rest
    as collected."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))  # one worker, one session (see the docstring)

    def turn(item: pytest.Item) -> int:
        if item.get_closest_marker("xdist_group") is not None:
            return 0
        module = item.nodeid.split("::")[0]
        return 1 + LONG_FIRST.index(module) if module in LONG_FIRST else 1 + len(LONG_FIRST)

    items.sort(key=turn)  # stable: each module's tests stay in their order


def _active_spark_context() -> object | None:
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    return SparkContext._active_spark_context


@pytest.fixture(autouse=True)
def _no_session_of_its_own(request) -> Iterator[None]:
    """A test that does not ask for ``spark`` must not start an in-process Spark session: under ``--dist
    loadgroup`` it may run on the worker without the session, where it would be a second one."""
    if "spark" in request.fixturenames and os.environ.get("PYTEST_XDIST_WORKER"):
        assert request.node.nodeid.endswith("@spark"), (
            "the Spark tests are not on one worker: run with --dist loadgroup and pytest < 9.2 (see pyproject)")
    before = _active_spark_context()
    yield
    if "spark" not in request.fixturenames and before is None:
        assert _active_spark_context() is None, "this test starts Spark in-process: ask for the spark fixture"


@pytest.fixture(scope="session", autouse=True)
def temp_folder_of_the_run(tmp_path_factory) -> Iterator[Path]:
    """The system temp folder of this run and of every process it starts (TMPDIR), removed at its end: what a
    process killed on purpose (the kill -9 tests) leaves there, its JVM's native libraries included, goes too."""
    folder = tmp_path_factory.mktemp("system-tmp")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # read TMPDIR again
    yield folder
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    tempfile.tempdir = None
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_jobs.sessions.session import get_session

    session = get_session("local[2]")
    yield session
    from pyspark import SparkFiles

    root = SparkFiles.getRootDirectory()  # where addPyFile put the engine zip, on this process's path too
    session.stop()
    # stopping deletes that folder: later imports must not look there
    shipped = [p for p in sys.path if p.startswith(root)]
    for path in shipped:
        sys.path.remove(path)
        sys.path_importer_cache.pop(path, None)


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> Iterator[Path]:
    """The ``python`` of a new venv holding only numpy, pandas (<3), pyarrow and numba (and what they require):
    not the project, not sortedcontainers, not pyspark (Spark puts its own pyspark.zip on its workers' path).

    Its site-packages links to this venv's installed copies of those distributions (``_link_distributions``), as a
    ``pip install`` of the same versions would have unpacked them: under a second, where the install took 25 s of
    a core and wrote 535 MB. What the executors can import is checked below either way.
    """
    yield from _bare_venv(tmp_path_factory, "bare-venv", BARE_PACKAGES)


@pytest.fixture(scope="session")
def connect_port(tmp_path_factory) -> Callable[[], contextlib.AbstractContextManager]:
    """A lock that a test holds while a local Spark Connect server of its runs, shared by the run's workers (a file in
    the run's temp root): such a server listens on Connect's port, 15002, and a second one at the same time fails to
    start (or its client reaches the other's server, which refuses its token)."""
    root = tmp_path_factory.getbasetemp()
    path = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "spark-connect-port.lock"

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        with open(path, "a") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)

    return held


@pytest.fixture(scope="session")
def connect_server_python(tmp_path_factory) -> Iterator[Path]:
    """``bare_python`` with the Spark Connect client's packages (``CONNECT_PACKAGES``), still without the project:
    the Python of a Connect server's workers, whose ``foreachBatch`` process imports ``pyspark.sql.connect`` (Spark
    starts it with the server's ``PYSPARK_PYTHON``; without grpc it fails to start)."""
    yield from _bare_venv(tmp_path_factory, "connect-server-venv", {**BARE_PACKAGES, **CONNECT_PACKAGES})


def _bare_venv(tmp_path_factory, name: str, packages: dict[str, str]) -> Iterator[Path]:
    """A new venv's ``python`` whose site-packages links the distributions ``packages`` (name -> import name) and
    what they require, and nothing of the project (checked)."""
    began = time.perf_counter()
    venv = tmp_path_factory.mktemp(name)
    env = {k: v for k, v in os.environ.items() if k not in _OWN_ENVIRONMENT}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env,
                          capture_output=True, text=True, check=True, timeout=120).stdout.strip()  # fmt: skip
    linked = _link_distributions(sorted(packages), Path(site))
    probe = "import importlib.util as u, json, sys; print(json.dumps([n for n in sys.argv[1:] if u.find_spec(n)]))"
    names = [*sorted(packages.values()), "spanning", "buckets", "sweeping", "spark_jobs", "sortedcontainers",
             "pyspark"]
    found = subprocess.run([str(python), "-c", probe, *names], env=env, cwd=venv, capture_output=True, text=True,
                           check=True, timeout=120)  # fmt: skip
    assert json.loads(found.stdout) == sorted(packages.values()), found.stdout  # no project, no sortedcontainers
    print(f"{name} with {', '.join(linked)}: {time.perf_counter() - began:.1f} s", file=sys.stderr)
    yield python
    shutil.rmtree(venv, ignore_errors=True)  # links only: the linked copies stay


def _link_distributions(names: list[str], site: Path) -> list[str]:
    """Link the installed distributions ``names``, and those they require (their markers evaluated here), into the
    folder ``site``: each top-level entry of their files, their ``.dist-info`` included. Returns ``name==version``
    of each distribution linked."""
    from importlib import metadata

    from packaging.requirements import Requirement

    linked, todo = {}, list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        name = dist.metadata["Name"]
        if name.lower() in linked:
            continue
        linked[name.lower()] = f"{name}=={dist.version}"
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}:
            if not (site / top).exists():
                (site / top).symlink_to(Path(dist.locate_file(top)))
    return sorted(linked.values())
