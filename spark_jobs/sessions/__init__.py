"""What every Spark job of spanning stands on: the session, the driver's class archive, the engine shipped to the
executors, the Python workers' daemon, and a failed job's Python error in one line. Nothing here imports a layer of
``spark_jobs`` above it."""
