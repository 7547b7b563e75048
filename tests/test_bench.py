"""``spanning bench --quick``: every preset runs, writes its files, and all compared runs agree."""

from __future__ import annotations

import json

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


def test_bench_rejects_unknown_presets(capsys):
    assert main(["bench", "fig99", "--quick"]) == 2
    assert "unknown preset 'fig99'" in capsys.readouterr().err
