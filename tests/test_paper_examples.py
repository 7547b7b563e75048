"""The worked examples of Suzanne et al., §3.1 and §3.2, on the SE-Slicing slice store.

Slices are 5 minutes from time 0 (ω = 15, β = 5), seven of them, with the paper's initial partials.
The new event is the 18-minute call ending at 34, i.e. [16, 34).
"""

from __future__ import annotations

from spanning import WindowSpec, count, maximum
from spanning.techniques.se_slicing import SESlicing

SPEC = WindowSpec(range=15, slide=5, ttp=20)
PHI = [8, 19, 15, 18, 14, 12, 16]  # φ: events ending in the slice (and the PES counts of §3.1)
VPHI = [25, 18, 12, 14, 11, 19, 16]  # ϕ: events going beyond the slice (§3.2.2)
MAX = [20, 63, 19, 33, 12, 47, 14]  # partial maxima (§3.1, §3.2.1)


def slices(aggregates, ended=None, ongoing=None, selected=None) -> SESlicing:
    tech = SESlicing(SPEC, aggregates)
    for k in range(7):
        tech.add_window(*SPEC.window(k))
    for i in range(7):  # the paper's initial state, written into the slice lists
        if ended:
            tech._ended[i][0] = ended[i]
            tech._ongoing[i][0] = ongoing[i]
        if selected:
            tech._selected[i][0] = selected[i]
    return tech


def test_point_event_slices_count_42_and_max_63():
    """§3.1: with point events a window is the combine of its slices: count 42, max 63."""
    tech = slices([count(), maximum("duration")], ended=PHI, ongoing=[0] * 7, selected=MAX)
    tech.insert(33, 34, [1, 18])  # the call seen as a point event at 34 updates the latest slice only
    assert [tech._ended[i][0] for i in range(7)] == [8, 19, 15, 18, 14, 12, 17]
    assert [tech._selected[i][0] for i in range(7)] == [20, 63, 19, 33, 12, 47, 18]
    n, longest = tech.query(0, 15)
    assert (n, longest) == (42, 63)


def test_selective_spanning_event_updates_every_overlapped_slice_max_63():
    """§3.2.1: max is combined into each slice the call overlaps (20, 25 and 30 here)."""
    tech = slices([maximum("duration")], selected=MAX)
    tech.insert(16, 34, [18])
    assert [tech._selected[i][0] for i in range(7)] == [20, 63, 19, 33, 18, 47, 18]
    assert tech.query(0, 15) == [63]


def test_cumulative_spanning_event_phi_varphi_count_54():
    """§3.2.2: lift* gives (1, 0) where the call ends and (0, 1) in the three earlier slices."""
    tech = slices([count()], ended=PHI, ongoing=VPHI)
    tech.insert(16, 34, [1])
    assert [tech._ended[i][0] for i in range(7)] == [8, 19, 15, 18, 14, 12, 17]
    assert [tech._ongoing[i][0] for i in range(7)] == [25, 18, 12, 15, 12, 20, 16]
    assert tech.query(0, 15) == [8 + 19 + 15 + 12]  # combine*: Σφ, then ϕ of the last slice = 54
    assert tech.query(0, 15) == [54]
