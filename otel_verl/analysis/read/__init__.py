"""Read stage: any trace source → one span table (a pandas DataFrame, one row per span, tree resolved).

================  ===========================================================================
module            job
================  ===========================================================================
load_options      :class:`LoadOptions`: how a source is read, for every reader and the CLI
sources           :func:`load_spans`: pick the reader for SOURCE, window, dedupe, resolve the tree
files             spool dirs and collector file exports, line by line (``file:line`` errors)
remote            Jaeger v2 and Tempo HTTP APIs
seed/             the seed profiler's logs as spans (each file, its step source)
otlp_json         OTLP/JSON documents → span columns (the fast decoder)
span_columns      the span table's columns and which contract attribute fills each
hierarchy         span kinds and step/worker/request/turn of every span, through the parent chain
window            ``--since``/``--until``: whole traces and steps
id_lookup         Arrow hash lookup of span ids
stats, progress   what a load read and skipped; the progress bar
step_stream       :func:`~.step_stream.iter_steps`: a run a step at a time (which spans belong to a step)
step_files        spool and collector archive split by step (forked readers, first pass)
remote_steps      Jaeger and Tempo fetched step by step (``verl.step`` search)
step_split        the same split of a table in memory; step tables joined back
spill, part_rows  spans waiting for their step, on disk; rows of span-table parts
================  ===========================================================================
"""

from otel_verl.analysis.read.load_options import SOURCE_TYPES, LoadOptions
from otel_verl.analysis.read.sources import load_spans
from otel_verl.analysis.read.stats import LoadStats

__all__ = ["SOURCE_TYPES", "LoadOptions", "LoadStats", "load_spans"]
