"""``spanning busy-hour``: each key's busiest hour of each day in Erlangs, and its time-consistent busy hour.

ITU-T E.500 dimensions a resource by its traffic in the busy hour. The command runs ``spanning run``'s job with
windows of ``--hour`` (60 minutes) every ``--step`` (15 minutes) and the aggregates ``erlang`` and
``peak_concurrent`` (docs/SEMANTICS.md, "Traffic"), every window kept, empty ones too, and no call late (the
TTP covers the whole input: a batch over files counts every call). From those windows it writes, beside the job's
``windows/``, ``rejected/``, ``late/`` and ``summary.json``:

* ``busy_hours``: per key and day (a window belongs to the day it starts in, in ``--timezone``), the window
  with the most Erlangs (the earliest of equal ones): its start and end, its ``erlang`` and ``peak_concurrent``,
  and the day's ``day_mean_erlang``: its traffic over 24 hours, Σ erlang × step / 24 h over the day's windows
  (each chronon of a call is in hour/step windows, so this counts it once; 23 and 25-hour days of a
  daylight-saving change are still divided by 24);
* ``consistent_busy_hour``: per key, the time-consistent busy hour: the time of day (``HH:MM`` in
  ``--timezone``) whose windows have the highest mean Erlangs over the days, that mean, and the days it is over;
* ``busy_hour.png``: Erlangs per key over the day (the mean over the days at each time of day), the
  time-consistent busy hour marked, for the keys with the most traffic.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from spanning.app.jobspec import (
    InputFiles,
    OutputOptions,
    RunConfig,
    SparkOptions,
    UsageError,
    WindowQuery,
    parse_duration,
)
from spanning.app.run_command import add_event_options, events_from_args, run_job
from spanning.engines.reader import chronon_timestamps, tzinfo

PLOTTED_KEYS = 8  # the plot draws the keys with the most traffic, at most this many
WHOLE_INPUT = 10 * 366 * 86400  # the TTP, in seconds: no call of a batch over files is late


def add_busy_hour_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("busy-hour", help="each key's busiest hour per day in Erlangs, and its time-consistent"
                       " busy hour", description=__doc__.split("\n\n")[0].replace("``", ""))  # fmt: skip
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or globs (CSV, Parquet, JSON lines)")
    p.add_argument("--hour", default="60m", help="length of the busy hour (default 60m)")
    p.add_argument("--step", default="15m", help="how far apart the candidate hours start (default 15m)")
    add_event_options(p, timezone_help=", and of the days and clock times")
    p.add_argument("--output", default="busy-hour-output", help="output folder (default busy-hour-output)")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv"],
                   help="format of the busy-hour tables (default parquet; the hourly windows are Parquet)")
    p.add_argument("--overwrite", action="store_true", help="replace an output folder that spanning wrote")
    p.add_argument("--engine", default="local", choices=["local", "spark"], help="local (default, pandas) or spark")
    p.set_defaults(handler=_busy_hour)


def busy_hour_config(args: argparse.Namespace) -> RunConfig:
    """The ``spanning run`` job behind ``busy-hour``: hourly windows every step, Erlangs and peaks, none late."""
    unit = args.time_unit
    hour, step = parse_duration(args.hour, unit), parse_duration(args.step, unit)
    if hour <= 0 or step <= 0:
        raise UsageError("--hour and --step must be longer than 0")
    if step > hour:
        raise UsageError(f"--step ({args.step}) is longer than --hour ({args.hour}): some hours would be in no window")
    whole = WHOLE_INPUT * (1000 if unit == "ms" else 1)
    query = WindowQuery(range=hour, slide=step, ttp=whole, aggregates=["count", "erlang", "peak_concurrent"],
                        empty_windows="emit")  # fmt: skip
    return RunConfig(InputFiles(args.inputs, format=args.input_format, delimiter=args.delimiter),
                     events_from_args(args), query,
                     output=OutputOptions(args.output, format="parquet", overwrite=args.overwrite),
                     engine=args.engine, spark=SparkOptions(master=args.master))  # fmt: skip


def busy_hours(
    windows: pd.DataFrame, keys: list[str], timezone: str, step: pd.Timedelta
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the busy hour of each key and day, the time-consistent busy hour of each key) of the hourly windows.

    ``windows`` has the key columns, ``window_start``/``window_end`` (UTC timestamps), ``erlang`` and
    ``peak_concurrent``, every window of each key's series (empty ones too).

    >>> w = pd.DataFrame({"cell": ["a"] * 4, "erlang": [0.5, 2.0, 1.0, 3.0], "peak_concurrent": [1, 3, 2, 4],
    ...                   "window_start": pd.to_datetime(["2024-03-04 10:00", "2024-03-04 11:00",
    ...                                                   "2024-03-05 10:00", "2024-03-05 11:00"], utc=True)})
    >>> w["window_end"] = w["window_start"] + pd.Timedelta("1h")
    >>> daily, consistent = busy_hours(w, ["cell"], "UTC", pd.Timedelta("1h"))
    >>> daily[["day", "erlang", "peak_concurrent"]].to_dict("records")  # doctest: +ELLIPSIS
    [{'day': datetime.date(2024, 3, 4), 'erlang': 2.0, 'peak_concurrent': 3}, {...}]
    >>> [round(x * 24, 9) for x in daily["day_mean_erlang"]]  # 2.5 and 4 Erlang-hours over 24 hours
    [2.5, 4.0]
    >>> consistent.to_dict("records")
    [{'cell': 'a', 'clock_time': '11:00', 'mean_erlang': 2.5, 'days': 2}]
    """
    zone = tzinfo(timezone)
    local = windows["window_start"].dt.tz_convert(zone)
    frame = windows.assign(day=local.dt.date, clock_time=local.dt.strftime("%H:%M"))
    groups = [*keys, "day"]
    ranked = frame.sort_values([*groups, "erlang", "window_start"], ascending=[True] * len(groups) + [False, True],
                               kind="stable")  # fmt: skip
    daily = ranked.groupby(groups, sort=True, dropna=False).head(1)
    means = (frame.groupby(groups, dropna=False)["erlang"].sum() * (step / pd.Timedelta("24h"))).rename(
        "day_mean_erlang")  # fmt: skip
    daily = daily.merge(means.reset_index(), on=groups, how="left")
    daily = daily[[*groups, "window_start", "window_end", "erlang", "peak_concurrent", "day_mean_erlang"]]
    daily = daily.rename(columns={"window_start": "busy_hour_start", "window_end": "busy_hour_end"})
    by_time = frame.groupby([*keys, "clock_time"], dropna=False).agg(mean_erlang=("erlang", "mean"),
                                                                     days=("day", "nunique")).reset_index()  # fmt: skip
    by_time = by_time.sort_values([*keys, "mean_erlang", "clock_time"],
                                  ascending=[True] * len(keys) + [False, True], kind="stable")  # fmt: skip
    consistent = by_time.groupby(keys, dropna=False).head(1) if keys else by_time.head(1)
    return daily.reset_index(drop=True), consistent.reset_index(drop=True)


