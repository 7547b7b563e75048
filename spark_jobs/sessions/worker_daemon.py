"""Spark's Python worker daemon, importing pyspark from its installed package instead of ``pyspark.zip``.

Spark starts its Python workers with ``pyspark.zip`` and py4j's source zip first on their path, also when pyspark is
a pip install whose package holds the same modules, compiled. Python compiles what it imports from a zip from
source, at every start: the daemon's imports cost 0.4-0.5 s instead of 0.1 s, and every forked worker then
compiles ``pyspark.worker`` and what it imports (measured on 2 cores; docs/BENCHMARKS.md). Each run pays this
once before its first Python task, and so does every new worker.

When the zips lie in the installed package itself (``<site>/pyspark/python/lib/``) and ``<site>`` is on the path,
this daemon leaves them off: the modules are the same files. Otherwise it changes nothing.

It then imports the modules that ``$SPANNING_WORKER_PRELOAD`` names (comma-separated; the session sets it for the
job it starts, ``session.get_session``'s ``worker_modules``), once: every worker it forks finds them in memory
instead of importing them itself (0.3-0.4 s of a core each, measured on 2 cores). It loads no kernel: each worker
loads (or, with no cache, compiles) its share in the warm-up (``session.warm_python_workers``), as before. Then it
runs pyspark's own daemon. ``spark_jobs.sessions.session`` starts it
(``spark.python.daemon.module``) only on a local master whose workers run this interpreter and import the engine from
where the driver does.

>>> site = "/venv/lib/python3.11/site-packages"
>>> [p.rsplit("/", 1)[-1] for p in installed_pyspark_first(
...     [f"{site}/pyspark/python/lib/pyspark.zip", f"{site}/pyspark/python/lib/py4j-0.10.9.9-src.zip", site],
...     exists=lambda path: True)]
['site-packages']
>>> len(installed_pyspark_first(["/opt/spark/python/lib/pyspark.zip", site], exists=lambda path: True))
2
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterable

PRELOAD_VARIABLE = "SPANNING_WORKER_PRELOAD"  # the modules the daemon imports before it forks workers


def installed_pyspark_first(path: list[str], exists: Callable[[str], bool] = os.path.exists) -> list[str]:
    """``path`` without the zips of pyspark and py4j that an installed pyspark on ``path`` holds unzipped."""
    on_path = {os.path.normpath(p) for p in path}
    kept = []
    for entry in path:
        name = os.path.basename(entry)
        package = os.path.dirname(os.path.dirname(os.path.dirname(entry)))  # <site>/pyspark of .../python/lib/x.zip
        site = os.path.dirname(package)
        if name == "pyspark.zip":
            unzipped = os.path.join(site, "pyspark", "__init__.py")
        elif name.startswith("py4j-") and name.endswith("-src.zip"):  # py4j-<version>-src.zip: that version
            unzipped = os.path.join(site, f"py4j-{name[len('py4j-'):-len('-src.zip')]}.dist-info")
        else:
            unzipped = None
        installed = os.path.basename(package) == "pyspark" and os.path.normpath(site) in on_path
        if unzipped is not None and installed and exists(unzipped):
            continue
        kept.append(entry)
    return kept


def preload(names: Iterable[str]) -> list[str]:
    """Import each module of ``names``; the names that failed. A failure is left to the task that imports the
    module to report; the daemon goes on. Anything a module prints goes to stderr: the daemon's stdout tells the
    JVM its port.

    >>> preload(["colorsys", "no_such_module_for_spanning"])
    ['no_such_module_for_spanning']
    """
    failed = []
    with contextlib.redirect_stdout(sys.stderr):
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the task that needs the module reports it
                failed.append(name)
    return failed


if __name__ == "__main__":
    sys.path[:] = installed_pyspark_first(sys.path)
    preload(filter(None, os.environ.get(PRELOAD_VARIABLE, "").split(",")))
    from pyspark.daemon import manager

    manager()
