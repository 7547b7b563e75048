"""``spanning bench``: the techniques side by side, Suzanne et al., §6 reproduced, SWAG sweeps and peer systems.

Presets (``spanning.app.bench.presets.PRESETS``): ``event-size`` (Figures 10-11), ``range`` (12-13), ``cdr``
(14), ``best-map`` (15), ``swag`` (the SWAGs of Shein et al., Tangwongsan et al. and Zhang et al.: sizes
and latency) and ``peers`` (DuckDB and Spark SQL). Every preset checks that all compared runs produced the
same windows before it reports. The command line lists them from ``spanning.app.bench.names``, which imports
nothing of the bench extra.
"""
