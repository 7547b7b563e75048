"""FIFO sliding-window aggregators (SWAGs), one module per algorithm behind ``spanning.swag.protocol``.

``ALGORITHMS`` maps each name to its class, built as ``cls(combine, identity)`` (plus ``inverse=``
for ``soe`` and SlickDeque's invertible form). Every one is tested against ``recalc`` with the same
generators (``tests/swag_harness.py``). Each class declares ``capabilities`` (``SwagCapabilities``): whether
it needs an inverse and whether it answers range queries. ``NEEDS_INVERSE`` and ``MULTI_RANGE`` are the
names of the classes that do, derived from those declarations.
"""

from spanning.swag.daba import DABA
from spanning.swag.daba_lite import DABALite
from spanning.swag.flatfat import FlatFAT
from spanning.swag.flatfit import FlatFIT
from spanning.swag.pba import PBA
from spanning.swag.protocol import SWAG, EmptyWindowError, Inverse, SwagCapabilities
from spanning.swag.recalc import Recalc
from spanning.swag.sba import SBA
from spanning.swag.slickdeque import SlickDeque
from spanning.swag.soe import SOE
from spanning.swag.two_stacks import TwoStacks
from spanning.swag.two_stacks_lite import TwoStacksLite

ALGORITHMS: dict[str, type] = {
    "recalc": Recalc,
    "soe": SOE,
    "two-stacks": TwoStacks,
    "two-stacks-lite": TwoStacksLite,
    "daba": DABA,
    "daba-lite": DABALite,
    "flatfat": FlatFAT,
    "flatfit": FlatFIT,
    "slickdeque": SlickDeque,  # invertible form with inverse=, selective form (max-like) without
    "sba": SBA,
    "pba": PBA,
}

NEEDS_INVERSE = {name for name, cls in ALGORITHMS.items() if cls.capabilities.needs_inverse}
MULTI_RANGE = {name for name, cls in ALGORITHMS.items() if cls.capabilities.range_queries}  # several windows on one

__all__ = ["ALGORITHMS", "MULTI_RANGE", "NEEDS_INVERSE", "SWAG", "EmptyWindowError", "Inverse", "SwagCapabilities"]
