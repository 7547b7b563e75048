"""Plans over several window specs: how result rows name each spec, and which specs share one slice sequence.

Both engines use them: ``spanning.aggregate_many`` and the local run tag rows with ``window_labels``,
and so does the Spark job; ``sharing_plan`` groups the specs that one ``MultiEngine`` runs together.

>>> specs = [WindowSpec(900, 300), WindowSpec(3600, 900), WindowSpec(900, 300, offset=60)]
>>> window_labels(specs)
['900/300', '3600/900', '900/300+60']
>>> sharing_plan(specs, "none")
[[0], [1], [2]]
"""

from __future__ import annotations

from collections.abc import Sequence

from spanning.kernels.windows import WindowSpec

__all__ = ["sharing_plan", "window_label", "window_labels"]


def window_label(spec: WindowSpec) -> str:
    """How result rows name their window spec: ``range/slide`` (``+offset`` when not 0)."""
    return f"{spec.range}/{spec.slide}" + (f"+{spec.offset}" if spec.offset else "")


def window_labels(specs: Sequence[WindowSpec]) -> list[str]:
    """The ``window`` tag of each spec, made unique with ``#index`` where two specs share a label."""
    labels = [window_label(s) for s in specs]
    return [lab if labels.count(lab) == 1 else f"{lab}#{i}" for i, lab in enumerate(labels)]


def sharing_plan(specs: list[WindowSpec], sharing: str, swag: str | None = None) -> list[list[int]]:
    """Groups of spec indices that share one slice sequence: "all", "none", or "weaveshare" (Shein and Chrysanthis)."""
    if sharing == "none":
        return [[i] for i in range(len(specs))]
    if sharing == "all":
        return [list(range(len(specs)))]
    if sharing != "weaveshare":
        raise ValueError(f"bad sharing {sharing!r}: use all, none or weaveshare")
    from spanning.sharing.weaveshare import weave_share

    technique = {"recalc": "panes", "flatfat": "flatfat", "flatfit": "flatfit"}.get(swag or "", "slickdeque-inv")
    queries = [(s.range, s.slide) for s in specs]
    groups, _ = weave_share(queries, technique, deque_length="harmonic")  # measured closer than Σ1/i!
    plan, unused = [], list(range(len(specs)))
    for group in groups:  # map the optimizer's (range, slide) groups back to spec indices
        members = []
        for query in group:
            i = next(i for i in unused if queries[i] == tuple(query))
            unused.remove(i)
            members.append(i)
        plan.append(members)
    return plan + [[i] for i in unused]
