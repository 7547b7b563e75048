"""The stream (``spanning stream``, and ``spanning.spark.aggregate`` on a streaming DataFrame): its query, each
micro-batch reduced against the buckets' open windows, the state kept in the checkpoint, and the batch's writer. It
imports no module of ``spark_jobs.batch``."""
