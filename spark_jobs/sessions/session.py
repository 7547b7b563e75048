"""The Spark session of a job: Java check, configuration, and shipping the engine to executors."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.sessions import class_archive, session_kind
from spark_jobs.sessions.worker_daemon import PRELOAD_VARIABLE

if TYPE_CHECKING:  # pyspark is imported when a session starts (``get_session``), after the check for Java
    from pyspark.sql import SparkSession

APP_NAME = "spanning"
#: The JVM option that keeps it to its quick compiler (C1): see ``get_session``
QUICK_COMPILER_ONLY = "-XX:TieredStopAtLevel=1"
#: The JVM option of its throughput collector, which a stream's driver takes: see ``get_session``
THROUGHPUT_GC = "-XX:+UseParallelGC"
#: Local paths (``file:``) through Hadoop's raw local file system, without its checksum layer.
#: Hadoop's default local file system writes a checksum file (``.NAME.crc``) beside every file it writes, reads it back
#: beside every file it reads, and renames both. A stream's trigger writes and lists a few small files in its
#: checkpoint (the offsets, the commit, the file source's log) and lists its input folder: with the checksum layer
#: those took 0.13-0.17 s of each trigger, without it 0.06-0.07 s (``latestOffset`` 47 -> 21 ms, ``walCommit`` 55 -> 24
#: ms, ``commitOffsets`` 30 -> 16 ms, medians of Spark's progress; 100k rows a trigger, 2026-11-28, docs/STREAMING.md).
#: Nothing reads the checksums back but Hadoop itself: the checkpoint's files are still written under a temporary name
#: and renamed whole, and Parquet files carry their own footer. Spark's file sources skip hidden files, so checksum
#: files that an earlier build left stay out of every listing.
RAW_LOCAL_FILES = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",  # Hadoop's FileSystem API
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",  # its FileContext API
}
#: Where the executors are the driver's own JVM (a ``local`` master): a task's result of up to this size reaches the
#: driver in the task's status message, not through the block manager. A stream's batch comes to the driver as one
#: task's Arrow rows (16.8 MB for 100k rows of the benchmark's CDRs); above Spark's 1 MiB default each batch was
#: stored as a block and fetched back over the block manager's own socket. Sustained, 100k rows a trigger, 15m/1m:
#: 138-171k events/s (164k at the median) against 124-164k (137k), the batch to the driver 0.33-0.41 s against
#: 0.36-0.48 s at the median, six alternating pairs (2026-11-28, docs/STREAMING.md). Spark caps it at
#: ``spark.rpc.message.maxSize`` (128 MiB); on a cluster the default stands, since there it is a network message.
LOCAL_DIRECT_RESULTS = {"spark.task.maxDirectResultSize": "128m"}


def check_java() -> str:
    """``java -version``'s text; fails with one clear line when no Java runtime is found."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else shutil.which("java")
    problem = None
    if not java or not Path(java).exists():
        problem = ("Java was not found: the Spark engine needs Java 17 or newer "
                   "(Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless), or use --engine local")  # fmt: skip
    else:
        try:
            ran = subprocess.run([str(java), "-version"], capture_output=True, check=True, timeout=60)
            return f"{Path(java).resolve()} {ran.stderr.decode(errors='replace').strip()}"
        except (OSError, subprocess.SubprocessError) as err:
            problem = f"Java at {java} does not run: {err}"
    from spanning.app.jobspec import UsageError  # only now: the class archive's build command starts quickly

    raise UsageError(problem)


def quiet_log_option() -> str:
    """The driver's JVM option that keeps Spark's log to warnings about the job (``log4j2-quiet.properties``)."""
    quiet = Path(__file__).with_name("log4j2-quiet.properties").resolve()
    return f"-Dlog4j2.configurationFile=file:{quiet}"


def submit_args(driver_options: list[str], memory: str | None = None) -> str:
    """``PYSPARK_SUBMIT_ARGS`` that start the driver's JVM with ``driver_options`` (and a heap of ``memory``)."""
    heap = f"--driver-memory {memory} " if memory else ""
    return f"{heap}--driver-java-options {shlex.quote(' '.join(driver_options))} pyspark-shell"


