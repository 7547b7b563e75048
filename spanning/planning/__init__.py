"""Planners: decisions taken before events flow, from the window specs and a sample of the events.

* ``height``: the height d of SE-ML-Slicing from the cost model of Suzanne et al., §5.3 (Table 4);
* ``specs``: the labels of several window specs and which of them share one slice sequence.

Planners import kernels and techniques; the engines ask them (``height="auto"``, ``sharing=``).
"""
