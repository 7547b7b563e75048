"""Synthetic call-detail records with a realistic shape (``spanning generate-cdr``).

* cells with skewed popularity (Zipf-like weights);
* diurnal arrivals: intensity follows the hour of day (quiet at night, peaks late morning and evening);
* voice calls with lognormal durations around a minute, a share of long data sessions (tens of minutes
  to hours, with many bytes), and SMS as zero-duration records;
* optionally a small share of bad rows (missing or garbled times, end before start, non-numeric
  bytes) to exercise the rejected output.

>>> calls = generate_cdr(1000, seed=7)
>>> sorted(calls.columns)
['bytes', 'call_id', 'caller', 'cell', 'duration', 'end', 'start', 'type']
>>> set(calls["type"]) == {"voice", "data", "sms"}
True
>>> "n/a" in set(generate_cdr(1000, seed=7, mix=CallMix(bad_share=0.05))["bytes"])  # a non-numeric value
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["CallMix", "generate_cdr"]

# relative call intensity per hour of day (0h .. 23h)
DIURNAL = np.array(
    [0.15, 0.1, 0.07, 0.05, 0.05, 0.08, 0.2, 0.45, 0.75, 0.9, 1.0, 1.0,
     0.95, 0.9, 0.9, 0.9, 0.95, 1.0, 1.0, 0.95, 0.85, 0.7, 0.5, 0.3]
)  # fmt: skip


@dataclass(frozen=True)
class CallMix:
    """What the records are: shares of long data sessions and of SMS (the rest are voice calls), and of bad rows."""

    data_share: float = 0.1
    sms_share: float = 0.15
    bad_share: float = 0.0  # unusable rows, for rejected/


def generate_cdr(
    rows: int,
    *,
    seed: int = 0,
    cells: int = 200,
    subscribers: int = 5000,
    start: str = "2024-03-04",
    days: float = 1.0,
    mix: CallMix = CallMix(),
) -> pd.DataFrame:
    """``rows`` CDRs as a DataFrame, times as ``YYYY-MM-DD HH:MM:SS`` strings, durations in seconds."""
    data_share, sms_share, bad_share = mix.data_share, mix.sms_share, mix.bad_share
    rng = np.random.default_rng(seed)
    origin = pd.Timestamp(start).value // 10**9
    # diurnal arrival times: pick a day and an hour by intensity, then a uniform second in the hour
    day = rng.integers(0, max(int(np.ceil(days)), 1), rows)
    hour = rng.choice(24, size=rows, p=DIURNAL / DIURNAL.sum())
    begin = origin + day * 86_400 + hour * 3600 + rng.integers(0, 3600, rows)
    begin = np.minimum(begin, origin + int(days * 86_400) - 1)

    kind = rng.choice(3, size=rows, p=[1 - data_share - sms_share, data_share, sms_share])
    duration = np.rint(rng.lognormal(np.log(60), 0.8, rows)).astype(np.int64) + 1  # voice: ~1 minute
    data = kind == 1
    duration[data] = np.rint(rng.lognormal(np.log(20 * 60), 1.0, data.sum())).astype(np.int64) + 1
    duration[kind == 2] = 0  # SMS: zero-duration records
    volume = np.where(data, rng.lognormal(np.log(5e6), 1.2, rows), duration * rng.uniform(1500, 2500, rows)).astype(
        np.int64
    )
    volume[kind == 2] = 140

    weights = 1.0 / np.arange(1, cells + 1) ** 1.1  # Zipf-like cell popularity
    cell = rng.choice(cells, size=rows, p=weights / weights.sum())
    frame = pd.DataFrame(
        {
            "call_id": np.arange(rows),
            "caller": rng.integers(0, subscribers, rows) + 33_600_000_000,
            "cell": np.char.add("cell-", cell.astype(str)),
            "type": np.array(["voice", "data", "sms"])[kind],
            "start": pd.to_datetime(begin, unit="s").strftime("%Y-%m-%d %H:%M:%S"),
            "end": pd.to_datetime(begin + duration, unit="s").strftime("%Y-%m-%d %H:%M:%S"),
            "duration": duration,
            "bytes": volume.astype(object),
        }
    )
    if bad_share > 0:
        _spoil(frame, rng, bad_share)
    return frame.sort_values("end", kind="stable").reset_index(drop=True)  # written when calls end


def _spoil(frame: pd.DataFrame, rng: np.random.Generator, share: float) -> None:
    """Make a share of rows unusable, in the ways real CDR exports are."""
    bad = np.flatnonzero(rng.random(len(frame)) < share)
    how = rng.integers(0, 4, len(bad))
    frame.loc[bad[how == 0], "start"] = None  # missing start
    frame.loc[bad[how == 1], "end"] = "not a time"  # garbled end
    swap = bad[how == 2]  # end before start
    frame.loc[swap, ["start", "end"]] = frame.loc[swap, ["end", "start"]].to_numpy()
    frame.loc[swap[frame.loc[swap, "duration"].to_numpy() == 0], "end"] = "1999-01-01 00:00:00"
    frame.loc[bad[how == 3], "bytes"] = "n/a"  # non-numeric value
