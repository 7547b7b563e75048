"""What the job asks of a session, answered for both kinds: a classic session (a SparkContext and its JVM in this
process, reached through Py4J) and a Spark Connect session (``SparkSession.builder.remote(...)``: a client of a
server elsewhere, with no SparkContext, no JVM and no RDDs here).

The rest of ``spark_jobs`` asks here, never ``spark.sparkContext`` or a DataFrame's ``_jdf``, so that one call works
on both kinds: the master, the cores, the Python the workers run, whether two handles are one session, a file shipped
to the workers' Python path, whether an ``Observation`` has its values, and frames whose analysis keeps the job's
settings after they are given back (``pinned``). Nothing here imports the Connect client: a classic session is told
by its class alone, so that the classic path needs neither grpc nor protobuf.
"""

from __future__ import annotations

import re
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

#: The prefix of the temporary views that hold a Connect job's prepared rows analysed (``pinned``)
PINNED_VIEW_PREFIX = "spanning_job_"
_cores: dict[str, int] = {}  # a Connect session's id -> its default parallelism (asked once: ``cores``)
_lock = threading.Lock()


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (``pyspark.sql.connect.session.SparkSession``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master(spark: SparkSession) -> str:
    """The session's master URL (``local[2]``, ``yarn``, ...): the server's, on Connect."""
    if is_connect(spark):
        return spark.conf.get("spark.master", "") or ""
    return spark.sparkContext.master


def is_local_master(spark: SparkSession, prefixes: tuple[str, ...] = ("local[",)) -> bool:
    """Whether the master is ``local`` or starts with one of ``prefixes``."""
    return is_local_name(master(spark), prefixes)


def is_local_name(name: str, prefixes: tuple[str, ...] = ("local[",)) -> bool:
    """``is_local_master`` of a master URL as given (before a session exists)."""
    return name == "local" or name.startswith(prefixes)


def cores(spark: SparkSession) -> int:
    """The session's default parallelism (the cores of its executors). On Connect, from the splits of a range that
    names none, as the server plans it (one request, no job; once per session)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    with _lock:
        known = _cores.get(spark.session_id)
    if known is None:
        plan = spark.range(1)._explain_string(mode="simple")  # "Range (0, 1, step=1, splits=N)"
        found = re.search(r"splits=(\d+)", plan)
        known = max(int(found.group(1)), 1) if found else 1
        with _lock:
            _cores[spark.session_id] = known
    return known


def worker_python(spark: SparkSession) -> str | None:
    """The Python the workers run, where this process can know it (a classic session); None on Connect."""
    return None if is_connect(spark) else spark.sparkContext.pythonExec


def session_id(spark: SparkSession) -> str:
    """What tells one application's (or, on Connect, one session's) shipped files from another's."""
    return spark.session_id if is_connect(spark) else spark.sparkContext.applicationId


def same_session(one: SparkSession, other: SparkSession) -> bool:
    """Whether two handles are one session."""
    if is_connect(one) != is_connect(other):
        return False
    if is_connect(one):
        return one.session_id == other.session_id
    return one._jsparkSession.equals(other._jsparkSession)


def add_python_file(spark: SparkSession, path: Path) -> None:
    """Put the zip or ``.py`` file ``path`` on the path of the session's Python workers: ``addPyFile`` on a classic
    session; on Connect, an artifact of the session (the server keeps it for this session only)."""
    if is_connect(spark):
        spark.addArtifacts(str(path), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(path))


def observation_done(observation: Observation) -> bool:
    """Whether ``observation`` has its values (an action over its frame has run), without waiting for them."""
    if hasattr(observation, "_jo"):  # classic: the JVM's observation and its future
        try:
            return observation._jo is not None and observation._jo.future().isCompleted()
        except Exception:  # noqa: BLE001 - no such handle in this Spark: count in a pass of one's own
            return False
    # Connect: ``observe`` sets an empty dict, which the response that carries the metrics fills
    return bool(getattr(observation, "_result", None))


PARQUET_FORMAT = "org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat"


def is_plain_parquet_read(df: DataFrame) -> bool:
    """Whether ``df`` is a plain read of Parquet files (``spark.read.parquet(...)`` or its ``format("parquet")``
    form: no projection, filter or join above it). Errs on no: the caller reads any other frame from its rows.

    Classic: from the analysed plan through Py4J (a file relation of Parquet's own format, not a subclass such as
    Delta's, without partition columns). Connect: from the plan the client holds, which is the read as written (a
    ``DataSource`` of format ``parquet``, not a stream, no JDBC predicates); the server's listing of partition
    columns is not seen there, so the caller also holds the frame's schema to the files' footers.
    """
    if is_connect(df.sparkSession):
        plan = getattr(df, "_plan", None)
        return (type(plan).__name__ == "DataSource" and str(getattr(plan, "_format", "") or "").lower() == "parquet"
                and not getattr(plan, "_is_streaming", False) and not getattr(plan, "_predicates", None))  # fmt: skip
    plan = df._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "LogicalRelation":
        return False
    relation = plan.relation()
    if relation.getClass().getSimpleName() != "HadoopFsRelation" or (
            relation.fileFormat().getClass().getName() != PARQUET_FORMAT):  # not a subclass (Delta's, say)
        return False
    return relation.partitionSchema().length() == 0


def pinned(spark: SparkSession, frames: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """``frames`` as they are analysed now, under the session's current settings, for ever after.

    A classic DataFrame is analysed when it is built, and keeps the ANSI mode and time zone it was built under: its
    frames are returned as they are. A Connect DataFrame is a plan that the server analyses again at every action,
    under the settings the session has then; so each frame becomes a temporary view, which the server analyses once,
    now (a view made from a DataFrame keeps its analysed plan), and the frame read from it. The views stay in the
    session as ``spanning_job_<id>_<name>`` (a frame read from one needs it as long as it lives).

    An ``Observation`` made inside a frame given here comes back empty on Connect (a write or a collect of the view
    leaves it ``{}``; checked on a local server, 2026-11-29): pin the frame below it, and observe above the view
    (``compute`` pins the prepared rows only).
    """
    if not is_connect(spark):
        return frames
    job = uuid.uuid4().hex[:12]
    out = {}
    for name, frame in frames.items():
        view = f"{PINNED_VIEW_PREFIX}{job}_{name}"
        frame.createOrReplaceTempView(view)
        out[name] = spark.table(view)
    return out
