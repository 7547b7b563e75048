"""The batch job over the prepared frame: the plans (in the JVM, or the tasks' compiled kernel), the ``mapInPandas``
job, the CSV byte ranges the tasks read themselves, and the outputs with summary.json. It imports no module of
``spark_jobs.stream``."""
