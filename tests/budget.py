"""How many examples each property test draws: its number, times ``SPANNING_TEST_DEPTH`` (0.3 by default).

The default keeps the whole suite near 12 minutes on two cores; ``SPANNING_TEST_DEPTH=1 bash scripts/test.sh``
draws every property test's full number (about three times the property tests' time), and a larger depth more.
Failures hypothesis found are kept in ``.hypothesis/`` and replayed first, whatever the depth.

>>> examples(150) == max(1, round(150 * DEPTH))
True
"""

from __future__ import annotations

import os

DEPTH = float(os.environ.get("SPANNING_TEST_DEPTH", "0.3"))


def examples(full: int) -> int:
    """The number of examples a property test written for ``full`` draws at this run's depth (at least 1)."""
    return max(1, round(full * DEPTH))
