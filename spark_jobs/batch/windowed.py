"""The windowed job: partition by key, sort by (key, end), stream each partition through the engine.

Each partition arrives in ``mapInPandas`` as Arrow batches sorted by (key, end, _seq). The keyed driver
(``spanning.engines.keyed``, through the faces of ``spanning.engines.streams``) reduces each batch with array
operations (``SortedStreamAggregator``) or runs the per-event engine of the technique (``SortedEngineStream``),
as ``vectorised_path`` decides, and carries the open windows of at most one key to the next batch, so memory
stays bounded whatever the key sizes.
The function yields released windows and late events in one frame: late rows have ``_late_seq`` set.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spanning.app.jobspec import EVENTS_COLUMN, RunConfig, user_errors
from spark_jobs.reading.prepare import END, EVENT_END, SEQ, SERIES, START, Prepared, quoted, result_type

LATE_SEQ, MISSED = "_late_seq", "_windows_missed"
# the compiled kernels that the batch path's tasks call (``SortedStreamAggregator``: runs, key extremes, labels,
# counts, the explode of the distinct counts and quantiles), loaded by the workers' warm-up
PLAN_KERNELS = ("chunk_runs", "key_extremes", "run_sums_into", "run_windows", "window_labels")


def warm_up(part: int = 0, parts: int = 1) -> float:
    """Load ``PLAN_KERNELS`` (this worker's share of them, ``compiled.warm_up``) and numba's compiler with the
    first: what a Python worker's warm-up (``session.warm_python_workers``) runs while the driver plans,
    not every kernel of vector's plan. Its seconds."""
    from spanning.kernels import compiled

    return compiled.warm_up(part=part, parts=parts, names=PLAN_KERNELS)


def window_job(events: DataFrame, prepared: Prepared, cfg: RunConfig, series_start: bool) -> DataFrame:
    """Windows and late events of ``events`` (see ``spark_jobs.reading.prepare.events``)."""
    keys = prepared.keys
    outputs = {**prepared.aggregates(cfg.query), EVENTS_COLUMN: "count"}
    key_fields = [events.schema[k] for k in keys]
    schema = T.StructType(
        [
            *[T.StructField(f.name, f.dataType, True) for f in key_fields],
            T.StructField("window_start", T.LongType(), True),
            T.StructField("window_end", T.LongType(), True),
            *[T.StructField(name, result_type(spec, prepared), True) for name, spec in outputs.items()],
            T.StructField(LATE_SEQ, T.LongType(), True),
            T.StructField(MISSED, T.LongType(), True),
        ]
    )
    spec, names, specs = cfg.query.spec, list(outputs), list(outputs.values())
    column_order = [f.name for f in schema.fields]
    object_columns = [f.name for f in schema.fields if not isinstance(f.dataType, T.NumericType)]
    skip_empty = cfg.query.empty_windows == "skip"
    execution = cfg.execution
    input_names = {v: c for c, v in prepared.values.items()}

    def process(batches):
        import pandas as pd

        from spanning.engines.engine import build_aggregates
        from spanning.engines.keyed import vectorised_path
        from spanning.engines.params import ChunkColumns
        from spanning.engines.streams import SortedEngineStream, SortedStreamAggregator

        _, aggs = build_aggregates(dict(zip(names, specs, strict=True)))
        common = dict(series_start=SERIES if series_start else None,
                      columns=ChunkColumns(start=START, end=END, seq=SEQ))  # fmt: skip
        if vectorised_path(execution, aggs):
            stream = SortedStreamAggregator(spec, aggs, names, keys, **common)
        else:
            technique, height, swag = execution.technique, execution.height, execution.swag
            stream = SortedEngineStream(
                spec, aggs, names, keys, technique=technique, height=height, swag=swag, **common
            )

        def frame(windows, late):
            late = late.rename(columns={"seq": LATE_SEQ, "windows_missed": MISSED})
            parts = [p for p in (windows, late) if len(p)]
            if not parts:
                return None
            out = pd.concat(parts, ignore_index=True).reindex(columns=column_order)
            if not len(windows):  # late rows only: non-numeric columns of nulls, not of NaN floats
                for name in object_columns:
                    out[name] = pd.Series([None] * len(out), dtype=object)
            return out

        def nonempty(windows):  # empty windows would cross Arrow only to be filtered out
            return windows[windows[EVENTS_COLUMN].to_numpy() > 0] if skip_empty else windows

        try:
            for batch in batches:
                windows, late = stream.feed(batch)
                out = frame(nonempty(windows), late)
                if out is not None:
                    yield out
            windows, late = stream.finish()
            out = frame(nonempty(windows), late)
            if out is not None:
                yield out
        except ValueError as err:  # e.g. an overflowing sum: name the user's column, not the internal one
            raise user_errors(err, input_names) from None

    key_cols = [quoted(k) for k in keys]
    if not (series_start and cfg.query.series_start == "earliest" and keys):  # else the Window partitioned by key
        events = events.repartition(*key_cols) if keys else events.repartition(1)
    ordered = events.sortWithinPartitions(*key_cols, F.expr(EVENT_END), F.col(SEQ))  # arrival: by u, then seq
    return ordered.mapInPandas(process, schema)
