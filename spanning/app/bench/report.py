"""Writing a bench run: results.csv, results.json, agreement.json, summary.md and one PNG plot per preset."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

COLUMNS = ["technique", "variant", "height", "events_per_s", "seconds_median", "seconds_min", "seconds_max",
           "cpu_seconds_median", "peak_rss_mb_max", "rss_growth_mb_max", "latency_p50_us", "latency_p99_us",
           "latency_max_us"]  # fmt: skip
CASE = {"event-size": ["range", "slide", "mu"], "range": ["fraction", "range", "slide"],
        "cdr": ["rows", "range", "slide"], "best-map": ["mu", "range", "slide"], "swag": ["op", "window"],
        "peers": ["slide", "rows"]}  # fmt: skip


def write(records: list[dict], agreement: dict, output: Path, meta: dict) -> pd.DataFrame:
    output.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(records)
    frame.to_csv(output / "results.csv", index=False)
    (output / "results.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1, default=float))
    (output / "agreement.json").write_text(json.dumps(agreement, indent=1))
    agreed = all(v for cases in agreement.values() for v in cases.values())
    lines = [f"# spanning bench ({meta['mode']})", "", f"{meta['machine']}; repeat {meta['repeat']}; "
             f"every compared run gave the same windows: {agreed}", ""]  # fmt: skip
    for preset, group in frame.groupby("preset", sort=False):
        lines += [f"## {preset}", "", f"![{preset}]({preset}.png)", ""]
        cols = [c for c in CASE.get(preset, []) + COLUMNS if c in group and group[c].notna().any()]
        lines += [_markdown(group[cols]), ""]
        if preset == "best-map":
            lines += ["Fastest technique per cell:", "", _markdown(best_map_table(group)), ""]
        plot(preset, group, output / f"{preset}.png")
    (output / "summary.md").write_text("\n".join(lines) + "\n")
    return frame


def _markdown(frame: pd.DataFrame) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
        return str(v)

    rows = [" | ".join(map(str, frame.columns))] + [" | ".join("---" for _ in frame.columns)]
    rows += [" | ".join(fmt(v) for v in row) for row in frame.itertuples(index=False)]
    return "\n".join(f"| {r} |" for r in rows)


def best_map_table(group: pd.DataFrame) -> pd.DataFrame:
    best = group.loc[group.groupby(["mu", "slide"])["events_per_s"].idxmax()]
    label = best["technique"] + best["height"].map(lambda h: f" d={h}" if h and h > 1 else "")
    table = best.assign(best=label).pivot(index="mu", columns="slide", values="best")
    table.columns = [f"β={c}" for c in table.columns]
    return table.reset_index()


def plot(preset: str, group: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    variant = group.get("variant", pd.Series("", index=group.index)).fillna("")
    group = group.assign(label=group["technique"] + variant.map(lambda v: f" ({v})" if v else ""))
    if preset in ("event-size", "range", "best-map", "swag", "cdr"):
        x = {"event-size": "mu", "range": "range", "best-map": "mu", "swag": "window", "cdr": "range"}[preset]
        split = {"event-size": "range", "range": "fraction", "best-map": "slide", "swag": "op", "cdr": "rows"}[preset]
        styles = {part: ("-", "--", ":", "-.")[i % 4] for i, part in enumerate(group[split].unique())}
        colors = {name: f"C{i % 10}" for i, name in enumerate(group["label"].unique())}
        for (part, name), g in group.groupby([split, "label"], sort=False):
            style = styles[part]  # one line style per case, one colour per technique
            part = int(part) if isinstance(part, float) and part.is_integer() else part
            ax.plot(g[x], g["events_per_s"], marker="o", linestyle=style, color=colors[name],
                    label=f"{name}, {split} {part}")  # fmt: skip
        ax.set_xscale("log")
        _label_measured(ax.xaxis, sorted(group[x].dropna().unique()))
        ax.set_xlabel(x)
    else:
        names = group["label"] + group.get("slide", pd.Series("", index=group.index)).map(
            lambda s: f" β={s}" if pd.notna(s) and s != "" else ""
        )
        ax.barh(names, group["events_per_s"])
        ax.set_xscale("log")
    ax.set_yscale("log") if preset != "peers" else None
    ax.set_title(f"spanning bench: {preset} (events/s)")
    if preset != "peers":
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _label_measured(axis, values: list) -> None:
    """On a log axis, labels at the measured values only: the minor ticks' labels overlap within a decade."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    if len(values) > 12:  # too many to label: one in every few, the last one kept
        step = -(-len(values) // 12)
        values = values[::-1][::step][::-1]
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