def plot_busy_hours(windows: pd.DataFrame, consistent: pd.DataFrame, keys: list[str], timezone: str,
                    path: Path) -> None:  # fmt: skip
    """Erlangs over the day (mean over the days at each time of day) of the busiest keys, with the TCBH marked."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    local = windows["window_start"].dt.tz_convert(tzinfo(timezone))
    frame = windows.assign(minute=local.dt.hour * 60 + local.dt.minute)
    label = frame[keys].astype(str).agg(" ".join, axis=1) if keys else pd.Series("all", index=frame.index)
    frame = frame.assign(_label=label)
    top = frame.groupby("_label")["erlang"].sum().nlargest(PLOTTED_KEYS).index
    fig, ax = plt.subplots(figsize=(10, 5))
    markers = "osD^v<>p"
    for i, name in enumerate(top):
        curve = frame[frame["_label"] == name].groupby("minute")["erlang"].mean()
        line = ax.plot(curve.index / 60, curve.to_numpy(), marker=markers[i % len(markers)], markevery=8,
                       label=str(name), color=plt.get_cmap("tab10")(i % 10))[0]  # fmt: skip
        row = consistent[(consistent[keys].astype(str).agg(" ".join, axis=1) if keys else pd.Series(["all"])) == name]
        if len(row):
            hour, minute = map(int, row["clock_time"].iloc[0].split(":"))
            ax.axvline(hour + minute / 60, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlabel(f"time of day ({timezone}), start of the hour")
    ax.set_ylabel("Erlangs (mean over the days)")
    ax.set_title("Traffic per key over the day; dotted: the time-consistent busy hour")
    ax.set_xlim(0, 24)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")  # outside the data
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _busy_hour(args: argparse.Namespace) -> int:
    summary = run_job(busy_hour_config(args), args.verbose)
    output = Path(summary["output"])
    windows = pd.read_parquet(output / "windows")
    keys = [c for c in windows.columns if c not in ("window_start", "window_end", "count", "erlang",
                                                    "peak_concurrent")]  # fmt: skip
    if not pd.api.types.is_datetime64_any_dtype(windows["window_start"]):  # epoch numbers: chronons
        for name in ("window_start", "window_end"):
            windows[name] = chronon_timestamps(windows[name].to_numpy(np.int64), args.time_unit).array
    step = pd.Timedelta(parse_duration(args.step, args.time_unit), unit=args.time_unit)
    daily, consistent = busy_hours(windows, keys, args.timezone, step)
    for name, table in (("busy_hours", daily), ("consistent_busy_hour", consistent)):
        if args.format == "csv":
            table.to_csv(output / f"{name}.csv", index=False)
        else:
            table.to_parquet(output / f"{name}.parquet", index=False)
    try:
        plot_busy_hours(windows, consistent, keys, args.timezone, output / "busy_hour.png")
        drawn = ", busy_hour.png"
    except ModuleNotFoundError:  # matplotlib comes with the bench extra, not the base install
        drawn = " (no busy_hour.png: drawing it needs matplotlib, pip install 'spanning[bench]')"
    print(f"read {summary['rows_read']:,} rows: {summary['accepted']:,} accepted, {summary['rejected']:,} rejected;"
          f" {len(daily):,} busy hours of {len(consistent):,} keys")  # fmt: skip
    print(f"results: {output}/busy_hours.{args.format}, consistent_busy_hour.{args.format}{drawn}"
          " (the hourly windows/, rejected/, summary.json beside them)")
    return 0
