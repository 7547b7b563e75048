"""``spanning bench``: the techniques side by side, seed 001 §6 reproduced, SWAG sweeps and peer systems.

Presets (``spanning.bench.presets.PRESETS``): ``event-size`` (Figures 10-11), ``range`` (12-13), ``cdr``
(14), ``best-map`` (15), ``swag`` (seeds 000/002/004: sizes and latency) and ``peers`` (DuckDB and Spark
SQL). Every preset checks that all compared runs produced the same windows before it reports. The
command line lists them from ``spanning.bench.names``, which imports nothing of the bench extra.
"""
