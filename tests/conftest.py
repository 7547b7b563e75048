"""Session-wide fixtures: one Spark session for the whole test run (local[2]), started only by tests that need
it, and a bare Python for the executors of a cluster test, created only by tests that need it.

The suite runs on two pytest-xdist workers (``scripts/test.sh``: ``-n 2 --dist loadgroup``). Every test that
asks for the ``spark`` fixture is put in one group, so one worker holds the one Spark session and runs all of
them, while the other worker runs the pure-Python tests and the ones that start their own processes (a
cluster, ``spark-submit``, a killed stream); a test that starts an in-process session without the fixture
fails (``_no_session_of_its_own``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.budget import examples

# property tests that name no number draw the default 100, scaled like the others (tests/budget.py)
settings.register_profile("spanning", max_examples=examples(100))
settings.load_profile("spanning")

# all that an executor of a cluster needs installed (pip name: import name)
BARE_PACKAGES = {"numpy": "numpy", "pandas": "pandas", "pyarrow": "pyarrow", "numba": "numba"}
# what must not leak into the bare Python, whatever the machine's configuration
_OWN_ENVIRONMENT = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the group marks into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))  # one worker, one session (see the docstring)


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
    from spark_jobs.session import get_session

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
    """The ``python`` of a new venv holding only numpy, pandas (<3), pyarrow and numba: not the project, not
    sortedcontainers, not pyspark (Spark puts its own pyspark.zip on its workers' path).

    The versions are the ones of this venv, so pip takes them from its cache or the machine's configured
    indexes; about 10 s on two cores. A venv ``--without-pip``, installed by this venv's pip (``--python``).
    """
    import numba
    import numpy
    import pandas
    import pyarrow

    began = time.perf_counter()
    venv = tmp_path_factory.mktemp("bare-venv")
    env = {k: v for k, v in os.environ.items() if k not in _OWN_ENVIRONMENT}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, check=True, timeout=300)
    python = venv / "bin" / "python"
    pins = [f"numpy=={numpy.__version__}", f"pandas=={pandas.__version__}", f"pyarrow=={pyarrow.__version__}",
            f"numba=={numba.__version__}"]
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *pins],
                             env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    probe = "import importlib.util as u, json, sys; print(json.dumps([n for n in sys.argv[1:] if u.find_spec(n)]))"
    names = [*sorted(BARE_PACKAGES.values()), "spanning", "buckets", "sweeping", "spark_jobs", "sortedcontainers",
             "pyspark"]
    found = subprocess.run([str(python), "-c", probe, *names], env=env, cwd=venv, capture_output=True, text=True,
                           check=True, timeout=120)  # fmt: skip
    assert json.loads(found.stdout) == sorted(BARE_PACKAGES.values()), found.stdout  # no project, no sortedcontainers
    print(f"bare venv with {', '.join(pins)}: {time.perf_counter() - began:.1f} s", file=sys.stderr)
    yield python
    shutil.rmtree(venv, ignore_errors=True)  # about 330 MB: not kept between runs
