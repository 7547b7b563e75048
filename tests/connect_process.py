"""The Connect process of ``tests/test_spark_connect.py``: one process of its own starts a local Connect server
(``SparkSession.builder.remote("local[2]")``) and makes every call of ``tests/session_scenarios.py`` there.

It takes about two minutes, mostly waiting on the server's Spark: ``tests/conftest.py`` starts it with the first
Spark test of a run that holds the Connect module (``connect_run``), so that it runs beside the other Spark tests
rather than after them, and a test that starts a Connect server of its own waits for it first (``wait_for_it``):
two local servers cannot listen on Connect's port, 15002, at once.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

from tests.conftest import KERNEL_CACHE

ROOT = Path(__file__).resolve().parent.parent
#: what must not reach the Connect process: this process's session (a gateway), a remote of the user's, or a path
#: that would put the checkout on the server's workers' path
_NOT_INHERITED = ("PYTHONPATH", "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE",
                  "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")  # fmt: skip


class ConnectRun:
    """The Connect process, started at once; ``results()`` waits for it (the classic calls run meanwhile)."""

    started: ConnectRun | None = None  # this test process's run, once started

    def __init__(self, server_python: Path, folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(PYSPARK_PYTHON=str(server_python), SPANNING_KERNEL_CACHE=str(KERNEL_CACHE))
        code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.session_scenarios import main; main()"
        self.out = folder / "results.pickle"
        # in its own folder: a local master's workers start in the server's folder, which must not hold the project
        self.process = subprocess.Popen([sys.executable, "-c", code, str(self.out), str(folder)], cwd=folder,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        self._results: dict | None = None
        ConnectRun.started = self

    def results(self) -> dict:
        if self._results is None:
            _, err = self.process.communicate(timeout=600)
            assert self.process.returncode == 0, err[-4000:]
            self._results = pickle.loads(self.out.read_bytes())
            print("Connect seconds:", self._results["seconds"], "streams:", self._results["stream_seconds"],
                  file=sys.stderr)
        return self._results

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def wait_for_it() -> None:
    """Return once this test process's Connect run, if one started, has ended (its server with it)."""
    if ConnectRun.started is not None and ConnectRun.started.process.poll() is None:
        ConnectRun.started.process.wait(timeout=600)
