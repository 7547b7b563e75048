"""The application, the top layer of ``spanning``: what the ``spanning`` command (``spanning.cli``) runs.

* ``jobspec``: the job's configuration (``RunConfig``) and the user errors (``UsageError``);
* ``run_command``: ``spanning run``'s options and engine choice; ``tool_commands``: the other subcommands;
* ``reader``: the reader contract that both engines follow, ``files``: the input files; ``local_run``:
  ``--engine local``;
* ``outputs``: the output folder (marker, safe ``--overwrite``);
* ``plugins``: the engines that live outside ``spanning`` (the Spark engine in ``spark_jobs``), found
  through entry points, since nothing in ``spanning`` imports ``spark_jobs``;
* ``tune``: ``spanning tune-height``; ``cdr``: synthetic CDRs; ``bench``: ``spanning bench``.
"""
