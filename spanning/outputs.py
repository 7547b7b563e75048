"""The output folder of ``spanning run``: windows/, rejected/, late/ and summary.json (both engines)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spanning.jobspec import RunConfig, UsageError


@contextmanager
def output_folder(cfg: RunConfig) -> Iterator[Path]:
    """The output folder, fresh: refuse an existing one unless ``--overwrite``; removed if the run fails."""
    output = Path(cfg.output)
    if output.exists():
        if not cfg.overwrite:
            raise UsageError(f"output folder {output} exists: give --overwrite to replace it")
        shutil.rmtree(output) if output.is_dir() else output.unlink()
    output.mkdir(parents=True)
    try:
        yield output
    except BaseException:
        shutil.rmtree(output, ignore_errors=True)
        raise


def finish_output(
    cfg: RunConfig, output: Path, *, rows_read: int, rejected: int, late: int, windows: int, seconds: float, **extra
) -> dict:
    """Write summary.json and return it. Every row read is accepted or rejected."""
    summary = {
        "rows_read": int(rows_read),
        "accepted": int(rows_read - rejected),
        "rejected": int(rejected),
        "late": int(late),
        "windows_written": int(windows),
        "output": str(output.resolve()),
        "wall_time_s": round(seconds, 3),
        "parameters": cfg.parameters(),
        **extra,
    }
    (output / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def human_summary(summary: dict) -> str:
    return (
        f"read {summary['rows_read']:,} rows: {summary['accepted']:,} accepted, {summary['rejected']:,} rejected,"
        f" {summary['late']:,} late; wrote {summary['windows_written']:,} windows in {summary['wall_time_s']:.1f} s\n"
        f"results: {summary['output']}/windows  (rejected/, late/, summary.json beside it)"
    )
