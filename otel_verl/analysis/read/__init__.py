"""Read stage: any trace source → one span table (a pandas DataFrame, one row per span, tree resolved).

================  ===========================================================================
module            job
================  ===========================================================================
sources           :func:`load_spans`: pick the reader for SOURCE, window, dedupe, resolve the tree
files             spool dirs and collector file exports, line by line (``file:line`` errors)
remote            Jaeger v2 and Tempo HTTP APIs
otlp_json         OTLP/JSON documents → span columns (the fast decoder)
span_columns      the span table's columns and which contract attribute fills each
hierarchy         span kinds and step/worker/request/turn of every span, through the parent chain
window            ``--since``/``--until``: whole traces and steps
id_lookup         Arrow hash lookup of span ids
stats, progress   what a load read and skipped; the progress bar
================  ===========================================================================
"""

from otel_verl.analysis.read.sources import SOURCE_TYPES, load_spans
from otel_verl.analysis.read.stats import LoadStats

__all__ = ["SOURCE_TYPES", "LoadStats", "load_spans"]
