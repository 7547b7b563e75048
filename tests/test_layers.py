"""The layers depend one way: a module imports its own layer and the layers below it, never one above.

Bottom to top: kernels -> techniques (and the baselines beside them) -> planning -> engines -> the
``spanning`` facade -> the application -> the Spark job. The imports are read with ``ast`` (nothing is
imported), function-level imports included, in every module of the four top-level packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spanning", "buckets", "sweeping", "spark_jobs")

#: module (and its submodules) -> layer. The longest match wins; ``spanning`` alone is the facade
#: (``spanning/__init__.py``): any other ``spanning.x`` must be listed, so a new module is placed on purpose.
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
    "spark_jobs": "spark",
}

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
    "spark": {"kernels", "techniques", "planning", "engines", "facade", "app"},
}


def layer_of(module: str) -> str | None:
    if module == "spanning":
        return LAYER_OF["spanning"]
    matches = [m for m in LAYER_OF if m != "spanning" and (module == m or module.startswith(m + "."))]
    return LAYER_OF[max(matches, key=len)] if matches else None


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) of every project module that ``path`` imports, relative imports resolved."""
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
            names.append((node.lineno, base))
    return [(line, name) for line, name in names if name.split(".")[0] in PACKAGES]


def test_every_module_has_a_layer():
    unplaced = [module for module in modules() if layer_of(module) is None]
    assert not unplaced, f"put these modules in a layer (LAYER_OF): {unplaced}"


def test_no_layer_imports_a_layer_above_it():
    wrong = []
    for module, path in modules().items():
        mine = layer_of(module)
        for line, name in imported(module, path):
            theirs = layer_of(name)
            if theirs is None:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {name} is in no layer (a module that moved?)")
            elif theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {theirs} ({name})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


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