def driver_memory() -> str | None:
    """The driver's heap when the user gives none (``SPARK_DRIVER_MEMORY``, or ``spark.driver.memory`` in
    spark-defaults.conf): a quarter of the machine's memory, from 1 GiB to 8 GiB.

    Spark's own default, 1 GiB, is the whole heap of ``local[*]`` (its executors run in the driver's JVM):
    ``spanning stream`` at 60 windows per event (1h windows every minute, 100k calls a trigger) ran out of it
    collecting a batch's windows.
    """
    if os.environ.get("SPARK_DRIVER_MEMORY"):
        return None
    if _sets(spark_defaults(), "spark.driver.memory"):
        return None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): Spark's default
        return None
    return f"{min(max(total // 4 // 2**20, 1024), 8192)}m"


def spark_defaults() -> str:
    """The text of the spark-defaults.conf that spark-submit reads (``SPARK_CONF_DIR``, else SPARK_HOME's conf/), or
    "" where there is none."""
    folder = os.environ.get("SPARK_CONF_DIR") or os.path.join(os.environ.get("SPARK_HOME", ""), "conf")
    defaults = Path(folder) / "spark-defaults.conf"
    return defaults.read_text(errors="replace") if defaults.is_file() else ""


def _sets(properties: str, key: str) -> bool:
    """Whether a properties file (spark-defaults.conf: ``key value``, ``key=value`` or ``key: value`` lines,
    ``#`` and ``!`` comments) gives ``key`` a value.

    >>> _sets("# spark.driver.memory 4g\\nspark.master local[2]\\n", "spark.driver.memory")
    False
    >>> _sets("  spark.driver.memory=4g\\n", "spark.driver.memory")
    True
    """
    for line in properties.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and re.split(r"[\s=:]", line, maxsplit=1)[0] == key:
            return True
    return False


