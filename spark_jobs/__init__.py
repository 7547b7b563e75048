"""PySpark side of spanning: CDR reading and validation, the windowed job, and ``spanning run``'s Spark engine.

Only this package imports pyspark; the engine itself (``spanning``) runs on the executors through
``mapInPandas``. ``spanning`` never imports this package: the command loads ``plugin`` through the
``spanning.engines`` entry point (``pyproject.toml``).
"""
