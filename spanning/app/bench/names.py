"""What the ``spanning bench`` command line needs without importing the bench code (psutil, matplotlib, duckdb).

``tests/test_install.py`` checks that ``PRESET_NAMES`` lists ``spanning.app.bench.presets.PRESETS`` in order.
"""

from __future__ import annotations

PRESET_NAMES: tuple[str, ...] = ("event-size", "range", "cdr", "best-map", "swag", "peers")
BENCH_MODULES: tuple[str, ...] = ("psutil", "matplotlib", "duckdb")  # the bench extra
