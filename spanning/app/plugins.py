"""Engines that live outside ``spanning``, found by name through entry points.

The layers depend one way: ``spark_jobs`` imports ``spanning``, and nothing in ``spanning`` imports
``spark_jobs``. The Spark engine makes itself known in ``pyproject.toml`` instead::

    [project.entry-points."spanning.engines"]
    spark = "spark_jobs.plugin"                  # run(), event_times(), peers: loading it imports pyspark

    [project.entry-points."spanning.worker_errors"]
    spark = "spark_jobs.sessions.errors:worker_error"     # reads a failure's text, imports no pyspark

An install (``pip install 'spanning[spark]'``, or ``pip install -e .`` of this checkout) writes these
entry points; ``register_engine`` adds an engine without them (``spark_jobs/submit.py`` does, for
``spark-submit`` from a checkout on ``PYTHONPATH``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from spanning.app.jobspec import UsageError

ENGINES = "spanning.engines"
WORKER_ERRORS = "spanning.worker_errors"
NOT_INSTALLED = "the {title} engine is not installed: pip install 'spanning[{name}]'"

_registered: dict[str, Any] = {}


def register_engine(name: str, engine: Any) -> None:
    """Make ``engine`` the engine ``name`` in this process, whatever the installed entry points say."""
    _registered[name] = engine


def _entry_points(group: str, name: str | None = None) -> list[EntryPoint]:
    found = entry_points(group=group) if name is None else entry_points(group=group, name=name)
    return list({ep.name: ep for ep in found}.values())  # one per name (a checkout may hold a second copy)


def load_engine(name: str) -> Any:
    """The engine ``name`` (a module or object with ``run(cfg, verbose)``), loaded on first use.

    Raises ``UsageError`` when no such engine is installed, and ``ImportError`` when it is installed but
    cannot be imported (its extra, such as pyspark, is missing): callers tell the user which.
    """
    if name in _registered:
        return _registered[name]
    found = _entry_points(ENGINES, name)
    if not found:
        raise UsageError(NOT_INSTALLED.format(title=name.capitalize(), name=name))
    entry = found[0]
    try:
        engine = entry.load()
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] == entry.module.split(".")[0]:  # metadata of a removed package
            raise UsageError(NOT_INSTALLED.format(title=name.capitalize(), name=name)) from err
        raise
    _registered[name] = engine
    return engine


def worker_error_readers() -> Iterator[Callable[[BaseException], Any]]:
    """What each installed engine offers to read its workers' failures (``worker_error(err)``), in name order."""
    for entry in sorted(_entry_points(WORKER_ERRORS), key=lambda ep: ep.name):
        try:
            yield entry.load()
        except ImportError:  # a stale install: nothing to read failures with
            continue
