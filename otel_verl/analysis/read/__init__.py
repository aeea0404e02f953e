"""Read stage: any trace source → one span table (a pandas DataFrame, one row per span, tree resolved).

================  ===========================================================================
module            job
================  ===========================================================================
sources           the one dispatcher: SOURCE's format told once; :func:`load_spans` (the whole run) and the
                  step reader of each format (:func:`~.sources.step_source`)
spool/            our spool and collector file exports: whole (``files``), by step (``steps``), which run
remote/           Jaeger v2 and Tempo HTTP APIs: whole (``fetch``), by step (``steps``)
seed/             the seed profiler's logs as spans: whole (``convert``), by step (``steps``)
otlp/             the OTLP/JSON decoders the spool, files and backends share (``batch``, ``documents``)
load_options      :class:`LoadOptions`: how a source is read, for every reader and the CLI
span_columns      the span table's columns and which contract attribute fills each
span_frame        parts of the span table into the table
hierarchy         span kinds and step/worker/request/turn of every span, through the parent chain
window            ``--since``/``--until``: whole traces and steps
id_lookup         Arrow hash lookup of span ids
stats, progress   what a load read and skipped; the progress bar
step_stream       :func:`~.step_stream.iter_steps`: a run a step at a time (which spans belong to a step)
step_split        the same split of a table in memory; step tables joined back
spill, part_rows  spans waiting for their step, on disk; rows of span-table parts
allocator, forked the process's memory; work spread over forked readers
================  ===========================================================================
"""

from otel_verl.analysis.read.load_options import SOURCE_TYPES, LoadOptions
from otel_verl.analysis.read.sources import load_spans
from otel_verl.analysis.read.stats import LoadStats

__all__ = ["SOURCE_TYPES", "LoadOptions", "LoadStats", "load_spans"]
