"""Techniques: how partial aggregates are stored and combined, behind the ``Technique`` protocol.

* ``protocol``: the four calls between the window manager and a technique (Algorithm 1);
* ``se_slicing``, ``se_ml_slicing``, ``slice_ring``: SE-Slicing and SE-ML-Slicing (Suzanne et al., §4-5);
* ``point_windows``: point events through Pairs slices and a FIFO SWAG (``spanning.swag``);
* ``registry``: technique names -> factories; the baselines (``buckets``, ``sweeping``) are registered
  by name and imported on first use, so that ``import spanning`` needs neither.

``spanning.swag`` (the SWAGs) and ``spanning.sharing`` (the WeaveShare cost model) are in this layer too.
Techniques import only kernels.
"""
