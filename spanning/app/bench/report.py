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
        lines += [f"Why: {why}" for why in surprises(preset, group)] + [""] * bool(surprises(preset, group))
        if preset == "best-map":
            lines += ["Fastest technique per cell:", "", _markdown(best_map_table(group)), ""]
        plot(preset, group, output / f"{preset}.png")
    (output / "summary.md").write_text("\n".join(lines) + "\n")
    return frame


def surprises(preset: str, group: pd.DataFrame) -> list[str]:
    """One sentence for each result a reader would not expect, saying why it comes out that way."""
    speed = group.groupby("technique")["events_per_s"].median()
    said = []
    if preset == "cdr" and "se-slicing" in speed and speed["se-slicing"] < speed.drop("se-slicing").max():
        said.append("SE-Slicing trails a baseline here: with ω/β = 5 a one-minute call meets about 5 windows, so a"
                    " bucket per window costs a few appends per call, less than SE-Slicing's per-call slice work in"
                    " Python; SE-Slicing's cost does not grow with the windows per event, and it leads where they"
                    " are many (the range and event-size presets, and docs/BENCHMARKS.md).")  # fmt: skip
    if preset == "peers" and {"Spark job", "Spark SQL explode+group-by"} <= set(speed.index):
        if speed["Spark job"] < speed["Spark SQL explode+group-by"]:
            said.append("the Spark job trails the hand-written SQL at this size: on so few rows both are mostly"
                        " Spark's fixed costs, and the job also writes its rejected and late rows and checks exact"
                        " sums; docs/BENCHMARKS.md has the sizes and shapes where it leads.")  # fmt: skip
    return said


def _markdown(frame: pd.DataFrame) -> str:
    def fmt(v):
        if v is None or (isinstance(v, float) and v != v):  # nothing measured there (NaN)
            return "–"
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
            return f"{v:,.0f}"
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
        return str(v)

    rows = [" | ".join(map(str, frame.columns))] + [" | ".join("---" for _ in frame.columns)]
    rows += [" | ".join(fmt(v) for v in row) for row in frame.itertuples(index=False)]
    return "\n".join(f"| {r} |" for r in rows)


def best_map_table(group: pd.DataFrame) -> pd.DataFrame:
    best = group.loc[group.groupby(["mu", "slide"])["events_per_s"].idxmax()]
    label = best["technique"] + best["height"].map(lambda h: f" d={_number(h)}" if pd.notna(h) and h > 1 else "")
    table = best.assign(best=label).pivot(index="mu", columns="slide", values="best")
    table.columns = [f"β={_number(c)}" for c in table.columns]
    return table.reset_index()


def _number(value) -> str:
    """60 for 60.0 (columns with gaps are floats), else as it is."""
    return f"{int(value)}" if isinstance(value, float) and value.is_integer() else f"{value}"


MARKERS = "osD^vP*Xh<>p"


def plot(preset: str, group: pd.DataFrame, path: Path) -> None:
    """Lines over the swept parameter (one colour and marker per technique, one line style per case), or bars
    where a run measured a single point per line; the legend beside the data, never over it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variant = group.get("variant", pd.Series("", index=group.index)).fillna("")
    group = group.assign(label=group["technique"] + variant.map(lambda v: f" ({v})" if v else ""))
    x = {"event-size": "mu", "range": "range", "best-map": "mu", "swag": "window", "cdr": "range"}.get(preset)
    lines = x is not None and group[x].nunique() > 1
    fig, ax = plt.subplots(figsize=(10, 5) if lines else (8, 0.6 + 0.32 * len(group)))
    if lines:
        split = {"event-size": "range", "range": "fraction", "best-map": "slide", "swag": "op", "cdr": "rows"}[preset]
        styles = {part: ("-", "--", ":", "-.")[i % 4] for i, part in enumerate(group[split].unique())}
        names = list(group["label"].unique())
        palette = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
        looks = {name: (palette(i % palette.N), MARKERS[i % len(MARKERS)]) for i, name in enumerate(names)}
        for (part, name), g in group.groupby([split, "label"], sort=False):
            color, marker = looks[name]  # one colour and marker per technique, one line style per case
            ax.plot(g[x], g["events_per_s"], marker=marker, linestyle=styles[part], color=color,
                    label=f"{name}, {split} {_number(part)}")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        _label_measured(ax.xaxis, sorted(group[x].dropna().unique()))
        ax.set_xlabel(x)
        ax.set_ylabel("events/s")
        ax.legend(fontsize=7, ncol=1 + len(names) // 12, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0)  # fmt: skip
    else:  # one measurement per technique and case: bars, labelled with the case
        cases = [c for c in CASE.get(preset, []) if c in group and group[c].notna().any()]
        names = group["label"] + group.apply(
            lambda r: "".join(f", {c} {_number(r[c])}" for c in cases if pd.notna(r[c])), axis=1
        )
        ax.barh(names, group["events_per_s"], color=[f"C{i % 10}" for i in range(len(group))])
        ax.set_xscale("log")
        ax.set_xlabel("events/s")
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
    ax.set_title(f"spanning bench: {preset} (events/s)")
    fig.savefig(path, dpi=110, bbox_inches="tight")
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
