"""Engines: events in, released windows out, over the techniques.

* ``manager``: the window manager (clock, TTP release, eviction, lateness; Algorithm 1);
* ``engine``: ``Engine``, one stream, one event at a time, any technique;
* ``multi_window``: ``MultiEngine``, several window specs over shared slices;
* ``chunks``: the vectorised batch form of SE-Slicing over sorted chunks, and the per-key streams;
* ``batch``: ``aggregate`` and ``aggregate_many`` over a DataFrame (vectorised or per-event).

Engines import kernels, techniques and planners, never the application (``spanning.app``).
"""
