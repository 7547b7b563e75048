"""A DataFrame as the prepared frame: the input files read, and every row given its times in chronons, its values as
numbers, or the reason it cannot be used (the reader contract of ``spanning.engines.reader``, as Spark SQL). The batch
job and the stream both start from it (``prepare.prepared_frame``)."""
