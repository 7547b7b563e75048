#!/usr/bin/env bash
# Create .venv and install spanning with its test, Spark, Spark Connect, bench and docs extras. Idempotent: re-runs only
# when pyproject.toml changed. Checks for Java 17+, which the Spark job needs, compiles the kernel
# and builds the class archive.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1; then
    echo "error: Java was not found. The Spark job needs Java 17 or newer:" >&2
    echo "       install it (Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless) and re-run." >&2
    exit 3
fi
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
if [ -n "$java_major" ] && [ "$java_major" -lt 17 ]; then
    echo "error: Java $java_major found; Spark 4 needs Java 17 or newer." >&2
    exit 3
fi

began=$SECONDS
say() { echo "[setup $((SECONDS - began))s] $*"; }

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    say "creating .venv with $("$python" --version 2>&1)"
    "$python" -m venv .venv
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
    say "installing spanning and its dependencies into .venv: pyspark alone is about 450 MB, so about a minute"
    .venv/bin/python -m pip install --quiet --upgrade pip
    # one line per package as pip resolves and installs them (pip's own bars show on a terminal only)
    # (PYTHONWARNINGS: setuptools' banner about editable installs is no news to a developer's checkout)
    PYTHONWARNINGS=ignore .venv/bin/python -m pip install --progress-bar off -e ".[test,spark,connect,bench,docs]" |
    while IFS= read -r line; do
        case "$line" in
            Collecting*) say "  ${line%% (*}" ;;
            "Installing collected packages"*) say "  installing $(echo "$line" | tr ',' '\n' | wc -l) packages (unpacking pyspark is most of it)" ;;
            "Successfully installed"*) say "  installed" ;;
        esac
    done
    rm -f .venv/.installed-*
    touch "$stamp"
fi
# The compiled kernel (spanning.kernels.compiled), compiled once and cached beside its source, so that neither the
# first job nor each test process pays it (about 30 s of one core the first time, 0.6 s when cached).
say "the compiled kernel (numba: about 30 s the first time, nothing to do when cached)"
.venv/bin/python -c "from spanning.kernels.compiled import warm_up; warm_up(every=True)"
# The copy that executors importing the shipped engine run, compiled ahead in the folder that the cluster test gives
# its bare executors (SPANNING_KERNEL_CACHE; tests/conftest.py, KERNEL_CACHE): they load it instead of compiling.
say "the kernel as executors run it from the shipped engine (the same, once more when not cached)"
SPANNING_KERNEL_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/spanning/kernel" \
    .venv/bin/python -c "from spanning.kernels.compiled import warm_up_shipped; warm_up_shipped()"
# Spark's classes for the driver's JVM, archived once (spark_jobs/sessions/): seconds off every job's start.
# About a minute the first time, 0.2 s when in place; a failure costs speed only, so it does not stop the setup.
say "the Spark class archive (written once per checkout, about a minute; nothing to do when in place)"
.venv/bin/python -m spark_jobs.sessions.build_class_archive --quiet \
    || echo "warning: no Spark class archive: jobs start as usual (python -m spark_jobs.sessions.build_class_archive to retry)" >&2
say "ready"
