"""One Spark session for the whole test run (local[2]), started only by tests that need it."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_jobs.session import get_session

    session = get_session("local[2]")
    yield session
    session.stop()