def unless_spark_defaults(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` (spanning's own, such as ``RAW_LOCAL_FILES``), less any key spark-defaults.conf sets: the user's
    choice stands."""
    text = spark_defaults()
    return {key: value for key, value in settings.items() if not _sets(text, key)}


def compiler_options(java_version: str, quick_compiler: bool, throughput_gc: bool, environ: Mapping[str, str],
                     defaults: str = "") -> list[str]:  # fmt: skip
    r"""The driver JVM's compiler and collector options (``get_session``), on HotSpot only. The collector is left
    to the JVM where the JVM options that spark-submit and the JVM gather elsewhere choose one (a second choice
    stops the JVM at its start): ``environ``'s ``JAVA_TOOL_OPTIONS``, ``JDK_JAVA_OPTIONS``, ``_JAVA_OPTIONS`` and
    ``SPARK_SUBMIT_OPTS``, and ``spark.driver.defaultJavaOptions`` or ``spark.driver.extraJavaOptions`` in the text
    of spark-defaults.conf (``defaults``). A choice in ``conf/spark-env.sh`` or ``conf/java-opts`` is not seen.

    >>> hotspot = 'openjdk version "17.0.9"\nOpenJDK 64-Bit Server VM'
    >>> compiler_options(hotspot, True, True, {})
    ['-XX:TieredStopAtLevel=1', '-XX:+UseParallelGC']
    >>> compiler_options(hotspot, False, True, {"JDK_JAVA_OPTIONS": "-Xss2m -XX:+UseZGC",
    ...                                         "JAVA_TOOL_OPTIONS": "-XX:+UseCompressedOops -XX:+UseGCOverheadLimit"})
    []
    >>> [compiler_options(hotspot, False, True, {name: "-XX:+UseSerialGC"}) for name in ("JAVA_TOOL_OPTIONS",
    ...  "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")], compiler_options(hotspot, False, True, {}, "x 1\n"
    ...  "spark.driver.defaultJavaOptions -XX:-UseParallelGC -XX:+UseShenandoahGC")
    ([[], [], []], [])
    >>> compiler_options('openjdk version "17.0.9"\nEclipse OpenJ9 VM', True, True, {})
    []
    """
    if not class_archive.is_hotspot(java_version):
        return []
    options = [QUICK_COMPILER_ONLY] if quick_compiler else []
    names = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")
    given = [environ.get(name, "") for name in names] + [
        line for line in defaults.splitlines()
        if re.match(r"\s*spark\.driver\.(default|extra)JavaOptions\b", line)
    ]  # fmt: skip
    if throughput_gc and re.search(r"-XX:[+-]Use\w*GC\b", " ".join(given)) is None:
        options.append(THROUGHPUT_GC)
    return options


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs the executors in the driver's JVM (``local``, ``local[N]``; not ``local-cluster``)."""
    return master is not None and (master == "local" or master.startswith("local["))


def starting(master: str | None) -> str:
    """The progress line while ``get_session`` starts Spark."""
    return f"starting Spark ({master or 'local[*]'}): the JVM and the session take 5-15 s"


def jvm_temp_folder() -> str:
    """A folder for the temporary files of the driver's JVM, removed when this process exits.

    The JVM unpacks native libraries there (lz4, 150 KB a run; RocksDB for the stream, 14 MB), and Spark keeps
    its block manager's files there: in the system temp folder they would stay after every run.
    """
    folder = tempfile.mkdtemp(prefix="spanning-jvm-")
    atexit.register(_remove_after_spark, folder)
    return folder


def _remove_after_spark(folder: str) -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # its JVM still holds files there: stop it first
        stop_at_exit(active)
    shutil.rmtree(folder, ignore_errors=True)


def stop_at_exit(spark) -> None:
    """Stop ``spark``'s context as this process exits, without PySpark's wait for its accumulator server.

    ``SparkContext.stop`` stops the JVM's context (0.1-0.2 s here), then shuts down the server that takes the
    tasks' accumulator updates and waits for it. Once Python tasks have run, the server's handler polls the JVM's
    connection once a second, so that wait took 0.84-0.97 s of every run's exit (measured 2026-11-28, cProfile of
    ``stop`` after a ``mapInArrow`` job). The server is a daemon thread of this process, which is ending: it is
    told to stop and left to end with the process.
    """
    context = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)  # PySpark's own; absent in other versions: a plain stop
    if server is not None and hasattr(server, "server_shutdown"):
        server.server_shutdown = True  # its handler stops at its next poll
        context._accumulatorServer = None  # so ``stop`` does not wait for it
    spark.stop()


def get_session(
    master: str | None = None,
    timezone: str = "UTC",
    verbose: bool = False,
    partitions: int | None = None,
    quick_compiler: bool = False,
    throughput_gc: bool = False,
    worker_modules: tuple[str, ...] = (),
):
    """A SparkSession for spanning jobs (reused if one is active).

    When it starts the driver's JVM itself, it maps the class archive (``spark_jobs.sessions.class_archive``) if one was
    built, and with ``quick_compiler`` it keeps the JVM to its quick compiler (C1): where the JVM's own work is
    small (a small input, or Parquet that vector's tasks read), the optimising compiler's threads only compete
    with the job for the cores (``docs/BENCHMARKS.md``). On ``local-cluster`` the executors' JVMs take it too.

    With ``throughput_gc`` (``spanning stream``) the driver's JVM takes the throughput collector
    (``THROUGHPUT_GC``) in place of G1, unless the JVM options given elsewhere choose one (``compiler_options``).
    A stream's driver allocates each batch's rows as Arrow (16.8 MB for 100k rows) and drops them: G1's concurrent
    marking took 0.5-0.65 s of CPU over ten such batches. Sustained, 100k rows a trigger, 15m/1m: 168-184k events/s
    against 144-168k, a batch's p95 latency 0.87-0.94 s against 0.98-1.01 s, three alternating pairs; ``spanning
    run`` over 30M rows showed no difference either way (2026-11-28, docs/STREAMING.md).

    ``worker_modules``: what the job's Python workers will import. Where the workers import the engine from here
    (``workers_import_the_engine``), the worker daemon imports them once (``worker_daemon.preload``) and every worker
    it forks has them; the daemon starts as soon as the SparkContext is up, while the JVM builds the SparkSession
    (``start_worker_daemon``).
    """
    java_version = check_java()
    import pyspark
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_HOME", str(Path(pyspark.__file__).parent))  # local-cluster launches executors from it
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if not verbose:  # PySpark logs analysis errors itself (as JSON); the command reports them in one line
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger", "py4j"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    active = SparkSession.getActiveSession()
    if active is not None:  # a session of the caller's (tests, notebooks): the run's time zone still applies
        active.conf.set("spark.sql.session.timeZone", timezone)
        active.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        return active
    options = []  # the driver's JVM is ours to start (not spark-submit's, nor PYSPARK_SUBMIT_ARGS'): quiet, quick
    temp = None
    if "PYSPARK_GATEWAY_PORT" not in os.environ and "PYSPARK_SUBMIT_ARGS" not in os.environ:
        temp = jvm_temp_folder()
        options = ([] if verbose else [quiet_log_option()]) + class_archive.driver_options(java_version)
        options.append(f"-Djava.io.tmpdir={temp}")
        options += compiler_options(java_version, quick_compiler, throughput_gc, os.environ, spark_defaults())
    if options:  # for this launch only: a later session of this process chooses its own
        os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args(options, driver_memory())
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False).setAppName(APP_NAME)  # as the builder makes it: only what is set here
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: run locally
        master = "local[*]"
    if master:
        conf.setMaster(master)
    conf.setAll([
        ("spark.sql.session.timeZone", timezone),
        ("spark.sql.ansi.enabled", "false"),  # unparseable values become nulls -> rejected/, not a crash
        ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"),  # as pyarrow writes them
        ("spark.sql.execution.arrow.pyspark.enabled", "true"),
        ("spark.sql.execution.arrow.maxRecordsPerBatch", "50000"),  # fewer, larger batches per partition
        ("spark.ui.showConsoleProgress", "false"),
        ("spark.ui.enabled", "false"),
        # local files without Hadoop's checksum files; a local master's task results in their status messages
        *unless_spark_defaults({**RAW_LOCAL_FILES, **(LOCAL_DIRECT_RESULTS if is_local(master) else {})}).items(),
    ])  # fmt: skip
    if QUICK_COMPILER_ONLY in options and master and master.startswith("local-cluster"):
        # local-cluster's executors: JVMs of this machine that this launch starts, whose work is as small; prepended
        # to any spark.executor.extraJavaOptions (the cluster test: 80.8-84.3 s against 101.0-101.5 s)
        conf.set("spark.executor.defaultJavaOptions", QUICK_COMPILER_ONLY)
    if temp is not None and "SPARK_LOCAL_DIRS" not in os.environ:
        conf.set("spark.local.dir", temp)  # the block manager's files too
    preloading = False  # our daemon imports worker_modules: start it while the JVM builds the session
    if master and workers_import_the_engine(master, os.environ["PYSPARK_PYTHON"]):
        # pyspark compiled, not from its zip
        conf.set("spark.python.daemon.module", "spark_jobs.sessions.worker_daemon")
        if worker_modules:
            conf.set(f"spark.executorEnv.{PRELOAD_VARIABLE}", ",".join(worker_modules))
            preloading = True
    try:
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            launch_driver_jvm(conf)
        if preloading:
            from pyspark import SparkContext

            start_worker_daemon(SparkContext.getOrCreate(conf))
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
    finally:
        if options:
            del os.environ["PYSPARK_SUBMIT_ARGS"]
    spark.sparkContext.setLogLevel("WARN" if verbose else "OFF")
    if partitions:
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    elif not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # Spark's 200 costs a Python task each; two per core keeps every core busy (AQE does not
        # coalesce ahead of the per-key Window); --partitions or spark-defaults override it
        spark.conf.set("spark.sql.shuffle.partitions", str(2 * spark.sparkContext.defaultParallelism))
    ship_engine(spark)
    return spark


def connect_session(remote: str, timezone: str = "UTC", verbose: bool = False, partitions: int | None = None):
    """A Spark Connect session of its own on the server at ``remote`` (``spanning run --remote``), with the
    command's settings: ``sc://host:port`` (a new session of that server: ``release_connect_session`` gives it
    back), or ``local[N]`` (a server started in this process, as ``SparkSession.builder.remote`` starts one, which
    ends with the process).

    The settings are the session's SQL settings that ``get_session`` gives a classic session (zone, ANSI off,
    timestamps as pyarrow writes them, Arrow batches, two shuffle partitions per core); the JVM's options, the
    class archive and the console's progress are the server's, whoever started it.
    """
    if not verbose:  # as get_session: the command reports analysis errors in one line
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:  # the Connect client's own class: it checks grpc, protobuf, ... (one line now, not a trace later)
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as err:
        from spanning.app.jobspec import UsageError

        raise UsageError(f"--remote needs the Spark Connect client ({err}): pip install 'spanning[connect]'") from None
    if remote.startswith("local"):  # a server of this process, started (or found) as PySpark starts one
        spark = SparkSession.builder.remote(remote).getOrCreate()
    else:  # a session of the command's own, by the client's class, which sets no variable of this process
        # (PySpark's builder sets SPARK_CONNECT_MODE_ENABLED: a later classic session here, or a child's, went Connect)
        spark = ConnectSession.builder.remote(remote).create()
    _first_contact(spark, remote, timezone)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions or 2 * session_kind.cores(spark)))
    for name, value in [("spark.sql.session.timeZone", timezone), ("spark.sql.ansi.enabled", "false"),
                        ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"),
                        ("spark.sql.execution.arrow.maxRecordsPerBatch", "50000")]:  # fmt: skip
        spark.conf.set(name, value)
    return spark


#: Tries at the first request to a Connect server before ``spanning run --remote`` says that none answers: about
#: 4 s of PySpark's backoff (50 ms x 4^n), where its default policy waits at least 10 minutes
FIRST_CONTACT_RETRIES = 4


def _first_contact(spark, remote: str, timezone: str) -> None:
    """The session's zone set: its first request, which fails in one line within seconds when no server answers at
    ``remote`` (the job's own requests keep PySpark's retries)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = spark.client
    policies = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=FIRST_CONTACT_RETRIES)])
    try:
        spark.conf.set("spark.sql.session.timeZone", timezone)
    except Exception as err:  # noqa: BLE001 - grpc's failure, whatever its class: the one line says what it said
        from spanning.app.jobspec import UsageError

        client.close()  # so that PySpark's exit hook sends nothing more to no server (it would retry for minutes)
        details = re.search(r'details = "([^"]*)"', str(err))
        said = details.group(1) if details else " ".join(str(err).split())[:200]
        raise UsageError(f"no Spark Connect server answers at {remote}: {said}") from None
    client.set_retry_policies(policies)


def release_connect_session(spark, remote: str) -> None:
    """Give back the server's session that ``connect_session`` made on a server elsewhere, and close the channel.

    Not ``spark.stop()``: in a process that also runs a local server (a notebook's, a test's), PySpark's stop of any
    Connect session stops that server too. A local server of the command's own ends with the process."""
    if remote.startswith("local"):
        return
    try:
        spark.client.release_session()
        spark.client.close()
    except Exception:  # noqa: BLE001 - the server went first: nothing of this session is left to give back
        pass


#: The line the JVM prints at start for the incubator module that Spark 4 adds to every JVM it launches
INCUBATOR_WARNING = b"WARNING: Using incubator modules:"
#: Lines that are noise to a user: that warning (until 2026-11-26 also the chatter of the Python process that
#: Spark ran on the driver for ``transformWithStateInPandas``, which ``spanning stream`` no longer uses)
JVM_STDERR_NOISE = (INCUBATOR_WARNING,)


def launch_driver_jvm(conf) -> None:
    """Start the driver's JVM (``spark-submit``, as PySpark does) with its standard error read through
    ``forward_jvm_stderr``, unless this process already has one.

    Spark 4 starts its JVMs with ``--add-modules=jdk.incubator.vector``, and Java then prints
    ``INCUBATOR_WARNING`` on every start, which tells a user nothing about their job (nor do the other lines of
    ``JVM_STDERR_NOISE``); every other line the JVM writes (Spark's log, a JVM that cannot start) reaches this
    process's standard error as before. The pipe is read from before the JVM starts, so that a failing start's
    text is not held back.
    """
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    read_end, write_end = os.pipe()
    threading.Thread(target=forward_jvm_stderr, args=(read_end, 2), daemon=True, name="jvm-stderr").start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_end})
    finally:
        os.close(write_end)  # the JVM holds its own copy: the reader ends when the JVM exits
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def forward_jvm_stderr(read_fd: int, write_fd: int) -> None:
    """Copy the JVM's standard error, line by line, to ``write_fd``, leaving out ``JVM_STDERR_NOISE`` (and the
    blank line right after such a line)."""
    dropped = False
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        for line in iter(stream.readline, b""):
            noise = line.startswith(JVM_STDERR_NOISE)
            if not noise and not (dropped and not line.strip()):
                os.write(write_fd, line)
            dropped = noise


#: What the executors import, shipped with every job, each package whole (its subpackages, such as ``spanning.kernels``
#: or ``spanning.engines``, included): the project's top-level packages (``spanning`` imports ``buckets`` and
#: ``sweeping`` by name, when a job's ``--technique`` is a baseline; a job's function may refer to ``spark_jobs``)
#: and ``sortedcontainers``, the one pure-Python dependency (plane sweeping imports it). numpy, pandas and pyarrow
#: hold compiled code: they are all that the executors need installed.
ENGINE_PACKAGES = ("spanning", "buckets", "sweeping", "spark_jobs", "sortedcontainers")
ENGINE_ZIP = "spanning-engine.zip"
_NOT_SHIPPED = frozenset({"__pycache__", "tests"})
_engine_zip: Path | None = None
_shipped_to: set[str] = set()  # the Spark applications whose executors were given the zip (ship_engine)


def package_files(name: str) -> list[tuple[Path, str]]:
    """The ``.py`` files of the importable package ``name`` (wherever it is installed) with their names in a zip."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot ship {name!r} to the Spark executors: it is not an importable package here")
    files = []
    for location in spec.submodule_search_locations:  # one but for a namespace package
        root = Path(location)
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root)
            if path.is_file() and not _NOT_SHIPPED.intersection(relative.parts[:-1]):
                files.append((path, Path(name, relative).as_posix()))
    return files


def engine_zip() -> Path:
    """One zip of ``ENGINE_PACKAGES`` as this process imports them, built on the first call only."""
    global _engine_zip
    if _engine_zip is None or not _engine_zip.is_file():
        folder = Path(tempfile.mkdtemp(prefix="spanning-pyfiles-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        target = folder / ENGINE_ZIP
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in ENGINE_PACKAGES:
                for path, arcname in package_files(name):
                    archive.write(path, arcname)
        _engine_zip = target
    return _engine_zip


def ship_engine(spark) -> Path | None:
    """Add the engine's zip (``engine_zip``) to the job, so that executors without the project can import it.

    Not when the executors are this JVM's threads and their Python workers run this interpreter, which finds
    the engine where this process found it (``workers_import_the_engine``): each task of a worker with a zip
    on its path re-reads the zip's index for every package in it (0.1-0.2 s a task, measured), and compiles
    the modules it imports from source. Once per application (``spanning run`` starts its session and then takes
    the job's way, which ships to any session it is given); on Spark Connect, once per session, as an artifact of
    the session (the server's workers are out of this process's sight, so the zip always goes). Returns the zip, or
    None when it is not needed.
    """
    python = session_kind.worker_python(spark)  # not known on Connect: the server's workers are shipped the zip
    if python is not None and workers_import_the_engine(session_kind.master(spark), python):
        return None
    target = engine_zip()
    application = session_kind.session_id(spark)
    if application not in _shipped_to:  # once per application: a job on a session already shipped adds nothing
        session_kind.add_python_file(spark, target)
        _shipped_to.add(application)
    return target


SIMPLIFIED_TRACEBACK = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"


def start_worker_daemon(sc) -> threading.Thread:
    """Start the Python worker daemon, which imports the job's modules (``worker_daemon.preload``), with one
    task of an RDD job in the background, right after the SparkContext: the JVM then builds the SparkSession on
    the other core, and the first query finds the daemon ready.

    Spark keeps one daemon per environment of the workers. Its SQL tasks add ``SPARK_SIMPLIFIED_TRACEBACK`` to
    theirs while the setting is on (its default), and an RDD's tasks do not: so the context's environment takes it
    too, or the SQL tasks would start a daemon of their own. One task, not one per core: two took the core that
    the SparkSession needed, and the run was no quicker (100 CSV files, 3M rows, 2 cores, Spark's event log).
    """
    if sc.getConf().get(SIMPLIFIED_TRACEBACK, "true").lower() == "true":
        sc.environment.setdefault("SPARK_SIMPLIFIED_TRACEBACK", "1")

    def start() -> None:
        try:
            sc.parallelize([0], 1).mapPartitions(iter).collect()
        except Exception:  # noqa: BLE001 - a start only: the query reports what is wrong with the workers
            pass

    thread = threading.Thread(target=start, name="spanning-start-worker-daemon", daemon=True)
    thread.start()
    return thread


def warm_python_workers(spark, modules: tuple[str, ...]) -> threading.Thread:
    """Start the executors' Python workers, importing ``modules``, in a background job while the driver plans.

    A run whose plan calls Python (``vector``'s ``mapInArrow``) otherwise starts them in its windows stage: the
    daemon, a worker per core and their imports cost that stage about a second on its first tasks, while a core
    sat idle as the driver planned (docs/BENCHMARKS.md). Workers are reused (``spark.python.worker.reuse``), so
    the stage finds them started, with the compiled kernel loaded (a module's ``warm_up``). A warm-up only: a
    failure here is left to the query to report.

    On a local master the workers share one kernel cache (one machine), so with an empty cache each task compiles
    its share of the kernels (``warm_up(part=i, parts=cores)``) and loads the rest from the cache when it needs
    them; elsewhere every task loads or compiles them all (an executor machine has a cache of its own).
    """
    cores = session_kind.cores(spark)
    parts = cores if session_kind.is_local_master(spark, ("local[", "local-cluster[")) else 1

    def start_worker(batches):  # runs on the executors
        import importlib

        from pyspark import TaskContext

        part = TaskContext.get().partitionId() % parts
        for name in modules:
            warm_up = getattr(importlib.import_module(name), "warm_up", None)
            if warm_up is not None:  # the compiled kernel: loaded from its cache (or compiled) here
                warm_up(part=part, parts=parts)
        yield from batches

    def warm() -> None:
        try:
            spark.range(0, cores, 1, cores).mapInArrow(start_worker, "id long").collect()
        except Exception:  # noqa: BLE001 - the query itself reports what is wrong with the workers
            pass

    thread = threading.Thread(target=warm, name="spanning-warm-python-workers", daemon=True)
    thread.start()
    return thread


def workers_import_the_engine(master: str, worker_python: str) -> bool:
    """Whether Python workers import ``ENGINE_PACKAGES`` from the files this process imports them from: a local
    master (executors in this JVM, workers started in this folder with this environment), workers running this
    interpreter, and every package found at start-up (site-packages, ``PYTHONPATH``, the current folder, or an
    editable install's finder), not from a path this process added as it ran."""
    if not (master == "local" or master.startswith("local[")):
        return False
    if os.path.abspath(shutil.which(worker_python) or worker_python) != os.path.abspath(sys.executable):
        return False
    import site

    entries = [*site.getsitepackages(), site.getusersitepackages(), os.getcwd(),
               *os.environ.get("PYTHONPATH", "").split(os.pathsep)]  # fmt: skip
    startup = {os.path.abspath(p) for p in entries if p}
    editable = [f for f in sys.meta_path if str(getattr(f, "__module__", "")).startswith("__editable__")]
    for name in ENGINE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None or not Path(spec.origin).is_file():  # a namespace, or in a zip
            return False
        root = os.path.abspath(Path(spec.origin).parent.parent)
        if root not in startup and not any(_finds(f, name, spec.origin) for f in editable):
            return False
    return True


def _finds(finder, name: str, origin: str) -> bool:
    try:
        found = finder.find_spec(name, None)
    except Exception:  # a finder of another installer's making: ship, to be safe
        return False
    return found is not None and found.origin == origin


ZONE, ANSI = "spark.sql.session.timeZone", "spark.sql.ansi.enabled"


_settings_lock = threading.RLock()  # two calls in threads of one process: one changes settings at a time


@contextlib.contextmanager
def job_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` in the session while the block builds (analyses) the job's DataFrames or starts its query, then
    the session's own values again: Spark fixes ANSI mode and the time zone in an analysed plan, and a query
    copies the session's settings when it starts. (A query of another thread that is analysed during the block
    sees them too: the session's settings are the session's, not a thread's.)"""
    conf = spark.conf
    with _settings_lock:
        before = {name: conf.get(name, None) for name in settings}
        try:
            for name, value in settings.items():
                conf.set(name, value)
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    conf.unset(name)
                else:
                    conf.set(name, value)
