"""Figures stage: one module per figure of the seed's analysis: ``compute_x(spans, tables=None) -> DataFrame``,
``plot_x(df, path)`` (PNG) and ``plotly_x(df)`` (the interactive report).

Figures read :mod:`otel_verl.analysis.tables` only, never :mod:`otel_verl.analysis.findings` (what both need is
a table). :mod:`.catalog` lists them in report order; :mod:`.rendering` draws them beside the detectors.
"""
