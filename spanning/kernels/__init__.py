"""Kernels, the bottom layer: time, windows and array kernels, with no knowledge of techniques or engines.

* ``windows``: ``WindowSpec`` and the Pairs/Union slicers (Suzanne et al., §5.1-5.2);
* ``intervals``: ``[l, u)`` intervals and the predicates P∩, P⌟, P→ (§2.1);
* ``ranges``: array kernels over runs of window numbers (the batch face of the aggregates).

The aggregates (``spanning.aggregates``) belong to this layer too. Layers above may import these
modules; these modules import nothing above them (``tests/test_layers.py``).
"""
