"""The stream's ``foreachBatch`` function on a Spark Connect session: it runs in the server's Python, not here.

On Connect, ``foreachBatch``'s function is pickled (cloudpickle) by the client and called in a Python process that
the server starts beside it for the query (the ``pyspark.sql.connect.streaming.worker.foreach_batch_worker`` module,
run by the server's ``PYSPARK_PYTHON``). That process:

* does not have the session's artifacts on its path (Spark 4.3, local server: only pyspark's own zips and the
  server's folder), so the engine that ``ship_engine`` gives the executors cannot be imported there, and a function
  of ``spark_jobs`` pickled by reference could not be unpickled;
* imports ``pyspark.sql.connect`` itself, so it needs the Connect client's packages (``grpcio``, ``grpcio-status``,
  ``googleapis-common-protos``, ``zstandard``; ``pip install "spanning[connect]"`` has them) besides numpy, pandas,
  pyarrow and numba;
* keeps running between the query's batches, and a new one is started for each query the server starts.

So the function given to ``foreachBatch`` (``server_function``) is a closure pickled by value that holds the
engine's zip as bytes and the query's parameters pickled apart (``StreamOnServer``: the reducer, the column maps,
the paths; no DataFrame, lock, thread or open file). Its first call writes the zip into the checkpoint
(``spanning/engine/<digest>.zip``), puts it first on the process's path, unpickles the parameters and builds the
stream's ``BatchWriter`` there (kept in ``_RUNNING`` for the query's next batches). The writer reads the stream's
state and batch records from the checkpoint as it does on a classic driver, so a new process (a restart of the
query, or of the server) goes on from them: the same exactly-once writes, replays and restarts. The client and the
server must see the checkpoint (and ``write_stream``'s output) at the same paths: a local server, or a file system
both mount.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_jobs.stream.query import StreamQuery

__all__ = ["StreamOnServer", "server_function"]

ENGINE_FOLDER = "engine"  # in CHECKPOINT/spanning/: the engine's zip, as the server's foreachBatch process imports it
log = logging.getLogger("spanning")

#: the queries' functions built in this process (the Connect server's foreachBatch Python), by their parameters'
#: digest: a query's batches go on with the writer its first batch built
_RUNNING: dict[str, Callable[[Any, int], None]] = {}


@dataclass
class StreamOnServer:
    """What the server's Python needs to build a stream's ``BatchWriter``: picklable, holding no DataFrame.

    ``output``: ``write_stream``'s folder (None for ``foreach_batch``); ``fn``: ``foreach_batch``'s function, which
    the server's Python calls with DataFrames of the batch's session; ``renames``: the windows' columns as the
    caller named them; ``zone``: the query's session time zone; ``token``: this start of the query's own."""

    job: StreamQuery
    zone: str
    output: str | None = None
    fn: Callable | None = None
    renames: dict[str, str] = field(default_factory=dict)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def start(self) -> Callable[[Any, int], None]:
        """The query's ``foreachBatch`` function, with its writer (built from the checkpoint's records)."""
        from spark_jobs.stream.writer import BatchWriter, batch_function

        session: list = [None]  # the session of the batch being written: its DataFrames are given to ``fn``
        def sink(tables: dict, batch_id: int) -> None:
            from pyspark.sql.pandas.types import from_arrow_schema

            # with their schema: a Connect session cannot infer one from a table with no rows
            frames = [session[0].createDataFrame(tables[kind], schema=from_arrow_schema(tables[kind].schema))
                      for kind in ("windows", "late", "rejected")]  # fmt: skip
            self.fn(*frames, batch_id)

        output = None if self.output is None else Path(self.output)
        writer = BatchWriter(self.job, output, _progress, None if self.fn is None else sink, zone=self.zone,
                             renames=self.renames)  # fmt: skip
        each_batch = batch_function(self.job, writer)

        def run(batch: Any, batch_id: int) -> None:
            session[0] = batch.sparkSession
            each_batch(batch, batch_id)

        return run


def _progress(line: str) -> None:
    log.info("%s", line)


def run_batch(digest: str, parameters: bytes, batch: Any, batch_id: int) -> None:
    """One batch of the query whose pickled ``StreamOnServer`` is ``parameters``, in the server's Python."""
    run = _RUNNING.get(digest)
    if run is None:
        import pickle

        run = _RUNNING[digest] = pickle.loads(parameters).start()  # noqa: S301 - our own client's pickle
    run(batch, batch_id)


def server_function(stream: StreamOnServer, engine: Path) -> Callable[[Any, int], None]:
    """``foreachBatch``'s function for ``stream`` on a Connect session: a closure that cloudpickle takes by value
    (it refers to no module of the project), carrying the engine's zip ``engine`` and the pickled parameters.
    Raises the pickling error of a parameter that cannot be pickled (``foreach_batch``'s ``fn``)."""
    from pyspark import cloudpickle

    parameters = cloudpickle.dumps(stream)
    digest = hashlib.sha256(parameters).hexdigest()
    zipped = engine.read_bytes()
    folder = str(Path(stream.job.options.checkpoint).resolve() / "spanning" / ENGINE_FOLDER)
    name = f"spanning-engine-{hashlib.sha256(zipped).hexdigest()[:16]}.zip"

    def each_batch(batch: Any, batch_id: int) -> None:  # runs in the server's Python: no global of this module
        import importlib
        import os
        import sys

        path = os.path.join(folder, name)
        if path not in sys.path:
            if not os.path.exists(path):
                os.makedirs(folder, exist_ok=True)
                temp = f"{path}.{os.getpid()}.tmp"
                with open(temp, "wb") as file:
                    file.write(zipped)
                os.replace(temp, path)
            sys.path.insert(0, path)
        importlib.import_module("spark_jobs.stream.remote").run_batch(digest, parameters, batch, batch_id)

    return each_batch
