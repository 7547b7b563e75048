"""Engines: events in, released windows out, over the techniques.

* ``params``: the parameter objects ``EventColumns`` and ``Execution``;
* ``manager``: the window manager (clock, TTP release, eviction, lateness; Algorithm 1);
* ``engine``: ``Engine``, one stream, one event at a time, any technique;
* ``multi_window``: ``MultiEngine``, several window specs over shared slices;
* ``chunks``: the vectorised batch form of SE-Slicing over chunks of many keys (``reduce_chunk``);
* ``keyed``: the one keyed driver (a stream grouped by key through a per-key engine, one key carried
  between batches) and ``vectorised_path`` (batch form or per-event engine);
* ``streams``: the sorted-stream faces of the keyed driver, DataFrame chunks in and out (Spark partitions);
* ``batch``: ``aggregate`` and ``aggregate_many`` over a DataFrame (vectorised or per-event).

Engines import kernels, techniques and planners, never the application (``spanning.app``).
"""
