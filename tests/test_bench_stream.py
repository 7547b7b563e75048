"""The stream benchmark's data shapes and its floor (``bench/bench_stream.py``, ``bench/stream_floor_job.py``):
the figures they give are reported against issue 47's targets, so what they count is checked here."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_stream import make_files  # noqa: E402
from stream_floor_job import floor_query  # noqa: E402


@pytest.mark.parametrize("keys", ["cells", "hot"])
def test_the_stream_benchmark_files_land_in_end_order_with_the_cells_asked_for(tmp_path, keys):
    files = make_files(tmp_path / "in", 20_000, 5_000, 500, "parquet", keys=keys)
    assert files == 4
    parts = [pd.read_parquet(p) for p in sorted((tmp_path / "in").glob("cdr-*.parquet"))]
    assert [len(p) for p in parts] == [5_000] * 4
    ends = [pd.to_datetime(p["end"]) for p in parts]
    assert all(a.max() <= b.min() for a, b in zip(ends, ends[1:], strict=False))  # each file after the one before
    cells = pd.concat(parts)["cell"].value_counts(normalize=True)
    if keys == "hot":  # 200 cells, one with 38% of the calls
        assert len(cells) == 200 and cells.index[0] == "cell-0" and abs(cells.iloc[0] - 0.38) < 0.02
    else:
        assert len(cells) > 200 and cells.iloc[0] < 0.3  # 500 cells by 1/rank^1.1: the first about 19%


def test_the_stream_floor_reads_every_row_one_file_per_trigger(spark, tmp_path):
    make_files(tmp_path / "in", 3_000, 1_000, 50, "parquet", keys="hot")
    pd.read_parquet(tmp_path / "in" / "cdr-0001.parquet").assign(end="not a time").to_parquet(
        tmp_path / "in" / "cdr-0001.parquet", index=False)  # a file of rows the reader contract rejects
    floor = floor_query(spark, tmp_path / "in", tmp_path / "floor", keyed=False)  # --keys none's query
    assert floor["rows"] == 3_000 and floor["rejected"] == 1_000, floor
    assert floor["trigger_rows"] == [1_000] * 3 and len(floor["trigger_seconds"]) == 3, floor
