"""``spanning bench --quick``: every preset runs, writes its files, and all compared runs agree."""

from __future__ import annotations

import json
import re

import pandas as pd

from spanning.app.bench.presets import PRESETS
from spanning.cli import main


def test_bench_quick(spark, tmp_path, capsys):
    """Uses the session's Spark (the peers preset compares the job with Spark SQL)."""
    assert main(["bench", "--quick", "--output", str(tmp_path)]) == 0
    printed = capsys.readouterr()
    assert "every compared run gave the same windows" in printed.out
    progress = printed.err.splitlines()  # not a terminal: plain lines, no carriage returns
    assert "\r" not in printed.err and len(progress) > 10 and all(line.startswith("[") for line in progress)
    assert any("starting Spark" in line for line in progress)
    for name in ("results.csv", "results.json", "agreement.json", "summary.md", *(f"{p}.png" for p in PRESETS)):
        assert (tmp_path / name).stat().st_size > 0, name
    agreement = json.loads((tmp_path / "agreement.json").read_text())
    assert set(agreement) == set(PRESETS) and all(all(cases.values()) and cases for cases in agreement.values())
    results = pd.read_csv(tmp_path / "results.csv")
    techniques = set(results.loc[results["preset"] == "event-size", "technique"])
    assert techniques == {"se-slicing", "se-ml-slicing", "aggregate-buckets", "tuple-buckets", "sweeping"}
    peers = set(results.loc[results["preset"] == "peers", "technique"])
    assert {"engine batch path", "DuckDB explode+group-by", "Spark job", "Spark SQL explode+group-by"} <= peers
    assert (results["events_per_s"] > 0).all()
    # a process's peak: this one holds Python, numpy, pandas and pyarrow (well over 50 MB), and at least its growth
    # (the Spark runs are timed only: their memory is the JVM's)
    measured = results.dropna(subset=["peak_rss_mb_max"])
    peak, growth = measured["peak_rss_mb_max"], measured["rss_growth_mb_max"]
    assert len(measured) > 10 and (peak > 50).all() and (peak >= growth).all()
    summary = (tmp_path / "summary.md").read_text()
    assert "nan" not in summary.lower().replace("nanoseconds", "")  # nothing measured shows as –
    assert not re.search(r"(β|d)=\d+\.0\b", summary)  # integer parameters written as integers
    cdr = results[results["preset"] == "cdr"].groupby("technique")["events_per_s"].median()
    if cdr["se-slicing"] < cdr.drop("se-slicing").max():  # a surprising result gets its sentence
        assert "Why: SE-Slicing trails a baseline here" in summary


def test_plot_draws_bars_for_single_points_and_keeps_the_legend_off_the_data(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from spanning.app.bench import report

    drawn = []
    original = plt.subplots

    def recording(*args, **kwargs):
        fig, ax = original(*args, **kwargs)
        drawn.append(ax)
        return fig, ax

    one_point = pd.DataFrame({"technique": ["a", "b"], "variant": ["", ""], "rows": [10, 10], "range": [900, 900],
                              "slide": [180.0, 180.0], "events_per_s": [5.0, 7.0]})  # fmt: skip
    sweep = pd.DataFrame({"technique": [f"t{i}" for i in range(12)] * 2, "variant": "", "op": "sum",
                          "window": [16] * 12 + [256] * 12, "events_per_s": range(1, 25)})  # fmt: skip
    plt.subplots = recording
    try:
        report.plot("cdr", one_point, tmp_path / "cdr.png")
        report.plot("swag", sweep, tmp_path / "swag.png")
    finally:
        plt.subplots = original
    bars, lines = drawn
    assert len(bars.patches) == 2 and not bars.lines  # one bar per technique, no one-point lines
    assert [t.get_text() for t in bars.get_yticklabels()] == ["a, rows 10, range 900, slide 180",
                                                              "b, rows 10, range 900, slide 180"]  # fmt: skip
    looks = {(line.get_color(), line.get_marker()) for line in lines.lines}
    assert len(looks) == 12  # twelve techniques, twelve looks
    legend = lines.get_legend()
    assert legend.get_bbox_to_anchor().x0 >= lines.get_window_extent().x1  # beside the axes, not over the data


def test_bench_rejects_unknown_presets(capsys):
    assert main(["bench", "fig99", "--quick"]) == 2
    assert "unknown preset 'fig99'" in capsys.readouterr().err


def test_the_peers_comparison_fails_on_a_row_on_one_side_or_a_different_count_of_it(spark):
    from spark_jobs.peers import same_rows

    rows = [(1, None), (1, None), (2, 3.0)]  # a row twice, a null (equal to a null, as exceptAll takes it)
    mine = spark.createDataFrame(rows, "cell int, value double")
    assert same_rows(mine, spark.createDataFrame(rows[::-1], "cell int, value double")) == (True, 3)
    for other in (rows[1:], [*rows, (2, 3.0)], [*rows[:2], (2, 3.5)], [*rows[:2], (3, 3.0)]):
        same, count = same_rows(mine, spark.createDataFrame(other, "cell int, value double"))
        assert not same and count == 3, other
