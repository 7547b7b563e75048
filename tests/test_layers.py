"""The layers depend one way: a module imports its own layer and the layers below it, never one above.

Bottom to top: kernels -> techniques (and the baselines beside them) -> planning -> engines -> the
``spanning`` facade -> the application -> the Spark job, itself in layers: sessions -> the prepared frame (reading)
-> batch and stream (beside each other) -> the PySpark API and the command's adapter -> the plugin and the benchmark
peers. The imports are read with ``ast`` (nothing is imported), function-level imports included, in every module of
the four top-level packages; and no modules import each other, directly or in a loop.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spanning", "buckets", "sweeping", "spark_jobs")

#: module (and its submodules) -> layer. The longest match wins; ``spanning`` alone is the facade
#: (``spanning/__init__.py``) and ``spark_jobs`` alone the Spark package's face: any other ``spanning.x`` or
#: ``spark_jobs.x`` must be listed, so a new module is placed on purpose.
LAYER_OF = {
    "spanning.kernels": "kernels",
    "spanning.aggregates": "kernels",
    "spanning.techniques": "techniques",
    "spanning.swag": "techniques",
    "spanning.sharing": "techniques",
    "buckets": "baselines",
    "sweeping": "baselines",
    "spanning.planning": "planning",
    "spanning.engines": "engines",
    "spanning": "facade",
    "spanning.app": "app",
    "spanning.cli": "app",
    "spanning.spark": "app",  # the PySpark facade: the Spark engine found by name (spanning.app.plugins)
    "spark_jobs": "spark sessions",  # the package's face: it imports nothing
    "spark_jobs.sessions": "spark sessions",  # the session, the class archive, shipping the engine, worker errors
    "spark_jobs.reading": "spark reading",  # a DataFrame as the prepared frame (the reader contract)
    "spark_jobs.batch": "spark batch",  # the plans, the windowed job, the batch job's outputs
    "spark_jobs.stream": "spark stream",  # the stream's query, its state, its writer
    "spark_jobs.api": "spark entry",  # spanning.spark.aggregate
    "spark_jobs.command": "spark entry",  # spanning run --engine spark, spanning stream
    "spark_jobs.plugin": "spark plugin",  # the engine as the command loads it
    "spark_jobs.submit": "spark plugin",
    "spark_jobs.peers": "spark plugin",  # the benchmarks' Spark SQL peers
}
FACES = ("spanning", "spark_jobs")  # packages whose name alone is a layer, not their submodules'
BELOW_SPARK = {"kernels", "techniques", "planning", "engines", "facade", "app"}

#: layer -> the other layers it may import. The baselines are reached by name only (the technique
#: registry imports them on first use), so that ``import spanning`` needs neither package.
ALLOWED = {
    "kernels": set(),
    "techniques": {"kernels"},
    "baselines": {"kernels", "techniques"},
    "planning": {"kernels", "techniques"},
    "engines": {"kernels", "techniques", "planning"},
    "facade": {"kernels", "techniques", "planning", "engines"},
    "app": {"kernels", "techniques", "planning", "engines", "facade"},
    "spark sessions": BELOW_SPARK,
    "spark reading": BELOW_SPARK | {"spark sessions"},
    "spark batch": BELOW_SPARK | {"spark sessions", "spark reading"},
    "spark stream": BELOW_SPARK | {"spark sessions", "spark reading"},
    "spark entry": BELOW_SPARK | {"spark sessions", "spark reading", "spark batch", "spark stream"},
    "spark plugin": BELOW_SPARK | {"spark sessions", "spark reading", "spark batch", "spark stream", "spark entry"},
}


def layer_of(module: str) -> str | None:
    if module in FACES:
        return LAYER_OF[module]
    matches = [m for m in LAYER_OF if m not in FACES and (module == m or module.startswith(m + "."))]
    return LAYER_OF[max(matches, key=len)] if matches else None


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(module: str, path: Path, known: dict[str, Path] | None = None) -> list[tuple[int, str]]:
    """(line, module) of every project module that ``path`` imports, relative imports resolved. With ``known``
    (the project's modules), ``from package import name`` is the submodule ``package.name`` where there is one."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in (known or {})]
            names += [(node.lineno, name) for name in submodules or [base]]
            if submodules and len(submodules) < len(node.names):  # names of the package's own, too
                names.append((node.lineno, base))
    return [(line, name) for line, name in names if name.split(".")[0] in PACKAGES]


def import_loops() -> list[list[str]]:
    """The loops among the project's modules: each strongly connected set of modules that import each other,
    directly or through others (function-level imports and ``from package import submodule`` counted), as one
    loop through them (Tarjan's algorithm, then a shortest way round)."""
    found = modules()
    edges = {m: sorted({name for _, name in imported(m, path, found) if name in found and name != m})
             for m, path in found.items()}  # fmt: skip
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(m: str) -> None:  # recursive: the project's import chains are short
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in edges[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    loops = []
    for group in groups:  # a shortest way round from the group's first module, inside the group (breadth first)
        start, inside = group[0], set(group)
        ways, todo = {start: [start]}, [start]
        while todo:
            m = todo.pop(0)
            if start in edges[m]:
                loops.append([*ways[m], start])
                break
            for n in edges[m]:
                if n in inside and n not in ways:
                    ways[n] = [*ways[m], n]
                    todo.append(n)
    return loops


def test_every_module_has_a_layer():
    unplaced = [module for module in modules() if layer_of(module) is None]
    assert not unplaced, f"put these modules in a layer (LAYER_OF): {unplaced}"


def test_no_layer_imports_a_layer_above_it():
    wrong = []
    found = modules()
    for module, path in found.items():
        mine = layer_of(module)
        for line, name in imported(module, path, found):
            theirs = layer_of(name)
            if theirs is None:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {name} is in no layer (a module that moved?)")
            elif theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {theirs} ({name})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_modules_import_each_other():
    loops = import_loops()
    assert not loops, "modules that import each other:\n" + "\n".join(" -> ".join(loop) for loop in loops)


BLOCKED_IMPORT = """
import sys

BLOCKED = ("buckets", "sweeping", "pyspark", "py4j", "spark_jobs")


class Blocker:  # as if those packages were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, Blocker())
import spanning
import spanning.spark  # the PySpark facade imports no Spark until it is called

engine = spanning.Engine(spanning.WindowSpec(15, 5, ttp=20), {"n": "count"})
engine.insert(16, 34)
assert len(engine.flush()) == 6
names = sorted(spanning.TECHNIQUES)  # the baselines are listed by name, not imported
assert {"tuple-buckets", "aggregate-buckets", "sweeping"} <= set(names), names
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("ok")
"""


def test_import_spanning_needs_neither_the_baselines_nor_the_cluster_job():
    done = subprocess.run([sys.executable, "-c", BLOCKED_IMPORT], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
